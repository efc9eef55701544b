/* Hostile clients against a real kubeleased --dev ($KUBELEASED), as the
 * hardening issue probed it: slow clients trickling their requests to hold
 * every connection slot, and reads of made-up names to make the service
 * follow them. Raw sockets (raw_http.h), one thread. */
#include <errno.h>
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

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "raw_http.h"
#include "common/envelope.h"
#include "rpc/connect.h"

#define TRICKLERS        30
#define MAX_CONNECTIONS  "16"
#define READ_TIMEOUT_MS  10000 /* the default --read-timeout-s */
#define FIRST_TIMEOUT_MS 3000  /* the default --first-request-timeout-s */
#define TRICKLE_MS       5000  /* one header byte this often */
#define PROBE_MS         2000  /* /livez must answer within this */
#define TICK_MS          1000  /* the server's timer notices a kept-alive request within this */
#define MAX_LEASES       3
#define MAX_LEASES_FLAG  "3"

static server srv;

/* GET path on a fresh connection; returns how long the answer took (ms), or
 * -1 when it did not come within timeout_ms. */
static int64_t probe(int port, const char *path, int timeout_ms)
{
    int64_t t0 = now_ms();
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char req[128], buf[512];
    int n =
        snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
    size_t got = 0;
    bool ok = false;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        send(fd, req, (size_t)n, MSG_NOSIGNAL) == n) {
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

/* True once the peer closed fd (EOF or reset), after what it sent; never
 * blocks. */
static bool peer_closed(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) != 1)
        return false;
    char buf[512];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
        ; /* an answer (408) before the close */
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

typedef struct trickler {
    int fd;
    int64_t opened, closed; /* closed: 0 while open */
    size_t sent;
} trickler;

static const char slow_head[] = "GET /livez HTTP/1.1\r\nHost: x\r\nX-Slow: 0123456789\r\n\r\n";

/* The value of an unlabelled counter in the ops listener's /metrics (0
 * before its first sample). */
static long metric_of(const server *s, const char *name)
{
    response r;
    request(s->ops_port, "GET", "/metrics", NULL, "", 0, &r);
    char line[128];
    snprintf(line, sizeof line, "\n%s ", name);
    const char *p = strstr(r.body, line);
    long v = p ? atol(p + strlen(line)) : 0;
    free(r.body);
    return v;
}

static long metric(const char *name)
{
    return metric_of(&srv, name);
}

/* 30 clients each send one header byte every 5 s with --max-connections 16:
 * /livez on the ops listener answers within 2 s throughout, and every slow
 * connection is answered 408 and closed at the first-request deadline
 * (--first-request-timeout-s, 3 s), all in one wave: a head that is not
 * whole waits in the acceptor and holds no slot (before, the server held
 * 24, cut them at the 10 s read deadline and left the others in the listen
 * backlog until then). */
static void test_slow_clients_are_cut_and_probes_answered(void **state)
{
    (void)state;
    trickler t[TRICKLERS];
    for (int i = 0; i < TRICKLERS; i++) {
        t[i] = (trickler){.fd = connect_to(srv.port), .opened = now_ms()};
        send_all(t[i].fd, slow_head, 1);
        t[i].sent = 1;
    }
    int64_t worst = 0, start = now_ms();
    int probes = 0;
    for (;;) {
        int64_t now = now_ms();
        int open = 0;
        for (int i = 0; i < TRICKLERS; i++) {
            if (t[i].closed)
                continue;
            if (peer_closed(t[i].fd)) {
                t[i].closed = now;
                continue;
            }
            open++;
            if (now - t[i].opened >= (int64_t)t[i].sent * TRICKLE_MS &&
                t[i].sent < sizeof slow_head - 1)
                send(t[i].fd, slow_head + t[i].sent++, 1, MSG_NOSIGNAL);
        }
        if (!open)
            break;
        if (now - start > READ_TIMEOUT_MS + 2000)
            fail_msg("%d slow connections still open %lld ms after they opened", open,
                     (long long)(now - start));
        int64_t took = probe(srv.ops_port, "/livez", PROBE_MS);
        if (took < 0)
            fail_msg("/livez on the ops listener did not answer within %d ms, %lld ms into the "
                     "attack",
                     PROBE_MS, (long long)(now_ms() - start));
        worst = took > worst ? took : worst;
        probes++;
        usleep(100000);
    }
    int64_t first = INT64_MAX, last = 0;
    for (int i = 0; i < TRICKLERS; i++) {
        int64_t held = t[i].closed - t[i].opened;
        if (held < FIRST_TIMEOUT_MS - 100 || held > FIRST_TIMEOUT_MS + 1000)
            fail_msg("slow connection %d was closed after %lld ms: not at the %d ms "
                     "first-request deadline",
                     i, (long long)held, FIRST_TIMEOUT_MS);
        first = held < first ? held : first;
        last = held > last ? held : last;
        close(t[i].fd);
    }
    printf("%d slow connections: all closed %lld to %lld ms after they opened; /livez on the "
           "ops listener answered %d probes, the slowest in %lld ms\n",
           TRICKLERS, (long long)first, (long long)last, probes, (long long)worst);
    if (probe(srv.port, "/livez", PROBE_MS) < 0)
        fail_msg("/livez on --listen did not answer after the slow connections were cut");
}

