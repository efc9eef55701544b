/* kube_client: a callback may cancel its own request or free the whole
 * client; after that no callback runs for the request (or for any request
 * of the freed client), kube_client_start refuses to start new ones, and
 * nothing is freed twice or leaked (the ASan pass checks). A tiny HTTP
 * server on 127.0.0.1 answers GET /stream with a chunked 200 that stays
 * open and GET /plain with a short 200. Each test ends when a sentinel
 * request on a second client completes, so every earlier event has had its
 * chance to run. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/loop.h"
#include "kube/client.h"

/* ---- the server --------------------------------------------------------- */

#define MAX_CONNS 32

static int listen_fd, port;
static pthread_t accept_thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t conns[MAX_CONNS];
static int n_conns;

static void send_all(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void drain(int fd)
{
    char b[256];
    while (recv(fd, b, sizeof b, 0) > 0)
        ;
}

static void *conn_main(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char req[4096];
    size_t len = 0;
    req[0] = 0;
    while (len < sizeof req - 1 && !strstr(req, "\r\n\r\n")) {
        ssize_t r = recv(fd, req + len, sizeof req - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        req[len] = 0;
    }
    if (strncmp(req, "GET /stream ", 12) == 0) {
        /* One chunk, then open until the client goes away. */
        send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n2\r\na\n\r\n");
        drain(fd);
    } else {
        send_all(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     "Content-Length: 2\r\nConnection: close\r\n\r\nok");
        shutdown(fd, SHUT_WR);
        drain(fd);
    }
    close(fd);
    return NULL;
}

static void *accept_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        pthread_mutex_lock(&mu);
        if (n_conns == MAX_CONNS ||
            pthread_create(&conns[n_conns], NULL, conn_main, (void *)(intptr_t)fd) != 0) {
            close(fd);
        } else {
            n_conns++;
        }
        pthread_mutex_unlock(&mu);
    }
}

static int server_up(void **state)
{
    (void)state;
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (listen_fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(listen_fd, (struct sockaddr *)&a, &al) != 0 || listen(listen_fd, 16) != 0)
        return -1;
    port = ntohs(a.sin_port);
    return pthread_create(&accept_thread, NULL, accept_main, NULL) == 0 ? 0 : -1;
}

static int server_down(void **state)
{
    (void)state;
    shutdown(listen_fd, SHUT_RDWR); /* accept() gives up */
    pthread_join(accept_thread, NULL);
    close(listen_fd);
    return 0;
}

/* Joins the connection threads; every client connection is closed by then. */
static void conns_join(void)
{
    pthread_mutex_lock(&mu);
    for (int i = 0; i < n_conns; i++)
        pthread_join(conns[i], NULL);
    n_conns = 0;
    pthread_mutex_unlock(&mu);
}

/* ---- the client side ---------------------------------------------------- */

typedef enum action {
    NOTHING,
    CANCEL_IN_HEADERS,
    CANCEL_IN_DATA,
    CANCEL_IN_DONE,
    FREE_IN_DATA,
    FREE_IN_DONE,
} action;

typedef struct probe {
    kube_request *req;
    action act;
    int headers, data, done;
    int after; /* callbacks after its request was cancelled or its client freed */
} probe;

static loop *lp;
static kube_client *client, *aux; /* aux runs the sentinel */
static bool gone;                 /* client was freed (its requests are gone) */
static bool started_after_free;   /* kube_client_start worked on a freed client */
static bool sentinel_done, timed_out;
static loop_timer deadline;

static kube_client *client_new(void)
{
    kube_config cfg = {0};
    char server[64], err[256];
    snprintf(server, sizeof server, "http://127.0.0.1:%d", port);
    cfg.server = strdup(server);
    cfg.source = strdup("test");
    kube_client *c = kube_client_new(lp, &cfg, err, sizeof err);
    if (!c)
        fail_msg("kube_client_new: %s", err);
    return c;
}

static void sentinel_on_done(void *ctx, const kube_response *r)
{
    (void)ctx;
    assert_int_equal(r->http_code, 200);
    sentinel_done = true;
    loop_stop(lp);
}

/* The last request of a test: its completion ends the test. */
static void sentinel_start(void)
{
    kube_request_opts o = {.method = "GET", .path = "/plain", .on_done = sentinel_on_done};
    assert_non_null(kube_client_start(aux, &o));
}

static void on_deadline(void *arg)
{
    (void)arg;
    timed_out = true;
    loop_stop(lp);
}

