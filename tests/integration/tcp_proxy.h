/* A loopback TCP proxy for the client integration tests: forwards bytes
 * between the client library and a real kubeleased, and can cut every open
 * connection at once (the network breaking, both processes alive). Runs on
 * its own thread; header-only. */
#ifndef KL_TCP_PROXY_H
#define KL_TCP_PROXY_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PROXY_MAX 64

struct tcp_proxy {
    int listen_fd;
    int port;                 /* where clients connect */
    atomic_int upstream_port; /* the real service */
    int pair[PROXY_MAX][2];   /* client fd, upstream fd; -1 when unused */
    atomic_int cut;           /* request: close every pair */
    atomic_int stop;
    atomic_int accepted; /* connections accepted so far */
    /* proxy_swallow: the next client bytes holding swallow_what hold their
     * connection: they and everything after are dropped, nothing answers. */
    _Atomic(const char *) swallow_what;
    atomic_int swallow;   /* requests still to swallow */
    atomic_int swallowed; /* swallowed so far */
    atomic_int passed;    /* client bytes holding swallow_what passed on */
    int held[PROXY_MAX];
    int wake[2];
    pthread_t thread;
};

static inline int proxy_connect_upstream(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static inline void proxy_close_pair(struct tcp_proxy *p, int i)
{
    close(p->pair[i][0]);
    close(p->pair[i][1]);
    p->pair[i][0] = p->pair[i][1] = -1;
    p->held[i] = 0;
}

/* Client bytes buf[0..n) of pair i: whether to pass them on. */
static inline int proxy_pass(struct tcp_proxy *p, int i, const char *buf, size_t n)
{
    const char *what = atomic_load(&p->swallow_what);
    if (p->held[i])
        return 0;
    if (!what || !memmem(buf, n, what, strlen(what)))
        return 1;
    int left = atomic_load(&p->swallow);
    if (left > 0 && atomic_compare_exchange_strong(&p->swallow, &left, left - 1)) {
        p->held[i] = 1;
        atomic_fetch_add(&p->swallowed, 1);
        return 0;
    }
    atomic_fetch_add(&p->passed, 1);
    return 1;
}

static inline void *proxy_run(void *arg)
{
    struct tcp_proxy *p = arg;
    char buf[16384];
    while (!atomic_load(&p->stop)) {
        struct pollfd fds[2 + 2 * PROXY_MAX];
        int idx[2 + 2 * PROXY_MAX];
        int n = 0;
        fds[n].fd = p->listen_fd;
        fds[n++].events = POLLIN;
        fds[n].fd = p->wake[0];
        fds[n++].events = POLLIN;
        for (int i = 0; i < PROXY_MAX; i++) {
            if (p->pair[i][0] < 0)
                continue;
            for (int s = 0; s < 2; s++) {
                fds[n].fd = p->pair[i][s];
                fds[n].events = POLLIN;
                idx[n++] = i * 2 + s;
            }
        }
        if (poll(fds, (nfds_t)n, 1000) < 0)
            continue;
        if (fds[1].revents) {
            char c[64];
            if (read(p->wake[0], c, sizeof(c)) < 0)
                continue;
        }
        if (atomic_exchange(&p->cut, 0)) {
            for (int i = 0; i < PROXY_MAX; i++)
                if (p->pair[i][0] >= 0)
                    proxy_close_pair(p, i);
            continue;
        }
        for (int k = 2; k < n; k++) {
            if (!fds[k].revents)
                continue;
            int i = idx[k] / 2, s = idx[k] % 2;
            if (p->pair[i][0] < 0)
                continue;
            ssize_t got = read(p->pair[i][s], buf, sizeof(buf));
            if (got > 0 && s == 0 && !proxy_pass(p, i, buf, (size_t)got))
                continue;
            if (got <= 0 || send(p->pair[i][1 - s], buf, (size_t)got, MSG_NOSIGNAL) != got)
                proxy_close_pair(p, i);
        }
        if (fds[0].revents & POLLIN) {
            int cfd = accept(p->listen_fd, NULL, NULL);
            if (cfd < 0)
                continue;
            int ufd = proxy_connect_upstream(p->upstream_port);
            int slot = -1;
            for (int i = 0; i < PROXY_MAX && slot < 0; i++)
                if (p->pair[i][0] < 0)
                    slot = i;
            if (ufd < 0 || slot < 0) {
                close(cfd);
                if (ufd >= 0)
                    close(ufd);
                continue;
            }
            p->pair[slot][0] = cfd;
            p->pair[slot][1] = ufd;
            atomic_fetch_add(&p->accepted, 1);
        }
    }
    for (int i = 0; i < PROXY_MAX; i++)
        if (p->pair[i][0] >= 0)
            proxy_close_pair(p, i);
    return NULL;
}

static inline void proxy_start(struct tcp_proxy *p, int upstream_port)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    memset(p, 0, sizeof(*p));
    for (int i = 0; i < PROXY_MAX; i++)
        p->pair[i][0] = p->pair[i][1] = -1;
    p->upstream_port = upstream_port;
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(p->listen_fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(p->listen_fd, 64) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&a, &len) != 0 || pipe(p->wake) != 0) {
        perror("proxy");
        exit(1);
    }
    p->port = ntohs(a.sin_port);
    pthread_create(&p->thread, NULL, proxy_run, p);
}

/* Closes every open connection (new ones are accepted again). */
static inline void proxy_cut(struct tcp_proxy *p)
{
    atomic_store(&p->cut, 1);
    if (write(p->wake[1], "c", 1) != 1)
        perror("proxy wake");
}

/* Counts the client requests holding what (a string that must outlive
 * the proxy), and swallows the next n of them: each holds its connection
 * open, never answered (a service that accepted the connection and never
 * reads it). */
static inline void proxy_swallow(struct tcp_proxy *p, const char *what, int n)
{
    atomic_store(&p->swallow, n);
    atomic_store(&p->swallow_what, what);
}

/* Sends new connections to another service (a replica behind the same
 * address, as a Kubernetes Service would) and cuts the open ones. */
static inline void proxy_retarget(struct tcp_proxy *p, int upstream_port)
{
    atomic_store(&p->upstream_port, upstream_port);
    proxy_cut(p);
}

static inline void proxy_stop(struct tcp_proxy *p)
{
    atomic_store(&p->stop, 1);
    if (write(p->wake[1], "s", 1) != 1)
        perror("proxy wake");
    pthread_join(p->thread, NULL);
    close(p->listen_fd);
    close(p->wake[0]);
    close(p->wake[1]);
}

#endif
