/* The acceptor (server/http/accept.c) under a storm of new connections: a
 * Confirm on a new connection is served ahead of the streams that arrived
 * before it (docs/design.md, section 2). The storm is made deterministic by
 * holding the server's lock (s->mu, so white box): the streams' one worker
 * thread stops in the first stream it starts, and every connection opened
 * meanwhile waits, in the kernel's accept queue or in the acceptor's. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/envelope.h"
#include "core/loop.h"
#include "engine/engine.h"
#include "http/internal.h"
#include "ops/ops.h"
#include "http/server.h"
#include "store/memory.h"
#include "store/store.h"
#include "support/server_backend.h"

#define STREAMS_MAX 1500

typedef struct fixture {
    server_backend b;
    http_server *srv;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    server_backend_start(&f->b);
    char err[256];
    http_config hc = {.ops = ops_http_hooks(),
                      .listen = "127.0.0.1:0",
                      .engine = f->b.e,
                      .threads = 1,
                      .max_connections = STREAMS_MAX + 64};
    f->srv = http_server_start(&hc, err, sizeof err);
    if (!f->srv)
        fail_msg("http_server_start: %s", err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    server_backend_stop(&f->b, f->srv);
    free(f);
    return 0;
}

static void send_all(int fd, const char *request, size_t len)
{
    if (send(fd, request, len, MSG_NOSIGNAL) != (ssize_t)len)
        fail_msg("send: %s", strerror(errno));
}

/* A connection to the server, nothing written yet. */
static int open_silent(const fixture *f)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(http_server_port(f->srv))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect: %s", strerror(errno));
    return fd;
}

/* A silent connection from the loopback address 127.0.0.N. */
static int open_silent_from(const fixture *f, int n)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in src = {.sin_family = AF_INET};
    src.sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)n - 1);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(http_server_port(f->srv))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof src) != 0 ||
        connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect from 127.0.0.%d: %s", n, strerror(errno));
    return fd;
}

/* A connection to the server with the whole of request written. */
static int open_with(const fixture *f, const char *request, size_t len)
{
    int fd = open_silent(f);
    send_all(fd, request, len);
    return fd;
}

/* A WatchHolder request: one envelope of proto3 JSON. */
static size_t watch_request(char *out, size_t cap)
{
    static const char json[] = "{\"namespace\":\"default\",\"name\":\"storm\"}";
    uint8_t env[64];
    kl__envelope_header(env, 0, (uint32_t)(sizeof json - 1));
    memcpy(env + KL__ENVELOPE_HEADER, json, sizeof json - 1);
    size_t body = KL__ENVELOPE_HEADER + sizeof json - 1;
    int n = snprintf(out, cap,
                     "POST /kubelease.v1.LeaseService/WatchHolder HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: application/connect+json\r\nContent-Length: %zu\r\n\r\n",
                     body);
    memcpy(out + n, env, body);
    return (size_t)n + body;
}

static size_t confirm_request(char *out, size_t cap)
{
    static const char json[] = "{\"namespace\":\"default\",\"name\":\"held\",\"identity\":\"a\","
                               "\"epoch\":\"1\",\"termToken\":\"t\"}";
    return (size_t)snprintf(out, cap,
                            "POST /kubelease.v1.LeaseService/Confirm HTTP/1.1\r\nHost: x\r\n"
                            "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                            sizeof json - 1, json);
}

/* As many streams as the descriptors allow, up to STREAMS_MAX: each is a
 * descriptor here and one in the server. */
static int streams_possible(void)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    long n = ((long)rl.rlim_cur - 128) / 2;
    return n > STREAMS_MAX ? STREAMS_MAX : (int)n;
}

/* Waits for the first bytes of the answers, in the order they come;
 * returns how many streams answered before the Confirm did. */
static int streams_answered_before_confirm(int *streams, int n, int confirm)
{
    struct pollfd *p = calloc((size_t)n + 1, sizeof *p);
    bool *answered = calloc((size_t)n, sizeof *answered);
    int before = 0;
    for (int i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = streams[i], .events = POLLIN};
    p[n] = (struct pollfd){.fd = confirm, .events = POLLIN};
    for (int rounds = 0;; rounds++) {
        if (rounds > 600)
            fail_msg("the Confirm got no answer in a minute");
        if (poll(p, (nfds_t)n + 1, 100) <= 0)
            continue;
        for (int i = 0; i < n; i++) {
            if (p[i].revents && !answered[i]) {
                answered[i] = true;
                before++;
                p[i].fd = -1; /* answered: no longer watched */
            }
        }
        if (p[n].revents)
            break;
    }
    free(answered);
    free(p);
    return before;
}

