/* The HTTP side of kubeleased: libmicrohttpd (epoll, a small thread pool,
 * suspend/resume) serving the Connect API of kubelease.v1.LeaseService,
 * and every other path through the operator hooks a layer above hands it
 * (http_ops_hooks: server/ops/ serves /livez, /readyz, /metrics and the
 * status page).
 *
 * No MHD thread ever waits for the engine: a request that needs it is
 * suspended and resumed from the engine's callback. Streams are resumed at
 * least once a second so that a peer that went away is noticed.
 *
 * Threads: every function here belongs to the owner (server/service.c). */
#ifndef KL_HTTP_SERVER_H
#define KL_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "auth/auth.h"
#include "core/loop.h"
#include "engine/engine.h"
#include "kube/client.h"

typedef struct http_server http_server;
struct http_req; /* one request (internal.h) */

/* What serves the paths outside the Connect API (the operator endpoints),
 * given by the layer above at wiring time (server/ops/, from
 * server/service.c), so that http/ calls up into no layer. Every member
 * must be set; with no hooks at all (http_config.ops NULL), such paths are
 * answered 404. */
typedef struct http_ops_hooks {
    /* Answers a request for url (any path not under the RPC prefix, after
     * its head and body are in) with method ("GET"...); MHD threads, inside
     * the request's access handler. It may answer (http_respond...), start
     * a call to the engine (http_call_start, whose reply comes back
     * through render_page when q->method is NULL) or dispatch an RPC
     * (http_rpc_dispatch). The handler may run twice (auth.c). */
    enum MHD_Result (*route)(http_server *s, struct MHD_Connection *conn, struct http_req *q,
                             const char *url, const char *method);
    /* Renders the reply of a call started without a method (a ListLeases)
     * as the page: 0 with *body malloc'd and *content_type (static) set,
     * or -1. The engine thread. */
    int (*render_page)(const engine_reply *list, char **body, size_t *len,
                       const char **content_type);
    /* The Content-Security-Policy of the page (HTML answers). Static. */
    const char *(*page_csp)(void);
} http_ops_hooks;

/* Who may call (docs/design.md, rule 7). */
typedef enum http_auth_mode {
    HTTP_AUTH_NONE = 0,  /* anyone reaching the port may do anything */
    HTTP_AUTH_KUBERNETES /* bearer tokens: TokenReview, then SubjectAccessReview */
} http_auth_mode;

typedef struct http_config {
    const char *listen;       /* "ADDR:PORT" ("[::1]:8080" for IPv6); port 0: any */
    engine *engine;           /* not owned */
    unsigned threads;         /* MHD thread pool size; 0: 2 */
    unsigned max_connections; /* 0: 1024; RPCs over it: resource_exhausted */
    unsigned max_per_ip;      /* 0: no per-IP limit; RPCs over it: resource_exhausted,
                                 and no more wait for their head (accept.c) */
    size_t max_body_bytes;    /* request body cap; 0: 4096 */
    size_t max_header_bytes;  /* room for a request head (else 431); 0: 3072 */
    /* Whose clock (loop_clock) Connect-Timeout-Ms deadlines are read on:
     * the engine's loop, so that tests move it by hand; NULL: the
     * monotonic clock. Not owned; must outlive the server. */
    const loop *clock;
    unsigned idle_timeout_s;         /* idle connections (not streams); 0: 60 */
    unsigned stream_user_timeout_ms; /* TCP_USER_TIMEOUT on streams; 0: 10000 */
    /* A request's head and body must arrive within this, counted from the
     * connection's start or, kept alive, from the request's first byte;
     * slower connections are shut down. 0: 10000. */
    unsigned read_timeout_ms;
    /* A connection's first request head must be in within this of its
     * accept, and the whole request within this of its start (never longer
     * than read_timeout_ms); it is closed otherwise, so that connections
     * that send nothing do not hold slots. 0: 3000. */
    unsigned first_request_timeout_ms;
    const char *const *namespaces; /* served namespaces, NULL-terminated; NULL: all */
    /* Without auth (auth_mode NONE), a leader label is taken on only when
     * its Pod's status.podIP is the caller's address (docs/design.md, rule
     * 9). Off only in --dev, whose memory store has no Pod addresses. */
    bool pod_ip_check;
    /* "ADDR:PORT" of a second listener serving only /livez, /readyz,
     * /metrics and the status page, with connection slots of its own, so
     * that probes are answered even when clients hold every slot of listen.
     * NULL: none (they are served on listen, as they always are). */
    const char *ops_listen;
    /* HTTPS: the certificate chain and key (PEM files), re-read when they
     * change (at most once a second, on a handshake); both NULL: HTTP.
     * Both listeners serve it. */
    const char *tls_cert_file;
    const char *tls_key_file;
    /* Who may call: with HTTP_AUTH_KUBERNETES, the authorizer made of auth
     * (auth/auth.h; its loop is the engine's, its kube client the
     * reviews'). HTTP_AUTH_NONE (zeroed): no authorization. */
    http_auth_mode auth_mode;
    auth_config auth;
    const http_ops_hooks *ops; /* the operator endpoints; NULL: none (404) */
} http_config;

/* Checks an "ADDR:PORT" listen address. Returns 0, or -1 with a reason. */
int http_listen_check(const char *listen, char *err, size_t err_len);
/* Checks that a TLS certificate chain and key (PEM files) load and belong
 * together, and that libmicrohttpd can serve TLS. Returns 0, or -1 with a
 * reason. */
int http_tls_check(const char *cert_file, const char *key_file, char *err, size_t err_len);
/* Binds and starts serving. Returns NULL with a reason in err. */
http_server *http_server_start(const http_config *cfg, char *err, size_t err_len);
/* The bound port (useful with port 0). */
uint16_t http_server_port(const http_server *s);
/* The ops listener's bound port; 0 without one. */
uint16_t http_server_ops_port(const http_server *s);
/* Whether the server takes requests for the engine (/readyz): false while
 * it shuts down, else what engine_ready says, with the reason in why.
 * Takes the server's lock; any thread while the server runs. */
bool http_server_ready(http_server *s, char *why, size_t why_len);

/* Shutdown takes three steps around the engine's stop (the owner calls them
 * in this order; server/service.c says why):
 *
 * 1. Stops accepting connections; requests that arrive on open connections
 *    from now on are answered "unavailable", and the server calls no engine
 *    function any more, so nothing new reaches the engine's queue. The ops
 *    listener keeps answering (/readyz: 503) until step 3. */
void http_server_quiesce(http_server *s);
/* The clock of http_config.clock was moved by hand (tests): the timer
 * looks at the deadlines again at once. */
void http_server_clock_moved(http_server *s);
/* 2. Once the engine thread has been joined and engine_free() has returned
 *    (no engine callback can run any more): answers every call and ends
 *    every stream the engine never finished ("unavailable"), then waits up
 *    to timeout_ms for every stream to have written its end-of-stream frame.
 *    Returns the number of streams still open. */
int http_server_finish(http_server *s, int timeout_ms);
/* 3. Closes the streams still open (without an end frame), resumes
 *    whatever is suspended, stops the daemon, frees s. NULL is a no-op. */
void http_server_stop(http_server *s);

#endif
