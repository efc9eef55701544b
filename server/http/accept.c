/* The acceptor: one thread that takes new connections off the listening
 * socket as fast as they arrive and hands them to libmicrohttpd
 * (MHD_add_connection) a batch at a time, as its worker threads take them
 * up.
 *
 * Why: a connection storm (10,000 holder watches at once, bench/scale.sh)
 * must not delay the Confirms that keep leaders in office (docs/design.md,
 * section 2). libmicrohttpd's workers serve the new connections in the
 * same passes of their event loops as the kept-alive ones that carry
 * Confirms, and they accept at most 10 connections per pass themselves:
 * under a storm the kernel's accept queue (somaxconn) filled and the kernel
 * dropped handshakes, which clients retry only after 1 s, then 3 s (a
 * library opens a connection for a Confirm when its kept-alive ones are
 * busy). Handing the whole storm over at once instead made every pass
 * serve thousands of new connections, and Confirms waited seconds for the
 * workers to read them. So the queue is drained here at once (accepting
 * costs microseconds), into a queue of our own, and the workers get one
 * batch at a time: the next when every connection of the last has started
 * (MHD_CONNECTION_NOTIFY_STARTED, at the head of a worker's pass), or after
 * BATCH_WAIT_MS, so that one that never reports cannot stall the rest.
 * A connection whose first request is a Confirm or a Resign skips the
 * queue, whenever that request comes in: every queued connection is
 * watched (epoll, one shot) until its first bytes are in, and read from the
 * request line, which is why server.c uses the acceptor only without TLS.
 * (A library opens its connection and writes the request some passes of its
 * loop later: under a storm, a Confirm's connection is accepted and queued
 * behind thousands before a byte of it can be read.)
 *
 * It stops accepting at libmicrohttpd's connection limit, counting the
 * connections itself (those queued here, and those handed over until they
 * close): the kernel then keeps the next ones waiting, as with
 * libmicrohttpd's own accepting, rather than libmicrohttpd closing them. A
 * connection libmicrohttpd fails to set up for want of memory is never
 * reported closed and keeps its slot counted.
 *
 * Threads: its own, which owns the listening socket and the queue;
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
struct http_acceptor {
    int fd;      /* the listening socket */
    int wake[2]; /* non-blocking; a byte on wake[1] wakes the thread */
    struct MHD_Daemon *daemon;
    unsigned max;         /* libmicrohttpd's connection limit */
    unsigned batch;       /* connections per batch */
    bool tls;             /* requests cannot be read here */
    atomic_uint open;     /* accepted and not closed yet (queued or handed over) */
    atomic_int unstarted; /* of the last batch, not started yet */
    atomic_bool full;     /* the thread waits for a connection to close */
    atomic_bool quit;
    /* The queue (this thread only): a ring of accepted sockets, -1 where
     * one left it early (urgent). Each is in ep until it leaves, its
     * sequence number (q_seq for the head) as its data. */
    int *q;
    size_t q_cap, q_head, q_len;
    uint64_t q_seq;
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

