/* TokenReviews and SubjectAccessReviews, on the engine's loop thread: one
 * request per question in flight (callers asking the same question wait
 * on it), at most MAX_REVIEWS in flight and, for callers not known yet,
 * at most --review-rate a second in all and --review-rate-per-ip from one
 * address (rate.c; over them: "unavailable", saying when to retry);
 * answers cached, counted in kubelease_auth_reviews_total, and failures
 * turned into "unavailable" (fail closed: no answer is no access).
 *
 * Threads: the loop thread only, except auth_reviews_free, which the owner
 * calls once the loop has stopped. The in-flight list needs no lock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/secret.h"
#include "core/log.h"
#include "core/metrics.h"
#include "auth/internal.h"
#include "kube/api.h"
#include "kube/lease_json.h"

#define REVIEW_TIMEOUT_MS 5000
#define MAX_REVIEWS                                                                                \
    256                      /* in flight; more: unavailable, so a flood of bad tokens             \
                                cannot queue unbounded work on the apiserver */
#define EXPIRY_SLACK_MS 1000 /* a token is not trusted up to its last second */

typedef enum review_kind { REVIEW_TOKEN, REVIEW_ACCESS } review_kind;

typedef struct waiter {
    struct waiter *next;
    auth_token_cb token_cb;
    auth_access_cb access_cb;
    void (*drop)(void *ctx);
    void *ctx;
} waiter;

typedef struct auth_review {
    struct kl__list link; /* in a->reviews while in flight */
    auth_ctx *a;
    review_kind kind;
    uint8_t key[AUTH_DIGEST_LEN]; /* the token's digest, or the access key */
    kube_request *req;
    waiter *waiters, **tail;
    char *token;             /* token reviews: for the message of a refusal (secret) */
    bool apiserver_audience; /* token reviews: for the apiserver's audience (/metrics) */
    auth_subject *subject;   /* access reviews */
    char verb[16], ns[64], name[254], path[64];
} auth_review;

/* ---- the in-flight list --------------------------------------------------- */

static auth_review *find_review(auth_ctx *a, review_kind kind, const uint8_t *key)
{
    KL__LIST_FOREACH (link, &a->reviews) {
        auth_review *r = KL__LIST_ENTRY(link, auth_review, link);
        if (r->kind == kind && memcmp(r->key, key, AUTH_DIGEST_LEN) == 0)
            return r;
    }
    return NULL;
}

static void review_unlink(auth_ctx *a, auth_review *r)
{
    kl__list_remove(&r->link);
    a->n_reviews--;
}

static void review_free(auth_review *r)
{
    for (waiter *w = r->waiters, *next; w; w = next) {
        next = w->next;
        free(w);
    }
    kl__secret_free(r->token);
    auth_subject_unref(r->subject);
    free(r);
}

static int add_waiter(auth_review *r, auth_token_cb tcb, auth_access_cb acb, void (*drop)(void *),
                      void *ctx)
{
    waiter *w = calloc(1, sizeof *w);
    if (!w)
        return -1;
    *w = (waiter){NULL, tcb, acb, drop, ctx};
    *r->tail = w;
    r->tail = &w->next;
    return 0;
}

/* Whether who may have one more review now (rate.c); message says
 * why not, and when to try again. */
static bool rate_allows(auth_ctx *a, const auth_asker *who, char *message, size_t message_len)
{
    if (!who->limited)
        return true;
    int64_t retry_ms;
    auth_rate_verdict v = auth_rate_take(a->rate, who->peer, auth_now(a), &retry_ms);
    if (v == AUTH_RATE_OK)
        return true;
    if (v == AUTH_RATE_PEER)
        snprintf(message, message_len,
                 "too many callers to authenticate from %s (over --review-rate-per-ip, %u "
                 "reviews a second): retry in %lld ms, and reuse a token once it is accepted (a "
                 "known token costs no review)",
                 who->peer, a->review_rate_per_ip, (long long)retry_ms);
    else
        snprintf(message, message_len,
                 "too many callers to authenticate (over --review-rate, %u reviews a second in "
                 "all): retry in %lld ms, or raise --review-rate if so many new callers are "
                 "expected",
                 a->review_rate, (long long)retry_ms);
    metrics_add("kubelease_auth_reviews_limited_total",
                v == AUTH_RATE_PEER ? "limit=\"per_ip\"" : "limit=\"overall\"", 1);
    return false;
}

/* A new review, listed, with its first waiter; NULL (message set) when too
 * many are in flight, who is over a rate, or out of memory. */
