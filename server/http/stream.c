/* Server streams (Campaign, WatchHolder): the engine's events become
 * envelopes in a per-stream queue that MHD's content reader drains. When the
 * queue is empty the connection is suspended; an event, the end of the
 * stream or the timer (which looks every second for peers that left)
 * resumes it. Back-pressure: a peer that lets more than STREAM_QUEUE_MAX
 * bytes pile up is treated as gone.
 *
 * A stream has three references: the request's (dropped when MHD completes
 * the request), the response's (dropped when MHD destroys it) and the
 * engine's (dropped in on_close, or when the engine is gone without calling
 * it). The stream waits in an http_wait (wait.h), whose done means the
 * end-of-stream frame is queued; its references change only through
 * http_wait_ref/unref.
 *
 * Locking: s->mu guards a stream from the moment it is shared (listed, or
 * known to MHD or the engine); it is taken by MHD threads (content reader,
 * completion), the engine thread (on_event, on_close), the timer thread and
 * the owner (shutdown). */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "common/envelope.h"
#include "core/log.h"
#include "http/internal.h"
#include "http/metrics.h"
#include "http/wait.h"
#include "rpc/lease_service.h"

#define STREAM_QUEUE_MAX      (256 * 1024) /* bytes a stream may have unsent */
#define STREAM_IDLE_TIMEOUT_S 30           /* a stream whose peer takes nothing for this long */
/* The response's own buffer, allocated with each stream: libmicrohttpd
 * reads a chunked (HTTP/1.1) answer into the connection's pool instead, and
 * uses this only for an HTTP/1.0 peer, which then gets at most this much
 * per read: it is kept small, since every stream holds one. */
#define STREAM_BLOCK 64

typedef struct frame {
    struct frame *next;
    size_t len;
    uint8_t data[];
} frame;

struct http_stream {
    http_wait w; /* done: the end-of-stream frame is queued; listed in
                  * s->streams from its start to its request's end */
    const rpc_method *method;
    rpc_codec codec;
    uint64_t engine_id;
    bool engine_open; /* the engine may still call on_event/on_close */
    bool detached;    /* we told the engine the peer is gone */
    bool aborted;     /* the peer does not keep up: close without end frame */
    rpc_code end_code;
    int64_t deadline_ms; /* Connect-Timeout-Ms; 0: none */
    int fd;              /* the connection's socket, for noticing a peer that left */
    frame *head, *tail;  /* the queue: envelopes not yet (fully) read by MHD */
    size_t off;          /* bytes of head already read */
    size_t queued;       /* bytes in the queue */
};

/* ---------- the stream object ---------- */

static void queue_clear(http_stream *st)
{
    for (frame *f = st->head, *next; f; f = next) {
        next = f->next;
        free(f);
    }
    st->head = st->tail = NULL;
    st->queued = st->off = 0;
}

static http_stream *stream_of_wait(http_wait *w)
{
    return KL__LIST_ENTRY(w, http_stream, w);
}

static void stream_release(http_wait *w)
{
    http_stream *st = stream_of_wait(w);
    queue_clear(st);
    free(st);
}

/* A new stream holding the request's reference. */
static http_stream *stream_new(http_server *s, struct MHD_Connection *conn, const http_req *q)
{
    http_stream *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    http_wait_init(&st->w, s, conn, stream_release);
    st->method = q->method;
    st->codec = q->codec;
    st->fd = -1;
    if (q->timeout_ms >= 0)
        st->deadline_ms = http_deadline_ms(s, q->timeout_ms);
    return st;
}

static void stream_list(http_server *s, http_stream *st)
{
    http_wait_list(&s->streams, &st->w);
    s->n_streams++;
}

static void stream_unlist(http_server *s, http_stream *st)
{
    http_wait_unlist(&st->w);
    s->n_streams--;
    pthread_cond_broadcast(&s->drained);
}

