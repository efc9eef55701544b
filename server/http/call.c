/* Unary calls (and the status page, a ListLeases rendered as HTML): the
 * request is suspended, sent to the engine, and resumed with its answer
 * when the engine replies, its Connect-Timeout-Ms passes or the engine goes
 * away. An MHD thread never waits for the engine.
 *
 * A call waits in an http_wait (wait.h) with two references: the
 * request's (dropped when MHD completes the request) and the engine's
 * (dropped when the engine's reply has been handled, or when the engine is
 * gone without replying). They change only through http_wait_ref/unref.
 *
 * Locking: s->mu guards a call from the moment it is shared (listed, or
 * known to the engine); it is taken by MHD threads, the engine thread
 * (call_done), the timer thread and the owner (shutdown). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "http/internal.h"
#include "http/wait.h"
#include "rpc/lease_service.h"

struct http_call {
    http_wait w;              /* listed in s->calls while the engine has not answered */
    const rpc_method *method; /* NULL: the status page */
    rpc_codec codec;
    int64_t deadline_ms;   /* 0: none */
    http_list_scope scope; /* a listing: what it may show */
    /* the answer */
    int status;
    rpc_code code;
    const char *content_type;
    uint8_t *body;
    size_t len;
};

/* ---------- the call object ---------- */

static http_call *call_of_wait(http_wait *w)
{
    return KL__LIST_ENTRY(w, http_call, w);
}

static void call_release(http_wait *w)
{
    http_call *k = call_of_wait(w);
    http_list_scope_clear(&k->scope);
    free(k->body);
    free(k);
}

/* A new call holding the request's reference; it takes over q->scope. */
static http_call *call_new(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    http_call *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    http_wait_init(&k->w, s, conn, call_release);
    k->method = q->method;
    k->codec = q->codec;
    if (q->timeout_ms >= 0)
        k->deadline_ms = http_deadline_ms(s, q->timeout_ms);
    k->scope = q->scope;
    q->scope.subject = NULL;
    return k;
}

/* Sets the answer of a call that has none yet and resumes its connection.
 * Takes body. */
static void call_complete_locked(http_call *k, int status, rpc_code code, const char *content_type,
                                 uint8_t *body, size_t len)
{
    if (k->w.done) {
        free(body);
        return;
    }
    k->status = status;
    k->code = code;
    k->content_type = content_type;
    k->body = body;
    k->len = len;
    http_wait_complete(&k->w);
}

static void call_fail_locked(http_call *k, rpc_code code, const char *message)
{
    char *body = rpc_error_json(code, message);
    call_complete_locked(k, body ? rpc_code_http_status(code) : 500, code, "application/json",
                         (uint8_t *)body, body ? strlen(body) : 0);
}

static void call_fail_wait(http_wait *w, rpc_code code, const char *message)
{
    call_fail_locked(call_of_wait(w), code, message);
}

/* ---------- the engine's side ---------- */

/* The reply, narrowed if need be (engine thread). Encoded before taking s->mu. */
static void call_answer(void *ctx, const engine_reply *r)
{
    http_call *k = ctx;
    http_server *s = k->w.srv;
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
    http_wait_unlist(&k->w);
    if (k->method && code != RPC_OK)
        call_fail_locked(k, code, r->message);
    else if (!body)
        call_fail_locked(k, RPC_INTERNAL, "out of memory");
    else
        call_complete_locked(k, 200, RPC_OK, ct, body, len);
    http_wait_unref(&k->w); /* the engine's */
    pthread_mutex_unlock(&s->mu);
}

/* A narrowed listing. One that could not be narrowed is an error, also for
 * the status page (which renders whatever the engine answers otherwise); so
 * is, for /leases, one narrowed to nothing (http_list_scope.deny_empty). */
static void call_narrowed(void *ctx, const engine_reply *r)
{
    http_call *k = ctx;
    http_server *s = k->w.srv;
    bool denied = r->code == ENGINE_OK && k->scope.deny_empty && k->scope.subject && !r->n_leases;
    if (!denied && (r->code == ENGINE_OK || k->method)) {
        call_answer(k, r);
        return;
    }
    pthread_mutex_lock(&s->mu);
    http_wait_unlist(&k->w);
    if (denied)
        call_fail_locked(k, RPC_PERMISSION_DENIED,
                         "this token may list none of the elections served here: it may not "
                         "list elections.kubelease.io in every namespace, nor in the namespace "
                         "of any Lease this replica follows now");
    else
        call_fail_locked(k, rpc_code_of_engine(r->code), r->message);
    http_wait_unref(&k->w); /* the engine's */
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
    if (http_list_narrow(k->w.srv, &k->scope, r, call_narrowed, k) != 0) {
        engine_reply oom = {.code = ENGINE_INTERNAL};
        snprintf(oom.message, sizeof oom.message, "out of memory");
        call_narrowed(k, &oom);
    }
}

/* Hands k to the engine, which takes a reference until call_done. */
static void call_send_locked(http_server *s, http_call *k, const ProtobufCMessage *m,
                             const http_req *q)
{
    http_wait_list(&s->calls, &k->w);
    http_wait_ref(&k->w);
    int rc = m ? rpc_unary_start(s->engine, k->method->id, m, q->peer[0] ? q->peer : NULL,
                                 q->caller, call_done, k)
               : engine_list(s->engine, call_done, k);
    if (rc != 0) {
        http_wait_unlist(&k->w);
        http_wait_unref(&k->w); /* the engine never calls back */
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
        http_wait_unref(&k->w);
        pthread_mutex_unlock(&s->mu);
        if (!q->method)
            return http_respond_text(conn, q, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting down\n");
        return http_respond_unary_error(conn, q, RPC_UNAVAILABLE, 0, HTTP_SHUTTING_DOWN);
    }
    http_wait_park(&k->w);
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
    if (!http_wait_resumed(&k->w, call_fail_wait)) {
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    uint8_t *body = k->body;
    size_t len = k->len;
    int status = k->status;
    rpc_code code = k->code;
    const char *ct = k->content_type;
    k->body = NULL;
    http_wait_request_done(&k->w);
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
    http_wait_request_done(&k->w);
    pthread_mutex_unlock(&s->mu);
    q->call = NULL;
}

/* ---------- timer and shutdown ---------- */

int64_t http_calls_expire_locked(http_server *s, int64_t now, int64_t wake)
{
    KL__LIST_FOREACH (link, &s->calls) {
        http_call *k = call_of_wait(http_wait_of(link));
        if (k->w.done || !k->deadline_ms)
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
    http_waits_end(&s->calls, call_fail_wait); /* the engine will never reply */
}

void http_calls_fail_locked(http_server *s)
{
    http_waits_fail(&s->calls, call_fail_wait);
}
