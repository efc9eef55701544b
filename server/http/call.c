/* Unary calls (and the status page, a ListLeases rendered as HTML): the
 * request is suspended, sent to the engine, and resumed with its answer
 * when the engine replies, its Connect-Timeout-Ms passes or the engine goes
 * away. An MHD thread never waits for the engine.
 *
 * A call has two references: the request's (dropped when MHD completes the
 * request) and the engine's (dropped when the engine's reply has been
 * handled, or when the engine is gone without replying). They change only
 * through call_ref/call_unref.
 *
 * Locking: s->mu guards a call from the moment it is shared (listed, or
 * known to the engine); it is taken by MHD threads, the engine thread
 * (call_done), the timer thread and the owner (shutdown). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "http/internal.h"
#include "rpc/lease_service.h"

struct http_call {
    http_server *srv;
    int refs;
    struct MHD_Connection *conn; /* NULL once the request is over */
    const rpc_method *method;    /* NULL: the status page */
    rpc_codec codec;
    bool done;             /* the answer is set */
    bool suspended;        /* conn is suspended: resume it once done */
    int64_t deadline_ms;   /* 0: none */
    http_list_scope scope; /* a listing: what it may show */
    struct kl__list link;  /* in s->calls while the engine has not answered */
    /* the answer */
    int status;
    rpc_code code;
    const char *content_type;
    uint8_t *body;
    size_t len;
};

/* ---------- the call object ---------- */

/* A new call holding the request's reference; it takes over q->scope. */
static http_call *call_new(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    http_call *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->srv = s;
    k->refs = 1;
    k->conn = conn;
    k->method = q->method;
    k->codec = q->codec;
    if (q->timeout_ms >= 0)
        k->deadline_ms = http_deadline_ms(q->timeout_ms);
    k->scope = q->scope;
    q->scope.subject = NULL;
    return k;
}

/* Both with s->mu held, or before the call is shared with anyone. */
static void call_ref(http_call *k)
{
    k->refs++;
}

static void call_unref(http_call *k)
{
    if (--k->refs > 0)
        return;
    http_list_scope_clear(&k->scope);
    free(k->body);
    free(k);
}

static void call_list(http_server *s, http_call *k)
{
    kl__list_insert_head(&s->calls, &k->link);
}

/* Safe on a call no longer listed. */
static void call_unlist(http_call *k)
{
    kl__list_remove(&k->link);
}

static http_call *call_of(struct kl__list *link)
{
    return KL__LIST_ENTRY(link, http_call, link);
}

/* Sets the answer of a call that has none yet and resumes its connection.
 * Takes body. */
static void call_complete_locked(http_call *k, int status, rpc_code code, const char *content_type,
                                 uint8_t *body, size_t len)
{
    if (k->done) {
        free(body);
        return;
    }
    k->done = true;
    k->status = status;
    k->code = code;
    k->content_type = content_type;
    k->body = body;
    k->len = len;
    if (k->suspended && k->conn) {
        k->suspended = false;
        MHD_resume_connection(k->conn);
    }
}

static void call_fail_locked(http_call *k, rpc_code code, const char *message)
{
    char *body = rpc_error_json(code, message);
    call_complete_locked(k, body ? rpc_code_http_status(code) : 500, code, "application/json",
                         (uint8_t *)body, body ? strlen(body) : 0);
}

/* ---------- the engine's side ---------- */

/* The reply, narrowed if need be (engine thread). Encoded before taking s->mu. */
static void call_answer(void *ctx, const engine_reply *r)
{
    http_call *k = ctx;
    http_server *s = k->srv;
    uint8_t *body = NULL;
    size_t len = 0;
    const char *ct = NULL;
    rpc_code code = rpc_code_of_engine(r->code);
    if (!k->method) {
        char *html = NULL;
        if (s->ops->render_page(r, &html, &len, &ct) == 0)
            body = (uint8_t *)html;
    } else if (code == RPC_OK) {
        body = rpc_reply_encode(k->method->id, k->codec, r, &len);
        ct = rpc_content_type(k->codec, false);
    }
    pthread_mutex_lock(&s->mu);
    call_unlist(k);
    if (k->method && code != RPC_OK)
        call_fail_locked(k, code, r->message);
    else if (!body)
        call_fail_locked(k, RPC_INTERNAL, "out of memory");
    else
        call_complete_locked(k, 200, RPC_OK, ct, body, len);
    call_unref(k); /* the engine's */
    pthread_mutex_unlock(&s->mu);
}

/* A narrowed listing. One that could not be narrowed is an error, also for
 * the status page (which renders whatever the engine answers otherwise); so
 * is, for /leases, one narrowed to nothing (http_list_scope.deny_empty). */