static http_stream *stream_of(struct kl__list *link)
{
    return stream_of_wait(http_wait_of(link));
}

static void stream_wake_locked(http_stream *st)
{
    http_wait_resume(&st->w);
}

/* Queues an envelope (header + msg). Returns -1 when out of memory. */
static int stream_push_locked(http_stream *st, unsigned flags, const uint8_t *msg, size_t len)
{
    frame *f = malloc(sizeof *f + KL__ENVELOPE_HEADER + len);
    if (!f)
        return -1;
    f->next = NULL;
    f->len = KL__ENVELOPE_HEADER + len;
    kl__envelope_header(f->data, flags, (uint32_t)len);
    if (len)
        memcpy(f->data + KL__ENVELOPE_HEADER, msg, len);
    if (st->tail)
        st->tail->next = f;
    else
        st->head = f;
    st->tail = f;
    st->queued += f->len;
    return 0;
}

/* Moves up to max queued bytes into buf; returns how many. */
static size_t stream_pop_locked(http_stream *st, char *buf, size_t max)
{
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
    return n;
}

/* Queues the end-of-stream frame (once). */
static void stream_end_locked(http_stream *st, rpc_code code, const char *message)
{
    if (st->w.done)
        return;
    st->w.done = true; /* the connection is woken by the caller */
    st->end_code = code;
    char *json = rpc_end_stream_json(code, message);
    if (!json || stream_push_locked(st, KL__ENVELOPE_FLAG_END_STREAM, (const uint8_t *)json,
                                    strlen(json)) != 0)
        st->aborted = true; /* out of memory: close without a proper end */
    free(json);
}

/* Tells the engine the peer is gone. */
static void stream_detach_locked(http_server *s, http_stream *st)
{
    if (!st->engine_open || st->detached || s->gone || !st->engine_id)
        return;
    st->detached = true;
    rpc_stream_detach(s->engine, st->method->id, st->engine_id);
}

/* ---------- the engine's side (engine thread) ---------- */

/* The engine did not take the stream on: it ends with the engine's code;
 * on_close follows. */
static void stream_on_refused(http_stream *st, const engine_event *ev)
{
    http_server *s = st->w.srv;
    pthread_mutex_lock(&s->mu);
    if (!st->w.done && !st->aborted) {
        st->detached = true;
        stream_end_locked(st, rpc_code_of_engine(ev->code), ev->message);
        stream_wake_locked(st);
    }
    pthread_mutex_unlock(&s->mu);
}

static void stream_on_event(void *ctx, const engine_event *ev)
{
    http_stream *st = ctx;
    http_server *s = st->w.srv;
    if (ev->kind == ENGINE_EVENT_REFUSED) {
        stream_on_refused(st, ev);
        return;
    }
    size_t len = 0;
    /* A refused campaign ends with the error alone, no Lost message. */
    bool refused = ev->kind == ENGINE_EVENT_LOST && ev->code != ENGINE_OK;
    uint8_t *msg = refused ? NULL : rpc_event_encode(st->codec, ev, &len);
    pthread_mutex_lock(&s->mu);
    if (!st->w.done && !st->aborted) {
        if (refused) {
            st->detached = true; /* on_close follows */
            stream_end_locked(st, rpc_code_of_engine(ev->code), ev->message);
        } else if (!msg || stream_push_locked(st, 0, msg, len) != 0) {
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
            /* Closed without an end frame: nothing queued is sent. */
            queue_clear(st);
            stream_detach_locked(s, st);
        }
        stream_wake_locked(st);
    }
    pthread_mutex_unlock(&s->mu);
    free(msg);
}

/* The engine is done with this stream: it drops its reference. */
static void stream_on_close(void *ctx)
{
    http_stream *st = ctx;
    http_server *s = st->w.srv;
    pthread_mutex_lock(&s->mu);
    st->engine_open = false;
    if (!st->aborted)
        stream_end_locked(st, s->stopping ? RPC_UNAVAILABLE : RPC_OK,
                          s->stopping ? HTTP_SHUTTING_DOWN : NULL);
    stream_wake_locked(st);
    http_wait_unref(&st->w); /* the engine's */
    pthread_mutex_unlock(&s->mu);
}

