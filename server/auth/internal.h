/* Private to server/auth/: the authorizer object, its caches, the
 * subjects it authenticated, and the reviews it runs on the engine's loop.
 *
 * Who runs where:
 * - cache.c: thread-safe maps (a mutex each) and the lookups in them;
 *   callers' threads read them for cached callers, the loop thread fills
 *   them.
 * - review.c: the loop thread only (every kube_client call, the in-flight
 *   reviews and their waiters, and the rate limits of rate.c, which have
 *   no lock). auth_free runs it down on the owner's thread once the loop
 *   has stopped.
 * - auth.c (checks: any thread, then the loop thread) and list.c
 *   (narrowing, on the loop thread) use both; policy.c is pure.
 * - Time is auth_now: the loop's clock. */
#ifndef KL_AUTH_INTERNAL_H
#define KL_AUTH_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/auth.h"
#include "common/list.h"
#include "kube/review.h"

#define AUTH_DIGEST_LEN 32
#define AUTH_PEER_LEN   48 /* a peer's address as text */

/* SHA-256 of data into out. Returns 0, or -1 when libcrypto fails. Any thread. */
int auth_digest(const void *data, size_t len, uint8_t out[AUTH_DIGEST_LEN]);

/* ---- cache.c ------------------------------------------------------------------- */

typedef struct auth_cache auth_cache;

/* At most capacity entries; free_value (may be NULL) releases a value that
 * is evicted, expired, replaced or left at auth_cache_free. */
auth_cache *auth_cache_new(size_t capacity, void (*free_value)(void *value));
void auth_cache_free(auth_cache *c);
/* How long a lookup told to refresh an answer keeps others from being told. */
#define AUTH_REFRESH_RETRY_MS 1000

/* On a live entry: copy(value, out) under the cache's lock, then true. An
 * expired entry is dropped. refresh (may be NULL) is set when the entry is
 * three quarters through its life and no lookup was told so in the last
 * AUTH_REFRESH_RETRY_MS: the caller should ask again (and put the answer). */
bool auth_cache_get(auth_cache *c, const uint8_t key[AUTH_DIGEST_LEN], int64_t now_ms,
                    void (*copy)(const void *value, void *out), void *out, bool *refresh);
/* Takes value, put at now_ms (monotonic) to live until expires_ms;
 * replaces an entry with the same key, evicts the least recently used one
 * when full. */
void auth_cache_put(auth_cache *c, const uint8_t key[AUTH_DIGEST_LEN], void *value, int64_t now_ms,
                    int64_t expires_ms);
/* Forgets key's entry, if any. */
void auth_cache_remove(auth_cache *c, const uint8_t key[AUTH_DIGEST_LEN]);

/* ---- rate.c: reviews a second, overall and per peer ---------------------- */

typedef struct auth_rate auth_rate;

typedef enum auth_rate_verdict {
    AUTH_RATE_OK,   /* one review taken */
    AUTH_RATE_PEER, /* over the peer's rate (--review-rate-per-ip) */
    AUTH_RATE_ALL,  /* over the overall rate (--review-rate) */
} auth_rate_verdict;

/* Buckets for rate reviews a second in all and per_peer a second for each
 * peer address (0: no such limit), full at now_ms; at most max_peers
 * addresses are remembered. NULL when out of memory. */
auth_rate *auth_rate_new(unsigned rate, unsigned per_peer, size_t max_peers, int64_t now_ms);
void auth_rate_free(auth_rate *r);
/* One review for addr (NULL or "": counted only in the overall bucket; an
 * IPv6 address counts for its /64) at now_ms. Refused: nothing is taken, and *retry_ms says when
 * the bucket that refused holds a review again. */
auth_rate_verdict auth_rate_take(auth_rate *r, const char *addr, int64_t now_ms, int64_t *retry_ms);
/* Addresses remembered. */
size_t auth_rate_peers(const auth_rate *r);

