/* Who may call (docs/design.md, rule 7), on the request's side: the bearer
 * token, the identity policy and the verdict, and the tickets of requests
 * that wait for the apiserver; the authorizer object itself.
 *
 * A request whose token and access answers are cached is decided on its
 * MHD thread (a lookup in each cache under its mutex). Otherwise a ticket
 * is made, the connection suspended and the ticket posted to the loop
 * thread, which asks the apiserver (auth_review.c) and resumes the
 * connection with the verdict; the access handler then runs again and
 * finds it, with the request's message kept (rpc.c). A ticket waits in an
 * http_wait (wait.h) like a call: its references (the request's, the
 * loop's) change only through http_wait_ref/unref, and they and the list
 * s->auth_tickets change under s->mu. */
#include "http/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/secret.h"
#include "core/loop.h"
#include "http/auth_internal.h"
#include "http/wait.h"

#define TOKEN_TTL_MS      60000
#define NEGATIVE_TTL_MS   30000 /* docs/design.md, rule 7: why 30 s */
#define ACCESS_TTL_MS     10000
#define TOKEN_CACHE_MAX   4096
#define REFUSED_CACHE_MAX 4096 /* about 1.7 MB at most */
#define ACCESS_CACHE_MAX  16384
#define RATE_PEERS_MAX    4096 /* addresses whose review rate is remembered */
#define TOKEN_MAX         16384

struct http_auth_ticket {
    http_wait w; /* listed in s->auth_tickets while the loop has not answered */
    /* the question */
    uint8_t digest[AUTH_DIGEST_LEN];
    char *token; /* secret: wiped when freed */
    char verb[16], ns[64], name[254], path[64], identity[256], pod_ns[64], pod[254];
    char peer[AUTH_PEER_LEN]; /* the caller's address, for --review-rate-per-ip */
    bool has_identity, narrow_on_deny, pod_denies;
    auth_subject *subject; /* loop thread: the caller, once authenticated */
    /* the answer */
    http_auth_verdict verdict;
    http_auth_denial denial;
    auth_subject *narrow;    /* allowed, narrowed to what this subject may list */
    char label_refused[256]; /* the label's Pod is not the caller's (a Campaign) */
};

/* ---- the authorizer --------------------------------------------------------- */

static void access_answer_free(void *v)
{
    free(v);
}

http_auth *http_auth_new(const http_auth_config *cfg)
{
    http_auth *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->mode = cfg->mode;
    a->policy = cfg->identity_policy;
    snprintf(a->audience, sizeof a->audience, "%s",
             cfg->audience && cfg->audience[0] ? cfg->audience : HTTP_AUTH_DEFAULT_AUDIENCE);
    a->loop = cfg->loop;
    a->kube = cfg->kube;
    a->token_ttl_ms = cfg->token_ttl_ms > 0 ? cfg->token_ttl_ms : TOKEN_TTL_MS;
    a->negative_ttl_ms = cfg->negative_ttl_ms > 0 ? cfg->negative_ttl_ms : NEGATIVE_TTL_MS;
    a->access_ttl_ms = cfg->access_ttl_ms > 0 ? cfg->access_ttl_ms : ACCESS_TTL_MS;
    a->metrics = cfg->metrics;
    a->review_rate = cfg->review_rate;
    a->review_rate_per_ip = cfg->review_rate_per_ip;
    pthread_mutex_init(&a->refresh_mu, NULL);
    a->tokens = auth_cache_new(TOKEN_CACHE_MAX, auth_token_answer_free);
    a->refused = auth_cache_new(REFUSED_CACHE_MAX, auth_token_answer_free);
    a->access = auth_cache_new(ACCESS_CACHE_MAX, access_answer_free);
    a->rate = auth_rate_new(a->review_rate, a->review_rate_per_ip, RATE_PEERS_MAX, mono_ms());
    if (!a->tokens || !a->refused || !a->access || !a->rate) {
        http_auth_free(a);
        return NULL;
    }
    return a;
}