static auth_review *review_new(auth_ctx *a, review_kind kind, const uint8_t *key,
                               const auth_asker *who, auth_token_cb tcb, auth_access_cb acb,
                               void (*drop)(void *), void *ctx, char *message, size_t message_len)
{
    if (a->n_reviews >= MAX_REVIEWS) {
        snprintf(message, message_len,
                 "too many callers are being authenticated at once; try again shortly");
        return NULL;
    }
    if (!rate_allows(a, who, message, message_len))
        return NULL;
    auth_review *r = calloc(1, sizeof *r);
    if (r)
        r->tail = &r->waiters;
    if (!r || add_waiter(r, tcb, acb, drop, ctx) != 0) {
        free(r);
        snprintf(message, message_len, "out of memory");
        return NULL;
    }
    r->a = a;
    r->kind = kind;
    memcpy(r->key, key, AUTH_DIGEST_LEN);
    kl__list_insert_head(&a->reviews, &r->link);
    a->n_reviews++;
    return r;
}

static void count_review(const char *kind, const char *result)
{
    char labels[96];
    snprintf(labels, sizeof labels, "kind=\"%s\",result=\"%s\"", kind, result);
    metrics_add("kubelease_auth_reviews_total", labels, 1);
}

/* Why a review got no answer: unreachable, refused (kubeleased's own RBAC),
 * or an error of the apiserver's. */
static void failure_message(const char *kind, const char *resource, const kube_response *res,
                            char *out, size_t out_len)
{
    if (res->http_code == 0) {
        snprintf(out, out_len, "cannot reach the apiserver for a %s: %s", kind, res->error);
        return;
    }
    kube_status st;
    char detail[384];
    kube_status_message(res->http_code,
                        kube_status_decode(res->body, res->body_len, &st) == 0 ? &st : NULL, detail,
                        sizeof detail);
    if (res->http_code == 403)
        snprintf(out, out_len,
                 "kubeleased may not create %s (grant it create in a ClusterRole): %s", resource,
                 detail);
    else
        snprintf(out, out_len, "the apiserver did not answer a %s: %s", kind, detail);
}

/* ---- token reviews ---------------------------------------------------------- */

static void subject_free(auth_subject *s)
{
    kube_user_clear(&s->user);
    free(s);
}

/* A subject taking over tr's user. NULL when out of memory. */
static auth_subject *subject_new(kube_token_review *tr)
{
    auth_subject *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    atomic_init(&s->refs, 1);
    s->user = tr->user;
    memset(&tr->user, 0, sizeof tr->user);
    /* The digest is of the JSON of every field an access review sends about
     * the user, so that two users never share access answers. */
    char *body =
        kube_access_review_body(&s->user, &(kube_resource_attributes){"", "", "", "", "", NULL});
    if (!body || auth_digest(body, strlen(body), s->digest) != 0) {
        free(body);
        subject_free(s);
        return NULL;
    }
    free(body);
    if (kube_user_serviceaccount(&s->user, s->sa, sizeof s->sa) != 0)
        s->sa[0] = 0;
    /* A pod-bound token's Pod lives in its ServiceAccount's namespace (a
     * Pod can use only a ServiceAccount of its own namespace). */
    const char *pod = kube_user_extra_value(&s->user, KUBE_EXTRA_POD_NAME);
    const char *colon = strchr(s->sa, ':');
    if (pod && pod[0] && colon && (size_t)(colon - s->sa) < sizeof s->pod_ns) {
        snprintf(s->pod, sizeof s->pod, "%s", pod);
        snprintf(s->pod_ns, sizeof s->pod_ns, "%.*s", (int)(colon - s->sa), s->sa);
    }
    return s;
}

void auth_token_answer_free(void *v)
{
    auth_token_answer *t = v;
    auth_subject_unref(t->subject);
    free(t);
}

/* Why the apiserver refused a token, in terms the caller can act on: its
 * claims (read, not trusted) tell an expired token or a wrong audience
 * from an otherwise invalid one. */
static void refusal_message(const char *audience, const char *token, const char *error, char *out,
                            size_t out_len)
{
    kube_jwt_claims c;
    bool jwt = kube_jwt_peek(token, &c) == 0;
    const char *why = error[0] ? error : "the apiserver does not authenticate it";
    if (jwt && c.exp > 0 && c.exp * 1000000 <= wall_us()) {
        time_t t = (time_t)c.exp;
        struct tm tm;
        char when[32];
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
        snprintf(out, out_len, "the token expired at %s (TokenReview: %s)", when, why);
    } else if (jwt && audience && !kube_jwt_has_audience(&c, audience)) {
        snprintf(out, out_len,
                 "the token's audience is [%s], not \"%s\": use a ServiceAccount token requested "
                 "for audience \"%s\" (a projected token)",
                 c.aud, audience, audience);
    } else {
        snprintf(out, out_len, "the token is invalid (TokenReview: %s)", why);
    }
}