/* ---- subjects and answers -------------------------------------------------- */

/* A user the apiserver authenticated: what access reviews ask about, and
 * what the identity policy checks. Immutable once made; shared by the token
 * cache and whatever acts for the user, with atomic reference counts. */
struct auth_subject {
    atomic_int refs;
    kube_user user;
    uint8_t digest[AUTH_DIGEST_LEN]; /* of the whole user: access answers are keyed by it */
    char sa[320];                    /* "NS:NAME" for a ServiceAccount, else "" */
    char pod[254];                   /* the pod-name claim of a pod-bound token, else "" */
    char pod_ns[64];                 /* with pod: its namespace (the ServiceAccount's) */
};

auth_subject *auth_subject_ref(auth_subject *s);
/* Frees a cached auth_token_answer (the token cache's free_value). */
void auth_token_answer_free(void *v);

/* What a token is, as cached. code AUTH_OK: subject (a reference of the
 * holder's) is the caller; AUTH_UNAUTHENTICATED: refused, message says why;
 * AUTH_UNAVAILABLE (never cached): the apiserver could not tell. */
typedef struct auth_token_answer {
    auth_code code;
    auth_subject *subject;
    char message[300];
} auth_token_answer;

/* What an access review said. code AUTH_OK: decided (allowed, reason);
 * AUTH_UNAVAILABLE (never cached): no decision, message says why. */
typedef struct auth_access_answer {
    auth_code code;
    bool allowed;
    char message[300];
} auth_access_answer;

/* An access question: SubjectAccessReview attributes for
 * elections.kubelease.io, or with path a non-resource URL ("/metrics"). */
typedef struct auth_access_question {
    const char *verb;
    const char *ns;   /* "": the cluster scope */
    const char *name; /* "": every name */
    const char *path; /* NULL or "": a question about elections; else about this URL */
} auth_access_question;

struct auth_ctx {
    auth_identity_policy policy;
    char audience[256];
    loop *loop;
    kube_client *kube;
    int64_t token_ttl_ms, negative_ttl_ms, access_ttl_ms;
    bool metrics; /* /metrics needs a token allowed get on it (--metrics-auth) */
    unsigned review_rate, review_rate_per_ip; /* a second; 0: no limit */
    /* The key of a token (auth_token_key) -> auth_token_answer: accepted
     * ones in tokens, refused ones apart in refused, so that a flood of bad
     * tokens never evicts a caller who is known. */
    auth_cache *tokens;
    auth_cache *refused;
    auth_cache *access; /* SHA-256 of (subject, verb, ns, name) -> auth_access_answer */
    /* loop thread only (review.c) */
    struct kl__list reviews; /* auth_review.link: in flight */
    size_t n_reviews;
    auth_rate *rate; /* reviews of callers not known yet */
    /* answers to ask again (refresh.c): queued by any thread, asked on the loop */
    pthread_mutex_t refresh_mu;
    struct kl__list refreshes; /* auth_refresh.link */
    size_t n_refreshes;
    bool refresh_posted; /* the loop has a task to take them */
    /* checks waiting for the loop (auth.c): added by any thread */
    pthread_mutex_t checks_mu;
    struct kl__list checks; /* auth_pending.link */
};

/* The loop's clock: the one time source of the caches, rates and reviews. */
int64_t auth_now(const auth_ctx *a);

/* The cache key of a token (len bytes) as reviewed for audience (NULL:
 * the apiserver's own, for /metrics): the same token may be good for one
 * and not for the other. Returns 0, or -1 when libcrypto fails. */
int auth_token_key(const char *token, size_t len, bool apiserver_audience,
                   uint8_t key[AUTH_DIGEST_LEN]);
/* cache.c: the cached answer for a token (any thread). True on a hit,
 * with out->subject a new reference (release it with auth_subject_unref);
 * *refresh as auth_cache_get says (refresh may be NULL). */
