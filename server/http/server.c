/* libmicrohttpd glue. Locking: one mutex (s->mu) guards every call and
 * stream shared between MHD threads, the engine thread and the timer
 * thread. MHD_suspend_connection/MHD_resume_connection and every engine_*
 * call made from here happen under s->mu: a connection is resumed only while
 * it is known to be suspended (so it cannot have been closed), and no engine
 * function is called once the engine is gone. libmicrohttpd calls none of
 * our callbacks while holding its own locks, and the engine posts without
 * holding anything while it runs callbacks, so the lock order is simply
 * s->mu -> (MHD, loop). */
#include "http/server.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/log.h"
#include "http/http_ops.h"
#include "rpc/connect.h"
#include "rpc/lease_service.h"
#include "rpc/route.h"

#define DEFAULT_THREADS         2
#define DEFAULT_MAX_CONNECTIONS 1024
#define DEFAULT_MAX_BODY        4096
#define DEFAULT_IDLE_TIMEOUT_S  60
#define DEFAULT_USER_TIMEOUT_MS 10000
#define STREAM_QUEUE_MAX        (256 * 1024) /* bytes a stream may have unsent */
#define STREAM_IDLE_TIMEOUT_S   30           /* a stream whose peer takes nothing for this long */
#define RESUME_EVERY_MS         1000         /* every suspended stream is resumed this often */
#define CONNECTION_MEMORY       16384
#define PEER_BUCKETS            256

typedef struct frame {
    struct frame *next;
    size_t len;
    uint8_t data[];
} frame;

/* A unary call (or the status page) waiting for the engine. Refs: the MHD
 * request, and the engine until its callback ran. */
typedef struct call {
    http_server *srv;
    int refs;
    struct MHD_Connection *conn; /* NULL once the request is over */
    const rpc_method *method;    /* NULL: the status page */
    rpc_codec codec;
    bool done, suspended;
    bool listed;         /* in s->pending: the engine has not answered yet */
    int64_t deadline_ms; /* 0: none */
    struct call *prev, *next;
    /* the answer */
    int status;
    rpc_code code;
    const char *content_type;
    uint8_t *body;
    size_t len;
} call;

/* A server stream. Refs: the MHD request, the MHD response (content reader),
 * and the engine until on_close. */
typedef struct stream {
    http_server *srv;
    int refs;
    struct MHD_Connection *conn; /* NULL once the request is over */
    const rpc_method *method;
    rpc_codec codec;
    uint64_t engine_id;
    bool engine_open; /* the engine may still call on_event/on_close */
    bool detached;    /* we told the engine the peer is gone */
    bool ended;       /* the end-of-stream frame is queued */
    bool aborted;     /* the peer does not keep up: close without end frame */
    bool suspended;
    rpc_code end_code;
    int64_t deadline_ms; /* Connect-Timeout-Ms; 0: none */
    int fd;              /* the connection's socket, for noticing a peer that left */
    frame *head, *tail;
    size_t off, queued;
    struct stream *prev, *next;
} stream;

enum req_kind { REQ_RPC, REQ_OTHER };

/* Per-request state (MHD's req_cls). */
typedef struct req {
    int64_t start_us;
    enum req_kind kind;
    const rpc_method *method;
    rpc_codec codec;
    int64_t timeout_ms; /* Connect-Timeout-Ms; -1: none */
    uint8_t *body;
    size_t len, cap;
    bool too_large;
    bool responded;
    bool close; /* answer with Connection: close */
    call *call;
    stream *stream;
} req;

struct http_server {
    struct MHD_Daemon *daemon;
    engine *engine;
    size_t max_body;
    unsigned user_timeout_ms;
    char **namespaces; /* NULL-terminated; NULL: all */
    uint16_t port;
    int listen_fd; /* after MHD_quiesce_daemon; -1 before */

    pthread_mutex_t mu;
    pthread_cond_t wake;    /* the timer thread */
    pthread_cond_t drained; /* a stream ended */
    bool stopping;          /* no new engine requests */
    bool gone;              /* no engine calls at all */
    bool timer_quit;
    call *pending;
    stream *streams;
    int n_streams;
    pthread_t timer;
    bool timer_started;

    /* Connection limits (see "connection limits" below); conn_mu guards them. */
    pthread_mutex_t conn_mu;
    unsigned max_conns, max_per_ip; /* the configured (soft) limits */
    unsigned n_conns;
    struct peer *peers[PEER_BUCKETS];
};

/* ---------- small helpers ---------- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static enum MHD_Result queue_response(struct MHD_Connection *conn, int status,
                                      const char *content_type, void *body, size_t len, bool close)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (content_type)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (close)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result queue(struct MHD_Connection *conn, int status, const char *content_type,
                             void *body, size_t len)
{
    return queue_response(conn, status, content_type, body, len, false);
}

static enum MHD_Result queue_text(struct MHD_Connection *conn, int status, const char *text)
{
    char *body = strdup(text);
    if (!body)
        return MHD_NO;
    return queue(conn, status, "text/plain; charset=utf-8", body, strlen(body));
}

static void account(req *q, rpc_code code)
{
    if (q->method)
        http_ops_rpc_done(q->method->name, rpc_code_name(code),
                          (double)(mono_us() - q->start_us) / 1e6);
    if (log_enabled(LOG_DEBUG) && q->method)
        log_event(LOG_DEBUG, "rpc", "method=%s code=%s us=%lld", q->method->name,
                  rpc_code_name(code), (long long)(mono_us() - q->start_us));
}

/* A Connect error for a unary call (or a request refused before routing). */
static enum MHD_Result unary_error(struct MHD_Connection *conn, req *q, rpc_code code, int status,
                                   const char *message)
{
    char *body = rpc_error_json(code, message);
    if (!body)
        return MHD_NO;
    q->responded = true;
    account(q, code);
    return queue_response(conn, status ? status : rpc_code_http_status(code), "application/json",
                          body, strlen(body), q->close);
}

