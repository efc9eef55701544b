/* Strict request framing (server/http/framing.c, docs/design.md section
 * 6): the pure check of a request head, and a real server answering each
 * ambiguous head 400 and closing the connection, on its first request (the
 * acceptor) and on a later one of a kept-alive connection (the access
 * handler), on --listen and --ops-listen. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "http/framing.h"
#include "http/server.h"
#include "ops/ops.h"
#include "support/server_backend.h"

#define GET_HOLDER "POST /kubelease.v1.LeaseService/GetHolder HTTP/1.1\r\nHost: x\r\n"
#define JSON       "Content-Type: application/json\r\n"
#define BODY       "{\"namespace\":\"default\",\"name\":\"x\"}"

/* One ambiguous head, what the check says of it, and the request bytes. */
typedef struct framing_case {
    const char *name;
    const char *request;
    const char *why; /* a part of the check's reason */
} framing_case;

static const framing_case cases[] = {
    {"two different Content-Lengths (CL: 0 smuggling a second request)",
     GET_HOLDER JSON "Content-Length: 0\r\nContent-Length: 35\r\n\r\n" BODY,
     "two Content-Length headers"},
    {"two equal Content-Lengths",
     GET_HOLDER JSON "Content-Length: 35\r\nContent-Length: 35\r\n\r\n" BODY,
     "two Content-Length headers"},
    {"Content-Length with Transfer-Encoding",
     GET_HOLDER JSON "Content-Length: 35\r\nTransfer-Encoding: chunked\r\n\r\n23\r\n" BODY
                     "\r\n0\r\n\r\n",
     "Content-Length with Transfer-Encoding"},
    {"obs-folded header", "GET /livez HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", "obs-folded"},
    {"obs-folded header with a tab", "GET /livez HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tb\r\n\r\n",
     "obs-folded"},
    {"bare LF line ends", "GET /livez HTTP/1.1\nHost: x\n\n", "bare LF"},
    {"one bare LF among CRLFs", "GET /livez HTTP/1.1\r\nHost: x\nX-A: a\r\n\r\n", "bare LF"},
    {"bare CR", "GET /livez HTTP/1.1\r\nHost: x\rX-A: a\r\n\r\n", "CR without LF"},
    {"white space before the colon", "GET /livez HTTP/1.1\r\nHost : x\r\n\r\n",
     "malformed header line"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static void test_http_head_check_refuses_each_ambiguous_head(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_CASES; i++) {
        char why[128] = "";
        size_t head_len = 0;
        http_head_verdict v =
            http_head_check(cases[i].request, strlen(cases[i].request), &head_len, why, sizeof why);
        if (v != HTTP_HEAD_BAD || !strstr(why, cases[i].why))
            fail_msg("%s: verdict %d \"%s\", want bad \"%s\"", cases[i].name, (int)v, why,
                     cases[i].why);
    }
}

static void test_http_head_check_takes_well_framed_heads(void **state)
{
    (void)state;
    static const char *good[] = {
        GET_HOLDER JSON "Content-Length: 35\r\n\r\n" BODY,
        GET_HOLDER JSON "Transfer-Encoding: chunked\r\n\r\n23\r\n" BODY "\r\n0\r\n\r\n",
        "GET /livez HTTP/1.1\r\nHost: x\r\nUser-Agent: a b\tc\r\n\r\n",
        "\r\nGET /livez HTTP/1.1\r\nHost: x\r\n\r\n", /* an empty line first: skipped */
        /* What follows the head is not looked at: a pipelined bare-LF one. */
        "GET /livez HTTP/1.1\r\nHost: x\r\n\r\nGET /livez HTTP/1.1\n\n",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        char why[128] = "";
        size_t head_len = 0, len = strlen(good[i]);
        http_head_verdict v = http_head_check(good[i], len, &head_len, why, sizeof why);
        if (v != HTTP_HEAD_OK)
            fail_msg("head %zu: verdict %d (%s), want ok:\n%s", i, (int)v, why, good[i]);
        const char *end = strstr(good[i], "\r\n\r\n");
        assert_int_equal(head_len, (size_t)(end + 4 - good[i]));
    }
}

static void test_http_head_check_waits_for_a_whole_head(void **state)
{
    (void)state;
    const char *head = GET_HOLDER JSON "Content-Length: 35\r\n\r\n";
    size_t len = strlen(head), head_len;
    char why[128];
    for (size_t n = 0; n < len; n++)
        if (http_head_check(head, n, &head_len, why, sizeof why) != HTTP_HEAD_INCOMPLETE)
            fail_msg("the first %zu bytes of a good head are not incomplete (%s)", n, why);
    assert_int_equal(http_head_check(head, len, &head_len, why, sizeof why), HTTP_HEAD_OK);
}

/* ---------- a real server ---------- */

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
                      .ops_listen = "127.0.0.1:0",
                      .engine = f->b.e};
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