/* A kept-alive connection may idle (the idle timeout applies, not the read
 * deadline), but a request trickled on it is cut like any other. */
static void test_kept_alive_connection_idles_but_cannot_trickle(void **state)
{
    (void)state;
    int fd = connect_to(srv.port);
    const char *get = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[512];
    for (int round = 0; round < 2; round++) {
        send_all(fd, get, strlen(get));
        ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
        if (n <= 0 || !memmem(buf, (size_t)n, "\r\n\r\nok\n", 7))
            fail_msg("request %d on the kept-alive connection was not answered", round + 1);
        if (round == 0)
            usleep((READ_TIMEOUT_MS + 1500) * 1000); /* idle past the read deadline */
    }
    int64_t t0 = now_ms();
    for (size_t i = 0; i < sizeof slow_head - 1; i++) {
        if (send(fd, slow_head + i, 1, MSG_NOSIGNAL) != 1 || peer_closed(fd))
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, TRICKLE_MS);
    }
    int64_t held = now_ms() - t0;
    close(fd);
    printf("a request trickled on a kept-alive connection was cut after %lld ms\n",
           (long long)held);
    if (held > READ_TIMEOUT_MS + 500)
        fail_msg("a request trickled on a kept-alive connection was held %lld ms", (long long)held);
    if (held < READ_TIMEOUT_MS - TICK_MS - 500)
        fail_msg("a request trickled on a kept-alive connection was cut early, after %lld ms",
                 (long long)held);
}

/* A Campaign stream request for default/name, left open (never read). */
/* Opens a Campaign stream for ns/name on port from the loopback address
 * src (a caller of its own with --auth none). */
static int campaign_open_from(int port, const char *src, const char *ns, const char *name,
                              const char *identity)
{
    char json[256], head[256];
    int n = snprintf(json, sizeof json,
                     "{\"namespace\":\"%s\",\"name\":\"%s\",\"identity\":\"%s\","
                     "\"leaseDurationSeconds\":15,\"renewDeadlineSeconds\":10,"
                     "\"retryPeriodSeconds\":2}",
                     ns, name, identity);
    int hl = snprintf(head, sizeof head,
                      "POST /kubelease.v1.LeaseService/Campaign HTTP/1.1\r\nHost: x\r\n"
                      "Connection: close\r\nContent-Type: application/connect+json\r\n"
                      "Content-Length: %d\r\n\r\n",
                      n + 5);
    uint8_t env[KL__ENVELOPE_HEADER];
    kl__envelope_header(env, 0, (uint32_t)n);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in from = {.sin_family = AF_INET};
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, src, &from.sin_addr) != 1 ||
        bind(fd, (struct sockaddr *)&from, sizeof from) != 0)
        fail_msg("bind to %s: %s", src, strerror(errno));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&to, sizeof to) != 0)
        fail_msg("connect: %s", strerror(errno));
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    send_all(fd, head, (size_t)hl);
    send_all(fd, env, sizeof env);
    send_all(fd, json, (size_t)n);
    return fd;
}

static int campaign_open(const char *name, const char *identity)
{
    return campaign_open_from(srv.port, "127.0.0.1", "default", name, identity);
}

/* 3,000 GetHolder calls on distinct absent names follow nothing: before,
 * each name was followed for ten minutes, with its own apiserver watch
 * against a cluster. */
static void test_reads_of_absent_leases_follow_nothing(void **state)
{
    (void)state;
    long before = metric("kubelease_leases_followed");
    int64_t t0 = now_ms();
    for (int i = 0; i < 3000; i++) {
        char json[128];
        int n =
            snprintf(json, sizeof json, "{\"namespace\":\"default\",\"name\":\"absent-%d\"}", i);
        response r;
        request(srv.port, "POST", "/kubelease.v1.LeaseService/GetHolder", "application/json", json,
                (size_t)n, &r);
        expect(&r, 404, "\"not_found\"", "GetHolder of an absent lease");
        free(r.body);
    }
    long after = metric("kubelease_leases_followed");
    printf("3000 GetHolder calls on absent names in %lld ms: kubelease_leases_followed %ld -> "
           "%ld\n",
           (long long)(now_ms() - t0), before, after);
    assert_int_equal(after, before);
}

/* --max-leases: a campaign that would follow one Lease more ends with
 * resource_exhausted naming the flag; so does a read of a Lease not
 * followed. */