/* An end-of-stream frame as the whole body of a stream response: how
 * streams report errors found before they start (HTTP 200, as Connect
 * wants). */
static uint8_t *end_frame(rpc_code code, const char *message, size_t *len)
{
    char *json = rpc_end_stream_json(code, message);
    if (!json)
        return NULL;
    uint8_t *f = rpc_envelope_encode(RPC_FLAG_END_STREAM, (const uint8_t *)json, strlen(json), len);
    free(json);
    return f;
}

static enum MHD_Result stream_error(struct MHD_Connection *conn, req *q, rpc_code code,
                                    const char *message)
{
    size_t len;
    uint8_t *f = end_frame(code, message, &len);
    if (!f)
        return MHD_NO;
    q->responded = true;
    account(q, code);
    return queue_response(conn, MHD_HTTP_OK, rpc_content_type(q->codec, true), f, len, q->close);
}

static enum MHD_Result rpc_error(struct MHD_Connection *conn, req *q, rpc_code code,
                                 const char *message)
{
    if (q->method && q->method->server_stream)
        return stream_error(conn, q, code, message);
    return unary_error(conn, q, code, 0, message);
}

/* ---------- unary calls ---------- */

static void call_unref_locked(call *k, bool *free_it)
{
    *free_it = --k->refs == 0;
}

static void call_free(call *k)
{
    if (!k)
        return;
    free(k->body);
    free(k);
}

static void call_unlist(http_server *s, call *k)
{
    if (!k->listed)
        return;
    if (k->prev)
        k->prev->next = k->next;
    else
        s->pending = k->next;
    if (k->next)
        k->next->prev = k->prev;
    k->prev = k->next = NULL;
    k->listed = false;
}

/* Sets the answer of a call that has none yet and resumes its connection.
 * Takes body. s->mu held. */
static void call_complete_locked(http_server *s, call *k, int status, rpc_code code,
                                 const char *content_type, uint8_t *body, size_t len)
{
    if (k->done) {
        free(body);
        return;
    }
    k->done = true;
    k->status = status;
    k->code = code;
    k->content_type = content_type;
    k->body = body;
    k->len = len;
    if (k->suspended && k->conn) {
        k->suspended = false;
        MHD_resume_connection(k->conn);
    }
}

static void call_fail_locked(http_server *s, call *k, rpc_code code, const char *message)
{
    char *body = rpc_error_json(code, message);
    call_complete_locked(s, k, body ? rpc_code_http_status(code) : 500, code, "application/json",
                         (uint8_t *)body, body ? strlen(body) : 0);
}

/* The engine's answer (engine thread). */
static void unary_done(void *ctx, const engine_reply *r)
{
    call *k = ctx;
    http_server *s = k->srv;
    uint8_t *body = NULL;
    size_t len = 0;
    const char *ct = NULL;
    int status = 200;
    rpc_code code = rpc_code_of_engine(r->code);
    if (!k->method) {
        char *html = NULL;
        if (http_ops_status_page(r, &html, &len, &ct) == 0)
            body = (uint8_t *)html;
    } else if (code == RPC_OK) {
        body = rpc_reply_encode(k->method->id, k->codec, r, &len);
        ct = rpc_content_type(k->codec, false);
    }
    bool free_it;
    pthread_mutex_lock(&s->mu);
    call_unlist(s, k);
    if (k->method && code != RPC_OK)
        call_fail_locked(s, k, code, r->message);
    else if (!body)
        call_fail_locked(s, k, RPC_INTERNAL, "out of memory");
    else
        call_complete_locked(s, k, status, RPC_OK, ct, body, len);
    call_unref_locked(k, &free_it);
    pthread_mutex_unlock(&s->mu);
    if (free_it)
        call_free(k);
}

/* Starts the engine request of k. s->mu held. Returns 0 or -1. */
static int unary_start_locked(http_server *s, call *k, const ProtobufCMessage *m)
{
    if (!k->method)
        return engine_list(s->engine, unary_done, k);
    return rpc_unary_start(s->engine, k->method->id, m, unary_done, k);
}

/* Suspends the request and hands it to the engine. */
static enum MHD_Result unary_dispatch(http_server *s, struct MHD_Connection *conn, req *q,
                                      const ProtobufCMessage *m)
{
    call *k = calloc(1, sizeof *k);
    if (!k)
        return unary_error(conn, q, RPC_INTERNAL, 0, "out of memory");
    k->srv = s;
    k->refs = 2;
    k->conn = conn;
    k->method = q->method;
    k->codec = q->codec;
    if (q->timeout_ms >= 0)
        k->deadline_ms = now_ms() + q->timeout_ms;
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        free(k);
        return unary_error(conn, q, RPC_UNAVAILABLE, 0, "the service is shutting down");
    }
    k->listed = true;
    k->next = s->pending;
    if (s->pending)
        s->pending->prev = k;
    s->pending = k;
    k->suspended = true;
    MHD_suspend_connection(conn);
    if (unary_start_locked(s, k, m) != 0) {
        call_unlist(s, k);
        k->refs--; /* the engine never calls back */
        call_fail_locked(s, k, RPC_INTERNAL, "out of memory");
    }
    if (k->deadline_ms)
        pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    q->call = k;
    return MHD_YES;
}

