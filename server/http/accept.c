/* The acceptor: one thread that takes new connections off the listening
 * socket as fast as they arrive, waits for each one's first request line,
 * and hands it to one of two libmicrohttpd daemons (MHD_add_connection):
 * the streams' (Campaign, WatchHolder) or the calls' (every other request).
 *
 * Why: a connection storm (10,000 holder watches at once, bench/scale.sh)
 * must not delay the Confirms that keep leaders in office (docs/design.md,
 * section 2), and neither must the streams once they are up.
 * - libmicrohttpd accepts at most 10 connections per pass of a worker's
 *   loop: under a storm the kernel's accept queue (somaxconn) filled and
 *   the kernel dropped handshakes, which clients retry only after 1 s, then
 *   3 s. So the listening socket is drained here at once (accepting costs
 *   microseconds).
 * - A worker serves new connections in the same passes as its kept-alive
 *   ones, and handing the whole storm over at once made every pass serve
 *   thousands of them. So the workers get one batch at a time: the next
 *   when every connection of the last has started
 *   (MHD_CONNECTION_NOTIFY_STARTED, at the head of a worker's pass), or
 *   after BATCH_WAIT_MS, so that one that never reports cannot stall the
 *   rest. A connection whose first request is a Confirm or a Resign skips
 *   the batches.
 * - A stream stays suspended in libmicrohttpd between its events, and
 *   every pass that resumes any connection walks all the suspended ones of
 *   that worker: with 10,000 streams, each Confirm answered cost a walk of
 *   thousands. On daemons of their own, a Confirm's walk is over the calls
 *   in flight.
 * A client library opens its connection and writes its request some passes
 *   of its loop later, so a connection is classed only once its first bytes
 *   are in: until then it waits here, watched (epoll, one shot), at most
 *   FIRST_WAIT_MS, however many wait before it (under a storm, a Confirm's
 *   connection is accepted behind thousands). Its class is read from the
 *   request line, which is why server.c uses the acceptor only without TLS.
 * A kept-alive connection stays on its daemon: a stream's answer closes
 *   its connection (stream.c), and libkubelease opens a fresh one for each
 *   stream; a stream another client asks for on a calls' connection is
 *   served there, as any request would be.
 *
 * It stops accepting at libmicrohttpd's connection limit, counting the
 * connections itself (those waiting here, and those handed over until they
 * close): the kernel then keeps the next ones waiting, as with
 * libmicrohttpd's own accepting, rather than libmicrohttpd closing them. A
 * connection libmicrohttpd fails to set up for want of memory is never
 * reported closed and keeps its slot counted.
 *
 * Threads: its own, which owns the listening socket and the rings;
 * MHD_add_connection may be called from any thread of a daemon with
 * MHD_USE_ITC, and runs the accept policy (server.c) on this one.
 * http_acceptor_started and http_acceptor_closed run on MHD workers and
 * touch only the atomics and the wake-up pipe. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/log.h"
#include "http/internal.h"
#include "rpc/route.h"

/* After accept fails for want of descriptors or memory, the pause before
 * the next try (the socket stays readable: without it the thread would
 * spin). */
#define ACCEPT_PAUSE_MS 100
/* Connections per batch for each worker: libmicrohttpd's own accepting
 * took 10 per pass. */
#define BATCH_PER_THREAD 8
/* The longest wait for a batch to start before the next is handed over. */
#define BATCH_WAIT_MS 50
/* The longest a connection waits for its first request line; then it is
 * classed by what came in (nothing or a piece: the calls' daemon, whose
 * read deadline deals with it). */
#define FIRST_WAIT_MS 1000

/* A connection waiting here. */
typedef struct slot {
    int fd;           /* -1: it left early */
    bool stream;      /* ready: for the streams' daemon */
    int64_t since_ms; /* waiting: when accepted */
} slot;

/* A queue of slots, each known by its sequence number (seq: the head's). */
typedef struct ring {
    slot *s;
    size_t cap, head, len;
    uint64_t seq;
} ring;