void http_auth_free(http_auth *a)
{
    if (!a)
        return;
    auth_reviews_free(a);
    auth_refreshes_free(a);
    pthread_mutex_destroy(&a->refresh_mu);
    auth_cache_free(a->tokens);
    auth_cache_free(a->refused);
    auth_cache_free(a->access);
    auth_rate_free(a->rate);
    free(a);
}

bool http_auth_metrics(const http_auth *a)
{
    return a && a->metrics;
}

/* ---- the rules ------------------------------------------------------------------- */

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
}

/* identity names the caller's Pod: "<namespace>/<pod>", or the bare name
 * in the Pod's own namespace. */
static bool is_own_pod(const auth_subject *s, const char *identity, const char *ns)
{
    size_t n = strlen(s->pod_ns);
    if (strncmp(identity, s->pod_ns, n) == 0 && identity[n] == '/')
        return strcmp(identity + n + 1, s->pod) == 0;
    return strcmp(identity, s->pod) == 0 && ns && strcmp(ns, s->pod_ns) == 0;
}

int auth_policy_check(const http_auth *a, const auth_subject *s, const char *identity,
                      const char *ns, char *msg, size_t msg_len)
{
    if (!identity || a->policy == HTTP_IDENTITY_ANY)
        return 0;
    if (a->policy == HTTP_IDENTITY_POD) {
        if (!s->pod[0]) {
            snprintf(msg, msg_len,
                     "--identity-policy pod: the caller's token is not bound to a pod (use a "
                     "projected ServiceAccount token), so no identity is its own");
            return -1;
        }
        if (is_own_pod(s, identity, ns))
            return 0;
        snprintf(msg, msg_len,
                 "--identity-policy pod: identity \"%.200s\" is not the caller's pod %s/%s "
                 "(\"%s/%s\", or \"%s\" for a Lease in the namespace %s)",
                 identity, s->pod_ns, s->pod, s->pod_ns, s->pod, s->pod, s->pod_ns);
        return -1;
    }
    if (!s->sa[0]) {
        snprintf(msg, msg_len,
                 "--identity-policy serviceaccount: the caller \"%.200s\" is not a "
                 "ServiceAccount",
                 s->user.username);
        return -1;
    }
    size_t n = strlen(s->sa);
    if (strncmp(identity, s->sa, n) == 0 && !name_char(identity[n]))
        return 0;
    snprintf(msg, msg_len,
             "--identity-policy serviceaccount: identity \"%.200s\" does not start with the "
             "caller's \"%s\" (namespace:serviceaccount)",
             identity, s->sa);
    return -1;
}

int auth_pod_check(const auth_subject *s, const char *pod_ns, const char *pod, char *msg,
                   size_t msg_len)
{
    if (!pod)
        return 0;
    if (!s->pod[0]) {
        snprintf(msg, msg_len,
                 "pod_name: the caller's token is not bound to a pod (use a projected "
                 "ServiceAccount token), so no Pod is its own to label");
        return -1;
    }
    if (strcmp(pod, s->pod) == 0 && pod_ns && strcmp(pod_ns, s->pod_ns) == 0)
        return 0;
    snprintf(msg, msg_len,
             "pod_name: pod %s/%.200s is not the caller's pod %s/%s (the pod claim of its "
             "token): a campaign may label only its own Pod",
             pod_ns ? pod_ns : "", pod, s->pod_ns, s->pod);
    return -1;
}

void auth_forbidden_message(const auth_subject *s, const auth_access_question *q,
                            const char *reason, char *msg, size_t msg_len)
{
    if (q->path && q->path[0]) {
        snprintf(msg, msg_len,
                 "forbidden: User \"%.200s\" cannot %s path \"%s\"%s%.200s (grant it in a "
                 "ClusterRole: nonResourceURLs [\"%s\"], verbs [\"%s\"])",
                 s->user.username, q->verb, q->path, reason && reason[0] ? ": " : "",
                 reason ? reason : "", q->path, q->verb);
        return;
    }
    char what[320], where[96];
    if (q->name[0])
        snprintf(what, sizeof what, "%s.%s \"%s\"", HTTP_AUTH_RESOURCE, HTTP_AUTH_GROUP, q->name);
    else
        snprintf(what, sizeof what, "%s.%s", HTTP_AUTH_RESOURCE, HTTP_AUTH_GROUP);
    if (q->ns[0])
        snprintf(where, sizeof where, "in the namespace \"%s\"", q->ns);
    else
        snprintf(where, sizeof where, "at the cluster scope");
    snprintf(msg, msg_len,
             "%s is forbidden: User \"%.200s\" cannot %s resource \"%s\" in API group \"%s\" "
             "%s%s%.200s",
             what, s->user.username, q->verb, HTTP_AUTH_RESOURCE, HTTP_AUTH_GROUP, where,
             reason && reason[0] ? ": " : "", reason ? reason : "");
}