/* The access handler runs again after a resume: answer, or keep waiting. */
static enum MHD_Result unary_resumed(http_server *s, struct MHD_Connection *conn, req *q)
{
    call *k = q->call;
    pthread_mutex_lock(&s->mu);
    if (!k->done && s->gone)
        call_fail_locked(s, k, RPC_UNAVAILABLE, "the service is shutting down");
    if (!k->done) {
        k->suspended = true;
        MHD_suspend_connection(conn);
        pthread_mutex_unlock(&s->mu);
        return MHD_YES;
    }
    uint8_t *body = k->body;
    size_t len = k->len;
    int status = k->status;
    rpc_code code = k->code;
    const char *ct = k->content_type;
    k->body = NULL;
    k->conn = NULL;
    bool free_it;
    call_unref_locked(k, &free_it);
    pthread_mutex_unlock(&s->mu);
    if (free_it)
        call_free(k);
    q->call = NULL;
    q->responded = true;
    account(q, code);
    return queue(conn, status, ct, body, len);
}

/* ---------- streams ---------- */

static void stream_free(stream *st)
{
    for (frame *f = st->head, *next; f; f = next) {
        next = f->next;
        free(f);
    }
    free(st);
}

static void stream_unref_locked(stream *st, bool *free_it)
{
    *free_it = --st->refs == 0;
}

static void stream_wake_locked(stream *st)
{
    if (st->suspended && st->conn) {
        st->suspended = false;
        MHD_resume_connection(st->conn);
    }
}

/* Queues an envelope (header + msg). s->mu held. Returns -1 when out of memory. */
static int stream_push_locked(stream *st, uint8_t flags, const uint8_t *msg, size_t len)
{
    frame *f = malloc(sizeof *f + RPC_ENVELOPE_HEADER + len);
    if (!f)
        return -1;
    f->next = NULL;
    f->len = RPC_ENVELOPE_HEADER + len;
    rpc_envelope_header(flags, (uint32_t)len, f->data);
    if (len)
        memcpy(f->data + RPC_ENVELOPE_HEADER, msg, len);
    if (st->tail)
        st->tail->next = f;
    else
        st->head = f;
    st->tail = f;
    st->queued += f->len;
    return 0;
}

/* Queues the end-of-stream frame (once). s->mu held. */
static void stream_end_locked(stream *st, rpc_code code, const char *message)
{
    if (st->ended)
        return;
    st->ended = true;
    st->end_code = code;
    char *json = rpc_end_stream_json(code, message);
    if (!json ||
        stream_push_locked(st, RPC_FLAG_END_STREAM, (const uint8_t *)json, strlen(json)) != 0)
        st->aborted = true; /* out of memory: close without a proper end */
    free(json);
}

/* Tells the engine the peer is gone. s->mu held. */
static void stream_detach_locked(http_server *s, stream *st)
{
    if (!st->engine_open || st->detached || s->gone || !st->engine_id)
        return;
    st->detached = true;
    rpc_stream_detach(s->engine, st->method->id, st->engine_id);
}

/* Engine thread. */
static void stream_on_event(void *ctx, const engine_event *ev)
{
    stream *st = ctx;
    http_server *s = st->srv;
    size_t len = 0;
    uint8_t *msg = rpc_event_encode(st->codec, ev, &len);
    pthread_mutex_lock(&s->mu);
    if (!st->ended && !st->aborted) {
        if (!msg || stream_push_locked(st, 0, msg, len) != 0) {
            st->aborted = true;
        } else if (ev->kind == ENGINE_EVENT_LOST) {
            /* The campaign is over on the engine's side: on_close follows. */
            st->detached = true;
            stream_end_locked(st, RPC_OK, NULL);
        } else if (st->queued > STREAM_QUEUE_MAX) {
            /* The peer does not read: treat it as gone. */
            log_event(LOG_WARN, "stream_overflow", "method=%s queued=%zu", st->method->name,
                      st->queued);
            st->aborted = true;
        }
        if (st->aborted) {
            for (frame *f = st->head, *next; f; f = next) {
                next = f->next;
                free(f);
            }
            st->head = st->tail = NULL;
            st->queued = st->off = 0;
            stream_detach_locked(s, st);
        }
        stream_wake_locked(st);
    }
    pthread_mutex_unlock(&s->mu);
    free(msg);
}

/* Engine thread: the engine is done with this stream. */
static void stream_on_close(void *ctx)
{
    stream *st = ctx;
    http_server *s = st->srv;
    bool free_it;
    pthread_mutex_lock(&s->mu);
    st->engine_open = false;
    if (!st->aborted)
        stream_end_locked(st, s->stopping ? RPC_UNAVAILABLE : RPC_OK,
                          s->stopping ? "the service is shutting down" : NULL);
    stream_wake_locked(st);
    stream_unref_locked(st, &free_it);
    pthread_mutex_unlock(&s->mu);
    if (free_it)
        stream_free(st);
}

