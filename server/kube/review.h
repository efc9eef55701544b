/* The Kubernetes API's reviews, as kube-apiserver speaks them: a TokenReview
 * (authentication.k8s.io/v1: who does this bearer token belong to, for this
 * audience?) and a SubjectAccessReview (authorization.k8s.io/v1: may this
 * user do this verb on this resource?), their request bodies and their
 * answers; and a look at a JWT's claims, which are not trusted for anything
 * but messages and cache lifetimes (the TokenReview decides validity).
 *
 * Pure functions over buffers: no I/O, no global state, any thread. The
 * requests themselves go through kube/client.c like every other. Bearer
 * tokens are secrets: a body holding one must be wiped before it is freed
 * (kube_review_body_free), and nothing here logs. */
#ifndef KL_KUBE_REVIEW_H
#define KL_KUBE_REVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KUBE_TOKENREVIEWS_PATH         "/apis/authentication.k8s.io/v1/tokenreviews"
#define KUBE_SUBJECTACCESSREVIEWS_PATH "/apis/authorization.k8s.io/v1/subjectaccessreviews"

/* The user.extra key of a pod-bound ServiceAccount token: the pod's name. */
#define KUBE_EXTRA_POD_NAME "authentication.kubernetes.io/pod-name"

typedef struct kube_user_extra {
    char *key;
    char **values;
    size_t n_values;
} kube_user_extra;

/* A user as a TokenReview reports it (status.user): everything a
 * SubjectAccessReview needs to ask about the same user. */
typedef struct kube_user {
    char *username; /* "system:serviceaccount:NS:NAME" for ServiceAccounts */
    char *uid;      /* "" when none */
    char **groups;
    size_t n_groups;
    kube_user_extra *extra;
    size_t n_extra;
} kube_user;

/* Frees every member and zeroes *u; NULL is a no-op. */
void kube_user_clear(kube_user *u);
/* The first value of extra key, or NULL when the user has none. */
const char *kube_user_extra_value(const kube_user *u, const char *key);
/* For a ServiceAccount user ("system:serviceaccount:NS:NAME"): writes
 * "NS:NAME" into out and returns 0; -1 for any other user. */
int kube_user_serviceaccount(const kube_user *u, char *out, size_t out_len);

/* The body of a TokenReview of token for audience (NULL: the apiserver's
 * own). malloc'd (it holds the token: free it with kube_review_body_free),
 * NULL when out of memory. */
char *kube_token_review_body(const char *token, const char *audience);
/* Wipes and frees a request body. NULL is a no-op. */
void kube_review_body_free(char *body);

typedef struct kube_token_review {
    bool authenticated;
    kube_user user;  /* when authenticated */
    char error[256]; /* status.error, "" when none (cut to fit) */
} kube_token_review;

/* Parses the answer to a TokenReview (HTTP 201). Returns 0 with *out filled
 * (clear it with kube_token_review_clear), or -1 with err saying what is
 * wrong with the body (*out then needs no clearing). An authenticated answer
 * without a username is an error. */
int kube_token_review_parse(const char *body, size_t len, kube_token_review *out, char *err,
                            size_t err_len);
void kube_token_review_clear(kube_token_review *r);

/* What a SubjectAccessReview asks about (spec.resourceAttributes); ns "" is
 * the cluster scope, name "" every name. With path (not NULL or ""), it
 * asks about that non-resource URL instead (spec.nonResourceAttributes:
 * path and verb; group, resource, ns and name are not sent). */
typedef struct kube_resource_attributes {
    const char *verb;
    const char *group;
    const char *resource;
    const char *ns;
    const char *name;
    const char *path;
} kube_resource_attributes;

/* The body of a SubjectAccessReview of u for a. malloc'd, NULL when out of
 * memory. */
char *kube_access_review_body(const kube_user *u, const kube_resource_attributes *a);

typedef struct kube_access_review {
    bool allowed;
    char reason[256];           /* status.reason, "" when none */
    char evaluation_error[256]; /* status.evaluationError, "" when none */
} kube_access_review;

/* Parses the answer to a SubjectAccessReview (HTTP 201). Returns 0 with
 * *out filled, or -1 with err saying what is wrong with the body. */
int kube_access_review_parse(const char *body, size_t len, kube_access_review *out, char *err,
                             size_t err_len);

/* A JWT's claims as written, not verified. */
typedef struct kube_jwt_claims {
    int64_t exp;   /* seconds since the Unix epoch; 0 when absent */
    char aud[256]; /* the audiences, comma-separated; "" when absent */
} kube_jwt_claims;

/* Reads the claims of token when it is a JWT (three base64url parts whose
 * middle one is a JSON object). Returns 0, or -1 when it is not one. */
int kube_jwt_peek(const char *token, kube_jwt_claims *out);
/* True when the comma-separated audience list aud holds audience. */
bool kube_jwt_has_audience(const kube_jwt_claims *c, const char *audience);

#endif
