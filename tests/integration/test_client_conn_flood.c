/* Floods of idle connections against a real kubeleased --dev
 * ($KUBELEASED), as issue 24 made them: connections that send nothing,
 * reopened as the server closes them, from one address and from many
 * (loopback addresses 127.0.0.x stand for distinct peers). Terms before
 * strangers: a new leader's Confirms are served and it keeps its first
 * term; probes are always answered. The leaders are libkubelease
 * (kl_replica, and a client in the test); the flood is raw sockets. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "raw_http.h"
#include "kubelease.h"

#define LIVEZ_MS       1000 /* /livez must answer within this */
#define FIRST_DEADLINE 3000 /* the default --first-request-timeout-s */
#define REOPEN_PER_S   4000 /* the flood reopens at most this many a second */

static server srv;

/* ---------- the flood ---------- */

typedef struct flood_group {
    const char *addr; /* the source address */
    int n;            /* connections kept open from it */
} flood_group;

typedef struct flood {
    int port;
    const flood_group *groups;
    int n_groups;
    int *fds; /* one per connection, groups in order */
    int ep;
    atomic_bool quit;
    atomic_long opened; /* connections opened, reopenings included */
    atomic_long closed; /* closed by the server */
    pthread_t thread;
} flood;

/* A non-blocking connection from addr to port, watched in ep with its
 * index; -1 when it could not even start. */
static int flood_open(flood *f, const char *addr, int index)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in src = {.sin_family = AF_INET};
    inet_pton(AF_INET, addr, &src.sin_addr);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port)};
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&src, sizeof src) != 0 ||
        (connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0 && errno != EINPROGRESS)) {
        close(fd);
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLRDHUP | EPOLLIN, .data.u32 = (uint32_t)index};
    epoll_ctl(f->ep, EPOLL_CTL_ADD, fd, &ev);
    atomic_fetch_add(&f->opened, 1);
    return fd;
}

static const char *flood_addr(const flood *f, int index)
{
    for (int g = 0; g < f->n_groups; g++) {
        if (index < f->groups[g].n)
            return f->groups[g].addr;
        index -= f->groups[g].n;
    }
    return NULL;
}

/* Keeps every connection open, reopening each the server closes (at most
 * REOPEN_PER_S a second, so that the test machine keeps a core). */
static void *flood_main(void *arg)
{
    flood *f = arg;
    int total = 0;
    for (int g = 0; g < f->n_groups; g++)
        total += f->groups[g].n;
    int *gone = calloc((size_t)total, sizeof *gone);
    int n_gone = 0;
    int64_t second = now_ms();
    long this_second = 0;
    for (int i = 0; i < total; i++)
        if ((f->fds[i] = flood_open(f, flood_addr(f, i), i)) < 0)
            gone[n_gone++] = i;
    while (!atomic_load(&f->quit)) {
        struct epoll_event evs[256];
        int n = epoll_wait(f->ep, evs, 256, 10);
        for (int e = 0; e < n; e++) {
            int i = (int)evs[e].data.u32;
            if (f->fds[i] < 0)
                continue;
            char c;
            ssize_t r = recv(f->fds[i], &c, 1, MSG_DONTWAIT);
            if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)))
                continue; /* an answer (408): its close comes next */
            close(f->fds[i]);
            f->fds[i] = -1;
            gone[n_gone++] = i;
            atomic_fetch_add(&f->closed, 1);
        }
        int64_t now = now_ms();
        if (now - second >= 1000) {
            second = now;
            this_second = 0;
        }
        while (n_gone && this_second < REOPEN_PER_S) {
            int i = gone[--n_gone];
            f->fds[i] = flood_open(f, flood_addr(f, i), i);
            this_second++;
            if (f->fds[i] < 0) {
                gone[n_gone++] = i;
                break;
            }
        }
    }
    for (int i = 0; i < total; i++)
        if (f->fds[i] >= 0)
            close(f->fds[i]);
    free(gone);
    return NULL;
}

static void flood_start(flood *f, int port, const flood_group *groups, int n_groups)
{
    int total = 0;
    for (int g = 0; g < n_groups; g++)
        total += groups[g].n;
    *f = (flood){.port = port, .groups = groups, .n_groups = n_groups};
    f->fds = calloc((size_t)total, sizeof *f->fds);
    f->ep = epoll_create1(0);
    pthread_create(&f->thread, NULL, flood_main, f);
    /* The flood is up once every connection was opened, and the server
     * has had a moment to take them. */
    int64_t until = now_ms() + 3 * FIRST_DEADLINE;
    while (atomic_load(&f->opened) < total) {
        if (now_ms() > until)
            fail_msg("the flood opened %ld of %d connections in %d ms", atomic_load(&f->opened),
                     total, 3 * FIRST_DEADLINE);
        usleep(10000);
    }
    usleep(500000);
}

static void flood_stop(flood *f)
{
    atomic_store(&f->quit, true);
    pthread_join(f->thread, NULL);
    close(f->ep);
    free(f->fds);
    printf("the flood opened %ld connections; the server closed %ld of them\n",
           atomic_load(&f->opened), atomic_load(&f->closed));
}