/* MHD thread: the next bytes of the response. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    stream *st = cls;
    http_server *s = st->srv;
    pthread_mutex_lock(&s->mu);
    if (st->aborted) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = 0;
    while (st->head && n < max) {
        frame *f = st->head;
        size_t take = f->len - st->off;
        if (take > max - n)
            take = max - n;
        memcpy(buf + n, f->data + st->off, take);
        n += take;
        st->off += take;
        if (st->off == f->len) {
            st->head = f->next;
            if (!st->head)
                st->tail = NULL;
            st->queued -= f->len;
            st->off = 0;
            free(f);
        }
    }
    if (n == 0 && st->ended) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n == 0 && st->conn) {
        st->suspended = true;
        MHD_suspend_connection(st->conn);
    }
    pthread_mutex_unlock(&s->mu);
    return (ssize_t)n;
}

/* MHD: the response is destroyed. */
static void stream_response_free(void *cls)
{
    stream *st = cls;
    http_server *s = st->srv;
    bool free_it;
    pthread_mutex_lock(&s->mu);
    stream_unref_locked(st, &free_it);
    pthread_mutex_unlock(&s->mu);
    if (free_it)
        stream_free(st);
}

static void set_stream_socket_options(http_server *s, stream *st, struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return;
    int fd = ci->connect_fd;
    st->fd = fd;
    int on = 1, idle = 5, intvl = 2, cnt = 3;
    unsigned ut = s->user_timeout_ms;
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof ut);
    /* A stream is never idle for long (heartbeats, resumes); one whose peer
     * takes nothing is closed after this. */
    MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, STREAM_IDLE_TIMEOUT_S);
}

static enum MHD_Result stream_start(http_server *s, struct MHD_Connection *conn, req *q,
                                    const ProtobufCMessage *m)
{
    stream *st = calloc(1, sizeof *st);
    if (!st)
        return stream_error(conn, q, RPC_INTERNAL, "out of memory");
    st->srv = s;
    st->refs = 3; /* request, response, engine */
    st->conn = conn;
    st->method = q->method;
    st->codec = q->codec;
    st->engine_open = true;
    st->fd = -1;
    if (q->timeout_ms >= 0)
        st->deadline_ms = now_ms() + q->timeout_ms;
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_response_free);
    if (!resp) {
        free(st);
        return stream_error(conn, q, RPC_INTERNAL, "out of memory");
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rpc_content_type(q->codec, true));
    set_stream_socket_options(s, st, conn);

    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        st->refs = 1;
        MHD_destroy_response(resp); /* frees st through stream_response_free */
        return stream_error(conn, q, RPC_UNAVAILABLE, "the service is shutting down");
    }
    st->next = s->streams;
    if (s->streams)
        s->streams->prev = st;
    s->streams = st;
    s->n_streams++;
    if (st->deadline_ms)
        pthread_cond_signal(&s->wake); /* the timer thread learns the new deadline */
    engine_listener l = {stream_on_event, stream_on_close, st};
    st->engine_id = rpc_stream_start(s->engine, q->method->id, m, l);
    if (!st->engine_id) {
        st->engine_open = false;
        st->refs--;
        stream_end_locked(st, RPC_INTERNAL, "out of memory");
    }
    pthread_mutex_unlock(&s->mu);
    http_ops_stream(q->method->name, +1);
    q->stream = st;
    q->responded = true;
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ---------- routing ---------- */

/* ---------- connection limits ----------
 *
 * libmicrohttpd enforces its limits by closing a connection as it is
 * accepted, which a client can only report as "connection reset". So the
 * configured limits (--max-connections, --max-per-ip) are enforced here
 * instead: a connection accepted over them gets a Connect resource_exhausted
 * error naming the limit on its RPCs, and is closed after the answer.
 * Probes, scrapes and the status page are still answered on it, so an
 * overloaded replica still tells the kubelet and Prometheus what is going
 * on. libmicrohttpd's own limits sit a little higher (limit_headroom), as the
 * last line of defence. */

typedef struct peer {
    struct peer *next;
    int family;
    uint8_t addr[16];
    unsigned conns;
} peer;

/* Per-connection state (MHD's socket context). */
typedef struct conn_state {
    peer *peer;     /* NULL when the address is unknown or memory ran out */
    char over[160]; /* why RPCs are refused on this connection; "" when they are not */
} conn_state;

static unsigned limit_headroom(unsigned limit)
{
    return limit / 8 > 8 ? limit / 8 : 8;
}

static bool peer_key(const struct sockaddr *sa, int *family, uint8_t addr[16])
{
    memset(addr, 0, 16);
    if (sa->sa_family == AF_INET) {
        memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    } else {
        return false;
    }
    *family = sa->sa_family;
    return true;
}

static unsigned peer_hash(const uint8_t addr[16])
{
    unsigned h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ addr[i]) * 16777619u;
    return h % PEER_BUCKETS;
}

/* s->conn_mu held. The peer of that address, created with no connections. */
static peer *peer_get(http_server *s, const struct sockaddr *sa)
{
    int family;
    uint8_t addr[16];
    if (!sa || !peer_key(sa, &family, addr))
        return NULL;
    peer **head = &s->peers[peer_hash(addr)];
    for (peer *p = *head; p; p = p->next)
        if (p->family == family && memcmp(p->addr, addr, 16) == 0)
            return p;
    peer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->family = family;
    memcpy(p->addr, addr, 16);
    p->next = *head;
    *head = p;
    return p;
}