/* Holds the streams' worker, opens n streams and then a Confirm, lets the
 * worker go and returns how many streams were answered before the Confirm.
 * late: every connection opens silent, and the requests are written once
 * all are accepted, the Confirm's last. */
static int storm(fixture *f, int n, bool late)
{
    char watch[512], confirm[512];
    size_t wlen = watch_request(watch, sizeof watch);
    size_t clen = confirm_request(confirm, sizeof confirm);
    int *streams = calloc((size_t)n, sizeof *streams);

    pthread_mutex_lock(&f->srv->mu);
    int first = open_with(f, watch, wlen); /* the worker stops in it */
    for (int i = 0; i < n; i++)
        streams[i] = late ? open_silent(f) : open_with(f, watch, wlen);
    int c = late ? open_silent(f) : open_with(f, confirm, clen);
    if (late) {
        for (int waited_ms = 0; http_acceptor_open(f->srv->acceptor) < (unsigned)n + 2;
             waited_ms++) {
            if (waited_ms > 60000)
                fail_msg("the server accepted %u of %d connections in a minute",
                         http_acceptor_open(f->srv->acceptor), n + 2);
            poll(NULL, 0, 1);
        }
        for (int i = 0; i < n; i++)
            send_all(streams[i], watch, wlen);
        send_all(c, confirm, clen);
    }
    pthread_mutex_unlock(&f->srv->mu);

    int before = streams_answered_before_confirm(streams, n, c);
    char head[16] = "";
    assert_true(recv(c, head, sizeof head - 1, 0) > 0);
    assert_memory_equal(head, "HTTP/1.1 ", 9);
    print_message("%d of %d streams answered before the Confirm\n", before, n);
    close(c);
    close(first);
    for (int i = 0; i < n; i++)
        close(streams[i]);
    free(streams);
    return before;
}

static void test_http_confirm_is_served_before_a_storm_of_new_streams(void **state)
{
    int n = streams_possible();
    if (n < 100)
        skip();
    /* Only the batches handed over before the Confirm arrived go first;
     * served in arrival order (libmicrohttpd's own accept), the Confirm
     * would wait for every stream opened before it. */
    int before = storm(*state, n, false);
    if (before >= n / 2)
        fail_msg("%d of %d streams opened before the Confirm were answered before it", before, n);
}

/* A client library opens its connection and writes its request some passes
 * of its loop later: under a storm, the Confirm's connection is accepted and
 * queued behind the others before a byte of it is in. It still goes first,
 * however many are queued before it. */
static void test_http_confirm_written_late_is_served_before_the_queue(void **state)
{
    int n = streams_possible();
    if (n < 100)
        skip();
    /* Only the batches handed over while the requests were written go
     * first; were the Confirm's connection served in its turn, or watched
     * for its first bytes only after those queued ahead of it, most would. */
    int before = storm(*state, n, true);
    if (before >= n / 4)
        fail_msg("%d of %d streams opened before the Confirm were answered before it", before, n);
}

/* The waiting room full, a new connection comes from the address whose
 * only waiting connection is the oldest: that one is closed to make room,
 * and the new one is served (its address's record, freed with the old
 * connection, is made anew: ASan sees a use after free otherwise). */
#define WAITING_ROOM 1024 /* server.c's WAITING_MAX: --max-connections is below it */

static int setup_room(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    server_backend_start(&f->b);
    char err[256];
    /* The silent connections wait past the test: no first-request deadline
     * closes them before the room is full. */
    http_config hc = {.ops = ops_http_hooks(),
                      .listen = "127.0.0.1:0",
                      .engine = f->b.e,
                      .threads = 1,
                      .max_connections = 64,
                      .first_request_timeout_ms = 120000};
    f->srv = http_server_start(&hc, err, sizeof err);
    if (!f->srv)
        fail_msg("http_server_start: %s", err);
    *state = f;
    return 0;
}