/* The answer to a TokenReview, cached when it is one. */
static void token_answer_of(auth_review *r, const kube_response *res, auth_token_answer *ans)
{
    auth_ctx *a = r->a;
    int64_t now = auth_now(a);
    kube_token_review tr;
    char err[256];
    memset(ans, 0, sizeof *ans);
    ans->code = AUTH_UNAVAILABLE;
    if (res->http_code != 201) {
        failure_message("TokenReview", "tokenreviews.authentication.k8s.io", res, ans->message,
                        sizeof ans->message);
        count_review("TokenReview", "error");
        return;
    }
    if (kube_token_review_parse(res->body, res->body_len, &tr, err, sizeof err) != 0) {
        snprintf(ans->message, sizeof ans->message, "the apiserver's answer: %s", err);
        count_review("TokenReview", "error");
        return;
    }
    int64_t until = now + a->negative_ttl_ms;
    if (tr.authenticated) {
        ans->subject = subject_new(&tr);
        ans->code = ans->subject ? AUTH_OK : AUTH_INTERNAL;
        snprintf(ans->message, sizeof ans->message, "%s", ans->subject ? "" : "out of memory");
        kube_jwt_claims c;
        until = now + a->token_ttl_ms;
        if (kube_jwt_peek(r->token, &c) == 0 && c.exp > 0) {
            int64_t left = c.exp * 1000 - wall_us() / 1000 - EXPIRY_SLACK_MS;
            if (now + left < until)
                until = now + left;
        }
    } else {
        ans->code = AUTH_UNAUTHENTICATED;
        refusal_message(r->apiserver_audience ? NULL : a->audience, r->token, tr.error,
                        ans->message, sizeof ans->message);
        if (r->apiserver_audience)
            snprintf(ans->message + strlen(ans->message),
                     sizeof ans->message - strlen(ans->message),
                     "; /metrics takes a ServiceAccount token for the apiserver's own audience");
    }
    kube_token_review_clear(&tr);
    count_review("TokenReview", ans->code == AUTH_OK ? "authenticated" : "unauthenticated");
    /* A refusal replaces an accepted answer still cached (a refresh that
     * finds the token revoked): the token stops working now, not when the
     * accepted answer would have expired; and an acceptance a refusal. */
    if (ans->code == AUTH_UNAUTHENTICATED)
        auth_cache_remove(a->tokens, r->key);
    else if (ans->code == AUTH_OK)
        auth_cache_remove(a->refused, r->key);
    auth_token_answer *cached = ans->code != AUTH_INTERNAL ? malloc(sizeof *cached) : NULL;
    if (cached && until > now) {
        *cached = *ans;
        auth_subject_ref(cached->subject);
        auth_cache_put(ans->code == AUTH_OK ? a->tokens : a->refused, r->key, cached, now, until);
    } else {
        free(cached);
    }
}

static void token_done(void *ctx, const kube_response *res)
{
    auth_review *r = ctx;
    auth_ctx *a = r->a;
    auth_token_answer ans;
    r->req = NULL;
    review_unlink(a, r); /* waiters may start reviews of their own */
    token_answer_of(r, res, &ans);
    if (ans.code == AUTH_UNAVAILABLE)
        log_event(LOG_WARN, "auth_review_failed", "kind=TokenReview error=%s", log_q(ans.message));
    for (waiter *w = r->waiters; w; w = w->next)
        w->token_cb(w->ctx, &ans);
    auth_subject_unref(ans.subject);
    review_free(r);
}

static int review_start(auth_review *r, const char *path, char *body, kube_done_fn done,
                        char *message, size_t message_len)
{
    kube_request_opts o = {.method = "POST",
                           .path = path,
                           .body = body,
                           .body_len = body ? strlen(body) : 0,
                           .timeout_ms = REVIEW_TIMEOUT_MS,
                           .on_done = done,
                           .ctx = r};
    r->req = body ? kube_client_start(r->a->kube, &o) : NULL;
    kube_review_body_free(body); /* the client keeps a copy, wiped when the request ends */
    if (r->req)
        return 0;
    snprintf(message, message_len, "cannot start a review request to the apiserver");
    review_unlink(r->a, r);
    review_free(r);
    return -1;
}