/* s->conn_mu held. */
static void peer_put(http_server *s, peer *p)
{
    if (!p || --p->conns > 0)
        return;
    for (peer **pp = &s->peers[peer_hash(p->addr)]; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    free(p);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        conn_state *cs = calloc(1, sizeof *cs);
        pthread_mutex_lock(&s->conn_mu);
        s->n_conns++;
        peer *p = ci ? peer_get(s, ci->client_addr) : NULL;
        if (p)
            p->conns++;
        if (cs) {
            cs->peer = p;
            if (s->n_conns > s->max_conns)
                snprintf(cs->over, sizeof cs->over,
                         "kubeleased has %u connections open, over --max-connections %u: retry "
                         "later or on another replica",
                         s->n_conns, s->max_conns);
            else if (s->max_per_ip && p && p->conns > s->max_per_ip)
                snprintf(cs->over, sizeof cs->over,
                         "%u connections open from this address, over --max-per-ip %u: close "
                         "some or share one client",
                         p->conns, s->max_per_ip);
        } else {
            peer_put(s, p);
        }
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = cs;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_state *cs = *socket_context;
        pthread_mutex_lock(&s->conn_mu);
        s->n_conns--;
        if (cs)
            peer_put(s, cs->peer);
        pthread_mutex_unlock(&s->conn_mu);
        free(cs);
        *socket_context = NULL;
    }
}

/* Why RPCs are refused on this connection, or NULL. */
static const char *connection_over_limit(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    const conn_state *cs = ci ? ci->socket_context : NULL;
    return cs && cs->over[0] ? cs->over : NULL;
}

static bool namespace_served(const http_server *s, const char *ns)
{
    if (!s->namespaces || !ns)
        return true;
    for (char **p = s->namespaces; *p; p++)
        if (strcmp(*p, ns) == 0)
            return true;
    return false;
}

/* Parses Connect-Timeout-Ms: at most 10 digits. Returns 0 or -1. */
static int parse_timeout(const char *v, int64_t *out)
{
    size_t n = strlen(v);
    if (n == 0 || n > 10)
        return -1;
    int64_t t = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        t = t * 10 + (v[i] - '0');
    }
    *out = t;
    return 0;
}

static enum MHD_Result begin_rpc(http_server *s, struct MHD_Connection *conn, req *q,
                                 const char *url, const char *method)
{
    char msg[512];
    q->kind = REQ_RPC;
    q->timeout_ms = -1;
    q->method = rpc_method_find(url);
    if (!q->method) {
        snprintf(msg, sizeof msg, "no method %.200s in kubelease.v1.LeaseService",
                 url + strlen(RPC_SERVICE_PREFIX));
        return unary_error(conn, q, RPC_UNIMPLEMENTED, MHD_HTTP_NOT_FOUND, msg);
    }
    bool is_stream = q->method->server_stream;
    if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
        const rpc_method *m = q->method;
        q->method = NULL; /* not an RPC of that method: do not count it */
        snprintf(msg, sizeof msg, "%s needs POST, not %.20s", m->name, method);
        char *body = rpc_error_json(RPC_UNIMPLEMENTED, msg);
        if (!body)
            return MHD_NO;
        struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
        if (!r) {
            free(body);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "POST");
        q->responded = true;
        enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_METHOD_NOT_ALLOWED, r);
        MHD_destroy_response(r);
        return ret;
    }
    const char *ct =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (rpc_content_type_parse(ct, is_stream, &q->codec) != 0) {
        snprintf(msg, sizeof msg, "unsupported Content-Type \"%.100s\" for %s: use %s",
                 ct ? ct : "", q->method->name,
                 is_stream ? "application/connect+proto or application/connect+json"
                           : "application/proto or application/json");
        q->codec = RPC_CODEC_JSON;
        return unary_error(conn, q, RPC_INVALID_ARGUMENT, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, msg);
    }
    const char *over = connection_over_limit(conn);
    if (over) {
        q->close = true;
        return rpc_error(conn, q, RPC_RESOURCE_EXHAUSTED, over);
    }
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->max_body) {
        snprintf(msg, sizeof msg, "request body of %.20s bytes exceeds the limit of %zu bytes", cl,
                 s->max_body);
        return rpc_error(conn, q, RPC_RESOURCE_EXHAUSTED, msg);
    }
    /* No compression is offered; a compressed body would only fail to decode. */
    const char *enc = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                  is_stream ? "Connect-Content-Encoding"
                                                            : MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (enc && strcasecmp(enc, "identity") != 0) {
        snprintf(msg, sizeof msg, "compression \"%.40s\" is not supported: send identity", enc);
        return rpc_error(conn, q, RPC_UNIMPLEMENTED, msg);
    }
    const char *to = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connect-Timeout-Ms");
    if (to && parse_timeout(to, &q->timeout_ms) != 0) {
        snprintf(msg, sizeof msg, "Connect-Timeout-Ms: \"%.40s\" is not 1 to 10 digits", to);
        return rpc_error(conn, q, RPC_INVALID_ARGUMENT, msg);
    }
    return MHD_YES; /* wait for the body */
}

static enum MHD_Result status_page(http_server *s, struct MHD_Connection *conn, req *q)
{
    call *k = calloc(1, sizeof *k);
    if (!k)
        return MHD_NO;
    k->srv = s;
    k->refs = 2;
    k->conn = conn;
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        pthread_mutex_unlock(&s->mu);
        free(k);
        q->responded = true;
        return queue_text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "shutting down\n");
    }
    k->listed = true;
    k->next = s->pending;
    if (s->pending)
        s->pending->prev = k;
    s->pending = k;
    k->suspended = true;
    MHD_suspend_connection(conn);
    if (unary_start_locked(s, k, NULL) != 0) {
        call_unlist(s, k);
        k->refs--;
        call_fail_locked(s, k, RPC_INTERNAL, "out of memory");
    }
    pthread_mutex_unlock(&s->mu);
    q->call = k;
    return MHD_YES;
}

