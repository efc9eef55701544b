/* Who may call (docs/design.md, rule 7), as a module of its own: bearer
 * tokens authenticated by a TokenReview and authorized by a
 * SubjectAccessReview on elections.kubelease.io, answers cached, reviews
 * run on the engine's loop through kube/. It knows nothing of HTTP: its
 * callers hand it the token, what the request asks to do, and (to narrow a
 * listing) namespace names; its answers are in its own codes, which its
 * callers map to theirs (Connect's, for the RPCs).
 *
 * Time is the loop's clock (loop_clock), so tests drive the caches, the
 * rate limits and the reviews by hand.
 *
 * Threads: auth_new and auth_free belong to the owner (auth_free once the
 * loop has stopped); auth_check, auth_metrics and the subject functions
 * may run on any thread; auth_narrow and every callback run on the loop
 * thread. */
#ifndef KL_AUTH_AUTH_H
#define KL_AUTH_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/loop.h"
#include "kube/client.h"

/* The virtual resource every RPC is authorized on: Roles grant its verbs. */
#define AUTH_GROUP            "kubelease.io"
#define AUTH_RESOURCE         "elections"
#define AUTH_DEFAULT_AUDIENCE "kubelease"

typedef struct auth_ctx auth_ctx;
/* A user the apiserver authenticated (reference counted, immutable). */
typedef struct auth_subject auth_subject;

/* Why a caller is refused. */
typedef enum auth_code {
    AUTH_OK = 0,
    AUTH_UNAUTHENTICATED,   /* no token, or not one the apiserver accepts */
    AUTH_PERMISSION_DENIED, /* RBAC or the identity/pod policy says no */
    AUTH_UNAVAILABLE,       /* the apiserver could not tell (no answer is no access) */
    AUTH_INTERNAL,          /* out of memory, libcrypto failed */
} auth_code;

/* Which campaign identities a caller may use (Campaign, Confirm, Resign). */
typedef enum auth_identity_policy {
    AUTH_IDENTITY_ANY = 0,        /* any */
    AUTH_IDENTITY_SERVICEACCOUNT, /* "<namespace>:<serviceaccount>", optionally followed by a
                                     character names cannot hold (":", "/", "_", ...) */
    AUTH_IDENTITY_POD,            /* the name of the caller's pod (a pod-bound token) */
} auth_identity_policy;

typedef struct auth_config {
    const char *audience; /* TokenReview audience; NULL or "": "kubelease" */
    auth_identity_policy identity_policy;
    loop *loop;        /* where reviews run, whose clock is read; must outlive the authorizer */
    kube_client *kube; /* reviews go through it on that loop; not owned */
    /* Cache lifetimes in ms; 0: 60000 (tokens, never past their expiry),
     * 30000 (refused tokens), 10000 (access answers). */
    int token_ttl_ms, negative_ttl_ms, access_ttl_ms;
    /* Reviews a second for callers not known yet, in all and from one
     * address; 0: no limit. */
    unsigned review_rate, review_rate_per_ip;
    bool metrics; /* /metrics needs a token allowed get on it */
} auth_config;

/* NULL when out of memory. */
auth_ctx *auth_new(const auth_config *cfg);
/* The loop has stopped: cancels the reviews in flight, drops the checks
 * never answered (their callbacks never run) and frees a. NULL is a no-op. */
void auth_free(auth_ctx *a);
/* Whether /metrics needs a token allowed get on it. */
bool auth_metrics(const auth_ctx *a);
/* The audience tokens are reviewed for. */
const char *auth_audience(const auth_ctx *a);

/* What a request asks to do on elections.kubelease.io, or (path) on a
 * non-resource URL. */
typedef struct auth_action {
    const char *verb; /* "campaign", "get", "watch", "list", "handoff" */
    /* A non-resource URL ("/metrics"; NULL: none): the token is reviewed
     * for the apiserver's own audience, and access is asked about verb on
     * path; ns and name are then "". */
    const char *path;
    const char *ns;       /* the Lease's namespace; "": the cluster scope */
    const char *name;     /* the Lease's name; "": every name */
    const char *identity; /* the campaign identity the policy binds; NULL: none */
    /* A denial at the cluster scope is not the end: the caller is allowed,
     * its listing to be narrowed to what it may list (auth_verdict.narrow). */
    bool narrow_on_deny;
    /* The Pod (pod_ns/pod) a leader label is for; pod NULL: none. It must be
     * the pod claim of the caller's token (docs/design.md, rule 9): when it
     * is not, the action is denied (pod_denies), or allowed with the
     * refusal in auth_verdict.label_refused (its label is dropped). */
    const char *pod_ns;
    const char *pod;
    bool pod_denies;
    const char *peer; /* the caller's address, for the per-address review rate; NULL: none */
} auth_action;

typedef enum auth_result {
    AUTH_ALLOWED,
    AUTH_DENIED,
    AUTH_PENDING, /* the apiserver is asked: the callback brings the verdict */
} auth_result;

typedef struct auth_verdict {
    auth_result result; /* AUTH_ALLOWED or AUTH_DENIED */
    auth_code code;     /* denied: why */
    char message[512];  /* denied: what to do about it */
    /* Allowed, to be narrowed to what this subject may list (a reference
     * the receiver takes; NULL: not narrowed). */
    auth_subject *narrow;
    char caller[256];        /* allowed: the user's name (the engine's quotas) */
    char label_refused[256]; /* allowed: why the label's Pod is not the caller's; "": it is */
} auth_verdict;

/* The verdict of a check that waited (loop thread). The receiver takes
 * v->narrow. */
typedef void (*auth_check_done)(void *ctx, auth_verdict *v);

/* Decides act for a caller with token (len bytes), from the caches when it
 * can: then *out is the verdict and AUTH_ALLOWED or AUTH_DENIED returned.
 * Otherwise, with done NULL, AUTH_PENDING is returned and nothing asked
 * (a caller can look before it makes what it waits in); with done, the
 * question goes to the loop thread and AUTH_PENDING is returned: done(ctx,
 * verdict) runs there once, or drop(ctx) (may be NULL) from auth_free if
 * the loop never answered. Any thread. */
auth_result auth_check(auth_ctx *a, const char *token, size_t len, const auth_action *act,
                       auth_verdict *out, auth_check_done done, void (*drop)(void *ctx), void *ctx);

/* Which of n namespaces subject may list elections in: allowed[i] for
 * names[i], or code (AUTH_UNAVAILABLE, AUTH_INTERNAL) and message when
 * some could not be told (then allowed is NULL). Valid during the call. */
typedef void (*auth_narrow_done)(void *ctx, auth_code code, const char *message,
                                 const bool *allowed);
/* Loop thread: asks about each name (copied), from the cache or the
 * apiserver. done runs once, inside this call when nothing had to be
 * asked, else later on the loop thread; or drop(ctx) (may be NULL) from
 * auth_free if the apiserver had not answered. Returns 0, or -1 when out
 * of memory (neither runs). */
int auth_narrow(auth_ctx *a, auth_subject *subject, const char *const *names, size_t n,
                auth_narrow_done done, void (*drop)(void *ctx), void *ctx);

auth_subject *auth_subject_ref(auth_subject *s);
/* NULL is a no-op. Any thread. */
void auth_subject_unref(auth_subject *s);

#endif