/* ---------- the response's side (MHD threads) ---------- */

/* MHD's content reader: the next bytes of the response. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    http_stream *st = cls;
    http_server *s = st->w.srv;
    pthread_mutex_lock(&s->mu);
    if (st->aborted) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = stream_pop_locked(st, buf, max);
    if (n == 0 && st->w.done) {
        pthread_mutex_unlock(&s->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n == 0)
        http_wait_park(&st->w);
    pthread_mutex_unlock(&s->mu);
    return (ssize_t)n;
}

/* MHD destroyed the response: it drops its reference. */
static void stream_response_free(void *cls)
{
    http_stream *st = cls;
    http_server *s = st->w.srv;
    pthread_mutex_lock(&s->mu);
    http_wait_unref(&st->w); /* the response's */
    pthread_mutex_unlock(&s->mu);
}

static void set_socket_options(http_server *s, http_stream *st, struct MHD_Connection *conn)
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

/* Lists st and starts its engine side; an end frame instead if the engine
 * cannot take it. q->peer: the caller's address when the engine must check
 * it against the Pod of a campaign's label, q->label_refused why that Pod
 * is not the caller's (docs/design.md, rule 9). */
static void stream_open_locked(http_server *s, http_stream *st, const ProtobufCMessage *m,
                               const http_req *q)
{
    stream_list(s, st);
    if (st->deadline_ms && st->deadline_ms < s->streams_due_ms) {
        s->streams_due_ms = st->deadline_ms;
        http_timer_wake_locked(s); /* the timer thread learns the new deadline */
    }
    http_wait_ref(&st->w); /* the engine's, until on_close */
    st->engine_open = true;
    engine_listener l = {stream_on_event, stream_on_close, st};
    st->engine_id = rpc_stream_start(s->engine, st->method->id, m, q->peer[0] ? q->peer : NULL,
                                     q->label_refused, q->caller, l);
    if (!st->engine_id) {
        st->engine_open = false;
        http_wait_unref(&st->w); /* the engine never calls on_close */
        stream_end_locked(st, RPC_INTERNAL, "out of memory");
    }
}

enum MHD_Result http_stream_start(http_server *s, struct MHD_Connection *conn, http_req *q,
                                  const ProtobufCMessage *m)
{
    http_stream *st = stream_new(s, conn, q);
    if (!st)
        return http_respond_stream_error(conn, q, RPC_INTERNAL, "out of memory");
    struct MHD_Response *resp = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, st, stream_response_free);
    if (!resp) {
        http_wait_unref(&st->w);
        return http_respond_stream_error(conn, q, RPC_INTERNAL, "out of memory");
    }
    http_wait_ref(&st->w); /* the response's, until stream_response_free */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, rpc_content_type(q->codec, true));
    /* The connection ends with the stream: a later request on it would be
     * served by the streams' threads (accept.c). */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    set_socket_options(s, st, conn);

    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        http_wait_unref(&st->w); /* the request's: it never holds the stream */
        pthread_mutex_unlock(&s->mu);
        MHD_destroy_response(resp); /* the response's: frees st */
        return http_respond_stream_error(conn, q, RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
    }
    stream_open_locked(s, st, m, q);
    pthread_mutex_unlock(&s->mu);
    http_metrics_stream(q->method->name, +1);
    q->stream = st;
    q->responded = true;
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return ret;
}