/* ---------- probes and metrics ---------- */

/* GET /livez on a fresh connection from 127.0.0.1; how long the answer
 * took (ms), or -1 when it did not come within timeout_ms. */
static int64_t livez(int port, int timeout_ms)
{
    int64_t t0 = now_ms();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const char req[] = "GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char buf[512];
    size_t got = 0;
    bool ok = false;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        send(fd, req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1)) {
        ssize_t r;
        while (!ok && got < sizeof buf - 1 &&
               (r = recv(fd, buf + got, sizeof buf - 1 - got, 0)) > 0) {
            got += (size_t)r;
            buf[got] = '\0';
            ok = strstr(buf, "\r\n\r\nok\n") != NULL;
        }
    }
    close(fd);
    int64_t took = now_ms() - t0;
    return ok && took <= timeout_ms ? took : -1;
}

/* /livez on port answers within LIVEZ_MS every 100 ms for ms; returns the
 * slowest answer. */
static int64_t livez_throughout(int port, int ms, const char *what)
{
    int64_t worst = 0, until = now_ms() + ms;
    int probes = 0;
    while (now_ms() < until) {
        int64_t took = livez(port, LIVEZ_MS);
        if (took < 0)
            fail_msg("/livez on %s did not answer within %d ms (probe %d of the flood)", what,
                     LIVEZ_MS, probes + 1);
        worst = took > worst ? took : worst;
        probes++;
        usleep(100000);
    }
    printf("/livez on %s: %d probes during the flood, the slowest answered in %lld ms\n", what,
           probes, (long long)worst);
    return worst;
}

/* The sum of a counter's samples whose labels contain part, on the ops
 * listener's /metrics. */
static long metric_sum(const char *name, const char *part)
{
    response r;
    request(srv.ops_port, "GET", "/metrics", NULL, "", 0, &r);
    long sum = 0;
    size_t nlen = strlen(name);
    for (const char *p = r.body; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, nlen) != 0 || (p[nlen] != '{' && p[nlen] != ' '))
            continue;
        const char *eol = strchr(p, '\n');
        const char *sp = memchr(p, ' ', eol ? (size_t)(eol - p) : strlen(p));
        const char *hit = strstr(p, part);
        if (sp && hit && hit < sp)
            sum += atol(sp + 1);
    }
    free(r.body);
    return sum;
}

/* ---------- leaders ---------- */

static pid_t replica(const char *lease, const char *id, const char *log)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        char endpoint[64];
        snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", srv.port);
        const char *bin = getenv("KL_REPLICA");
        execl(bin, bin, "--endpoint", endpoint, "--lease", lease, "--identity", id,
              "--lease-duration", "5", "--renew-deadline", "4", "--retry-period", "1",
              (char *)NULL);
        _exit(127);
    }
    return pid;
}

static kl_client *client(void)
{
    char endpoint[64];
    kl_error err;
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", srv.port);
    kl_client *c = kl_client_new(endpoint, &err);
    if (!c)
        fail_msg("kl_client_new: %s", err.message);
    return c;
}

/* Waits (10 s at most) until id holds lease; returns the epoch. */
static int64_t wait_holder(kl_client *c, const char *lease, const char *id)
{
    int64_t until = now_ms() + 10000;
    for (;;) {
        char *holder = NULL;
        int64_t epoch = 0;
        kl_get_holder(c, "default", lease, &holder, &epoch, NULL);
        bool ok = holder && strcmp(holder, id) == 0;
        kl_free(holder);
        if (ok)
            return epoch;
        if (now_ms() > until)
            fail_msg("%s did not become leader of %s in 10 s", id, lease);
        usleep(20000);
    }
}

/* The flood of the issue (1,100 idle connections from one peer, reopened
 * as they are closed) and more from four other peers, 2,100 in all, over
 * --max-connections 1024: the leader is killed, its standby is elected,
 * then keeps its first term (its Confirms are served), and /livez on both
 * ports answers within 1 s throughout. Before: every new RPC got 429, and
 * the standby lost its first term ("not confirmed in time"). */
