/* The acceptor: one thread that takes new connections off a listening
 * socket as fast as they arrive, waits for each one's request head, checks
 * its framing (framing.c) and hands it to a libmicrohttpd daemon
 * (MHD_add_connection). On --listen there are two daemons, the streams'
 * (Campaign, WatchHolder) and the calls' (every other request); on
 * --ops-listen one.
 *
 * Why: a burst of new connections (bench/scale.sh opens 10,000 holder
 * watches at once) must not delay the Confirms that keep leaders in office
 * (docs/design.md, section 2), neither must the streams once they are up,
 * and connections that send nothing must not hold the slots of those that
 * do (the figures behind each point: bench/README.md, "The acceptor").
 * - libmicrohttpd accepts at most 10 connections per pass of a worker's
 *   loop, and a full kernel accept queue (somaxconn) drops handshakes,
 *   which clients retry only after seconds. So the listening socket is
 *   drained here at once (accepting costs microseconds), and it is never
 *   left unwatched.
 * - A connection is handed over only once its whole head is in. Until
 *   then it waits here, watched (epoll, edge-triggered), at most the
 *   first-request timeout (--first-request-timeout-s), and costs a
 *   descriptor and a slot of a ring, no slot of libmicrohttpd's: one that
 *   sent nothing by then is closed, one that sent a piece is answered 408
 *   and closed. At most max_waiting wait at once (for a new one, the oldest
 *   is closed) and at most max_per_ip from one address (more are closed as
 *   they come), so that a flood of idle connections, from one address or
 *   many, keeps each of them waiting a short while and never stops a
 *   client that writes its request from being served.
 * - A head framed ambiguously (bare LF, obs-fold, two Content-Lengths,
 *   Content-Length with Transfer-Encoding) is answered 400 and closed: the
 *   bytes libmicrohttpd would take are seen only here (framing.h).
 * - A worker serves new connections in the same passes as its kept-alive
 *   ones, so a pass over a whole burst handed over at once would serve all
 *   of it before the next Confirm. The workers get one batch at a time:
 *   the next when every connection of the last has started
 *   (MHD_CONNECTION_NOTIFY_STARTED, at the head of a worker's pass), or
 *   after BATCH_WAIT_MS, so that one that never reports cannot stall the
 *   rest. A connection whose request is urgent (its method's row says so:
 *   Confirm, Resign) skips the batches.
 * - A stream stays suspended in libmicrohttpd between its events, and
 *   every pass that resumes any connection walks all the suspended ones of
 *   that worker. Streams and calls are on daemons of their own, so a
 *   Confirm's walk is over the calls in flight, not over the open streams.
 * A kept-alive connection stays on its daemon: a stream's answer closes
 *   its connection (stream.c), and libkubelease opens a fresh one for each
 *   stream; a stream another client asks for on a calls' connection is
 *   served there, as any request would be.
 *
 * Slots: at most max connections are handed over at a time (counted here,
 * until they report closing); the next wait in the ready ring, in order,
 * for one to close. Urgent ones get urgent_room more: a leader confirming
 * its term is never kept waiting for a slot that strangers hold (rpc.c
 * serves its Confirm past --max-connections too). A connection
 * libmicrohttpd fails to set up for want of memory is never reported closed
 * and keeps its slot counted.
 *
 * Threads: its own, which owns the listening socket, the rings and the
 * address table; MHD_add_connection may be called from any thread of a
 * daemon with MHD_USE_ITC, and runs the accept policy (server.c) on this
 * one. http_acceptor_started and http_acceptor_closed run on MHD workers
 * and touch only the atomics and the wake-up pipe. */
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
#include "http/framing.h"
#include "http/internal.h"
#include "http/metrics.h"
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
#define PEER_BUCKETS  256
/* The most of a refused request read before its answer. */
#define DRAIN_MAX 65536

/* The connections waiting here from one address. */
typedef struct apeer {
    struct apeer *next;
    int family;
    uint8_t addr[16];
    unsigned waiting;
} apeer;

/* A connection waiting here. */
typedef struct slot {
    int fd;           /* -1: it left the ring early */
    bool stream;      /* ready: for the streams' daemon */
    int64_t since_ms; /* waiting: when accepted */
    apeer *peer;      /* waiting: its address's count; NULL: not counted */
} slot;

