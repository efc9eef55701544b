/* Private to server/http/: who may call (docs/design.md, rule 7), on the
 * HTTP side. With --auth kubernetes every RPC, and the status page, carries
 * a bearer token; the authorizer (server/auth/) decides, from its caches on
 * the request's MHD thread when it can, else on the loop thread while the
 * request is suspended (auth.c).
 *
 * A pending check (a ticket) waits in an http_wait (wait.h): the request's
 * reference and the authorizer's. It is listed in s->auth_tickets while
 * parked; s->mu guards it once shared. */
#ifndef KL_HTTP_AUTH_H
#define KL_HTTP_AUTH_H

#include "auth/auth.h"
#include "http/internal.h"

/* s->auth is made by http_server_start (auth_new) when cfg->auth_mode is
 * kubernetes, and freed with auth_free once the loop has stopped and before
 * s->mu is destroyed (a ticket the loop never answered is dropped then). */

typedef enum http_auth_verdict {
    HTTP_AUTH_ALLOWED, /* go on (q->scope.subject set when the answer must be narrowed) */
    HTTP_AUTH_WAIT,    /* suspended: the access handler runs again with the answer */
    HTTP_AUTH_DENIED,  /* answer d */
} http_auth_verdict;

typedef struct http_auth_denial {
    rpc_code code; /* unauthenticated, permission_denied, unavailable, internal */
    char message[512];
} http_auth_denial;

/* MHD thread, inside the access handler. Decides act for the request (its
 * peer is set here), from the caches when it can; otherwise suspends it
 * and asks the loop thread, and the handler calls this again once the
 * answer is in (the same act, from the message kept). */
http_auth_verdict http_auth_authorize(http_server *s, struct MHD_Connection *conn, http_req *q,
                                      const auth_action *act, http_auth_denial *d);
/* The request is over: drops its reference to a pending ticket. */
void http_auth_request_done(http_server *s, http_req *q);
/* s->mu held, the loop stopped or the daemon stopping: answers every
 * parked ticket (unavailable). */
void http_auth_tickets_fail_locked(http_server *s);

/* ---- list.c: narrowing ListLeases and the status page ---------------------- */

/* The answer is narrowed: the engine's reply with only the rows the caller
 * may see, or with code ENGINE_UNAVAILABLE (no rows) when the apiserver
 * could not tell which those are. Valid during the call. Engine thread. */
typedef void (*http_list_done)(void *ctx, const engine_reply *narrowed);

/* True when scope leaves some rows out. */
bool http_list_scope_narrows(const http_list_scope *scope);
/* Engine thread: narrows a ListLeases reply to scope, asking the
 * authorizer (auth_narrow) which namespaces scope->subject may list. done
 * runs once, inside this call when nothing had to be asked, else later on
 * the engine thread. Returns 0, or -1 when out of memory (done never
 * runs). */
int http_list_narrow(http_server *s, const http_list_scope *scope, const engine_reply *r,
                     http_list_done done, void *ctx);
/* Releases what scope holds. */
void http_list_scope_clear(http_list_scope *scope);

#endif
