/* Who may call (docs/design.md, rule 7), on the HTTP side: the bearer
 * token of a request, the wait of one whose answer the authorizer
 * (server/auth/) must ask the apiserver for, and its verdict in Connect's
 * codes. The policy, the caches and the reviews are auth/'s.
 *
 * A request whose answers are cached is decided on its MHD thread by
 * auth_check. Otherwise a ticket is made and the check goes to the loop
 * thread; the connection is suspended until the ticket's callback resumes
 * it with the verdict, and the access handler then runs again and finds
 * it, with the request's message kept (rpc.c). A ticket waits in an
 * http_wait (wait.h) like a call: its references (the request's, the
 * authorizer's until its callback or its drop at auth_free) change only
 * through http_wait_ref/unref, and they and the list s->auth_tickets
 * change under s->mu. auth_check is never called with s->mu held: the
 * answer caches' mutexes are never held together with it. */
#include "http/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/wait.h"

#define TOKEN_MAX 16384

struct http_auth_ticket {
    http_wait w;          /* listed in s->auth_tickets while parked */
    auth_verdict verdict; /* once w.done */
};

/* ---- the authorizer ------------------------------------------------------------- */

/* auth/'s codes as Connect's. */
static rpc_code code_of(auth_code c)
{
    switch (c) {
    case AUTH_OK:
        return RPC_OK;
    case AUTH_UNAUTHENTICATED:
        return RPC_UNAUTHENTICATED;
    case AUTH_PERMISSION_DENIED:
        return RPC_PERMISSION_DENIED;
    case AUTH_UNAVAILABLE:
        return RPC_UNAVAILABLE;
    case AUTH_INTERNAL:
        break;
    }
    return RPC_INTERNAL;
}

static http_auth_verdict deny(http_auth_denial *d, rpc_code code, const char *message)
{
    d->code = code;
    snprintf(d->message, sizeof d->message, "%s", message);
    return HTTP_AUTH_DENIED;
}

/* The request's side of a verdict: the caller, the narrowing (taken) and
 * a label refused go to q. */
static http_auth_verdict verdict_of(http_req *q, auth_verdict *v, http_auth_denial *d)
{
    if (v->result != AUTH_ALLOWED) {
        auth_subject_unref(v->narrow);
        return deny(d, code_of(v->code), v->message);
    }
    if (v->label_refused[0] && !q->label_refused &&
        !(q->label_refused = strdup(v->label_refused))) {
        auth_subject_unref(v->narrow);
        return deny(d, RPC_INTERNAL, "out of memory"); /* never the label unchecked */
    }
    auth_subject_unref(q->scope.subject);
    q->scope.subject = v->narrow;
    snprintf(q->caller, sizeof q->caller, "%s", v->caller); /* the quotas' caller */
    return HTTP_AUTH_ALLOWED;
}

/* ---- tickets --------------------------------------------------------------------- */

static http_auth_ticket *ticket_of_wait(http_wait *w)
{
    return KL__LIST_ENTRY(w, http_auth_ticket, w);
}

static void ticket_release(http_wait *w)
{
    http_auth_ticket *t = ticket_of_wait(w);
    auth_subject_unref(t->verdict.narrow);
    free(t);
}

/* s->mu held (or t not shared): sets the verdict of a ticket that has
 * none, and resumes its connection. Takes v->narrow. */
static void ticket_answer_locked(http_auth_ticket *t, auth_verdict *v)
{
    if (t->w.done) {
        auth_subject_unref(v->narrow);
        return;
    }
    t->verdict = *v;
    http_wait_complete(&t->w);
}

static void ticket_fail_wait(http_wait *w, rpc_code code, const char *message)
{
    auth_verdict v = {.result = AUTH_DENIED,
                      .code = code == RPC_UNAVAILABLE ? AUTH_UNAVAILABLE : AUTH_INTERNAL};
    snprintf(v.message, sizeof v.message, "%s", message);
    ticket_answer_locked(ticket_of_wait(w), &v);
}

/* Loop thread: the verdict is in; the authorizer drops its reference. */
static void ticket_done(void *ctx, auth_verdict *v)
{
    http_auth_ticket *t = ctx;
    http_server *s = t->w.srv;
    pthread_mutex_lock(&s->mu);
    http_wait_unlist(&t->w);
    ticket_answer_locked(t, v);
    http_wait_unref(&t->w); /* the authorizer's */
    pthread_mutex_unlock(&s->mu);
}