struct http_acceptor {
    int fd;      /* the listening socket */
    int wake[2]; /* non-blocking; a byte on wake[1] wakes the thread */
    struct MHD_Daemon *calls, *streams;
    unsigned max;         /* libmicrohttpd's connection limit */
    unsigned batch;       /* connections per batch */
    atomic_uint open;     /* accepted and not closed yet (here or handed over) */
    atomic_int unstarted; /* of the last batch, not started yet */
    atomic_bool full;     /* the thread waits for a connection to close */
    atomic_bool quit;
    /* This thread only. waiting: accepted, first bytes not in yet, in
     * ep with their sequence numbers as data; ready: classed, in the order
     * they came, for the batches. */
    ring waiting, ready;
    int ep;
    pthread_t thread;
    bool started;
};

int http_listen_socket(const struct sockaddr *sa, socklen_t len, char *err, size_t err_len)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        goto fail;
    int on = 1;
    /* As libmicrohttpd's own socket: a restart binds at once, and an IPv6
     * address listens on IPv6 only. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (sa->sa_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
    if (bind(fd, sa, len) != 0 || listen(fd, SOMAXCONN) != 0)
        goto fail;
    return fd;
fail:
    snprintf(err, err_len, "%s", strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

static void wake(http_acceptor *a)
{
    ssize_t n = write(a->wake[1], "w", 1);
    (void)n; /* a full pipe wakes the thread all the same */
}

/* At the limit nothing more is accepted. Returns true when full. (The
 * thread sets full before it reads open, and http_acceptor_closed lowers
 * open before it reads full: one of them sees the other.) */
static bool at_limit(http_acceptor *a)
{
    if (atomic_load(&a->open) < a->max)
        return false;
    atomic_store(&a->full, true);
    if (atomic_load(&a->open) < a->max) {
        atomic_store(&a->full, false);
        return false;
    }
    return true;
}

static bool ring_push(ring *r, slot v)
{
    if (r->len == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 256;
        slot *n = malloc(cap * sizeof *n);
        if (!n)
            return false;
        for (size_t i = 0; i < r->len; i++)
            n[i] = r->s[(r->head + i) % r->cap];
        free(r->s);
        r->s = n;
        r->cap = cap;
        r->head = 0;
    }
    r->s[(r->head + r->len++) % r->cap] = v;
    return true;
}

static slot ring_pop(ring *r)
{
    slot v = r->s[r->head];
    r->head = (r->head + 1) % r->cap;
    r->len--;
    r->seq++;
    return v;
}

/* The slot numbered seq; NULL when it was popped. */
static slot *ring_at(ring *r, uint64_t seq)
{
    if (seq < r->seq || seq - r->seq >= r->len)
        return NULL;
    return &r->s[(r->head + (size_t)(seq - r->seq)) % r->cap];
}

static void ring_close_all(ring *r)
{
    while (r->len) {
        slot v = ring_pop(r);
        if (v.fd >= 0)
            close(v.fd);
    }
    free(r->s);
    r->s = NULL;
    r->cap = 0;
}

/* Hands fd over to d; false when libmicrohttpd refused it (over the
 * per-address limit, refused by the accept policy: it closed the socket and
 * reports nothing). */
static bool add_connection(http_acceptor *a, struct MHD_Daemon *d, int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) {
        close(fd); /* gone already */
        http_acceptor_closed(a);
        return false;
    }
    if (MHD_add_connection(d, fd, (struct sockaddr *)&ss, len) != MHD_YES) {
        http_acceptor_closed(a);
        return false;
    }
    return true;
}

/* A connection given up here: out of memory for its slot. */
static void drop(http_acceptor *a, int fd)
{
    log_event(LOG_WARN, "accept_failed", "error=%s", log_q("out of memory"));
    close(fd);
    http_acceptor_closed(a);
}

/* What came in first on a connection. URGENT: a Confirm or a Resign, a
 * leader keeping or ending its term, which must not wait behind a storm of
 * new streams. STREAM: a Campaign or a WatchHolder. CALL: anything else,
 * or nothing (closed, failed: libmicrohttpd closes it). NONE: nothing yet,
 * or too little of the request line to tell. */
typedef enum first_bytes { FIRST_NONE, FIRST_URGENT, FIRST_STREAM, FIRST_CALL } first_bytes;