static http_auth_verdict deny(http_auth_denial *d, rpc_code code, const char *message)
{
    d->code = code;
    snprintf(d->message, sizeof d->message, "%s", message);
    return HTTP_AUTH_DENIED;
}

/* After the token: refused, or the identity policy says no, or (pod_denies)
 * the label's Pod is not the caller's. A Campaign's label whose Pod is not
 * the caller's is no refusal: why goes to label_refused (n bytes). */
static bool refused(const http_auth *a, const auth_token_answer *t, const http_auth_action *act,
                    http_auth_denial *d, char *label_refused, size_t n)
{
    char msg[400];
    if (t->code != RPC_OK) {
        deny(d, t->code, t->message);
        return true;
    }
    if (auth_policy_check(a, t->subject, act->identity, act->ns, msg, sizeof msg) != 0) {
        deny(d, RPC_PERMISSION_DENIED, msg);
        return true;
    }
    if (auth_pod_check(t->subject, act->pod_ns, act->pod, msg, sizeof msg) != 0) {
        if (act->pod_denies) {
            deny(d, RPC_PERMISSION_DENIED, msg);
            return true;
        }
        snprintf(label_refused, n, "%s", msg);
    }
    return false;
}

/* The verdict of an access answer; *narrow (a new reference) when a denied
 * cluster-scope list is narrowed instead. */
static http_auth_verdict access_verdict(auth_subject *s, const http_auth_action *act,
                                        const auth_access_answer *acc, http_auth_denial *d,
                                        auth_subject **narrow)
{
    *narrow = NULL;
    if (acc->code != RPC_OK)
        return deny(d, acc->code, acc->message);
    if (acc->allowed)
        return HTTP_AUTH_ALLOWED;
    if (act->narrow_on_deny && !act->ns[0]) {
        *narrow = auth_subject_ref(s);
        return HTTP_AUTH_ALLOWED;
    }
    auth_access_question q = {act->verb, act->ns, act->name, act->path};
    auth_forbidden_message(s, &q, acc->message, d->message, sizeof d->message);
    d->code = RPC_PERMISSION_DENIED;
    return HTTP_AUTH_DENIED;
}

/* ---- tickets --------------------------------------------------------------------- */

static http_auth_ticket *ticket_of_wait(http_wait *w)
{
    return KL__LIST_ENTRY(w, http_auth_ticket, w);
}

static void ticket_release(http_wait *w)
{
    http_auth_ticket *t = ticket_of_wait(w);
    kl__secret_free(t->token);
    auth_subject_unref(t->subject);
    auth_subject_unref(t->narrow);
    free(t);
}

/* s->mu held: sets the verdict of a ticket that has none, and resumes its
 * connection. Takes narrow. */
static void ticket_answer_locked(http_auth_ticket *t, http_auth_verdict v,
                                 const http_auth_denial *d, auth_subject *narrow)
{
    if (t->w.done) {
        auth_subject_unref(narrow);
        return;
    }
    t->verdict = v;
    if (d)
        t->denial = *d;
    t->narrow = narrow;
    http_wait_complete(&t->w);
}

static void ticket_fail_wait(http_wait *w, rpc_code code, const char *message)
{
    http_auth_denial d;
    deny(&d, code, message);
    ticket_answer_locked(ticket_of_wait(w), HTTP_AUTH_DENIED, &d, NULL);
}