/* A queue of slots, each known by its sequence number (seq: the head's). */
typedef struct ring {
    slot *s;
    size_t cap, head, len;
    uint64_t seq;
} ring;

struct http_acceptor {
    http_acceptor_config cfg;
    unsigned batch;       /* connections per batch */
    atomic_uint open;     /* accepted and not closed yet (here or handed over) */
    atomic_uint handed;   /* handed over and not closed yet */
    atomic_int unstarted; /* of the last batch, not started yet */
    atomic_bool full;     /* ready ones wait for a handed-over one to close */
    atomic_bool quit;
    int wake[2]; /* non-blocking; a byte on wake[1] wakes the thread */
    /* This thread only. waiting: accepted, head not in yet, in ep with
     * their sequence numbers as data (n_waiting of them still there);
     * ready: whole, in the order they came, for the batches. */
    ring waiting, ready;
    size_t n_waiting;
    apeer *peers[PEER_BUCKETS];
    char *head; /* cfg.max_head + 1 bytes: what a connection sent so far */
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

/* True when no slot is free for a connection (urgent: with the room kept
 * for Confirms and Resigns). (The thread sets full before it reads handed,
 * and http_acceptor_closed lowers handed before it reads full: one of them
 * sees the other.) */
static bool at_limit(http_acceptor *a, bool urgent)
{
    unsigned max = a->cfg.max + (urgent ? a->cfg.urgent_room : 0);
    if (atomic_load(&a->handed) < max)
        return false;
    atomic_store(&a->full, true);
    if (atomic_load(&a->handed) < max) {
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

/* ---------- addresses ---------- */

static unsigned peer_hash(const uint8_t addr[16])
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (int i = 0; i < 16; i++)
        h = (h ^ addr[i]) * 16777619u;
    return h % PEER_BUCKETS;
}

/* The count of ss's address, created at zero; NULL when it has none (not
 * IP) or out of memory: then the connection is not counted. */
static apeer *peer_get(http_acceptor *a, const struct sockaddr_storage *ss)
{
    uint8_t addr[16] = {0};
    if (ss->ss_family == AF_INET)
        memcpy(addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    else if (ss->ss_family == AF_INET6)
        memcpy(addr, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    else
        return NULL;
    apeer **head = &a->peers[peer_hash(addr)];
    for (apeer *p = *head; p; p = p->next)
        if (p->family == ss->ss_family && memcmp(p->addr, addr, 16) == 0)
            return p;
    apeer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->family = ss->ss_family;
    memcpy(p->addr, addr, 16);
    p->next = *head;
    *head = p;
    return p;
}

/* Drops one waiting connection of p, and p with its last. */
static void peer_put(http_acceptor *a, apeer *p)
{
    if (!p || --p->waiting > 0)
        return;
    for (apeer **pp = &a->peers[peer_hash(p->addr)]; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    free(p);
}

static void peers_free(http_acceptor *a)
{
    for (unsigned b = 0; b < PEER_BUCKETS; b++) {
        for (apeer *p = a->peers[b], *next; p; p = next) {
            next = p->next;
            free(p);
        }
        a->peers[b] = NULL;
    }
}

/* ---------- what a connection sent ---------- */

/* A connection closed here, never handed over; reason counts it
 * (kubelease_http_connections_dropped_total), NULL: not counted. */
static void drop(http_acceptor *a, int fd, const char *reason)
{
    if (reason)
        http_metrics_connection_dropped(a->cfg.name, reason);
    close(fd);
    atomic_fetch_sub(&a->open, 1);
}

/* Answers status with text and closes fd. What it sent is read first (up
 * to DRAIN_MAX, so that a peer that keeps sending cannot hold this thread),
 * so that the close does not reset the connection before the answer is
 * read. Best effort: the socket is non-blocking and a full one gets
 * nothing. */
static void answer(http_acceptor *a, int fd, int status, const char *phrase, const char *text,
                   const char *reason)
{
    char drain[4096];
    for (size_t n = 0; n < DRAIN_MAX && recv(fd, drain, sizeof drain, MSG_DONTWAIT) > 0;)
        n += sizeof drain;
    char msg[512];
    int n = snprintf(msg, sizeof msg,
                     "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: text/plain; "
                     "charset=utf-8\r\nContent-Length: %zu\r\n\r\n%s\n",
                     status, phrase, strlen(text) + 1, text);
    if (n > 0 && (size_t)n < sizeof msg) {
        ssize_t w = send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)w;
    }
    shutdown(fd, SHUT_WR);
    drop(a, fd, reason);
}

/* Where a connection stands. NONE: nothing in yet. PARTIAL: a piece of a
 * head. GONE: closed before a byte, or failed. BAD: a head framed
 * ambiguously (why says how). URGENT: a Confirm or a Resign, a leader
 * keeping or ending its term, which must not wait behind a storm of new
 * streams. STREAM: a Campaign or a WatchHolder. CALL: anything else
 * (also a head longer than max_head, which libmicrohttpd answers 431). */
typedef enum first_bytes {
    FIRST_NONE,
    FIRST_PARTIAL,
    FIRST_GONE,
    FIRST_BAD,
    FIRST_URGENT,
    FIRST_STREAM,
    FIRST_CALL
} first_bytes;

/* The class of a whole head by its request line. */
static first_bytes request_class(const http_acceptor *a, const char *line, size_t len)
{
    static const char post[] = "POST ", prefix[] = "POST " RPC_SERVICE_PREFIX;
    size_t plen = sizeof prefix - 1;
    if (!a->cfg.classify || len <= plen || strncmp(line, prefix, plen) != 0)
        return FIRST_CALL;
    const char *end = memchr(line + plen, ' ', len - plen > 40 ? 40 : len - plen);
    if (!end)
        return FIRST_CALL;
    char path[sizeof prefix + 40];
    size_t n = (size_t)(end - line) - (sizeof post - 1);
    memcpy(path, line + sizeof post - 1, n);
    path[n] = '\0';
    const rpc_method *m = rpc_method_find(path);
    if (!m)
        return FIRST_CALL;
    if (m->urgent)
        return FIRST_URGENT;
    return m->server_stream ? FIRST_STREAM : FIRST_CALL;
}

static first_bytes first_request(http_acceptor *a, int fd, char *why, size_t why_len)
{
    ssize_t n = recv(fd, a->head, a->cfg.max_head + 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return FIRST_NONE;
    if (n <= 0)
        return FIRST_GONE;
    size_t head_len;
    switch (http_head_check(a->head, (size_t)n, &head_len, why, why_len)) {
    case HTTP_HEAD_BAD:
        return FIRST_BAD;
    case HTTP_HEAD_INCOMPLETE:
        if ((size_t)n <= a->cfg.max_head)
            return FIRST_PARTIAL;
        return request_class(a, a->head, (size_t)n); /* too long: 431 there */
    case HTTP_HEAD_OK:
        break;
    }
    return request_class(a, a->head, head_len);
}

/* ---------- handing over ---------- */

/* Hands fd over to d; false when libmicrohttpd refused it (refused by the
 * accept policy, out of memory: it closed the socket and reports nothing). */
static bool add_connection(http_acceptor *a, struct MHD_Daemon *d, int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) {
        drop(a, fd, NULL); /* gone already */
        return false;
    }
    atomic_fetch_add(&a->handed, 1);
    if (MHD_add_connection(d, fd, (struct sockaddr *)&ss, len) != MHD_YES) {
        http_acceptor_closed(a);
        return false;
    }
    return true;
}

/* The oldest connection queued here is closed for a new one: one still
 * waiting for its head first (it has asked for nothing), else the oldest
 * ready one, answered 503. */
static void evict_oldest(http_acceptor *a)
{
    while (a->waiting.len) {
        slot w = ring_pop(&a->waiting);
        if (w.fd < 0)
            continue;
        epoll_ctl(a->ep, EPOLL_CTL_DEL, w.fd, NULL);
        a->n_waiting--;
        peer_put(a, w.peer);
        drop(a, w.fd, "evicted");
        return;
    }
    if (a->ready.len) {
        slot r = ring_pop(&a->ready);
        answer(a, r.fd, 503, "Service Unavailable",
               "kubeleased has every connection slot in use: retry later or on another replica",
               "evicted");
    }
}

/* w leaves the waiting: unwatched and uncounted (its slot in the ring
 * stays, marked gone, when it is not the head). Returns its socket. */
static int unwait(http_acceptor *a, slot *w)
{
    int fd = w->fd;
    epoll_ctl(a->ep, EPOLL_CTL_DEL, fd, NULL);
    peer_put(a, w->peer);
    a->n_waiting--;
    w->fd = -1;
    return fd;
}

/* The oldest connection waiting from p's address is closed for a new one
 * from there: one address floods only its own connections, and the newest
 * (a leader's Confirm behind the same node address, about to write) waits. */
static void evict_oldest_of(http_acceptor *a, const apeer *p)
{
    for (size_t i = 0; i < a->waiting.len; i++) {
        slot *w = &a->waiting.s[(a->waiting.head + i) % a->waiting.cap];
        if (w->fd >= 0 && w->peer == p) {
            drop(a, unwait(a, w), "per_ip");
            return;
        }
    }
}

/* A connection whose head is whole: urgent, to the calls' daemon at once
 * when the room kept for it has a slot; else ready for the next batches. */
static void classed(http_acceptor *a, int fd, first_bytes fb, const char *why)
{
    char msg[160];
    switch (fb) {
    case FIRST_GONE:
        drop(a, fd, NULL);
        return;
    case FIRST_BAD:
        snprintf(msg, sizeof msg, "ambiguous request framing: %s", why);
        answer(a, fd, 400, "Bad Request", msg, "framing");
        return;
    case FIRST_URGENT:
        if (!at_limit(a, true)) {
            add_connection(a, a->cfg.calls, fd); /* outside the batches */
            return;
        }
        break;
    default:
        break;
    }
    if (a->n_waiting + a->ready.len >= a->cfg.max_waiting)
        evict_oldest(a);
    if (!ring_push(&a->ready, (slot){.fd = fd, .stream = fb == FIRST_STREAM}))
        drop(a, fd, "out_of_memory");
}

/* A connection just accepted from ss: classed when its head is in, else
 * waiting for it. */
static void take(http_acceptor *a, int fd, const struct sockaddr_storage *ss, int64_t now)
{
    char why[128];
    first_bytes fb = first_request(a, fd, why, sizeof why);
    if (fb != FIRST_NONE && fb != FIRST_PARTIAL) {
        classed(a, fd, fb, why);
        return;
    }
    /* Room first: the oldest may be the only one waiting from this
     * address, whose record its eviction frees. */
    if (a->n_waiting + a->ready.len >= a->cfg.max_waiting)
        evict_oldest(a);
    apeer *p = peer_get(a, ss);
    if (p) {
        p->waiting++; /* counted first: the eviction below cannot free p */
        if (a->cfg.max_per_ip && p->waiting > a->cfg.max_per_ip)
            evict_oldest_of(a, p);
    }
    /* Watched under the number it gets at the tail of the ring. */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET,
                             .data.u64 = a->waiting.seq + a->waiting.len};
    if (epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev) != 0 ||
        !ring_push(&a->waiting, (slot){.fd = fd, .since_ms = now, .peer = p})) {
        epoll_ctl(a->ep, EPOLL_CTL_DEL, fd, NULL);
        peer_put(a, p);
        drop(a, fd, "out_of_memory");
        return;
    }
    a->n_waiting++;
}

/* Classes the waiting connections whose head came in, and closes those
 * that waited the first-request timeout (408 if they sent a piece);
 * returns when the oldest left is due (-1: none). */
static int64_t waiting_sweep(http_acceptor *a, int64_t now)
{
    struct epoll_event evs[64];
    char why[128];
    int n;
    while ((n = epoll_wait(a->ep, evs, 64, 0)) > 0) {
        for (int i = 0; i < n; i++) {
            slot *w = ring_at(&a->waiting, evs[i].data.u64);
            if (!w || w->fd < 0)
                continue;
            first_bytes fb = first_request(a, w->fd, why, sizeof why);
            bool hup = evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR);
            if (hup && (fb == FIRST_NONE || fb == FIRST_PARTIAL)) {
                drop(a, unwait(a, w), NULL); /* it left before its head was whole */
                continue;
            }
            if (fb == FIRST_NONE || fb == FIRST_PARTIAL)
                continue; /* edge-triggered: woken again by the next bytes */
            classed(a, unwait(a, w), fb, why);
        }
        if (n < 64)
            break;
    }
    int64_t timeout = a->cfg.first_timeout_ms;
    while (a->waiting.len) {
        const slot *h = &a->waiting.s[a->waiting.head];
        if (h->fd >= 0 && now < h->since_ms + timeout)
            return h->since_ms + timeout;
        slot w = ring_pop(&a->waiting);
        if (w.fd < 0)
            continue;
        first_bytes fb = first_request(a, w.fd, why, sizeof why);
        int fd = unwait(a, &w);
        if (fb == FIRST_NONE)
            drop(a, fd, "idle");
        else if (fb == FIRST_PARTIAL)
            answer(a, fd, 408, "Request Timeout",
                   "the request head did not arrive within --first-request-timeout-s", "idle");
        else
            classed(a, fd, fb, why);
    }
    return -1;
}

typedef enum accept_wait { WAIT_SOCKET, WAIT_PAUSE } accept_wait;

/* Takes every connection waiting in the kernel; says what to wait for
 * next. */
static accept_wait accept_all(http_acceptor *a)
{
    int64_t now = http_now_ms();
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd =
            accept4(a->cfg.listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            atomic_fetch_add(&a->open, 1);
            take(a, fd, &ss, now);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return WAIT_SOCKET;
        log_event(LOG_WARN, "accept_failed", "listener=%s error=%s", a->cfg.name,
                  log_q(strerror(errno)));
        return WAIT_PAUSE;
    }
}

/* Hands the next batch over, as far as slots are free; urgent ones found
 * on the way go at once, with their room. */
static void hand_over(http_acceptor *a)
{
    int n = 0;
    atomic_store(&a->unstarted, 0);
    while (a->ready.len && n < (int)a->batch && !at_limit(a, false)) {
        slot r = ring_pop(&a->ready);
        atomic_fetch_add(&a->unstarted, 1);
        if (add_connection(a, r.stream ? a->cfg.streams : a->cfg.calls, r.fd))
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
        bool free_slot = a->ready.len && !at_limit(a, false);
        if (free_slot && (atomic_load(&a->unstarted) <= 0 || now >= batch_at + BATCH_WAIT_MS)) {
            hand_over(a);
            batch_at = now;
        }
        free_slot = a->ready.len && !at_limit(a, false);
        int timeout = w == WAIT_PAUSE ? ACCEPT_PAUSE_MS : -1;
        if (free_slot && atomic_load(&a->unstarted) <= 0)
            timeout = 0; /* the whole batch failed at once: the next */
        else if (free_slot)
            timeout = sooner(timeout, batch_at + BATCH_WAIT_MS, now);
        timeout = sooner(timeout, first_due, now);
        struct pollfd fds[3] = {{.fd = a->wake[0], .events = POLLIN},
                                {.fd = a->ep, .events = POLLIN},
                                {.fd = a->cfg.listen_fd, .events = POLLIN}};
        /* Paused, the listening socket is not watched. */
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

http_acceptor *http_acceptor_new(const http_acceptor_config *cfg)
{
    http_acceptor *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->cfg = *cfg;
    a->cfg.listen_fd = -1;
    a->wake[0] = a->wake[1] = -1;
    a->batch = (cfg->threads ? cfg->threads : 1) * BATCH_PER_THREAD;
    a->ep = epoll_create1(EPOLL_CLOEXEC);
    a->head = malloc(cfg->max_head + 1);
    if (a->ep < 0 || !a->head || pipe2(a->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        http_acceptor_free(a);
        return NULL;
    }
    a->cfg.listen_fd = cfg->listen_fd;
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
    atomic_fetch_sub(&a->handed, 1);
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
    close(a->cfg.listen_fd);
    a->cfg.listen_fd = -1;
    ring_close_all(&a->waiting);
    ring_close_all(&a->ready);
}

void http_acceptor_free(http_acceptor *a)
{
    if (!a)
        return;
    http_acceptor_stop(a);
    if (a->wake[0] >= 0) {
        close(a->wake[0]);
        close(a->wake[1]);
    }
    if (a->ep >= 0)
        close(a->ep);
    if (a->cfg.listen_fd >= 0)
        close(a->cfg.listen_fd);
    ring_close_all(&a->waiting);
    ring_close_all(&a->ready);
    peers_free(a);
    free(a->head);
    free(a);
}
