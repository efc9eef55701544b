/* Private to server/http/: the server object, the state of one request, and
 * the functions the files of the HTTP server call across files.
 *
 * Who runs where:
 * - router.c, rpc.c, respond.c and the operator routes (http_ops_hooks,
 *   served by server/ops/) run on MHD threads, inside the access handler
 *   of one connection. MHD runs one connection on one
 *   thread at a time, so an http_req needs no lock.
 * - call.c and stream.c hold what MHD threads, the engine thread (its
 *   callbacks), the timer thread (timer.c) and the owner share: calls
 *   waiting for the engine and open streams. s->mu guards them and the
 *   stopping/gone flags. MHD_suspend_connection, MHD_resume_connection and
 *   every engine call made by the server happen under s->mu, so a connection
 *   is resumed only while it is known to be suspended (it cannot have been
 *   closed), and no engine function is called once the engine is gone.
 *   libmicrohttpd calls none of our callbacks while holding its own locks,
 *   and the engine holds nothing while it runs callbacks, so the lock order
 *   is simply s->mu -> (MHD, engine queue).
 * - auth.c (requests, on MHD threads) asks the authorizer (server/auth/),
 *   whose answer caches have mutexes of their own, never held together
 *   with s->mu; pending checks (tickets) are shared under s->mu like calls
 *   (auth.h). list.c narrows listings on the engine thread.
 * - conn_limit.c has its own mutex, never held together with s->mu: the
 *   timer thread lets go of s->mu before it checks the read deadlines.
 * - tls.c has its own locks (its registry's, then its pair's), never held
 *   together with s->mu; its callback runs on MHD threads (of both daemons)
 *   during handshakes.
 * - server.c (start, quiesce, finish, stop) belongs to the owner. */
#ifndef KL_HTTP_INTERNAL_H
#define KL_HTTP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <gnutls/abstract.h>
#include <microhttpd.h>
#include <protobuf-c/protobuf-c.h>

#include "common/buf.h"
#include "auth/auth.h"
#include "common/list.h"
#include "engine/engine.h"
#include "http/server.h"
#include "rpc/connect.h"
#include "rpc/route.h"

/* The message of whatever shutdown ends. */
#define HTTP_SHUTTING_DOWN "the service is shutting down"

typedef struct http_tls http_tls;                 /* tls.c */
typedef struct http_call http_call;               /* call.c */
typedef struct http_stream http_stream;           /* stream.c */
typedef struct http_limits http_limits;           /* conn_limit.c */
typedef struct http_acceptor http_acceptor;       /* accept.c */
typedef struct http_auth_ticket http_auth_ticket; /* auth.c */

/* What a ListLeases (or the status page) may show: the Leases of ns (""
 * every namespace) and, when subject is set, only those in namespaces that
 * subject may list (list.c). subject is a reference the holder owns.
 * deny_empty (/leases): a listing narrowed for subject to no Lease at all is
 * answered permission_denied (call.c). */
typedef struct http_list_scope {
    char ns[64];
    auth_subject *subject;
    bool deny_empty;
} http_list_scope;

struct http_server {
    /* Set by http_server_start, read-only afterwards. */
    struct MHD_Daemon *daemon;        /* the calls' (with TLS, every request's) */
    struct MHD_Daemon *stream_daemon; /* without TLS, the streams' (accept.c) */
    struct MHD_Daemon *ops_daemon;    /* --ops-listen; NULL without */
    engine *engine;
    const http_ops_hooks *ops; /* the operator endpoints; NULL: none */
    const loop *clock;         /* Connect deadlines' (http_clock_ms); NULL: mono_ms */
    size_t max_body;
    unsigned user_timeout_ms;
    char **namespaces; /* NULL-terminated; NULL: all */
    bool pod_ip_check; /* without auth: a campaign's Pod has the caller's address */
    uint16_t port, ops_port;
    http_acceptor *acceptor;     /* takes the main daemon's connections */
    http_acceptor *ops_acceptor; /* the ops daemon's, without TLS */
    http_limits *limits;
    http_limits *ops_limits; /* the ops daemon's; NULL without */
    auth_ctx *auth;          /* NULL: --auth none, every caller may do everything */
    http_tls *tls;           /* NULL: plain HTTP (on both listeners) */
    atomic_bool refusing;    /* quiesced: new connections are closed at accept */

