/* The authorizer object and its one entry, auth_check: a caller whose
 * token and access answers are cached is decided on its own thread (a
 * lookup in each cache under its mutex); otherwise the question becomes a
 * pending check, posted to the loop thread, which asks the apiserver
 * (review.c) and runs the check's callback with the verdict.
 *
 * A pending check is listed in a->checks (under a->checks_mu) from its
 * posting to its answer, so that auth_free drops the ones the loop never
 * ran (their drop callback runs instead of done). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/internal.h"
#include "common/secret.h"

#define TOKEN_TTL_MS      60000
#define NEGATIVE_TTL_MS   30000 /* docs/design.md, rule 7: why 30 s */
#define ACCESS_TTL_MS     10000
#define TOKEN_CACHE_MAX   4096
#define REFUSED_CACHE_MAX 4096 /* about 1.7 MB at most */
#define ACCESS_CACHE_MAX  16384
#define RATE_PEERS_MAX    4096 /* addresses whose review rate is remembered */

typedef struct auth_pending {
    auth_ctx *a;
    struct kl__list link; /* in a->checks until answered */
    /* the question */
    uint8_t digest[AUTH_DIGEST_LEN];
    char *token; /* secret: wiped when freed */
    char verb[16], ns[64], name[254], path[64], identity[256], pod_ns[64], pod[254];
    char peer[AUTH_PEER_LEN]; /* the caller's address, for the per-address review rate */
    bool has_identity, narrow_on_deny, pod_denies;
    auth_subject *subject;   /* loop thread: the caller, once authenticated */
    char label_refused[256]; /* the label's Pod is not the caller's (a Campaign) */
    auth_check_done done;
    void (*drop)(void *ctx);
    void *ctx;
} auth_pending;

/* ---- the authorizer --------------------------------------------------------- */

static void access_answer_free(void *v)
{
    free(v);
}

int64_t auth_now(const auth_ctx *a)
{
    return loop_clock(a->loop);
}

auth_ctx *auth_new(const auth_config *cfg)
{
    auth_ctx *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->policy = cfg->identity_policy;
    snprintf(a->audience, sizeof a->audience, "%s",
             cfg->audience && cfg->audience[0] ? cfg->audience : AUTH_DEFAULT_AUDIENCE);
    a->loop = cfg->loop;
    a->kube = cfg->kube;
    a->token_ttl_ms = cfg->token_ttl_ms > 0 ? cfg->token_ttl_ms : TOKEN_TTL_MS;
    a->negative_ttl_ms = cfg->negative_ttl_ms > 0 ? cfg->negative_ttl_ms : NEGATIVE_TTL_MS;
    a->access_ttl_ms = cfg->access_ttl_ms > 0 ? cfg->access_ttl_ms : ACCESS_TTL_MS;
    a->metrics = cfg->metrics;
    a->review_rate = cfg->review_rate;
    a->review_rate_per_ip = cfg->review_rate_per_ip;
    pthread_mutex_init(&a->refresh_mu, NULL);
    pthread_mutex_init(&a->checks_mu, NULL);
    a->tokens = auth_cache_new(TOKEN_CACHE_MAX, auth_token_answer_free);
    a->refused = auth_cache_new(REFUSED_CACHE_MAX, auth_token_answer_free);
    a->access = auth_cache_new(ACCESS_CACHE_MAX, access_answer_free);
    a->rate = auth_rate_new(a->review_rate, a->review_rate_per_ip, RATE_PEERS_MAX, auth_now(a));
    if (!a->tokens || !a->refused || !a->access || !a->rate) {
        auth_free(a);
        return NULL;
    }
    return a;
}

static void pending_free(auth_pending *p)
{
    kl__secret_free(p->token);
    auth_subject_unref(p->subject);
    free(p);
}