static first_bytes first_request(int fd)
{
    static const char post[] = "POST ", prefix[] = "POST " RPC_SERVICE_PREFIX;
    char line[sizeof prefix + 32]; /* the longest method name, and a space */
    ssize_t n = recv(fd, line, sizeof line - 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return FIRST_NONE;
    if (n <= 0)
        return FIRST_CALL;
    line[n] = '\0';
    size_t len = (size_t)n, plen = sizeof prefix - 1;
    if (strncmp(line, prefix, len < plen ? len : plen) != 0)
        return FIRST_CALL;
    char *end = len > plen ? memchr(line + plen, ' ', len - plen) : NULL;
    if (!end)
        return len < sizeof line - 1 ? FIRST_NONE : FIRST_CALL;
    *end = '\0';
    const rpc_method *m = rpc_method_find(line + sizeof post - 1); /* the path */
    if (!m)
        return FIRST_CALL;
    if (m->id == RPC_METHOD_CONFIRM || m->id == RPC_METHOD_RESIGN)
        return FIRST_URGENT;
    return m->server_stream ? FIRST_STREAM : FIRST_CALL;
}

/* A connection whose first bytes are in (or that waited long enough):
 * urgent, to the calls' daemon at once; else ready for the next batches. */
static void classed(http_acceptor *a, int fd, first_bytes fb)
{
    if (fb == FIRST_URGENT)
        add_connection(a, a->calls, fd); /* outside the batches */
    else if (!ring_push(&a->ready, (slot){.fd = fd, .stream = fb == FIRST_STREAM}))
        drop(a, fd);
}

/* A connection just accepted: classed when its first bytes are in, else
 * waiting for them. */
static bool take(http_acceptor *a, int fd, int64_t now)
{
    first_bytes fb = first_request(fd);
    if (fb != FIRST_NONE) {
        classed(a, fd, fb);
        return true;
    }
    /* Watched under the number it gets at the tail of the ring. */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
                             .data.u64 = a->waiting.seq + a->waiting.len};
    if (epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        classed(a, fd, FIRST_CALL); /* unwatched: it waits in its turn */
        return true;
    }
    if (!ring_push(&a->waiting, (slot){.fd = fd, .since_ms = now})) {
        epoll_ctl(a->ep, EPOLL_CTL_DEL, fd, NULL);
        drop(a, fd);
        return false;
    }
    return true;
}

/* Classes the waiting connections whose request line came in, and those
 * that waited FIRST_WAIT_MS (as far as their bytes tell; a request line
 * still in pieces goes to the calls' daemon: watching it again would wake
 * this thread at once for the bytes already in); returns when the oldest
 * left is due (-1: none). */
static int64_t waiting_sweep(http_acceptor *a, int64_t now)
{
    struct epoll_event evs[64];
    int n;
    while ((n = epoll_wait(a->ep, evs, 64, 0)) > 0) {
        for (int i = 0; i < n; i++) {
            slot *w = ring_at(&a->waiting, evs[i].data.u64);
            if (!w || w->fd < 0)
                continue;
            first_bytes fb = first_request(w->fd);
            if (fb == FIRST_NONE)
                continue; /* a piece of a request line: classed when due */
            epoll_ctl(a->ep, EPOLL_CTL_DEL, w->fd, NULL);
            classed(a, w->fd, fb);
            w->fd = -1;
        }
        if (n < 64)
            break;
    }
    while (a->waiting.len) {
        slot *h = &a->waiting.s[a->waiting.head];
        if (h->fd >= 0 && now < h->since_ms + FIRST_WAIT_MS)
            return h->since_ms + FIRST_WAIT_MS;
        slot w = ring_pop(&a->waiting);
        if (w.fd >= 0) {
            epoll_ctl(a->ep, EPOLL_CTL_DEL, w.fd, NULL);
            first_bytes fb = first_request(w.fd);
            classed(a, w.fd, fb == FIRST_NONE ? FIRST_CALL : fb);
        }
    }
    return -1;
}

typedef enum accept_wait { WAIT_SOCKET, WAIT_PAUSE, WAIT_CLOSE } accept_wait;

/* Takes every connection waiting in the kernel, up to the limit; says what
 * to wait for next. */