    pthread_mutex_t mu;           /* guards everything below */
    bool stopping;                /* no new engine requests: answer "unavailable" */
    bool gone;                    /* no engine calls at all */
    struct kl__list calls;        /* http_call: waiting for the engine (call.c) */
    struct kl__list auth_tickets; /* http_auth_ticket: parked for the apiserver (auth.c) */
    struct kl__list streams;      /* http_stream: open (stream.c) */
    int n_streams;
    /* The earliest Connect-Timeout-Ms of an open stream, INT64_MAX for
     * none, so that the timer thread walks the streams (under s->mu) only
     * when one is due, not at every call's wake-up. Lowered when a stream
     * with a deadline opens, recomputed by the walk; a stream that ended
     * early leaves it early, which costs one walk. */
    int64_t streams_due_ms;
    pthread_cond_t drained; /* a stream's request ended */
    pthread_cond_t wake;    /* the timer thread: a new deadline, or quit */
    bool timer_quit;
    bool timer_started;
    pthread_t timer;
};

typedef enum http_req_kind { HTTP_REQ_RPC, HTTP_REQ_OTHER } http_req_kind;

/* One request (MHD's req_cls), from its first header to its completion. */
typedef struct http_req {
    int64_t start_us;
    http_req_kind kind;
    const rpc_method *method; /* an RPC's, once routed; NULL: not counted as an RPC */
    rpc_codec codec;
    int64_t timeout_ms;  /* Connect-Timeout-Ms; -1: none */
    struct kl__buf body; /* the upload, at most s->max_body bytes */
    bool too_large;      /* the upload passed s->max_body: body is dropped */
    bool responded;      /* an answer is queued (or the stream started) */
    bool close;          /* answer with Connection: close */
    http_call *call;
    http_stream *stream;
    http_auth_ticket *auth; /* a pending authorization */
    /* The request's message, decoded from the body, kept while auth waits
     * so that the handler, run again with the answer, does not decode the
     * body twice (rpc.c); NULL otherwise. */
    ProtobufCMessage *msg;
    /* Why the Pod of a Campaign's leader label is not the caller's (NULL:
     * it is, or none; malloc'd): the campaign goes on without the label. */
    char *label_refused;
    /* The caller's address, when the engine must check it against the Pod
     * of a leader label (--auth none); "" otherwise. */
    char peer[48];
    /* Who calls, for the engine's quotas: the authenticated user's name
     * (auth.c), or the peer's address without authentication (rpc.c). */
    char caller[ENGINE_CALLER_MAX];
    http_list_scope scope; /* ListLeases and the status page: what they may show */
    /* The Content-Security-Policy of an HTML answer: the page's
     * (http_ops_hooks.page_csp) on an operator route; NULL: none allowed. */
    const char *csp;
} http_req;

/* The monotonic clock in ms: read deadlines, TLS reloads, the acceptor. */
int64_t http_now_ms(void);
/* The clock of Connect-Timeout-Ms deadlines: s->clock's, else http_now_ms. */
int64_t http_clock_ms(const http_server *s);
/* The time (http_clock_ms) at which a Connect-Timeout-Ms of timeout_ms that
 * starts now has fully passed: one more than now + timeout_ms, since now is
 * truncated to whole milliseconds and a deadline must never end a call
 * early. */
int64_t http_deadline_ms(const http_server *s, int64_t timeout_ms);

/* --- router.c: the MHD access handler and request completion ----------- */

enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **req_cls);
/* The --ops-listen daemon's access handler: operator endpoints only. */
enum MHD_Result http_on_ops_request(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **req_cls);
void http_on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                       enum MHD_RequestTerminationCode toe);

/* --- rpc.c: a Connect request's checks, then a call or a stream ---------- */

/* The headers are in: routes the request and checks them. */
enum MHD_Result http_rpc_begin(http_server *s, struct MHD_Connection *conn, http_req *q,
                               const char *url, const char *method);
/* The whole body is in: decodes, validates, dispatches. */
enum MHD_Result http_rpc_finish(http_server *s, struct MHD_Connection *conn, http_req *q);
/* A decoded request of q->method (the body's, or one an ops route built):
 * validated, authorized (rule 7), its namespace checked against
 * --namespaces, then started. m stays the caller's. */
enum MHD_Result http_rpc_dispatch(http_server *s, struct MHD_Connection *conn, http_req *q,
                                  const ProtobufCMessage *m);
/* The caller's address as a Pod's status.podIP spells it (an IPv4 peer on
 * an IPv6 socket without its ::ffff: prefix); "" when unknown. */
void http_peer_ip(struct MHD_Connection *conn, char *out, size_t n);

/* --- respond.c: answers (create -> queue -> destroy); each sets
 * q->responded and honours q->close. Bodies are malloc'd and taken. ------ */

enum MHD_Result http_respond(struct MHD_Connection *conn, http_req *q, int status,
                             const char *content_type, void *body, size_t len);
enum MHD_Result http_respond_text(struct MHD_Connection *conn, http_req *q, int status,
                                  const char *text);