bool auth_token_lookup(auth_ctx *a, const uint8_t digest[AUTH_DIGEST_LEN], auth_token_answer *out,
                       bool *refresh);
/* The cache key of an access question and the cached answer, if any. */
void auth_access_key(const auth_subject *s, const auth_access_question *q,
                     uint8_t key[AUTH_DIGEST_LEN]);
bool auth_access_lookup(auth_ctx *a, const uint8_t key[AUTH_DIGEST_LEN], auth_access_answer *out,
                        bool *refresh);

/* ---- policy.c: pure, on any thread ------------------------------------------- */

/* A leader label's Pod (pod not NULL; pod_ns its namespace) is the
 * caller's: its token's pod claim names that namespace and Pod
 * (docs/design.md, rule 9). Returns 0, or -1 with why. */
int auth_pod_check(const auth_subject *s, const char *pod_ns, const char *pod, char *msg,
                   size_t msg_len);
/* The identity policy for a campaign's identity (identity NULL: none) in
 * the Lease's namespace ns. Under the pod policy the identity is the
 * caller's Pod: "<namespace>/<pod>", or its bare name when the Lease is in
 * the Pod's namespace. Returns 0, or -1 with the reason in msg. */
int auth_policy_check(auth_identity_policy policy, const auth_subject *s, const char *identity,
                      const char *ns, char *msg, size_t msg_len);
/* The permission_denied message for a denied question, like kubectl's. */
void auth_forbidden_message(const auth_subject *s, const auth_access_question *q,
                            const char *reason, char *msg, size_t msg_len);

/* ---- refresh.c: answers asked again before they expire ------------------- */

/* Any thread: queue a TokenReview of token (len bytes; digest its key; for
 * the apiserver's audience or kubeleased's), or an access question q about
 * s, for the loop to ask; what it learns is cached. */
void auth_refresh_token(auth_ctx *a, const uint8_t *digest, const char *token, size_t len,
                        bool apiserver_audience);
void auth_refresh_access(auth_ctx *a, auth_subject *s, const auth_access_question *q);
/* The owner's thread, the loop stopped: frees what was never asked. */
void auth_refreshes_free(auth_ctx *a);

/* ---- review.c: reviews on the loop thread ---------------------------------- */

/* A review answered: a (valid during the call; take a subject reference to
 * keep it). Loop thread. */
typedef void (*auth_token_cb)(void *ctx, const auth_token_answer *a);
typedef void (*auth_access_cb)(void *ctx, const auth_access_answer *a);

/* Who a review is for, in the rate limits (rate.c). */
typedef struct auth_asker {
    /* false: a refresh of an answer kept (not limited: there is at most one
     * per answer in use every three quarters of its life) */
    bool limited;
    const char *peer; /* limited: the caller's address; "" the overall limit only */
} auth_asker;

/* Reviews token (whose key is given; for the apiserver's audience or
 * kubeleased's), or joins the review of the same token in flight; cb runs
 * on the loop thread, never inside this call. The answer is cached. drop
 * (may be NULL) runs instead of cb when the authorizer is freed first.
 * Returns 0, or -1 when the review cannot be started (cb then never runs):
 * message says why (too many in flight, over a rate: what to do). */
int auth_review_token(auth_ctx *a, const uint8_t digest[AUTH_DIGEST_LEN], const char *token,
                      bool apiserver_audience, const auth_asker *who, auth_token_cb cb,
                      void (*drop)(void *ctx), void *ctx, char *message, size_t message_len);
/* The same for an access question about s. */
int auth_review_access(auth_ctx *a, auth_subject *s, const auth_access_question *q,
                       const auth_asker *who, auth_access_cb cb, void (*drop)(void *ctx), void *ctx,
                       char *message, size_t message_len);
/* Cancels every review in flight and runs the waiters' drop functions. The
 * loop has stopped. */
void auth_reviews_free(auth_ctx *a);

#endif