static int open_to(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect: %s", strerror(errno));
    return fd;
}

/* Everything the server sends on fd until it closes it (within 5 s, else
 * the test fails: the connection was left open). */
static size_t read_until_closed(int fd, char *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) != 1)
            fail_msg("the connection is still open 5 s after an ambiguous head; got:\n%.*s",
                     (int)got, buf);
        ssize_t n = recv(fd, buf + got, cap - 1 - got, 0);
        if (n < 0 && errno == ECONNRESET && got)
            break; /* closed with the rest of the request unread */
        if (n < 0)
            fail_msg("recv: %s (got %zu bytes)", strerror(errno), got);
        if (n == 0 || got + (size_t)n >= cap - 1) {
            got += (size_t)(n > 0 ? n : 0);
            break;
        }
        got += (size_t)n;
    }
    buf[got] = '\0';
    return got;
}

/* Sends prefix (a well-framed request, or "") and then the ambiguous
 * request on one connection; the answer to the latter is 400 naming what
 * is wrong, and the connection is closed. */
static void expect_refused(uint16_t port, const char *prefix, const framing_case *c)
{
    int fd = open_to(port);
    char buf[8192];
    if (*prefix) {
        send(fd, prefix, strlen(prefix), MSG_NOSIGNAL);
        size_t got = 0;
        while (!strstr(buf, "\r\n\r\nok\n")) {
            ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
            if (n <= 0)
                fail_msg("%s: no answer to the first request", c->name);
            got += (size_t)n;
            buf[got] = '\0';
        }
    }
    send(fd, c->request, strlen(c->request), MSG_NOSIGNAL);
    size_t got = read_until_closed(fd, buf, sizeof buf);
    close(fd);
    if (got < 12 || strncmp(buf, "HTTP/1.1 400", 12) != 0)
        fail_msg("%s (port %u%s): want 400, got:\n%s", c->name, port, *prefix ? ", kept alive" : "",
                 buf);
}

static void test_http_ambiguous_first_request_gets_400_and_close(void **state)
{
    fixture *f = *state;
    uint16_t ports[] = {http_server_port(f->srv), http_server_ops_port(f->srv)};
    for (size_t p = 0; p < 2; p++)
        for (size_t i = 0; i < N_CASES; i++)
            expect_refused(ports[p], "", &cases[i]);
}

/* A later request of a kept-alive connection is seen by libmicrohttpd
 * only: its Content-Length and Transfer-Encoding headers are checked. */
static void test_http_ambiguous_kept_alive_request_gets_400_and_close(void **state)
{
    fixture *f = *state;
    uint16_t ports[] = {http_server_port(f->srv), http_server_ops_port(f->srv)};
    const char *first = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
    for (size_t p = 0; p < 2; p++)
        for (size_t i = 0; i < 3; i++) /* the Content-Length cases */
            expect_refused(ports[p], first, &cases[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_head_check_refuses_each_ambiguous_head),
        cmocka_unit_test(test_http_head_check_takes_well_framed_heads),
        cmocka_unit_test(test_http_head_check_waits_for_a_whole_head),
        cmocka_unit_test_setup_teardown(test_http_ambiguous_first_request_gets_400_and_close, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_ambiguous_kept_alive_request_gets_400_and_close,
                                        setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