static void call_narrowed(void *ctx, const engine_reply *r)
{
    http_call *k = ctx;
    http_server *s = k->srv;
    bool denied = r->code == ENGINE_OK && k->scope.deny_empty && k->scope.subject && !r->n_leases;
    if (!denied && (r->code == ENGINE_OK || k->method)) {
        call_answer(k, r);
        return;
    }
    pthread_mutex_lock(&s->mu);
    call_unlist(k);
    if (denied)
        call_fail_locked(k, RPC_PERMISSION_DENIED,
                         "this token may list none of the elections served here: it may not "
                         "list elections.kubelease.io in every namespace, nor in the namespace "
                         "of any Lease this replica follows now");
    else
        call_fail_locked(k, rpc_code_of_engine(r->code), r->message);
    call_unref(k); /* the engine's */
    pthread_mutex_unlock(&s->mu);
}

/* The engine's reply (engine thread). A listing is narrowed to what the
 * caller may see first (the call stays listed meanwhile, so that shutdown
 * ends it); it never goes out whole for want of memory to narrow it. */
static void call_done(void *ctx, const engine_reply *r)
{
    http_call *k = ctx;
    if (r->code != ENGINE_OK || !http_list_scope_narrows(&k->scope)) {
        call_answer(k, r);
        return;
    }
    if (http_list_narrow(k->srv, &k->scope, r, call_narrowed, k) != 0) {
        engine_reply oom = {.code = ENGINE_INTERNAL};
        snprintf(oom.message, sizeof oom.message, "out of memory");
        call_narrowed(k, &oom);
    }
}

/* Hands k to the engine, which takes a reference until call_done. */
static void call_send_locked(http_server *s, http_call *k, const ProtobufCMessage *m,
                             const http_req *q)
{
    call_list(s, k);
    call_ref(k);
    int rc = m ? rpc_unary_start(s->engine, k->method->id, m, q->peer[0] ? q->peer : NULL,
                                 q->caller, call_done, k)
               : engine_list(s->engine, call_done, k);
    if (rc != 0) {
        call_unlist(k);
        call_unref(k); /* the engine never calls back */
        call_fail_locked(k, RPC_INTERNAL, "out of memory");
    }
}

/* ---------- the request's side ---------- */

enum MHD_Result http_call_start(http_server *s, struct MHD_Connection *conn, http_req *q,
                                const ProtobufCMessage *m)
{
    http_call *k = call_new(s, conn, q);
    if (!k)
        return q->method ? http_respond_unary_error(conn, q, RPC_INTERNAL, 0, "out of memory")
                         : MHD_NO;
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        call_unref(k);
        pthread_mutex_unlock(&s->mu);
        if (!q->method)
            return http_respond_text(conn, q, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting down\n");
        return http_respond_unary_error(conn, q, RPC_UNAVAILABLE, 0, HTTP_SHUTTING_DOWN);
    }
    k->suspended = true;
    MHD_suspend_connection(conn);
    call_send_locked(s, k, m, q);
    if (k->deadline_ms)
        http_timer_wake_locked(s);
    pthread_mutex_unlock(&s->mu);
    q->call = k;
    return MHD_YES;
}

enum MHD_Result http_call_resumed(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    http_call *k = q->call;
    pthread_mutex_lock(&s->mu);
    if (!k->done && s->gone)
        call_fail_locked(k, RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
    if (!k->done) {
        k->suspended = true;
        MHD_suspend_connection(conn);
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    uint8_t *body = k->body;
    size_t len = k->len;
    int status = k->status;
    rpc_code code = k->code;
    const char *ct = k->content_type;
    k->body = NULL;
    k->conn = NULL;
    call_unref(k); /* the request's */
    pthread_mutex_unlock(&s->mu);
    q->call = NULL;
    http_req_account(q, code);
    return http_respond(conn, q, status, ct, body, len);
}

void http_call_request_done(http_server *s, http_req *q)
{
    http_call *k = q->call;
    if (!k)
        return;
    /* The connection ended while the call waited (the daemon stopping). */
    pthread_mutex_lock(&s->mu);
    k->conn = NULL;
    k->suspended = false;
    call_unref(k); /* the request's */
    pthread_mutex_unlock(&s->mu);
    q->call = NULL;
}

/* ---------- timer and shutdown ---------- */

int64_t http_calls_expire_locked(http_server *s, int64_t now, int64_t wake)
{
    KL__LIST_FOREACH (link, &s->calls) {
        http_call *k = call_of(link);
        if (k->done || !k->deadline_ms)
            continue;
        if (k->deadline_ms <= now)
            call_fail_locked(k, RPC_DEADLINE_EXCEEDED,
                             "Connect-Timeout-Ms passed before the service could answer");
        else if (k->deadline_ms < wake)
            wake = k->deadline_ms;
    }
    return wake;
}

void http_calls_end_locked(http_server *s)
{
    while (!kl__list_empty(&s->calls)) {
        http_call *k = call_of(kl__list_first(&s->calls));
        call_unlist(k);
        call_fail_locked(k, RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
        call_unref(k); /* the engine's: it will never reply */
    }
}

void http_calls_fail_locked(http_server *s)
{
    KL__LIST_FOREACH (link, &s->calls) {
        call_fail_locked(call_of(link), RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
    }
}
