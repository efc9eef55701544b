/* Private to server/http/: who may call (docs/design.md, rule 7). With
 * --auth kubernetes every RPC, and the status page, carries a bearer token
 * that a TokenReview authenticates and a SubjectAccessReview authorizes on
 * elections.kubelease.io; answers are cached (auth_cache.c), so a known
 * caller is answered on its MHD thread, and an unknown one is suspended
 * while the loop thread asks the apiserver (auth.c, auth_review.c).
 *
 * A pending check (a ticket) has two references, like a call: the
 * request's and the loop's. It is listed in s->auth_tickets while the loop
 * holds it; s->mu guards it once shared. */
#ifndef KL_HTTP_AUTH_H
#define KL_HTTP_AUTH_H

#include "http/internal.h"

/* The virtual resource every RPC is authorized on: Roles grant its verbs. */
#define HTTP_AUTH_GROUP            "kubelease.io"
#define HTTP_AUTH_RESOURCE         "elections"
#define HTTP_AUTH_DEFAULT_AUDIENCE "kubelease"

/* Made by http_server_start when cfg->auth.mode is kubernetes; NULL when out
 * of memory. */
http_auth *http_auth_new(const http_auth_config *cfg);
/* The loop has stopped and every ticket was ended (http_server_finish):
 * cancels the reviews in flight and frees a. NULL is a no-op. */
void http_auth_free(http_auth *a);

/* What a request asks to do on elections.kubelease.io, or (path) on a
 * non-resource URL. */
typedef struct http_auth_action {
    const char *verb; /* "campaign", "get", "watch", "list" */
    /* A non-resource URL ("/metrics"; NULL: none): the token is reviewed
     * for the apiserver's own audience, as Kubernetes components review
     * their scrapers', and access is asked about verb on path; ns and name
     * are then "". */
    const char *path;
    const char *ns;       /* the Lease's namespace; "": the cluster scope */
    const char *name;     /* the Lease's name; "": every name */
    const char *identity; /* the campaign identity the policy binds; NULL: none */
    /* A denial at the cluster scope is not the end: the answer is narrowed
     * to the namespaces the caller may list (q->scope.subject). */
    bool narrow_on_deny;
    /* The Pod (pod_ns/pod) a leader label is for; pod NULL: none. It must be
     * the pod claim of the caller's token (docs/design.md, rule 9): when it
     * is not, a SetPodLabel (pod_denies) is denied, and a Campaign goes on
     * with the refusal in q->label_refused (its label is dropped). */
    const char *pod_ns;
    const char *pod;
    bool pod_denies;
} http_auth_action;

typedef enum http_auth_verdict {
    HTTP_AUTH_ALLOWED, /* go on (q->scope.subject set when the answer must be narrowed) */
    HTTP_AUTH_WAIT,    /* suspended: the access handler runs again with the answer */
    HTTP_AUTH_DENIED,  /* answer d */
} http_auth_verdict;

typedef struct http_auth_denial {
    rpc_code code; /* unauthenticated, permission_denied, unavailable, internal */
    char message[512];
} http_auth_denial;

/* MHD thread, inside the access handler. Decides act for the request, from
 * the caches when it can; otherwise suspends it and asks the loop thread,
 * and the handler calls this again once the answer is in (the same act:
 * it is re-derived from the same body). */
http_auth_verdict http_auth_authorize(http_server *s, struct MHD_Connection *conn, http_req *q,
                                      const http_auth_action *act, http_auth_denial *d);
/* The request is over: drops its reference to a pending ticket. */
void http_auth_request_done(http_server *s, http_req *q);
/* s->mu held, the loop stopped: answers every pending ticket (unavailable)
 * and drops the loop's references. */
void http_auth_tickets_end_locked(http_server *s);
/* s->mu held, the daemon stopping: answers every pending ticket. */
void http_auth_tickets_fail_locked(http_server *s);

/* Whether /metrics needs a token allowed get on it (--metrics-auth). */
bool http_auth_metrics(const http_auth *a);

/* Releases a subject reference (auth_review.c); NULL is a no-op. Any thread. */
void auth_subject_unref(auth_subject *s);

/* ---- auth_list.c: narrowing ListLeases and the status page ---------------- */

/* The answer is narrowed: the engine's reply with only the rows the caller
 * may see, or with code ENGINE_UNAVAILABLE (no rows) when the apiserver
 * could not tell which those are. Valid during the call. Engine thread. */
typedef void (*http_list_done)(void *ctx, const engine_reply *narrowed);

/* True when scope leaves some rows out. */
bool http_list_scope_narrows(const http_list_scope *scope);
/* Engine thread: narrows a ListLeases reply to scope, asking the apiserver
 * about namespaces not in the cache. done runs once, inside this call when
 * nothing had to be asked, else later on the engine thread. Returns 0, or
 * -1 when out of memory (done never runs). */
int http_list_narrow(http_server *s, const http_list_scope *scope, const engine_reply *r,
                     http_list_done done, void *ctx);
/* Releases what scope holds. */
void http_list_scope_clear(http_list_scope *scope);

#endif