void auth_free(auth_ctx *a)
{
    if (!a)
        return;
    auth_reviews_free(a); /* checks waiting on a review are dropped below */
    auth_refreshes_free(a);
    while (!kl__list_empty(&a->checks)) {
        auth_pending *p = KL__LIST_ENTRY(kl__list_first(&a->checks), auth_pending, link);
        kl__list_remove(&p->link);
        if (p->drop)
            p->drop(p->ctx);
        pending_free(p);
    }
    pthread_mutex_destroy(&a->checks_mu);
    pthread_mutex_destroy(&a->refresh_mu);
    auth_cache_free(a->tokens);
    auth_cache_free(a->refused);
    auth_cache_free(a->access);
    auth_rate_free(a->rate);
    free(a);
}

bool auth_metrics(const auth_ctx *a)
{
    return a && a->metrics;
}

const char *auth_audience(const auth_ctx *a)
{
    return a->audience;
}

/* ---- verdicts ---------------------------------------------------------------- */

static auth_result deny(auth_verdict *v, auth_code code, const char *message)
{
    v->result = AUTH_DENIED;
    v->code = code;
    snprintf(v->message, sizeof v->message, "%s", message);
    return AUTH_DENIED;
}

/* Takes narrow. */
static auth_result allow(auth_verdict *v, const auth_subject *s, auth_subject *narrow,
                         const char *label_refused)
{
    v->result = AUTH_ALLOWED;
    v->code = AUTH_OK;
    v->message[0] = 0;
    v->narrow = narrow;
    snprintf(v->caller, sizeof v->caller, "%s", s->user.username);
    snprintf(v->label_refused, sizeof v->label_refused, "%s", label_refused);
    return AUTH_ALLOWED;
}

/* After the token: refused, or the identity policy says no, or (pod_denies)
 * the label's Pod is not the caller's. A Campaign's label whose Pod is not
 * the caller's is no refusal: why goes to label_refused (n bytes). */
static bool refused(const auth_ctx *a, const auth_token_answer *t, const auth_action *act,
                    auth_verdict *v, char *label_refused, size_t n)
{
    char msg[400];
    if (t->code != AUTH_OK) {
        deny(v, t->code, t->message);
        return true;
    }
    if (auth_policy_check(a->policy, t->subject, act->identity, act->ns, msg, sizeof msg) != 0) {
        deny(v, AUTH_PERMISSION_DENIED, msg);
        return true;
    }
    if (auth_pod_check(t->subject, act->pod_ns, act->pod, msg, sizeof msg) != 0) {
        if (act->pod_denies) {
            deny(v, AUTH_PERMISSION_DENIED, msg);
            return true;
        }
        snprintf(label_refused, n, "%s", msg);
    }
    return false;
}

/* The verdict of an access answer about s; a denied cluster-scope list is
 * allowed, narrowed to what s may list. */
static auth_result access_verdict(auth_subject *s, const auth_action *act,
                                  const auth_access_answer *acc, const char *label_refused,
                                  auth_verdict *v)
{
    if (acc->code != AUTH_OK)
        return deny(v, acc->code, acc->message);
    if (acc->allowed)
        return allow(v, s, NULL, label_refused);
    if (act->narrow_on_deny && !act->ns[0])
        return allow(v, s, auth_subject_ref(s), label_refused);
    auth_access_question q = {act->verb, act->ns, act->name, act->path};
    auth_forbidden_message(s, &q, acc->message, v->message, sizeof v->message);
    v->result = AUTH_DENIED;
    v->code = AUTH_PERMISSION_DENIED;
    return AUTH_DENIED;
}

/* The cached answer to q; for a named election, failing that, the
 * namespace's answer when it allows: a SubjectAccessReview without a name
 * asks about every name, so its allowance holds for each, and one answer
 * serves all the elections of a namespace that a caller may act on. *due:
 * the answer used is due for refreshing; *wide: it was the namespace's;
 * *wide_denied: the namespace's answer is cached and refuses. */