static void test_http_new_connection_from_the_address_evicted_for_it(void **state)
{
    fixture *f = *state;
    int room = WAITING_ROOM;
    if (streams_possible() < room + 8)
        skip();
    int *fds = calloc((size_t)room + 1, sizeof *fds);
    fds[0] = open_silent_from(f, 2);
    for (int i = 1; i < room; i++)
        fds[i] = open_silent(f);
    for (int waited_ms = 0; http_acceptor_open(f->srv->acceptor) < (unsigned)room; waited_ms++) {
        if (waited_ms > 60000)
            fail_msg("the server accepted %u of %d connections in a minute",
                     http_acceptor_open(f->srv->acceptor), room);
        poll(NULL, 0, 1);
    }
    char watch[512];
    size_t wlen = watch_request(watch, sizeof watch);
    int late = open_silent_from(f, 2);
    char buf[16];
    /* The oldest, from 127.0.0.2, is closed... */
    struct pollfd pf = {.fd = fds[0], .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 5000), 1);
    assert_true(recv(fds[0], buf, sizeof buf, 0) <= 0);
    /* ...and the new one from there served. */
    send_all(late, watch, wlen);
    pf = (struct pollfd){.fd = late, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 5000), 1);
    assert_true(recv(late, buf, sizeof buf - 1, 0) > 0);
    assert_memory_equal(buf, "HTTP/1.1 ", 9);
    close(late);
    for (int i = 0; i < room; i++)
        close(fds[i]);
    free(fds);
}

#define PER_IP 4

static int setup_per_ip(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    server_backend_start(&f->b);
    char err[256];
    http_config hc = {.ops = ops_http_hooks(),
                      .listen = "127.0.0.1:0",
                      .engine = f->b.e,
                      .threads = 1,
                      .max_connections = 64,
                      .max_per_ip = PER_IP,
                      .first_request_timeout_ms = 120000};
    f->srv = http_server_start(&hc, err, sizeof err);
    if (!f->srv)
        fail_msg("http_server_start: %s", err);
    *state = f;
    return 0;
}

/* --max-per-ip connections from one address wait for their heads: the next
 * one from there closes the oldest of them, not itself, so that a flood
 * from an address shared with a leader (node-level SNAT) cannot keep the
 * leader's new connection out; it is served once it writes. */
static void test_http_per_ip_waiting_closes_the_oldest_for_a_new_one(void **state)
{
    fixture *f = *state;
    int fds[PER_IP];
    for (int i = 0; i < PER_IP; i++)
        fds[i] = open_silent_from(f, 3);
    for (int waited_ms = 0; http_acceptor_open(f->srv->acceptor) < PER_IP; waited_ms++) {
        if (waited_ms > 10000)
            fail_msg("the server accepted %u of %d connections",
                     http_acceptor_open(f->srv->acceptor), PER_IP);
        poll(NULL, 0, 1);
    }
    int late = open_silent_from(f, 3);
    char buf[16];
    struct pollfd pf = {.fd = fds[0], .events = POLLIN};
    if (poll(&pf, 1, 5000) != 1 || recv(fds[0], buf, sizeof buf, 0) > 0)
        fail_msg("the oldest waiting connection of the address was not closed");
    char watch[512];
    size_t wlen = watch_request(watch, sizeof watch);
    send_all(late, watch, wlen);
    pf = (struct pollfd){.fd = late, .events = POLLIN};
    if (poll(&pf, 1, 5000) != 1 || recv(late, buf, sizeof buf - 1, 0) <= 0 ||
        memcmp(buf, "HTTP/1.1 ", 9) != 0)
        fail_msg("the newest connection of the address was not served");
    close(late);
    for (int i = 0; i < PER_IP; i++)
        close(fds[i]);
}

/* A stream's connection ends with it (its answer says so): a request
 * after it would be served by the streams' threads. */
static void test_http_stream_answer_closes_its_connection(void **state)
{
    fixture *f = *state;
    char watch[512], head[2048];
    size_t wlen = watch_request(watch, sizeof watch), got = 0;
    int fd = open_with(f, watch, wlen);
    while (got < sizeof head - 1 && !memmem(head, got, "\r\n\r\n", 4)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 10000) != 1)
            fail_msg("no answer to the stream in 10 s");
        ssize_t n = recv(fd, head + got, sizeof head - 1 - got, 0);
        if (n <= 0)
            fail_msg("the stream's connection closed before its head");
        got += (size_t)n;
    }
    head[got] = '\0';
    if (!strcasestr(head, "\r\nConnection: close\r\n"))
        fail_msg("the stream's answer does not close its connection:\n%s", head);
    close(fd);
}