/* Carries out p's action from inside one of its callbacks. */
static void act(probe *p)
{
    kube_request_opts o = {.method = "GET", .path = "/plain", .on_done = sentinel_on_done};
    switch (p->act) {
    case CANCEL_IN_HEADERS:
    case CANCEL_IN_DATA:
    case CANCEL_IN_DONE:
        kube_client_cancel(client, p->req);
        kube_client_cancel(client, p->req); /* twice: still a no-op */
        p->req = NULL;
        break;
    case FREE_IN_DATA:
    case FREE_IN_DONE:
        kube_client_free(client);
        kube_client_free(client); /* twice: still a no-op */
        started_after_free = kube_client_start(client, &o) != NULL;
        gone = true;
        break;
    case NOTHING:
        return;
    }
    p->act = NOTHING;
    sentinel_start();
}

static void on_headers(void *ctx, long code)
{
    probe *p = ctx;
    p->after += !p->req || gone;
    p->headers++;
    assert_int_equal(code, 200);
    if (p->act == CANCEL_IN_HEADERS)
        act(p);
}

static int on_data(void *ctx, const char *data, size_t len)
{
    probe *p = ctx;
    (void)data;
    (void)len;
    p->after += !p->req || gone;
    p->data++;
    if (p->act == CANCEL_IN_DATA || p->act == FREE_IN_DATA)
        act(p);
    return 0;
}

static void on_done(void *ctx, const kube_response *r)
{
    probe *p = ctx;
    (void)r;
    p->after += !p->req || gone;
    p->done++;
    if (p->act == CANCEL_IN_DONE || p->act == FREE_IN_DONE)
        act(p);
}

static void start(probe *p, const char *path)
{
    kube_request_opts o = {.method = "GET", .path = path, .on_done = on_done, .ctx = p};
    if (strcmp(path, "/stream") == 0) {
        o.on_headers = on_headers;
        o.on_data = on_data;
    }
    p->req = kube_client_start(client, &o);
    assert_non_null(p->req);
}

static int setup(void **state)
{
    (void)state;
    lp = loop_new();
    if (!lp)
        return -1;
    client = client_new();
    aux = client_new();
    gone = started_after_free = sentinel_done = timed_out = false;
    loop_timer_init(lp, &deadline);
    loop_timer_start(&deadline, loop_now(lp) + 20000, on_deadline, NULL);
    return 0;
}

/* Runs the loop until the sentinel completes, then whatever is still ready. */
static void run(void)
{
    loop_run(lp);
    while (loop_drain(lp))
        ;
    assert_false(timed_out);
    assert_true(sentinel_done);
}

static int teardown(void **state)
{
    (void)state;
    loop_timer_stop(&deadline);
    if (!gone)
        kube_client_free(client);
    kube_client_free(aux);
    loop_free(lp); /* closes the connections libcurl kept */
    conns_join();
    return 0;
}

static void test_kube_client_callback_cancels_own_request_in_headers(void **state)
{
    (void)state;
    probe p = {.act = CANCEL_IN_HEADERS};
    start(&p, "/stream");
    run();
    assert_int_equal(p.headers, 1);
    assert_int_equal(p.data, 0);
    assert_int_equal(p.done, 0);
    assert_int_equal(p.after, 0);
}

static void test_kube_client_callback_cancels_own_request_in_data(void **state)
{
    (void)state;
    probe p = {.act = CANCEL_IN_DATA};
    start(&p, "/stream");
    run();
    assert_int_equal(p.headers, 1);
    assert_int_equal(p.data, 1);
    assert_int_equal(p.done, 0);
    assert_int_equal(p.after, 0);
}

static void test_kube_client_callback_cancels_own_request_in_done(void **state)
{
    (void)state;
    probe p = {.act = CANCEL_IN_DONE};
    start(&p, "/plain");
    run();
    assert_int_equal(p.done, 1);
    assert_int_equal(p.after, 0);
}

static void test_kube_client_callback_frees_client_in_data(void **state)
{
    (void)state;
    probe p = {.act = FREE_IN_DATA}, other = {0}, plain = {0};
    start(&p, "/stream");
    start(&other, "/stream");
    start(&plain, "/plain");
    run();
    assert_int_equal(p.data, 1);
    assert_int_equal(p.done, 0);
    assert_int_equal(p.after + other.after + plain.after, 0);
    assert_false(started_after_free);
}

static void test_kube_client_callback_frees_client_in_done(void **state)
{
    (void)state;
    probe p = {.act = FREE_IN_DONE}, other = {0};
    start(&p, "/plain");
    start(&other, "/stream");
    run();
    assert_int_equal(p.done, 1);
    assert_int_equal(p.after + other.after, 0);
    assert_int_equal(other.done, 0);
    assert_false(started_after_free);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kube_client_callback_cancels_own_request_in_headers,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_kube_client_callback_cancels_own_request_in_data,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_kube_client_callback_cancels_own_request_in_done,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_kube_client_callback_frees_client_in_data, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kube_client_callback_frees_client_in_done, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, server_up, server_down);
}