static bool access_cached(auth_ctx *a, const auth_subject *s, const auth_access_question *q,
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
    if (w.code != AUTH_OK || !w.allowed) {
        *wide_denied = true;
        return false;
    }
    *acc = w;
    *due = all_due;
    *wide = true;
    return true;
}

/* The decision from the caches; true when both answers were there. Answers
 * due for refreshing are queued to be asked again. */
static bool decide_cached(auth_ctx *a, const auth_action *act, const char *token, size_t token_len,
                          const uint8_t *digest, auth_verdict *v)
{
    auth_token_answer t;
    bool token_due = false, access_due = false;
    if (!auth_token_lookup(a, digest, &t, &token_due))
        return false;
    if (token_due && t.code == AUTH_OK)
        auth_refresh_token(a, digest, token, token_len, act->path != NULL);
    bool decided = true;
    char label_refused[256] = "";
    if (!refused(a, &t, act, v, label_refused, sizeof label_refused)) {
        auth_access_question aq = {act->verb, act->ns, act->name, act->path};
        auth_access_answer acc;
        bool wide, wide_denied;
        decided = access_cached(a, t.subject, &aq, &acc, &access_due, &wide, &wide_denied);
        if (decided)
            access_verdict(t.subject, act, &acc, label_refused, v);
        if (access_due) {
            auth_access_question rq = {act->verb, act->ns, wide ? "" : act->name, act->path};
            auth_refresh_access(a, t.subject, &rq);
        }
    }
    auth_subject_unref(t.subject);
    return decided;
}

/* ---- pending checks (the loop thread) ---------------------------------------- */

static auth_action pending_action(const auth_pending *p)
{
    return (auth_action){.verb = p->verb,
                         .path = p->path[0] ? p->path : NULL,
                         .ns = p->ns,
                         .name = p->name,
                         .identity = p->has_identity ? p->identity : NULL,
                         .narrow_on_deny = p->narrow_on_deny,
                         .pod_ns = p->pod_ns,
                         .pod = p->pod[0] ? p->pod : NULL,
                         .pod_denies = p->pod_denies,
                         .peer = p->peer};
}

/* The verdict is in: done runs, and p is freed. */
static void pending_complete(auth_pending *p, auth_verdict *v)
{
    auth_ctx *a = p->a;
    pthread_mutex_lock(&a->checks_mu);
    kl__list_remove(&p->link);
    pthread_mutex_unlock(&a->checks_mu);
    p->done(p->ctx, v);
    pending_free(p);
}

static void pending_fail(auth_pending *p, auth_code code, const char *message)
{
    auth_verdict v = {0};
    deny(&v, code, message);
    pending_complete(p, &v);
}

static void pending_on_access(void *ctx, const auth_access_answer *acc)
{
    auth_pending *p = ctx;
    auth_action act = pending_action(p);
    auth_verdict v = {0};
    access_verdict(p->subject, &act, acc, p->label_refused, &v);
    pending_complete(p, &v);
}

static void pending_ask(auth_pending *p, bool wide_first);

/* The namespace's answer: every name allowed, or ask about this one. */
static void pending_on_wide(void *ctx, const auth_access_answer *acc)
{
    auth_pending *p = ctx;
    if (acc->code == AUTH_OK && !acc->allowed)
        pending_ask(p, false);
    else
        pending_on_access(p, acc); /* allowed, or no answer: no access */
}

/* Asks the apiserver about the check's question; for a named election
 * (wide_first), first about the whole namespace (access_cached). */
static void pending_ask(auth_pending *p, bool wide_first)
{
    auth_access_question q = {p->verb, p->ns, wide_first ? "" : p->name, p->path};
    const auth_asker who = {.limited = true, .peer = p->peer};
    char msg[300];
    if (auth_review_access(p->a, p->subject, &q, &who,
                           wide_first ? pending_on_wide : pending_on_access, NULL, p, msg,
                           sizeof msg) != 0)
        pending_fail(p, AUTH_UNAVAILABLE, msg);
}