static accept_wait accept_all(http_acceptor *a)
{
    int64_t now = http_now_ms();
    for (;;) {
        if (at_limit(a))
            return WAIT_CLOSE;
        int fd = accept4(a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            atomic_fetch_add(&a->open, 1);
            if (!take(a, fd, now))
                return WAIT_PAUSE;
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return WAIT_SOCKET;
        log_event(LOG_WARN, "accept_failed", "error=%s", log_q(strerror(errno)));
        return WAIT_PAUSE;
    }
}

/* Hands the next batch over. */
static void hand_over(http_acceptor *a)
{
    int n = 0;
    atomic_store(&a->unstarted, 0);
    while (a->ready.len && n < (int)a->batch) {
        slot r = ring_pop(&a->ready);
        atomic_fetch_add(&a->unstarted, 1);
        if (add_connection(a, r.stream ? a->streams : a->calls, r.fd))
            n++;
        else
            atomic_fetch_sub(&a->unstarted, 1);
    }
}

/* Timeout for poll: the sooner of t and due (-1: none), at least 1 ms. */
static int sooner(int t, int64_t due, int64_t now)
{
    if (due < 0)
        return t;
    int64_t left = due - now;
    return left < 1 ? 1 : t < 0 || left < t ? (int)left : t;
}

static void *acceptor_main(void *arg)
{
    http_acceptor *a = arg;
    accept_wait w = WAIT_SOCKET;
    int64_t batch_at = 0; /* when the last batch was handed over */
    while (!atomic_load(&a->quit)) {
        int64_t now = http_now_ms();
        int64_t first_due = waiting_sweep(a, now);
        if (a->ready.len && (atomic_load(&a->unstarted) <= 0 || now >= batch_at + BATCH_WAIT_MS)) {
            hand_over(a);
            batch_at = now;
        }
        int timeout = w == WAIT_PAUSE ? ACCEPT_PAUSE_MS : -1;
        if (a->ready.len && atomic_load(&a->unstarted) <= 0)
            timeout = 0; /* the whole batch failed at once: the next */
        else if (a->ready.len)
            timeout = sooner(timeout, batch_at + BATCH_WAIT_MS, now);
        timeout = sooner(timeout, first_due, now);
        struct pollfd fds[3] = {{.fd = a->wake[0], .events = POLLIN},
                                {.fd = a->ep, .events = POLLIN},
                                {.fd = a->fd, .events = POLLIN}};
        /* Paused or full, the listening socket is not watched. */
        if (poll(fds, w == WAIT_SOCKET ? 3 : 2, timeout) < 0 && errno != EINTR)
            break;
        char drain[64];
        while (read(a->wake[0], drain, sizeof drain) > 0)
            ;
        atomic_store(&a->full, false);
        w = accept_all(a);
    }
    return NULL;
}

http_acceptor *http_acceptor_new(struct MHD_Daemon *calls, struct MHD_Daemon *streams,
                                 int listen_fd, unsigned max, unsigned threads)
{
    http_acceptor *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->fd = -1;
    a->calls = calls;
    a->streams = streams;
    a->max = max;
    a->batch = (threads ? threads : 1) * BATCH_PER_THREAD;
    a->ep = epoll_create1(EPOLL_CLOEXEC);
    if (a->ep < 0) {
        free(a);
        return NULL;
    }
    if (pipe2(a->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        close(a->ep);
        free(a);
        return NULL;
    }
    a->fd = listen_fd;
    return a;
}

int http_acceptor_run(http_acceptor *a)
{
    if (pthread_create(&a->thread, NULL, acceptor_main, a) != 0)
        return -1;
    a->started = true;
    return 0;
}

void http_acceptor_started(http_acceptor *a)
{
    if (atomic_fetch_sub(&a->unstarted, 1) == 1)
        wake(a); /* the batch is in: the next one */
}

void http_acceptor_closed(http_acceptor *a)
{
    atomic_fetch_sub(&a->open, 1);
    if (atomic_load(&a->full))
        wake(a);
}

unsigned http_acceptor_open(http_acceptor *a)
{
    return atomic_load(&a->open);
}

void http_acceptor_stop(http_acceptor *a)
{
    if (!a || !a->started)
        return;
    atomic_store(&a->quit, true);
    wake(a);
    pthread_join(a->thread, NULL);
    a->started = false;
    close(a->fd);
    a->fd = -1;
    ring_close_all(&a->waiting);
    ring_close_all(&a->ready);
}

void http_acceptor_free(http_acceptor *a)
{
    if (!a)
        return;
    http_acceptor_stop(a);
    close(a->wake[0]);
    close(a->wake[1]);
    close(a->ep);
    if (a->fd >= 0)
        close(a->fd);
    ring_close_all(&a->waiting);
    ring_close_all(&a->ready);
    free(a);
}