/* Appends fd, watched for its first bytes. */
static bool queue_push(http_acceptor *a, int fd)
{
    if (a->q_len == a->q_cap) {
        size_t cap = a->q_cap ? a->q_cap * 2 : 256;
        int *q = malloc(cap * sizeof *q);
        if (!q)
            return false;
        for (size_t i = 0; i < a->q_len; i++)
            q[i] = a->q[(a->q_head + i) % a->q_cap];
        free(a->q);
        a->q = q;
        a->q_cap = cap;
        a->q_head = 0;
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
                             .data.u64 = a->q_seq + a->q_len};
    if (epoll_ctl(a->ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        return false;
    a->q[(a->q_head + a->q_len++) % a->q_cap] = fd;
    return true;
}

/* The socket at the head, out of ep; -1 where one left early. */
static int queue_pop(http_acceptor *a)
{
    int fd = a->q[a->q_head];
    a->q_head = (a->q_head + 1) % a->q_cap;
    a->q_len--;
    a->q_seq++;
    if (fd >= 0)
        epoll_ctl(a->ep, EPOLL_CTL_DEL, fd, NULL);
    return fd;
}

/* The slot of the queued socket numbered seq; NULL when it left. */
static int *queue_at(http_acceptor *a, uint64_t seq)
{
    if (seq < a->q_seq || seq - a->q_seq >= a->q_len)
        return NULL;
    return &a->q[(a->q_head + (size_t)(seq - a->q_seq)) % a->q_cap];
}

/* Hands fd over; false when libmicrohttpd refused it (over the
 * per-address limit, refused by the accept policy: it closed the socket and
 * reports nothing). */
static bool add_connection(http_acceptor *a, int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) {
        close(fd); /* gone already */
        http_acceptor_closed(a);
        return false;
    }
    if (MHD_add_connection(a->daemon, fd, (struct sockaddr *)&ss, len) != MHD_YES) {
        http_acceptor_closed(a);
        return false;
    }
    return true;
}

typedef enum first_bytes { FIRST_NONE, FIRST_URGENT, FIRST_OTHER } first_bytes;

/* What came in first on fd. Urgent: a Confirm or a Resign, a leader
 * keeping or ending its term, which must not wait behind a storm of new
 * streams. Told from the request line (the acceptor serves no TLS). */
static first_bytes first_request(int fd)
{
    static const char confirm[] = "POST " RPC_SERVICE_PREFIX "Confirm ";
    static const char resign[] = "POST " RPC_SERVICE_PREFIX "Resign ";
    char line[sizeof confirm];
    ssize_t n = recv(fd, line, sizeof line - 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return FIRST_NONE;
    if (n <= 0)
        return FIRST_OTHER; /* closed or failed: libmicrohttpd closes it */
    line[n] = '\0';
    if (strncmp(line, confirm, sizeof confirm - 1) == 0 ||
        strncmp(line, resign, sizeof resign - 1) == 0)
        return FIRST_URGENT;
    return (size_t)n < sizeof confirm - 1 &&
                   (strncmp(line, confirm, (size_t)n) == 0 || strncmp(line, resign, (size_t)n) == 0)
               ? FIRST_NONE /* a prefix of one: more is coming */
               : FIRST_OTHER;
}

static bool enqueue(http_acceptor *a, int fd)
{
    if (queue_push(a, fd))
        return true;
    log_event(LOG_WARN, "accept_failed", "error=%s",
              log_q(errno ? strerror(errno) : "out of memory"));
    close(fd);
    http_acceptor_closed(a);
    return false;
}

/* Where a connection just accepted goes: to libmicrohttpd at once when
 * urgent, else into the queue. */
static bool place(http_acceptor *a, int fd)
{
    if (first_request(fd) == FIRST_URGENT) {
        add_connection(a, fd); /* outside the batches */
        return true;
    }
    return enqueue(a, fd);
}

/* Hands over at once the queued connections whose first request came in
 * and is urgent; those still waiting for their first bytes stay watched. */
static void urgent_sweep(http_acceptor *a)
{
    struct epoll_event evs[64];
    int n;
    while ((n = epoll_wait(a->ep, evs, 64, 0)) > 0) {
        for (int i = 0; i < n; i++) {
            int *slot = queue_at(a, evs[i].data.u64);
            if (!slot || *slot < 0)
                continue;
            first_bytes fb = first_request(*slot);
            if (fb == FIRST_URGENT) {
                epoll_ctl(a->ep, EPOLL_CTL_DEL, *slot, NULL);
                add_connection(a, *slot);
                *slot = -1;
            } else if (fb == FIRST_NONE) {
                /* A prefix of one: watched again. */
                struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
                                         .data.u64 = evs[i].data.u64};
                epoll_ctl(a->ep, EPOLL_CTL_MOD, *slot, &ev);
            }
        }
        if (n < 64)
            break;
    }
}

typedef enum accept_wait { WAIT_SOCKET, WAIT_PAUSE, WAIT_CLOSE } accept_wait;

/* Queues every connection waiting, up to the limit; says what to wait for
 * next. */
static accept_wait accept_all(http_acceptor *a)
{
    for (;;) {
        if (at_limit(a))
            return WAIT_CLOSE;
        int fd = accept4(a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            atomic_fetch_add(&a->open, 1);
            if (!place(a, fd))
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
    while (a->q_len && n < (int)a->batch) {
        int fd = queue_pop(a);
        if (fd < 0)
            continue; /* handed over already, urgent */
        atomic_fetch_add(&a->unstarted, 1);
        if (add_connection(a, fd))
            n++;
        else
            atomic_fetch_sub(&a->unstarted, 1);
    }
}

static void *acceptor_main(void *arg)
{
    http_acceptor *a = arg;
    accept_wait w = WAIT_SOCKET;
    int64_t batch_at = 0; /* when the last batch was handed over */
    while (!atomic_load(&a->quit)) {
        int64_t now = http_now_ms();
        urgent_sweep(a);
        if (a->q_len && (atomic_load(&a->unstarted) <= 0 || now >= batch_at + BATCH_WAIT_MS)) {
            hand_over(a);
            batch_at = now;
        }
        int timeout = w == WAIT_PAUSE ? ACCEPT_PAUSE_MS : -1;
        if (a->q_len && atomic_load(&a->unstarted) <= 0) {
            timeout = 0; /* the whole batch failed at once: the next */
        } else if (a->q_len) {
            int64_t left = batch_at + BATCH_WAIT_MS - now;
            timeout = left < 1 ? 1 : timeout < 0 || left < timeout ? (int)left : timeout;
        }
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

http_acceptor *http_acceptor_new(struct MHD_Daemon *daemon, int listen_fd, unsigned max,
                                 unsigned threads)
{
    http_acceptor *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->fd = -1;
    a->daemon = daemon;
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
    while (a->q_len) {
        int fd = queue_pop(a);
        if (fd >= 0)
            close(fd);
    }
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
    free(a->q);
    free(a);
}