/* Loop thread: the verdict is in; the loop drops its reference. */
static void ticket_complete(http_auth_ticket *t, http_auth_verdict v, const http_auth_denial *d,
                            auth_subject *narrow)
{
    http_server *s = t->w.srv;
    pthread_mutex_lock(&s->mu);
    http_wait_unlist(&t->w);
    ticket_answer_locked(t, v, d, narrow);
    http_wait_unref(&t->w); /* the loop's */
    pthread_mutex_unlock(&s->mu);
}

static void ticket_fail(http_auth_ticket *t, rpc_code code, const char *message)
{
    http_auth_denial d;
    deny(&d, code, message);
    ticket_complete(t, HTTP_AUTH_DENIED, &d, NULL);
}

static http_auth_action ticket_action(const http_auth_ticket *t)
{
    return (http_auth_action){.verb = t->verb,
                              .path = t->path[0] ? t->path : NULL,
                              .ns = t->ns,
                              .name = t->name,
                              .identity = t->has_identity ? t->identity : NULL,
                              .narrow_on_deny = t->narrow_on_deny,
                              .pod_ns = t->pod_ns,
                              .pod = t->pod[0] ? t->pod : NULL,
                              .pod_denies = t->pod_denies};
}

static void ticket_on_access(void *ctx, const auth_access_answer *acc)
{
    http_auth_ticket *t = ctx;
    http_auth_action act = ticket_action(t);
    http_auth_denial d;
    auth_subject *narrow;
    http_auth_verdict v = access_verdict(t->subject, &act, acc, &d, &narrow);
    ticket_complete(t, v, &d, narrow);
}

/* The cached answer to q; for a named election, failing that, the
 * namespace's answer when it allows: a SubjectAccessReview without a name
 * asks about every name, so its allowance holds for each, and one answer
 * serves all the elections of a namespace that a caller may act on. *due:
 * the answer used is due for refreshing; *wide: it was the namespace's;
 * *wide_denied: the namespace's answer is cached and refuses. */
static bool access_cached(http_auth *a, const auth_subject *s, const auth_access_question *q,
                          auth_access_answer *acc, bool *due, bool *wide, bool *wide_denied)
{
    uint8_t key[AUTH_DIGEST_LEN];
    *wide = *wide_denied = false;
    auth_access_key(s, q, key);
    if (auth_access_lookup(a, key, acc, due))
        return true;
    if (!q->name[0])
        return false;
    auth_access_question all = {q->verb, q->ns, "", NULL};
    auth_access_key(s, &all, key);
    auth_access_answer w;
    bool all_due = false;
    if (!auth_access_lookup(a, key, &w, &all_due))
        return false;
    if (w.code != RPC_OK || !w.allowed) {
        *wide_denied = true;
        return false;
    }
    *acc = w;
    *due = all_due;
    *wide = true;
    return true;
}

static void ticket_ask(http_auth_ticket *t, bool wide_first);

/* The namespace's answer: every name allowed, or ask about this one. */
static void ticket_on_wide(void *ctx, const auth_access_answer *acc)
{
    http_auth_ticket *t = ctx;
    if (acc->code == RPC_OK && !acc->allowed)
        ticket_ask(t, false);
    else
        ticket_on_access(t, acc); /* allowed, or no answer: no access */
}

/* Loop thread: asks the apiserver about the ticket's question; for a named
 * election (wide_first), first about the whole namespace (access_cached). */
static void ticket_ask(http_auth_ticket *t, bool wide_first)
{
    auth_access_question q = {t->verb, t->ns, wide_first ? "" : t->name, t->path};
    const auth_asker who = {.limited = true, .peer = t->peer};
    char msg[300];
    if (auth_review_access(t->w.srv->auth, t->subject, &q, &who,
                           wide_first ? ticket_on_wide : ticket_on_access, NULL, t, msg,
                           sizeof msg) != 0)
        ticket_fail(t, RPC_UNAVAILABLE, msg);
}

static void ticket_on_token(void *ctx, const auth_token_answer *ans)
{
    http_auth_ticket *t = ctx;
    http_auth *a = t->w.srv->auth;
    http_auth_action act = ticket_action(t);
    http_auth_denial d;
    if (refused(a, ans, &act, &d, t->label_refused, sizeof t->label_refused)) {
        ticket_complete(t, HTTP_AUTH_DENIED, &d, NULL);
        return;
    }
    t->subject = auth_subject_ref(ans->subject);
    auth_access_question q = {t->verb, t->ns, t->name, t->path};
    auth_access_answer acc;
    bool due, wide, wide_denied;
    if (access_cached(a, t->subject, &q, &acc, &due, &wide, &wide_denied))
        ticket_on_access(t, &acc);
    else
        ticket_ask(t, t->name[0] && !wide_denied);
}