static enum MHD_Result answer_other(http_server *s, struct MHD_Connection *conn, req *q,
                                    const char *url, const char *method)
{
    bool get =
        strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    bool known = strcmp(url, "/livez") == 0 || strcmp(url, "/readyz") == 0 ||
                 strcmp(url, "/metrics") == 0 || strcmp(url, "/") == 0;
    if (!known) {
        q->responded = true;
        return queue_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
    }
    if (!get) {
        q->responded = true;
        return queue_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed: use GET\n");
    }
    if (strcmp(url, "/livez") == 0) {
        q->responded = true;
        return queue_text(conn, MHD_HTTP_OK, "ok\n");
    }
    if (strcmp(url, "/readyz") == 0) {
        char why[256];
        bool ready;
        pthread_mutex_lock(&s->mu);
        if (s->stopping) {
            ready = false;
            snprintf(why, sizeof why, "shutting down");
        } else {
            ready = engine_ready(s->engine, why, sizeof why);
        }
        pthread_mutex_unlock(&s->mu);
        char text[300];
        snprintf(text, sizeof text, "%s\n", ready ? "ok" : why);
        q->responded = true;
        return queue_text(conn, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, text);
    }
    if (strcmp(url, "/metrics") == 0) {
        char *body = NULL;
        size_t len = 0;
        const char *ct = NULL;
        q->responded = true;
        if (http_ops_metrics(&body, &len, &ct) != 0)
            return queue_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
        return queue(conn, MHD_HTTP_OK, ct, body, len);
    }
    if (strcmp(url, "/") == 0)
        return status_page(s, conn, q);
    q->responded = true;
    return queue_text(conn, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* The whole request body is in: decode, validate, dispatch. */
static enum MHD_Result finish_rpc(http_server *s, struct MHD_Connection *conn, req *q)
{
    char msg[512];
    if (q->too_large) {
        snprintf(msg, sizeof msg, "request body exceeds the limit of %zu bytes", s->max_body);
        return rpc_error(conn, q, RPC_RESOURCE_EXHAUSTED, msg);
    }
    const uint8_t *data = q->body;
    size_t len = q->len;
    uint8_t *env = NULL;
    if (q->method->server_stream) {
        /* Exactly one uncompressed envelope. */
        rpc_envelope_decoder d;
        rpc_envelope_decoder_init(&d, s->max_body);
        size_t used = 0;
        rpc_envelope_status st = rpc_envelope_decoder_feed(&d, q->body, q->len, &used);
        uint8_t flags = 0;
        if (st != RPC_ENVELOPE_FRAME || used != q->len) {
            rpc_envelope_decoder_free(&d);
            return stream_error(
                conn, q, RPC_INVALID_ARGUMENT,
                st == RPC_ENVELOPE_FRAME
                    ? "the request must be exactly one envelope; found more bytes"
                    : "the request must be one envelope: [flags][length u32][message]; "
                      "it is truncated");
        }
        rpc_envelope_decoder_take(&d, &flags, &env, &len);
        rpc_envelope_decoder_free(&d);
        if (flags != 0) {
            free(env);
            return stream_error(conn, q, RPC_INVALID_ARGUMENT,
                                flags & RPC_FLAG_COMPRESSED
                                    ? "compressed requests are not supported"
                                    : "the request envelope has unexpected flags");
        }
        data = env;
    }
    ProtobufCMessage *m = rpc_message_decode(
        q->codec, q->method->request, data ? data : (const uint8_t *)"", len, msg, sizeof msg);
    free(env);
    if (!m)
        return rpc_error(conn, q, RPC_INVALID_ARGUMENT, msg);
    enum MHD_Result ret;
    if (rpc_validate_request(q->method->id, m, msg, sizeof msg) != 0) {
        ret = rpc_error(conn, q, RPC_INVALID_ARGUMENT, msg);
    } else if (!namespace_served(s, rpc_request_namespace(q->method->id, m))) {
        snprintf(msg, sizeof msg, "namespace \"%s\" is not served by this kubeleased",
                 rpc_request_namespace(q->method->id, m));
        ret = rpc_error(conn, q, RPC_PERMISSION_DENIED, msg);
    } else if (q->timeout_ms == 0 && !q->method->server_stream) {
        ret = rpc_error(conn, q, RPC_DEADLINE_EXCEEDED, "Connect-Timeout-Ms is 0");
    } else if (q->method->server_stream) {
        ret = stream_start(s, conn, q, m);
    } else {
        ret = unary_dispatch(s, conn, q, m);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    return ret;
}

static void append_body(http_server *s, req *q, const char *data, size_t n)
{
    if (q->too_large)
        return;
    if (q->len + n > s->max_body) {
        q->too_large = true;
        free(q->body);
        q->body = NULL;
        q->len = q->cap = 0;
        return;
    }
    if (q->len + n > q->cap) {
        size_t cap = q->cap ? q->cap : 512;
        while (cap < q->len + n)
            cap *= 2;
        uint8_t *b = realloc(q->body, cap);
        if (!b) {
            q->too_large = true; /* answered as over the limit: nothing better to say */
            return;
        }
        q->body = b;
        q->cap = cap;
    }
    memcpy(q->body + q->len, data, n);
    q->len += n;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)version;
    http_server *s = cls;
    req *q = *req_cls;
    if (!q) {
        q = calloc(1, sizeof *q);
        if (!q)
            return MHD_NO;
        q->start_us = mono_us();
        *req_cls = q;
        if (strncmp(url, RPC_SERVICE_PREFIX, strlen(RPC_SERVICE_PREFIX)) == 0)
            return begin_rpc(s, conn, q, url, method);
        /* Answered once the request is complete, so that the connection
         * can be kept alive (probes, scrapes). */
        q->kind = REQ_OTHER;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!q->responded)
            append_body(s, q, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (q->call)
        return unary_resumed(s, conn, q);
    if (q->responded)
        return MHD_YES;
    if (q->kind == REQ_RPC)
        return finish_rpc(s, conn, q);
    return answer_other(s, conn, q, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    http_server *s = cls;
    req *q = *req_cls;
    if (!q)
        return;
    *req_cls = NULL;
    if (q->stream) {
        stream *st = q->stream;
        bool free_it;
        pthread_mutex_lock(&s->mu);
        st->conn = NULL;
        st->suspended = false;
        stream_detach_locked(s, st);
        if (st->prev)
            st->prev->next = st->next;
        else
            s->streams = st->next;
        if (st->next)
            st->next->prev = st->prev;
        s->n_streams--;
        pthread_cond_broadcast(&s->drained);
        rpc_code code = st->ended ? st->end_code : RPC_CANCELED;
        if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !st->ended)
            code = RPC_CANCELED;
        stream_unref_locked(st, &free_it);
        pthread_mutex_unlock(&s->mu);
        if (free_it)
            stream_free(st);
        http_ops_stream(q->method->name, -1);
        account(q, code);
        if (log_enabled(LOG_DEBUG))
            log_event(LOG_DEBUG, "stream_end", "method=%s toe=%d", q->method->name, (int)toe);
    }
    if (q->call) {
        /* The connection ended while a call waited (daemon stopping). */
        call *k = q->call;
        bool free_it;
        pthread_mutex_lock(&s->mu);
        k->conn = NULL;
        k->suspended = false;
        call_unref_locked(k, &free_it);
        pthread_mutex_unlock(&s->mu);
        if (free_it)
            call_free(k);
    }
    free(q->body);
    free(q);
}

/* ---------- timer thread: deadlines and periodic resumes ---------- */

/* A suspended stream's client sends nothing after its request, so end of
 * file or an error on its socket means it left. (MHD does not read a
 * suspended connection, and a resumed one with nothing to send would only
 * notice at the next write.) s->mu held; the stream is suspended, so MHD
 * cannot have closed its socket. */
static bool peer_left(const stream *st)
{
    if (st->fd < 0)
        return false;
    char c;
    ssize_t n = recv(st->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return true;
    return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

static void *timer_main(void *arg)
{
    http_server *s = arg;
    pthread_mutex_lock(&s->mu);
    int64_t next_resume = now_ms() + RESUME_EVERY_MS;
    while (!s->timer_quit) {
        int64_t now = now_ms();
        int64_t wake = next_resume;
        for (call *k = s->pending, *next; k; k = next) {
            next = k->next;
            if (k->done)
                continue;
            if (k->deadline_ms && k->deadline_ms <= now)
                call_fail_locked(s, k, RPC_DEADLINE_EXCEEDED,
                                 "Connect-Timeout-Ms passed before the service could answer");
            else if (k->deadline_ms && k->deadline_ms < wake)
                wake = k->deadline_ms;
        }
        /* A stream past its Connect-Timeout-Ms ends with deadline_exceeded;
         * for a campaign that is a departure, not a resignation (a term in
         * progress ends when its last grant runs out). */
        for (stream *st = s->streams; st; st = st->next) {
            if (!st->deadline_ms || st->ended || st->aborted)
                continue;
            if (st->deadline_ms <= now) {
                stream_detach_locked(s, st);
                stream_end_locked(st, RPC_DEADLINE_EXCEEDED, "Connect-Timeout-Ms passed");
                stream_wake_locked(st);
            } else if (st->deadline_ms < wake) {
                wake = st->deadline_ms;
            }
        }
        if (now >= next_resume) {
            for (stream *st = s->streams; st; st = st->next) {
                if (st->suspended && !st->aborted && peer_left(st)) {
                    st->aborted = true;
                    stream_detach_locked(s, st);
                }
                stream_wake_locked(st);
            }
            next_resume = now + RESUME_EVERY_MS;
            if (next_resume < wake)
                wake = next_resume;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        int64_t delta = wake - now_ms();
        if (delta < 1)
            delta = 1;
        ts.tv_sec += delta / 1000;
        ts.tv_nsec += (delta % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&s->wake, &s->mu, &ts);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---------- lifecycle ---------- */

/* MHD hands a printf format of its own: a vprintf wrapper by nature. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char buf[256];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    log_event(LOG_DEBUG, "http", "msg=%s", log_q(buf));
}
#pragma GCC diagnostic pop

/* "ADDR:PORT" or "[V6]:PORT" into a socket address. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len, bool *v6,
                        char *err, size_t err_len)
{
    char host[128];
    const char *port;
    if (listen[0] == '[') {
        const char *end = strchr(listen, ']');
        if (!end || end[1] != ':' || (size_t)(end - listen - 1) >= sizeof host)
            goto bad;
        memcpy(host, listen + 1, (size_t)(end - listen - 1));
        host[end - listen - 1] = '\0';
        port = end + 2;
    } else {
        const char *colon = strrchr(listen, ':');
        if (!colon || (size_t)(colon - listen) >= sizeof host)
            goto bad;
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
        port = colon + 1;
    }
    char *end = NULL;
    long p = strtol(port, &end, 10);
    if (!*port || *end || p < 0 || p > 65535)
        goto bad;
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(*host ? host : NULL, port, &hints, &ai) != 0 || !ai)
        goto bad;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    *v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    return 0;
bad:
    snprintf(err, err_len,
             "listen address \"%s\": want ADDR:PORT with a numeric address, e.g. "
             "0.0.0.0:8080 or [::1]:8080",
             listen);
    return -1;
}

int http_listen_check(const char *listen, char *err, size_t err_len)
{
    struct sockaddr_storage ss;
    socklen_t len;
    bool v6;
    return parse_listen(listen, &ss, &len, &v6, err, err_len);
}

http_server *http_server_start(const http_config *cfg, char *err, size_t err_len)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    bool v6;
    if (parse_listen(cfg->listen, &ss, &sslen, &v6, err, err_len) != 0)
        return NULL;
    http_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    s->engine = cfg->engine;
    s->listen_fd = -1;
    s->max_body = cfg->max_body_bytes ? cfg->max_body_bytes : DEFAULT_MAX_BODY;
    s->user_timeout_ms =
        cfg->stream_user_timeout_ms ? cfg->stream_user_timeout_ms : DEFAULT_USER_TIMEOUT_MS;
    if (cfg->namespaces) {
        size_t n = 0;
        while (cfg->namespaces[n])
            n++;
        s->namespaces = calloc(n + 1, sizeof *s->namespaces);
        for (size_t i = 0; s->namespaces && i < n; i++)
            s->namespaces[i] = strdup(cfg->namespaces[i]);
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->conn_mu, NULL);
    s->max_conns = cfg->max_connections ? cfg->max_connections : DEFAULT_MAX_CONNECTIONS;
    s->max_per_ip = cfg->max_per_ip;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_cond_init(&s->drained, &ca);
    pthread_condattr_destroy(&ca);

    unsigned flags =
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    unsigned threads = cfg->threads ? cfg->threads : DEFAULT_THREADS;
    unsigned hard_max = s->max_conns + limit_headroom(s->max_conns);
    unsigned hard_per_ip = s->max_per_ip ? s->max_per_ip + limit_headroom(s->max_per_ip) : 0;
    unsigned idle = cfg->idle_timeout_s ? cfg->idle_timeout_s : DEFAULT_IDLE_TIMEOUT_S;
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, hard_max, MHD_OPTION_PER_IP_CONNECTION_LIMIT, hard_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, idle, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, err_len, "cannot listen on %s: %s", cfg->listen,
                 errno ? strerror(errno) : "libmicrohttpd refused to start");
        goto fail;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : 0;
    if (pthread_create(&s->timer, NULL, timer_main, s) != 0) {
        snprintf(err, err_len, "cannot start the timer thread");
        goto fail;
    }
    s->timer_started = true;
    return s;
fail:
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    http_server_stop(s);
    return NULL;
}

uint16_t http_server_port(const http_server *s)
{
    return s->port;
}

void http_server_quiesce(http_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_mutex_unlock(&s->mu);
    /* The listening socket is ours to close, after MHD_stop_daemon. */
    if (s->daemon && s->listen_fd < 0)
        s->listen_fd = MHD_quiesce_daemon(s->daemon);
}

void http_server_engine_stopped(http_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    s->gone = true;
    pthread_mutex_unlock(&s->mu);
}

void http_server_engine_gone(http_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = s->gone = true;
    /* Calls the engine never answered: answer them, drop the engine's ref. */
    while (s->pending) {
        call *k = s->pending;
        bool free_it;
        call_unlist(s, k);
        call_fail_locked(s, k, RPC_UNAVAILABLE, "the service is shutting down");
        call_unref_locked(k, &free_it);
        if (free_it)
            call_free(k);
    }
    for (stream *st = s->streams, *next; st; st = next) {
        next = st->next;
        if (st->engine_open) {
            /* The engine will never call on_close for it: drop its ref. */
            st->engine_open = false;
            st->refs--;
        }
        stream_end_locked(st, RPC_UNAVAILABLE, "the service is shutting down");
        stream_wake_locked(st);
    }
    pthread_mutex_unlock(&s->mu);
}

int http_server_drain(http_server *s, int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&s->mu);
    while (s->n_streams > 0) {
        if (pthread_cond_timedwait(&s->drained, &s->mu, &ts) == ETIMEDOUT)
            break;
    }
    int left = s->n_streams;
    pthread_mutex_unlock(&s->mu);
    return left;
}

void http_server_stop(http_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = s->gone = true;
    s->timer_quit = true;
    for (call *k = s->pending; k; k = k->next)
        call_fail_locked(s, k, RPC_UNAVAILABLE, "the service is shutting down");
    for (stream *st = s->streams; st; st = st->next) {
        st->aborted = st->aborted || !st->ended;
        stream_wake_locked(st);
    }
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    if (s->timer_started)
        pthread_join(s->timer, NULL);
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->namespaces) {
        for (char **p = s->namespaces; *p; p++)
            free(*p);
        free(s->namespaces);
    }
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->drained);
    pthread_mutex_destroy(&s->mu);
    /* Every connection was closed with the daemon, and with it its peer. */
    for (unsigned b = 0; b < PEER_BUCKETS; b++) {
        for (peer *p = s->peers[b], *next; p; p = next) {
            next = p->next;
            free(p);
        }
    }
    pthread_mutex_destroy(&s->conn_mu);
    free(s);
}