/* A Connect error as the method wants it: unary, or an end-of-stream frame
 * as the whole body of a stream (HTTP 200). Counted as the RPC's outcome. */
enum MHD_Result http_respond_error(struct MHD_Connection *conn, http_req *q, rpc_code code,
                                   const char *message);
/* A unary Connect error; status 0: the code's own HTTP status. */
enum MHD_Result http_respond_unary_error(struct MHD_Connection *conn, http_req *q, rpc_code code,
                                         int status, const char *message);
enum MHD_Result http_respond_stream_error(struct MHD_Connection *conn, http_req *q, rpc_code code,
                                          const char *message);
/* 405 with Allow: POST and a Connect error body; not counted as an RPC. */
enum MHD_Result http_respond_post_only(struct MHD_Connection *conn, http_req *q,
                                       const char *message);
/* Counts a finished RPC (metrics, debug log). */
void http_req_account(const http_req *q, rpc_code code);

/* --- call.c: unary calls and the status page, waiting for the engine ---- */

/* Suspends the request and sends it to the engine: q->method's request m,
 * or (m NULL) a ListLeases of every namespace, answered as the status page
 * when q->method is NULL, else as q->method's reply (/leases). The call
 * takes over q->scope: a listing is narrowed to it (list.c). */
enum MHD_Result http_call_start(http_server *s, struct MHD_Connection *conn, http_req *q,
                                const ProtobufCMessage *m);
/* The access handler runs again after a resume: answer, or keep waiting. */
enum MHD_Result http_call_resumed(http_server *s, struct MHD_Connection *conn, http_req *q);
/* The request is over (answered, or its connection closed). */
void http_call_request_done(http_server *s, http_req *q);
/* s->mu held. Fails the calls past their deadline; returns the earliest
 * deadline still to come, or wake if none comes sooner. */
int64_t http_calls_expire_locked(http_server *s, int64_t now, int64_t wake);
/* s->mu held, the engine gone: answers every call it never answered
 * (unavailable) and drops its references. */
void http_calls_end_locked(http_server *s);
/* s->mu held, the daemon stopping: answers every call still waiting. */
void http_calls_fail_locked(http_server *s);

/* --- stream.c: server streams, their queues and suspend/resume --------- */

enum MHD_Result http_stream_start(http_server *s, struct MHD_Connection *conn, http_req *q,
                                  const ProtobufCMessage *m);
/* The stream's request is over; toe says how it ended. */
void http_stream_request_done(http_server *s, http_req *q, enum MHD_RequestTerminationCode toe);
/* s->mu held. Ends the streams past their Connect-Timeout-Ms; returns the
 * earliest deadline still to come, or wake if none comes sooner. */
int64_t http_streams_expire_locked(http_server *s, int64_t now, int64_t wake);
/* s->mu held. Resumes the suspended streams whose peer sent something,
 * and aborts those whose peer left (end of file or an error on the socket;
 * TCP keepalives notice a peer gone silently). */
void http_streams_poll_locked(http_server *s);
/* s->mu held, the engine gone: ends every stream (unavailable) and drops the
 * engine's references. */
void http_streams_end_locked(http_server *s);
/* s->mu held, the daemon stopping: aborts the streams without an end frame
 * and resumes them all. */
void http_streams_abort_locked(http_server *s);
/* Waits up to timeout_ms for every stream's request to end; returns how
 * many are left. */
int http_streams_drain(http_server *s, int timeout_ms);

/* --- timer.c: the thread behind deadlines and the look for peers gone -- */

int http_timer_start(http_server *s);
/* Stops and joins the thread; a no-op if it did not start. */
void http_timer_stop(http_server *s);
/* s->mu held: a new deadline was set. */
void http_timer_wake_locked(http_server *s);

/* --- accept.c: the thread that accepts the main daemon's connections --- */

/* A non-blocking listening socket bound to sa; -1 with why. */
int http_listen_socket(const struct sockaddr *sa, socklen_t len, char *err, size_t err_len);
/* An acceptor on a listening socket (accept.c says what it does). */
typedef struct http_acceptor_config {
    /* Started with MHD_USE_NO_LISTEN_SOCKET and MHD_USE_ITC, without TLS;
     * the same daemon twice on --ops-listen. */
    struct MHD_Daemon *calls, *streams;
    int listen_fd;            /* non-blocking; taken over by http_acceptor_new */
    bool classify;            /* tell Confirms, Resigns and streams apart (--listen) */
    unsigned threads;         /* each daemon's workers: the batch size */
    unsigned max;             /* connections handed over at a time, all daemons together */
    unsigned urgent_room;     /* further Confirms and Resigns handed over past max */
    unsigned max_waiting;     /* connections queued here at once (head not in, or no slot) */
    unsigned max_per_ip;      /* of them waiting for their head, from one address; 0: none */
    int64_t first_timeout_ms; /* a head must be in within this of the accept */
    size_t max_head;          /* the longest head looked at (libmicrohttpd's 431 beyond) */
    const char *name;         /* the listener's flag, in logs and metrics: "listen" */
} http_acceptor_config;
/* NULL when out of resources: the socket is still the caller's. It accepts
 * nothing until http_acceptor_run, so that whatever the daemons'
 * notifications read (the server's pointer to it) is set before the first
 * connection. */