static void pending_on_token(void *ctx, const auth_token_answer *ans)
{
    auth_pending *p = ctx;
    auth_action act = pending_action(p);
    auth_verdict v = {0};
    if (refused(p->a, ans, &act, &v, p->label_refused, sizeof p->label_refused)) {
        pending_complete(p, &v);
        return;
    }
    p->subject = auth_subject_ref(ans->subject);
    auth_access_question q = {p->verb, p->ns, p->name, p->path};
    auth_access_answer acc;
    bool due, wide, wide_denied;
    if (access_cached(p->a, p->subject, &q, &acc, &due, &wide, &wide_denied))
        pending_on_access(p, &acc);
    else
        pending_ask(p, p->name[0] && !wide_denied);
}

/* The check's first step. */
static void pending_run(void *arg)
{
    auth_pending *p = arg;
    auth_ctx *a = p->a;
    auth_token_answer ans;
    char msg[300];
    const auth_asker who = {.limited = true, .peer = p->peer};
    if (auth_token_lookup(a, p->digest, &ans, NULL)) {
        pending_on_token(p, &ans);
        auth_subject_unref(ans.subject);
    } else if (auth_review_token(a, p->digest, p->token, p->path[0] != 0, &who, pending_on_token,
                                 NULL, p, msg, sizeof msg) != 0) {
        pending_fail(p, AUTH_UNAVAILABLE, msg);
    }
}

static auth_pending *pending_new(auth_ctx *a, const auth_action *act, const uint8_t *digest,
                                 const char *token, size_t len)
{
    auth_pending *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->a = a;
    memcpy(p->digest, digest, AUTH_DIGEST_LEN);
    snprintf(p->verb, sizeof p->verb, "%s", act->verb);
    snprintf(p->ns, sizeof p->ns, "%s", act->ns);
    snprintf(p->name, sizeof p->name, "%s", act->name);
    snprintf(p->path, sizeof p->path, "%s", act->path ? act->path : "");
    snprintf(p->peer, sizeof p->peer, "%s", act->peer ? act->peer : "");
    p->has_identity = act->identity != NULL;
    snprintf(p->identity, sizeof p->identity, "%s", act->identity ? act->identity : "");
    p->narrow_on_deny = act->narrow_on_deny;
    snprintf(p->pod_ns, sizeof p->pod_ns, "%s", act->pod_ns ? act->pod_ns : "");
    snprintf(p->pod, sizeof p->pod, "%s", act->pod ? act->pod : "");
    p->pod_denies = act->pod_denies;
    p->token = strndup(token, len);
    if (!p->token) {
        free(p);
        return NULL;
    }
    return p;
}

auth_result auth_check(auth_ctx *a, const char *token, size_t len, const auth_action *act,
                       auth_verdict *out, auth_check_done done, void (*drop)(void *ctx), void *ctx)
{
    uint8_t digest[AUTH_DIGEST_LEN];
    out->narrow = NULL;
    out->caller[0] = out->label_refused[0] = 0;
    if (auth_token_key(token, len, act->path != NULL, digest) != 0)
        return deny(out, AUTH_INTERNAL, "cannot hash the token (libcrypto failed)");
    if (decide_cached(a, act, token, len, digest, out))
        return out->result;
    if (!done)
        return AUTH_PENDING;
    auth_pending *p = pending_new(a, act, digest, token, len);
    if (!p)
        return deny(out, AUTH_INTERNAL, "out of memory");
    p->done = done;
    p->drop = drop;
    p->ctx = ctx;
    pthread_mutex_lock(&a->checks_mu);
    kl__list_insert_head(&a->checks, &p->link);
    pthread_mutex_unlock(&a->checks_mu);
    if (loop_post(a->loop, pending_run, p) != 0) {
        pthread_mutex_lock(&a->checks_mu);
        kl__list_remove(&p->link);
        pthread_mutex_unlock(&a->checks_mu);
        pending_free(p);
        return deny(out, AUTH_INTERNAL, "out of memory");
    }
    return AUTH_PENDING;
}