/* A request line that comes in pieces (the first, accepted, too short to
 * tell what it is) is still handed over and served: at once if the rest is
 * in when the acceptor reads it, else once its wait for it is over. */
static void test_http_request_line_in_pieces_is_served(void **state)
{
    fixture *f = *state;
    char confirm[512];
    size_t clen = confirm_request(confirm, sizeof confirm), first = 10;
    int c = open_silent(f);
    send_all(c, confirm, first);
    for (int waited_ms = 0; http_acceptor_open(f->srv->acceptor) < 1; waited_ms++) {
        if (waited_ms > 10000)
            fail_msg("the server accepted nothing in 10 s");
        poll(NULL, 0, 1);
    }
    send_all(c, confirm + first, clen - first);
    struct pollfd p = {.fd = c, .events = POLLIN};
    if (poll(&p, 1, 10000) != 1)
        fail_msg("no answer in 10 s to a request line sent in two pieces");
    char head[16] = "";
    assert_true(recv(c, head, sizeof head - 1, 0) > 0);
    assert_memory_equal(head, "HTTP/1.1 ", 9);
    close(c);
}

/* --max-connections 8: libmicrohttpd's 16 slots (8 and its headroom),
 * then a quarter more for Confirms and Resigns. */
#define FULL_MAX  8
#define FULL_HARD 16

static int setup_full(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    server_backend_start(&f->b);
    char err[256];
    http_config hc = {.ops = ops_http_hooks(),
                      .listen = "127.0.0.1:0",
                      .engine = f->b.e,
                      .threads = 1,
                      .max_connections = FULL_MAX};
    f->srv = http_server_start(&hc, err, sizeof err);
    if (!f->srv)
        fail_msg("http_server_start: %s", err);
    *state = f;
    return 0;
}

/* True when fd gets the first bytes of an answer within ms. */
static bool answered_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char head[16] = "";
    return poll(&p, 1, ms) == 1 && recv(fd, head, sizeof head - 1, MSG_DONTWAIT) > 0 &&
           memcmp(head, "HTTP/1.1 ", 9) == 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Reads fd until the server closes it, for at most ms; true if it did. */
static bool closed_within(int fd, int ms)
{
    char buf[512];
    for (int64_t end = now_ms() + ms; now_ms() < end;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(end - now_ms())) != 1)
            return false;
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n == 0)
            return true;
        if (n < 0)
            return errno == ECONNRESET;
    }
    return false;
}

/* Terms before strangers: with every slot held by kept-alive connections,
 * a new request waits for one to close, and a Confirm on a new connection
 * is served at once from the room kept for it, which it leaves with its
 * answer (the connection is closed: neither a leader's kept-alive
 * connection nor junk Confirms hold that room). */
static void test_http_confirm_is_served_when_every_slot_is_held(void **state)
{
    fixture *f = *state;
    static const char get[] = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
    int held[FULL_HARD];
    for (int i = 0; i < FULL_HARD; i++) {
        held[i] = open_with(f, get, sizeof get - 1);
        if (!answered_within(held[i], 5000))
            fail_msg("kept-alive connection %d of %d was not served", i + 1, FULL_HARD);
    }
    int waiting = open_with(f, get, sizeof get - 1);
    if (answered_within(waiting, 500))
        fail_msg("a request past every slot was served: the test holds no slots");
    char confirm[512];
    size_t clen = confirm_request(confirm, sizeof confirm);
    int c = open_with(f, confirm, clen);
    if (!answered_within(c, 2000))
        fail_msg("a Confirm was not served while strangers held every slot");
    if (!closed_within(c, 2000))
        fail_msg("the Confirm served past the limits kept its connection open");
    close(c);
    close(held[0]);
    if (!answered_within(waiting, 5000))
        fail_msg("the waiting request was not served once a slot was free");
    close(waiting);
    for (int i = 1; i < FULL_HARD; i++)
        close(held[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_http_confirm_is_served_before_a_storm_of_new_streams,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_confirm_written_late_is_served_before_the_queue,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_new_connection_from_the_address_evicted_for_it,
                                        setup_room, teardown),
        cmocka_unit_test_setup_teardown(test_http_per_ip_waiting_closes_the_oldest_for_a_new_one,
                                        setup_per_ip, teardown),
        cmocka_unit_test_setup_teardown(test_http_stream_answer_closes_its_connection, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_request_line_in_pieces_is_served, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_confirm_is_served_when_every_slot_is_held,
                                        setup_full, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