/* auth_free: the loop never answered. */
static void ticket_drop(void *ctx)
{
    http_auth_ticket *t = ctx;
    http_server *s = t->w.srv;
    pthread_mutex_lock(&s->mu);
    http_wait_unlist(&t->w);
    ticket_fail_wait(&t->w, RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
    http_wait_unref(&t->w); /* the authorizer's */
    pthread_mutex_unlock(&s->mu);
}

/* The verdict of a ticket that has one (s->mu held); drops the request's
 * reference. */
static http_auth_verdict ticket_take_locked(http_auth_ticket *t, http_req *q, http_auth_denial *d)
{
    http_auth_verdict v = verdict_of(q, &t->verdict, d);
    t->verdict.narrow = NULL;
    http_wait_request_done(&t->w);
    q->auth = NULL;
    return v;
}

/* The caches did not know: the check goes to the loop thread, and the
 * request waits for it. */
static http_auth_verdict ticket_start(http_server *s, struct MHD_Connection *conn, http_req *q,
                                      const auth_action *act, const char *token, size_t len,
                                      http_auth_denial *d)
{
    http_auth_ticket *t = calloc(1, sizeof *t);
    if (!t)
        return deny(d, RPC_INTERNAL, "out of memory");
    http_wait_init(&t->w, s, conn, ticket_release);
    http_wait_ref(&t->w); /* the authorizer's, until ticket_done or ticket_drop */
    auth_verdict v;
    if (auth_check(s->auth, token, len, act, &v, ticket_done, ticket_drop, t) != AUTH_PENDING) {
        http_wait_unref(&t->w); /* decided meanwhile: the authorizer never calls back */
        http_wait_unref(&t->w);
        return verdict_of(q, &v, d);
    }
    q->auth = t;
    pthread_mutex_lock(&s->mu);
    if (!t->w.done && s->stopping)
        ticket_fail_wait(&t->w, RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
    if (t->w.done) { /* answered already */
        http_auth_verdict r = ticket_take_locked(t, q, d);
        pthread_mutex_unlock(&s->mu);
        return r;
    }
    http_wait_list(&s->auth_tickets, &t->w);
    http_wait_park(&t->w);
    pthread_mutex_unlock(&s->mu);
    return HTTP_AUTH_WAIT;
}

/* The handler runs again: the verdict, or wait on. */
static http_auth_verdict ticket_resumed(http_server *s, http_req *q, http_auth_denial *d)
{
    http_auth_ticket *t = q->auth;
    pthread_mutex_lock(&s->mu);
    if (!http_wait_resumed(&t->w, ticket_fail_wait)) {
        pthread_mutex_unlock(&s->mu);
        return HTTP_AUTH_WAIT;
    }
    http_auth_verdict v = ticket_take_locked(t, q, d);
    pthread_mutex_unlock(&s->mu);
    return v;
}

/* ---- the request's side ------------------------------------------------------------ */

/* The token of "Authorization: Bearer <token>" into *token (pointing into
 * the header). Returns 0, or -1 with the reason in d. */
static int bearer_token(struct MHD_Connection *conn, const auth_ctx *a, const auth_action *act,
                        const char **token, size_t *len, http_auth_denial *d)
{
    char msg[300];
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
    if (!h && act->path) {
        snprintf(msg, sizeof msg,
                 "no credentials: send \"Authorization: Bearer <token>\" with a ServiceAccount "
                 "token (for the apiserver's audience) allowed get on %s",
                 act->path);
        deny(d, RPC_UNAUTHENTICATED, msg);
        return -1;
    }
    if (!h) {
        snprintf(msg, sizeof msg,
                 "no credentials: send \"Authorization: Bearer <token>\" with a ServiceAccount "
                 "token for audience \"%s\"",
                 auth_audience(a));
        deny(d, RPC_UNAUTHENTICATED, msg);
        return -1;
    }
    while (*h == ' ')
        h++;
    if (strncasecmp(h, "Bearer ", 7) != 0) {
        deny(d, RPC_UNAUTHENTICATED, "the Authorization header is not \"Bearer <token>\"");
        return -1;
    }
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = 0;
    while (h[n] > ' ' && h[n] < 0x7f)
        n++;
    size_t end = n;
    while (h[end] == ' ')
        end++;
    if (n == 0 || h[end] || n > TOKEN_MAX) {
        deny(d, RPC_UNAUTHENTICATED,
             "the bearer token is empty, too long or holds characters no token has");
        return -1;
    }
    *token = h;
    *len = n;
    return 0;
}

http_auth_verdict http_auth_authorize(http_server *s, struct MHD_Connection *conn, http_req *q,
                                      const auth_action *act, http_auth_denial *d)
{
    if (q->auth)
        return ticket_resumed(s, q, d);
    const char *token;
    size_t len;
    if (bearer_token(conn, s->auth, act, &token, &len, d) != 0)
        return HTTP_AUTH_DENIED;
    char peer[sizeof q->peer];
    http_peer_ip(conn, peer, sizeof peer);
    auth_action a = *act;
    a.peer = peer;
    auth_verdict v;
    if (auth_check(s->auth, token, len, &a, &v, NULL, NULL, NULL) != AUTH_PENDING)
        return verdict_of(q, &v, d);
    return ticket_start(s, conn, q, &a, token, len, d);
}

void http_auth_request_done(http_server *s, http_req *q)
{
    http_auth_ticket *t = q->auth;
    if (!t)
        return;
    pthread_mutex_lock(&s->mu);
    http_wait_request_done(&t->w);
    pthread_mutex_unlock(&s->mu);
    q->auth = NULL;
}

void http_auth_tickets_fail_locked(http_server *s)
{
    /* The authorizer keeps its references until its callback or auth_free. */
    http_waits_fail(&s->auth_tickets, ticket_fail_wait);
}