static void test_max_leases_refuses_new_leases(void **state)
{
    (void)state;
    int held[MAX_LEASES];
    for (int i = 0; i < MAX_LEASES; i++) {
        char name[32];
        snprintf(name, sizeof name, "capped-%d", i);
        held[i] = campaign_open(name, "a");
    }
    int64_t until = now_ms() + 5000;
    while (metric("kubelease_leases_followed") < MAX_LEASES && now_ms() < until)
        usleep(20000);
    assert_int_equal(metric("kubelease_leases_followed"), MAX_LEASES);
    int fd = campaign_open("one-too-many", "a");
    response r;
    read_response(fd, &r);
    close(fd);
    if (r.status != 200 || r.body_len < 5 || (uint8_t)r.body[0] != KL__ENVELOPE_FLAG_END_STREAM ||
        !strstr(r.body + 5, "resource_exhausted") || !strstr(r.body + 5, "--max-leases"))
        fail_msg("a campaign over --max-leases: want an end-of-stream frame with "
                 "resource_exhausted naming --max-leases, got %d %s",
                 r.status, r.body_len > 5 ? r.body + 5 : r.body);
    printf("a campaign over --max-leases %d: %s\n", MAX_LEASES, r.body + 5);
    free(r.body);
    const char *get = "{\"namespace\":\"default\",\"name\":\"one-too-many\"}";
    request(srv.port, "POST", "/kubelease.v1.LeaseService/GetHolder", "application/json", get,
            strlen(get), &r);
    expect(&r, 429, "--max-leases", "a read over --max-leases");
    free(r.body);
    for (int i = 0; i < MAX_LEASES; i++)
        close(held[i]);
}

/* Reads the answer to a Campaign that the service refused: true when it is
 * an end-of-stream frame with resource_exhausted naming flag. */
static bool campaign_refused_naming(int fd, const char *flag)
{
    response r;
    read_response(fd, &r);
    close(fd);
    bool ok = r.status == 200 && r.body_len > 5 &&
              (uint8_t)r.body[0] == KL__ENVELOPE_FLAG_END_STREAM &&
              strstr(r.body + 5, "resource_exhausted") && strstr(r.body + 5, flag);
    printf("a campaign over %s: %d %s\n", flag, r.status, r.body_len > 5 ? r.body + 5 : r.body);
    free(r.body);
    return ok;
}

/* Waits until s follows n Leases. */
static void wait_followed(const server *s, long n)
{
    int64_t until = now_ms() + 5000;
    while (metric_of(s, "kubelease_leases_followed") < n && now_ms() < until)
        usleep(20000);
    assert_int_equal(metric_of(s, "kubelease_leases_followed"), n);
}

/* Quotas through the RPC with --auth none, where a caller is its address:
 * 127.0.0.1 at --max-leases-per-caller 2 gets resource_exhausted naming the
 * flag while 127.0.0.2 campaigns; then namespace default at
 * --max-leases-per-namespace 3 refuses a fourth Lease while namespace
 * other is served. */
static void test_quotas_refuse_one_caller_and_namespace_only(void **state)
{
    (void)state;
    server q = {0};
    const char *extra[] = {"--ops-listen",
                           "127.0.0.1:0",
                           "--max-leases-per-caller",
                           "2",
                           "--max-leases-per-namespace",
                           "3",
                           NULL};
    server_start(&q, extra);
    int a0 = campaign_open_from(q.port, "127.0.0.1", "default", "quota-0", "a");
    int a1 = campaign_open_from(q.port, "127.0.0.1", "default", "quota-1", "a");
    wait_followed(&q, 2);
    assert_true(
        campaign_refused_naming(campaign_open_from(q.port, "127.0.0.1", "default", "quota-2", "a"),
                                "--max-leases-per-caller"));
    int b2 = campaign_open_from(q.port, "127.0.0.2", "default", "quota-2", "b");
    wait_followed(&q, 3);
    assert_true(
        campaign_refused_naming(campaign_open_from(q.port, "127.0.0.2", "default", "quota-3", "b"),
                                "--max-leases-per-namespace"));
    int b3 = campaign_open_from(q.port, "127.0.0.2", "other", "quota-3", "b");
    wait_followed(&q, 4);
    close(a0);
    close(a1);
    close(b2);
    close(b3);
    server_stop(&q);
}

static int setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    const char *extra[] = {"--max-connections",
                           MAX_CONNECTIONS,
                           "--ops-listen",
                           "127.0.0.1:0",
                           "--max-leases",
                           MAX_LEASES_FLAG,
                           NULL};
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
        cmocka_unit_test(test_slow_clients_are_cut_and_probes_answered),
        cmocka_unit_test(test_kept_alive_connection_idles_but_cannot_trickle),
        cmocka_unit_test(test_reads_of_absent_leases_follow_nothing),
        cmocka_unit_test(test_max_leases_refuses_new_leases),
        cmocka_unit_test(test_quotas_refuse_one_caller_and_namespace_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