/* Loop thread: the ticket's first step. */
static void ticket_run(void *arg)
{
    http_auth_ticket *t = arg;
    http_auth *a = t->w.srv->auth;
    auth_token_answer ans;
    char msg[300];
    const auth_asker who = {.limited = true, .peer = t->peer};
    if (auth_token_lookup(a, t->digest, &ans, NULL)) {
        ticket_on_token(t, &ans);
        auth_subject_unref(ans.subject);
    } else if (auth_review_token(a, t->digest, t->token, t->path[0] != 0, &who, ticket_on_token,
                                 NULL, t, msg, sizeof msg) != 0) {
        ticket_fail(t, RPC_UNAVAILABLE, msg);
    }
}

static http_auth_ticket *ticket_new(http_server *s, struct MHD_Connection *conn,
                                    const http_auth_action *act, const uint8_t *digest,
                                    const char *token)
{
    http_auth_ticket *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    http_wait_init(&t->w, s, conn, ticket_release);
    memcpy(t->digest, digest, AUTH_DIGEST_LEN);
    snprintf(t->verb, sizeof t->verb, "%s", act->verb);
    snprintf(t->ns, sizeof t->ns, "%s", act->ns);
    snprintf(t->name, sizeof t->name, "%s", act->name);
    snprintf(t->path, sizeof t->path, "%s", act->path ? act->path : "");
    http_peer_ip(conn, t->peer, sizeof t->peer);
    t->has_identity = act->identity != NULL;
    snprintf(t->identity, sizeof t->identity, "%s", act->identity ? act->identity : "");
    t->narrow_on_deny = act->narrow_on_deny;
    snprintf(t->pod_ns, sizeof t->pod_ns, "%s", act->pod_ns ? act->pod_ns : "");
    snprintf(t->pod, sizeof t->pod, "%s", act->pod ? act->pod : "");
    t->pod_denies = act->pod_denies;
    t->token = strdup(token);
    if (!t->token) {
        free(t);
        return NULL;
    }
    return t;
}

/* Suspends the request and hands its question to the loop thread. */
static http_auth_verdict ticket_start(http_server *s, struct MHD_Connection *conn, http_req *q,
                                      const http_auth_action *act, const uint8_t *digest,
                                      const char *token, http_auth_denial *d)
{
    http_auth_ticket *t = ticket_new(s, conn, act, digest, token);
    if (!t)
        return deny(d, RPC_INTERNAL, "out of memory");
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        http_wait_unref(&t->w);
        pthread_mutex_unlock(&s->mu);
        return deny(d, RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
    }
    http_wait_list(&s->auth_tickets, &t->w);
    http_wait_ref(&t->w); /* the loop's */
    if (loop_post(s->auth->loop, ticket_run, t) != 0) {
        http_wait_unlist(&t->w);
        http_wait_unref(&t->w); /* the loop's: it never got it */
        http_wait_unref(&t->w); /* the request's */
        pthread_mutex_unlock(&s->mu);
        return deny(d, RPC_INTERNAL, "out of memory");
    }
    http_wait_park(&t->w);
    pthread_mutex_unlock(&s->mu);
    q->auth = t;
    return HTTP_AUTH_WAIT;
}