static void test_flood_leaves_a_new_leaders_confirms_and_probes_served(void **state)
{
    (void)state;
    char log[256];
    snprintf(log, sizeof log, "/tmp/kl-conn-flood-%d-leader.log", (int)getpid());
    kl_client *c = client();
    pid_t leader = replica("flood", "leader-1", log);
    int64_t e1 = wait_holder(c, "flood", "leader-1");
    kl_error err;
    if (kl_run_election(c, "default", "flood", "leader-2", 5, 4, 1, &err) != KL_OK)
        fail_msg("kl_run_election: %s", err.message);
    static const flood_group groups[] = {{"127.0.0.2", 1100},
                                         {"127.0.0.3", 250},
                                         {"127.0.0.4", 250},
                                         {"127.0.0.5", 250},
                                         {"127.0.0.6", 250}};
    flood f;
    flood_start(&f, srv.port, groups, 5);
    livez_throughout(srv.ops_port, 2000, "--ops-listen");
    livez_throughout(srv.port, 1000, "--listen");
    int64_t t0 = now_ms();
    kill(leader, SIGKILL);
    waitpid(leader, NULL, 0);
    int64_t e2 = 0;
    int rc = kl_wait_elected(c, "default", "flood", 15, &e2, &err);
    int64_t took = now_ms() - t0;
    if (rc != KL_OK)
        fail_msg("the standby was not elected within 15 s of the leader's death: %s", err.message);
    /* Its first term holds: five Confirms at least (retry period 1 s). */
    rc = kl_wait_lost_timeout(c, "default", "flood", 5000, &err);
    int64_t kept = now_ms() - t0 - took;
    livez_throughout(srv.ops_port, 1000, "--ops-listen");
    long idle = metric_sum("kubelease_http_connections_dropped_total", "listener=\"listen\"");
    flood_stop(&f);
    printf("during the flood the standby was elected %lld ms after the leader's SIGKILL (lease "
           "duration 5 s), epoch %lld -> %lld; %ld flood connections closed unserved\n",
           (long long)took, (long long)e1, (long long)e2, idle);
    if (rc != KL_ERR_TIMEOUT)
        fail_msg("the new leader lost its first term %lld ms after it was elected: %s",
                 (long long)kept, err.message);
    assert_int_equal(e2, e1 + 1);
    assert_true(idle > 0);
    unlink(log);
    kl_client_free(c);
}

/* 1,024 idle connections to the ops port from 64 peers (16 each, its
 * per-address limit), reopened as closed: /livez answers within 1 s. */
static void test_ops_flood_leaves_livez_answered(void **state)
{
    (void)state;
    static char addrs[64][16];
    static flood_group groups[64];
    for (int i = 0; i < 64; i++) {
        snprintf(addrs[i], sizeof addrs[i], "127.0.1.%d", i + 1);
        groups[i] = (flood_group){addrs[i], 16};
    }
    flood f;
    flood_start(&f, srv.ops_port, groups, 64);
    livez_throughout(srv.ops_port, 5000, "--ops-listen");
    flood_stop(&f);
}

/* How long the server keeps a connection from 127.0.0.1 open after it sent
 * first (NULL: nothing); -1 beyond 15 s. */
static int64_t held_open(int port, const char *first, char *answer, size_t cap)
{
    int fd = connect_to(port);
    int64_t t0 = now_ms();
    if (first)
        send_all(fd, first, strlen(first));
    size_t got = 0;
    answer[0] = '\0';
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(t0 + 15000 - now_ms())) != 1) {
            close(fd);
            return -1;
        }
        ssize_t n = recv(fd, answer + got, cap - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        answer[got] = '\0';
    }
    close(fd);
    return now_ms() - t0;
}

/* A connection that sends nothing, or a piece of a head, is closed at the
 * first-request deadline (3 s), on both ports, long before the read
 * timeout (10 s); the piece is answered 408. */
static void test_idle_connections_are_closed_at_the_first_request_deadline(void **state)
{
    (void)state;
    int ports[] = {srv.port, srv.ops_port};
    const char *names[] = {"--listen", "--ops-listen"};
    for (int p = 0; p < 2; p++) {
        char answer[1024];
        int64_t held = held_open(ports[p], NULL, answer, sizeof answer);
        printf("%s: a connection that sent nothing was closed after %lld ms\n", names[p],
               (long long)held);
        if (held < FIRST_DEADLINE - 100 || held > FIRST_DEADLINE + 1000)
            fail_msg("%s: a connection that sent nothing was closed after %lld ms, want the %d "
                     "ms first-request deadline",
                     names[p], (long long)held, FIRST_DEADLINE);
        held = held_open(ports[p], "GET /livez HTTP/1.1\r\nHo", answer, sizeof answer);
        if (held < FIRST_DEADLINE - 100 || held > FIRST_DEADLINE + 1000 ||
            strncmp(answer, "HTTP/1.1 408", 12) != 0)
            fail_msg("%s: a connection that sent a piece of a head was closed after %lld ms "
                     "with \"%.40s\", want 408 at %d ms",
                     names[p], (long long)held, answer, FIRST_DEADLINE);
    }
    long dropped = metric_sum("kubelease_http_connections_dropped_total", "reason=\"idle\"");
    assert_true(dropped >= 4);
}

static int setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    if (!getenv("KL_REPLICA")) {
        fprintf(stderr, "KL_REPLICA is not set: skipping\n");
        exit(77);
    }
    const char *extra[] = {"--ops-listen", "127.0.0.1:0", NULL};
    server_start(&srv, extra);
    if (!srv.ops_port)
        fail_msg("no ops_port in the start-up line (log %s)", srv.log);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    server_stop(&srv);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_connections_are_closed_at_the_first_request_deadline),
        cmocka_unit_test(test_flood_leaves_a_new_leaders_confirms_and_probes_served),
        cmocka_unit_test(test_ops_flood_leaves_livez_answered),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
