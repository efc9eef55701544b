/* Refreshes: cached answers asked again before they expire (cache.c
 * says when), so that a caller who keeps calling never waits for a review.
 * Callers' threads queue them under a->refresh_mu; one task on the loop thread
 * takes the queue and starts the reviews (review.c), which cache what
 * they learn. A refresh that fails is asked again a second later, by the
 * next call that finds the answer; no answer is used past its expiry.
 * Refreshes are not rate-limited (rate.c): there is at most one per
 * answer in use every three quarters of its life, for callers once
 * admitted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/secret.h"
#include "core/loop.h"
#include "auth/internal.h"

#define REFRESH_QUEUE_MAX 1024 /* answers waiting to be asked again; more wait a second */

typedef struct auth_refresh {
    struct kl__list link; /* in a->refreshes until the loop takes it */
    uint8_t digest[AUTH_DIGEST_LEN];
    char *token;             /* a token's: the token (secret); NULL: an access question's */
    bool apiserver_audience; /* a token's: reviewed for the apiserver's audience */
    auth_subject *subject;   /* an access question's */
    char verb[16], ns[64], name[254], path[64];
} auth_refresh;

static void refresh_free(void *arg)
{
    auth_refresh *r = arg;
    kl__secret_free(r->token);
    auth_subject_unref(r->subject);
    free(r);
}

static void refresh_token_done(void *ctx, const auth_token_answer *ans)
{
    (void)ans; /* cached by the review */
    refresh_free(ctx);
}

static void refresh_access_done(void *ctx, const auth_access_answer *ans)
{
    (void)ans;
    refresh_free(ctx);
}

/* Loop thread: asks every queued question again. */
static void refreshes_run(void *arg)
{
    auth_ctx *a = arg;
    struct kl__list batch = {0};
    pthread_mutex_lock(&a->refresh_mu);
    KL__LIST_FOREACH_SAFE (node, &a->refreshes) {
        kl__list_remove(node);
        kl__list_insert_tail(&batch, node);
    }
    a->n_refreshes = 0;
    a->refresh_posted = false;
    pthread_mutex_unlock(&a->refresh_mu);
    KL__LIST_FOREACH_SAFE (node, &batch) {
        kl__list_remove(node);
        auth_refresh *r = KL__LIST_ENTRY(node, auth_refresh, link);
        char msg[300];
        auth_access_question q = {r->verb, r->ns, r->name, r->path};
        const auth_asker refresh = {.limited = false};
        int rc = r->token
                     ? auth_review_token(a, r->digest, r->token, r->apiserver_audience, &refresh,
                                         refresh_token_done, refresh_free, r, msg, sizeof msg)
                     : auth_review_access(a, r->subject, &q, &refresh, refresh_access_done,
                                          refresh_free, r, msg, sizeof msg);
        if (rc != 0)
            refresh_free(r);
    }
}

/* Any thread: queues r (taken) for the loop. */
static void refresh_queue(auth_ctx *a, auth_refresh *r)
{
    pthread_mutex_lock(&a->refresh_mu);
    if (a->n_refreshes >= REFRESH_QUEUE_MAX) {
        pthread_mutex_unlock(&a->refresh_mu);
        refresh_free(r);
        return;
    }
    kl__list_insert_tail(&a->refreshes, &r->link);
    a->n_refreshes++;
    if (!a->refresh_posted)
        a->refresh_posted = loop_post(a->loop, refreshes_run, a) == 0;
    pthread_mutex_unlock(&a->refresh_mu);
}

void auth_refresh_token(auth_ctx *a, const uint8_t *digest, const char *token, size_t len,
                        bool apiserver_audience)
{
    auth_refresh *r = calloc(1, sizeof *r);
    if (!r || !(r->token = strndup(token, len))) {
        free(r);
        return;
    }
    r->apiserver_audience = apiserver_audience;
    memcpy(r->digest, digest, AUTH_DIGEST_LEN);
    refresh_queue(a, r);
}

void auth_refresh_access(auth_ctx *a, auth_subject *s, const auth_access_question *q)
{
    auth_refresh *r = calloc(1, sizeof *r);
    if (!r)
        return;
    r->subject = auth_subject_ref(s);
    snprintf(r->verb, sizeof r->verb, "%s", q->verb);
    snprintf(r->ns, sizeof r->ns, "%s", q->ns);
    snprintf(r->name, sizeof r->name, "%s", q->name);
    snprintf(r->path, sizeof r->path, "%s", q->path ? q->path : "");
    refresh_queue(a, r);
}

void auth_refreshes_free(auth_ctx *a)
{
    KL__LIST_FOREACH_SAFE (node, &a->refreshes) {
        kl__list_remove(node);
        refresh_free(KL__LIST_ENTRY(node, auth_refresh, link));
    }
    a->n_refreshes = 0;
}