/* The handler runs again: the verdict, or wait on. */
static http_auth_verdict ticket_resumed(http_server *s, struct MHD_Connection *conn, http_req *q,
                                        http_auth_denial *d)
{
    http_auth_ticket *t = q->auth;
    (void)conn;
    pthread_mutex_lock(&s->mu);
    if (!http_wait_resumed(&t->w, ticket_fail_wait)) {
        pthread_mutex_unlock(&s->mu);
        return HTTP_AUTH_WAIT;
    }
    http_auth_verdict v = t->verdict;
    *d = t->denial;
    if (v == HTTP_AUTH_ALLOWED && t->label_refused[0] &&
        !(q->label_refused = strdup(t->label_refused)))
        v = deny(d, RPC_INTERNAL, "out of memory"); /* never the label unchecked */
    q->scope.subject = t->narrow;
    t->narrow = NULL;
    if (v == HTTP_AUTH_ALLOWED && t->subject) /* the quotas' caller */
        snprintf(q->caller, sizeof q->caller, "%s", t->subject->user.username);
    http_wait_request_done(&t->w);
    pthread_mutex_unlock(&s->mu);
    q->auth = NULL;
    return v;
}

/* ---- the request's side ------------------------------------------------------------ */

/* The token of "Authorization: Bearer <token>" into *token (pointing into
 * the header). Returns 0, or -1 with the reason in d. */
static int bearer_token(struct MHD_Connection *conn, const http_auth *a,
                        const http_auth_action *act, const char **token, size_t *len,
                        http_auth_denial *d)
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
                 a->audience);
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

/* The decision from the caches; true when both answers were there. Answers
 * due for refreshing are queued to be asked again. */
static bool decide_cached(http_auth *a, const http_auth_action *act, const char *token,
                          size_t token_len, const uint8_t *digest, http_req *q,
                          http_auth_verdict *v, http_auth_denial *d)
{
    auth_token_answer t;
    bool token_due = false, access_due = false;
    if (!auth_token_lookup(a, digest, &t, &token_due))
        return false;
    if (token_due && t.code == RPC_OK)
        auth_refresh_token(a, digest, token, token_len, act->path != NULL);
    bool decided = true;
    char label_refused[256] = "";
    if (refused(a, &t, act, d, label_refused, sizeof label_refused)) {
        *v = HTTP_AUTH_DENIED;
    } else {
        auth_access_question aq = {act->verb, act->ns, act->name, act->path};
        auth_access_answer acc;
        bool wide, wide_denied;
        decided = access_cached(a, t.subject, &aq, &acc, &access_due, &wide, &wide_denied);
        if (decided)
            *v = access_verdict(t.subject, act, &acc, d, &q->scope.subject);
        if (decided && *v == HTTP_AUTH_ALLOWED) /* the quotas' caller */
            snprintf(q->caller, sizeof q->caller, "%s", t.subject->user.username);
        if (decided && *v == HTTP_AUTH_ALLOWED && label_refused[0] && !q->label_refused &&
            !(q->label_refused = strdup(label_refused)))
            *v = deny(d, RPC_INTERNAL, "out of memory"); /* never the label unchecked */
        if (access_due) {
            auth_access_question rq = {act->verb, act->ns, wide ? "" : act->name, act->path};
            auth_refresh_access(a, t.subject, &rq);
        }
    }
    auth_subject_unref(t.subject);
    return decided;
}

http_auth_verdict http_auth_authorize(http_server *s, struct MHD_Connection *conn, http_req *q,
                                      const http_auth_action *act, http_auth_denial *d)
{
    if (q->auth)
        return ticket_resumed(s, conn, q, d);
    const char *token;
    size_t len;
    uint8_t digest[AUTH_DIGEST_LEN];
    if (bearer_token(conn, s->auth, act, &token, &len, d) != 0)
        return HTTP_AUTH_DENIED;
    if (auth_token_key(token, len, act->path != NULL, digest) != 0)
        return deny(d, RPC_INTERNAL, "cannot hash the token (libcrypto failed)");
    http_auth_verdict v;
    if (decide_cached(s->auth, act, token, len, digest, q, &v, d))
        return v;
    char *copy = strndup(token, len);
    if (!copy)
        return deny(d, RPC_INTERNAL, "out of memory");
    v = ticket_start(s, conn, q, act, digest, copy, d);
    kl__secret_free(copy);
    return v;
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

void http_auth_tickets_end_locked(http_server *s)
{
    http_waits_end(&s->auth_tickets, ticket_fail_wait); /* the loop will never run again */
}

void http_auth_tickets_fail_locked(http_server *s)
{
    http_waits_fail(&s->auth_tickets, ticket_fail_wait);
}