int auth_review_token(auth_ctx *a, const uint8_t digest[AUTH_DIGEST_LEN], const char *token,
                      bool apiserver_audience, const auth_asker *who, auth_token_cb cb,
                      void (*drop)(void *ctx), void *ctx, char *message, size_t message_len)
{
    auth_review *r = find_review(a, REVIEW_TOKEN, digest);
    if (r) {
        if (add_waiter(r, cb, NULL, drop, ctx) == 0)
            return 0;
        snprintf(message, message_len, "out of memory");
        return -1;
    }
    r = review_new(a, REVIEW_TOKEN, digest, who, cb, NULL, drop, ctx, message, message_len);
    if (!r)
        return -1;
    r->token = strdup(token);
    r->apiserver_audience = apiserver_audience;
    char *body =
        r->token ? kube_token_review_body(token, apiserver_audience ? NULL : a->audience) : NULL;
    return review_start(r, KUBE_TOKENREVIEWS_PATH, body, token_done, message, message_len);
}

/* ---- access reviews ---------------------------------------------------------- */

static void access_answer_of(auth_review *r, const kube_response *res, auth_access_answer *ans)
{
    kube_access_review ar;
    char err[256];
    memset(ans, 0, sizeof *ans);
    ans->code = AUTH_UNAVAILABLE;
    if (res->http_code != 201) {
        failure_message("SubjectAccessReview", "subjectaccessreviews.authorization.k8s.io", res,
                        ans->message, sizeof ans->message);
        count_review("SubjectAccessReview", "error");
        return;
    }
    if (kube_access_review_parse(res->body, res->body_len, &ar, err, sizeof err) != 0) {
        snprintf(ans->message, sizeof ans->message, "the apiserver's answer: %s", err);
        count_review("SubjectAccessReview", "error");
        return;
    }
    ans->code = AUTH_OK;
    ans->allowed = ar.allowed;
    snprintf(ans->message, sizeof ans->message, "%s", ar.reason);
    count_review("SubjectAccessReview", ar.allowed ? "allowed" : "denied");
    auth_access_answer *cached = malloc(sizeof *cached);
    if (cached) {
        *cached = *ans;
        int64_t now = auth_now(r->a);
        auth_cache_put(r->a->access, r->key, cached, now, now + r->a->access_ttl_ms);
    }
}

static void access_done(void *ctx, const kube_response *res)
{
    auth_review *r = ctx;
    auth_access_answer ans;
    r->req = NULL;
    review_unlink(r->a, r);
    access_answer_of(r, res, &ans);
    if (ans.code != AUTH_OK)
        log_event(LOG_WARN, "auth_review_failed", "kind=SubjectAccessReview error=%s",
                  log_q(ans.message));
    for (waiter *w = r->waiters; w; w = w->next)
        w->access_cb(w->ctx, &ans);
    review_free(r);
}

int auth_review_access(auth_ctx *a, auth_subject *s, const auth_access_question *q,
                       const auth_asker *who, auth_access_cb cb, void (*drop)(void *ctx), void *ctx,
                       char *message, size_t message_len)
{
    uint8_t key[AUTH_DIGEST_LEN];
    auth_access_key(s, q, key);
    auth_review *r = find_review(a, REVIEW_ACCESS, key);
    if (r) {
        if (add_waiter(r, NULL, cb, drop, ctx) == 0)
            return 0;
        snprintf(message, message_len, "out of memory");
        return -1;
    }
    r = review_new(a, REVIEW_ACCESS, key, who, NULL, cb, drop, ctx, message, message_len);
    if (!r)
        return -1;
    r->subject = auth_subject_ref(s);
    snprintf(r->verb, sizeof r->verb, "%s", q->verb);
    snprintf(r->ns, sizeof r->ns, "%s", q->ns);
    snprintf(r->name, sizeof r->name, "%s", q->name);
    snprintf(r->path, sizeof r->path, "%s", q->path ? q->path : "");
    kube_resource_attributes attrs = {r->verb, AUTH_GROUP, AUTH_RESOURCE, r->ns, r->name, r->path};
    char *body = kube_access_review_body(&s->user, &attrs);
    return review_start(r, KUBE_SUBJECTACCESSREVIEWS_PATH, body, access_done, message, message_len);
}

void auth_reviews_free(auth_ctx *a)
{
    while (!kl__list_empty(&a->reviews)) {
        auth_review *r = KL__LIST_ENTRY(kl__list_first(&a->reviews), auth_review, link);
        review_unlink(a, r);
        kube_client_cancel(a->kube, r->req);
        for (waiter *w = r->waiters; w; w = w->next)
            if (w->drop)
                w->drop(w->ctx);
        review_free(r);
    }
}

/* ---- subjects ------------------------------------------------------------------ */

auth_subject *auth_subject_ref(auth_subject *s)
{
    if (s)
        atomic_fetch_add(&s->refs, 1);
    return s;
}

void auth_subject_unref(auth_subject *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        subject_free(s);
}