http_acceptor *http_acceptor_new(const http_acceptor_config *cfg);
/* Starts its thread. Returns 0, or -1 (then free it). */
int http_acceptor_run(http_acceptor *a);
/* A connection handed over started (MHD_CONNECTION_NOTIFY_STARTED) or
 * closed (MHD_CONNECTION_NOTIFY_CLOSED); MHD workers. */
void http_acceptor_started(http_acceptor *a);
void http_acceptor_closed(http_acceptor *a);
/* Connections accepted and not closed yet, queued here or handed over;
 * any thread. */
unsigned http_acceptor_open(http_acceptor *a);
/* Stops and joins the thread and closes the socket: no connection is
 * handed over after it returns. NULL is a no-op. */
void http_acceptor_stop(http_acceptor *a);
/* Stops it if need be and frees it, once the daemon has stopped (its
 * connections report their closing to it). NULL is a no-op. */
void http_acceptor_free(http_acceptor *a);

/* --- tls.c: the certificate served, reloaded when its files change ----- */

/* Loads cert_file (PEM, the chain) and key_file (PEM). NULL with a reason
 * when they do not load, the key is not the certificate's, or
 * libmicrohttpd has no TLS. */
http_tls *http_tls_new(const char *cert_file, const char *key_file, char *err, size_t err_len);
/* After http_tls_stopped. NULL is a no-op. */
void http_tls_free(http_tls *t);
/* Runs start(arg), which starts a TLS daemon with http_tls_certificate as
 * its MHD_OPTION_HTTPS_CERT_CALLBACK2, and binds the daemon to t before any
 * handshake can ask for it. Returns what start returned. */
struct MHD_Daemon *http_tls_start(http_tls *t, struct MHD_Daemon *(*start)(void *arg), void *arg);
/* The daemon d was stopped: unbinds it. */
void http_tls_stopped(const struct MHD_Daemon *d);
/* MHD_OPTION_HTTPS_CERT_CALLBACK2: a copy of the current pair (MHD threads). */
int http_tls_certificate(gnutls_session_t session, const struct gnutls_cert_retr_st *info,
                         gnutls_pcert_st **certs, unsigned int *certs_length,
                         gnutls_ocsp_data_st **ocsp, unsigned int *ocsp_length,
                         gnutls_privkey_t *privkey, unsigned int *flags);

/* --- conn_limit.c: --max-connections, --max-per-ip, --read-timeout-s ---- */

/* NULL when out of memory. max_conns > 0; max_per_ip 0: no limit;
 * read_timeout_ms 0: no read deadline; first_timeout_ms: the deadline of a
 * connection's first request, from its start (0: read_timeout_ms). */
http_limits *http_limits_new(unsigned max_conns, unsigned max_per_ip, unsigned read_timeout_ms,
                             unsigned first_timeout_ms);
void http_limits_free(http_limits *l);
/* libmicrohttpd's own limit for a configured one: a little higher. */
unsigned http_limits_hard(unsigned limit);
/* MHD_OPTION_NOTIFY_CONNECTION, with cls the http_limits. */
void http_limits_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);
/* Why RPCs are refused on this connection, or NULL. urgent: the RPC is a
 * Confirm or a Resign, refused for no connection limit (it keeps or ends a
 * term: the limits are for strangers). */
const char *http_limits_over(struct MHD_Connection *conn, bool urgent);
/* The phases of a connection's requests, for the read deadline (MHD
 * threads): the head of a request is in (the access handler's first call),
 * its body is in (a later call with no upload data), it is over (completed;
 * the connection may be kept alive). */
void http_conn_request_begin(struct MHD_Connection *conn);
void http_conn_request_read(struct MHD_Connection *conn);
void http_conn_request_done(struct MHD_Connection *conn);
/* The timer thread, without s->mu: shuts down the connections whose
 * request did not arrive whole within the read timeout, and notices new
 * requests on kept-alive ones. Returns when it wants to look again
 * (INT64_MAX: no need). l may be NULL. */
int64_t http_limits_enforce(http_limits *l, int64_t now);

#endif