void http_stream_request_done(http_server *s, http_req *q, enum MHD_RequestTerminationCode toe)
{
    http_stream *st = q->stream;
    if (!st)
        return;
    pthread_mutex_lock(&s->mu);
    stream_detach_locked(s, st);
    stream_unlist(s, st);
    rpc_code code = st->w.done ? st->end_code : RPC_CANCELED;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && !st->w.done)
        code = RPC_CANCELED;
    http_wait_request_done(&st->w);
    pthread_mutex_unlock(&s->mu);
    q->stream = NULL;
    http_metrics_stream(q->method->name, -1);
    http_req_account(q, code);
    if (log_enabled(LOG_DEBUG))
        log_event(LOG_DEBUG, "stream_end", "method=%s toe=%d", q->method->name, (int)toe);
}

/* ---------- timer and shutdown ---------- */

typedef enum peer_news { PEER_QUIET, PEER_SENT, PEER_LEFT } peer_news;

/* A suspended stream's client sends nothing after its request, so end of
 * file or an error on its socket means it left, and bytes mean something
 * for libmicrohttpd to read (a TLS peer's close_notify, say). (MHD does
 * not read a suspended connection, and a resumed one with nothing to send
 * would only notice at the next write.) The stream is suspended, so MHD
 * cannot have closed its socket. */
static peer_news peer_news_of(const http_stream *st)
{
    if (st->fd < 0)
        return PEER_QUIET;
    char c;
    ssize_t n = recv(st->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0)
        return PEER_SENT;
    if (n == 0)
        return PEER_LEFT;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? PEER_QUIET : PEER_LEFT;
}

int64_t http_streams_expire_locked(http_server *s, int64_t now, int64_t wake)
{
    if (now < s->streams_due_ms)
        return s->streams_due_ms < wake ? s->streams_due_ms : wake;
    /* A stream past its Connect-Timeout-Ms ends with deadline_exceeded; for
     * a campaign that is a departure, not a resignation (a term in progress
     * ends when its last grant runs out). */
    int64_t due = INT64_MAX;
    KL__LIST_FOREACH (link, &s->streams) {
        http_stream *st = stream_of(link);
        if (!st->deadline_ms || st->w.done || st->aborted)
            continue;
        if (st->deadline_ms <= now) {
            stream_detach_locked(s, st);
            stream_end_locked(st, RPC_DEADLINE_EXCEEDED, "Connect-Timeout-Ms passed");
            stream_wake_locked(st);
        } else if (st->deadline_ms < due) {
            due = st->deadline_ms;
        }
    }
    s->streams_due_ms = due;
    return due < wake ? due : wake;
}

/* Only the streams whose peer left or sent something are resumed: resuming
 * the others would only suspend them again (libmicrohttpd restarts a
 * connection's idle timeout when it resumes it, and a suspended stream has
 * nothing to send), and with 10,000 watches that was 10,000 resumes a
 * second through the MHD threads that also serve the Confirms. */
void http_streams_poll_locked(http_server *s)
{
    KL__LIST_FOREACH (link, &s->streams) {
        http_stream *st = stream_of(link);
        if (!st->w.suspended || st->aborted)
            continue;
        peer_news news = peer_news_of(st);
        if (news == PEER_LEFT) {
            st->aborted = true;
            stream_detach_locked(s, st);
        }
        if (news != PEER_QUIET)
            stream_wake_locked(st);
    }
}

void http_streams_end_locked(http_server *s)
{
    KL__LIST_FOREACH (link, &s->streams) {
        http_stream *st = stream_of(link);
        if (st->engine_open) {
            st->engine_open = false;
            http_wait_unref(&st->w); /* the engine's: it will never call on_close */
        }
        stream_end_locked(st, RPC_UNAVAILABLE, HTTP_SHUTTING_DOWN);
        stream_wake_locked(st);
    }
}

void http_streams_abort_locked(http_server *s)
{
    KL__LIST_FOREACH (link, &s->streams) {
        http_stream *st = stream_of(link);
        st->aborted = st->aborted || !st->w.done;
        stream_wake_locked(st);
    }
}

int http_streams_drain(http_server *s, int timeout_ms)
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
