/* Bad input against a real kubeleased --dev ($KUBELEASED): each answered with
 * the right Connect code while the service keeps serving (/livez and a real
 * call are checked after each case). Raw sockets, so that nothing between
 * the test and the server tidies the input up. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "common/envelope.h"
#include "kubelease/v1/kubelease.pb-c.h"
#include "rpc/connect.h"

typedef struct server {
    pid_t pid;
    int port;
    char log[256];
} server;

static server srv;
static server other; /* a second server with limits; stopped in teardown if a test failed */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Starts $KUBELEASED --dev on a free port with extra flags; waits for its
 * start-up line. */
static void server_start(server *s, const char *const *extra)
{
    const char *bin = getenv("KUBELEASED");
    if (!bin) {
        fprintf(stderr, "KUBELEASED is not set: skipping\n");
        exit(77);
    }
    snprintf(s->log, sizeof s->log, "/tmp/kl-bad-input-%d-%p.log", (int)getpid(), (void *)s);
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        const char *argv[16] = {bin, "--dev", "--listen", "127.0.0.1:0"};
        int n = 4;
        for (int i = 0; extra && extra[i] && n < 15; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        execv(bin, (char **)argv);
        _exit(127);
    }
    int64_t deadline = now_ms() + 10000;
    s->port = 0;
    while (!s->port && now_ms() < deadline) {
        FILE *f = fopen(s->log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            char *p = strstr(line, "event=started");
            char *q = p ? strstr(p, " port=") : NULL;
            if (q)
                s->port = atoi(q + 6);
        }
        if (f)
            fclose(f);
        if (!s->port)
            usleep(20000);
    }
    if (!s->port)
        fail_msg("kubeleased did not start (log %s)", s->log);
}

static void server_stop(server *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    int status = 0;
    int64_t deadline = now_ms() + 5000;
    while (waitpid(s->pid, &status, WNOHANG) == 0) {
        if (now_ms() > deadline) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &status, 0);
            fail_msg("kubeleased did not stop within 5 s of SIGTERM");
        }
        usleep(10000);
    }
    s->pid = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("kubeleased exited with status %d after SIGTERM", status);
    unlink(s->log);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect: %s", strerror(errno));
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static void send_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0)
            return; /* the server may close early; its answer is what counts */
        p += n;
        len -= (size_t)n;
    }
}

typedef struct response {
    int status;
    char *body; /* NUL-terminated; owned */
    size_t body_len;
    char headers[2048];
} response;

/* Reads until the peer closes (requests carry "Connection: close"). */
static void read_response(int fd, response *r)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    memset(r, 0, sizeof *r);
    sscanf(buf, "HTTP/1.%*d %d", &r->status);
    char *sep = strstr(buf, "\r\n\r\n");
    if (sep) {
        size_t hl = (size_t)(sep - buf);
        snprintf(r->headers, sizeof r->headers, "%.*s", (int)(hl < 2000 ? hl : 2000), buf);
        r->body_len = len - hl - 4;
        r->body = malloc(r->body_len + 1);
        memcpy(r->body, sep + 4, r->body_len);
        r->body[r->body_len] = '\0';
    } else {
        r->body = strdup("");
    }
    free(buf);
}

/* One request: method, path, content type (NULL: none), body. */
static void request(int port, const char *method, const char *path, const char *ctype,
                    const void *body, size_t len, response *r)
{
    int fd = connect_to(port);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, ctype ? "Content-Type: " : "", ctype ? ctype : "",
                     ctype ? "\r\n" : "", len);
    send_all(fd, head, (size_t)n);
    send_all(fd, body, len);
    read_response(fd, r);
    close(fd);
}

static void rpc_json(const char *method, const char *json, response *r)
{
    char path[128];
    snprintf(path, sizeof path, "/kubelease.v1.LeaseService/%s", method);
    request(srv.port, "POST", path, "application/json", json, strlen(json), r);
}

/* The service still serves: /livez, and a real call that reaches the engine. */
static void still_serving(void)
{
    response r;
    request(srv.port, "GET", "/livez", NULL, "", 0, &r);
    assert_int_equal(r.status, 200);
    free(r.body);
    rpc_json("GetHolder", "{\"namespace\":\"default\",\"name\":\"probe\"}", &r);
    if (r.status != 404 || !strstr(r.body, "\"not_found\""))
        fail_msg("a real call after bad input: %d %s", r.status, r.body);
    free(r.body);
    assert_int_equal(kill(srv.pid, 0), 0);
}

static void expect(const response *r, int status, const char *body_part, const char *what)
{
    if (r->status != status || !strstr(r->body, body_part))
        fail_msg("%s: want %d with \"%s\", got %d %s", what, status, body_part, r->status, r->body);
}

static void test_garbage_and_truncated_protobuf(void **state)
{
    (void)state;
    response r;
    const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x12};
    request(srv.port, "POST", "/kubelease.v1.LeaseService/GetHolder", "application/proto", garbage,
            sizeof garbage, &r);
    expect(&r, 400, "\"invalid_argument\"", "garbage protobuf");
    expect(&r, 400, "kubelease.v1.GetHolderRequest", "garbage protobuf");
    assert_non_null(strstr(r.headers, "Content-Type: application/json"));
    free(r.body);
    still_serving();

    Kubelease__V1__GetHolderRequest g = KUBELEASE__V1__GET_HOLDER_REQUEST__INIT;
    g.namespace_ = "default";
    g.name = "a-rather-long-lease-name";
    uint8_t buf[128];
    size_t n = kubelease__v1__get_holder_request__pack(&g, buf);
    request(srv.port, "POST", "/kubelease.v1.LeaseService/GetHolder", "application/proto", buf,
            n - 5, &r);
    expect(&r, 400, "\"invalid_argument\"", "truncated protobuf");
    free(r.body);
    still_serving();

    /* The same for a stream: answered in an end-of-stream frame. */
    uint8_t env[64];
    kl__envelope_header(env, 0, sizeof garbage);
    memcpy(env + 5, garbage, sizeof garbage);
    request(srv.port, "POST", "/kubelease.v1.LeaseService/Campaign", "application/connect+proto",
            env, 5 + sizeof garbage, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.headers, "application/connect+proto"));
    assert_true(r.body_len > 5);
    free(r.body);
    still_serving();
}

static void test_malformed_json_and_wrong_types(void **state)
{
    (void)state;
    response r;
    rpc_json("GetHolder", "{\"namespace\":\"default\",", &r);
    expect(&r, 400, "malformed JSON", "malformed JSON");
    free(r.body);
    rpc_json("GetHolder", "[1,2,3]", &r);
    expect(&r, 400, "\"invalid_argument\"", "JSON array");
    free(r.body);
    rpc_json("Campaign", "{}", &r); /* unary content type on a stream */
    expect(&r, 415, "application/connect+json", "unary codec on a stream");
    free(r.body);
    rpc_json("Confirm",
             "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"epoch\":\"x\"}", &r);
    expect(&r, 400, "field \\\"epoch\\\"", "bad int64");
    free(r.body);
    rpc_json("GetHolder", "\x01\x02\xff{", &r);
    expect(&r, 400, "malformed JSON", "binary junk as JSON");
    free(r.body);
    still_serving();
}

static void test_wrong_content_type_method_and_route(void **state)
{
    (void)state;
    response r;
    request(srv.port, "POST", "/kubelease.v1.LeaseService/GetHolder", "text/plain", "{}", 2, &r);
    expect(&r, 415, "unsupported Content-Type", "text/plain");
    free(r.body);
    request(srv.port, "POST", "/kubelease.v1.LeaseService/GetHolder", NULL, "{}", 2, &r);
    expect(&r, 415, "unsupported Content-Type", "no content type");
    free(r.body);
    request(srv.port, "GET", "/kubelease.v1.LeaseService/GetHolder", NULL, "", 0, &r);
    expect(&r, 405, "needs POST", "GET on an RPC");
    assert_non_null(strstr(r.headers, "Allow: POST"));
    free(r.body);
    rpc_json("DropDatabase", "{}", &r);
    expect(&r, 404, "no method DropDatabase", "unknown method");
    free(r.body);
    request(srv.port, "POST", "/kubelease.v2.Other/GetHolder", "application/json", "{}", 2, &r);
    assert_int_equal(r.status, 404);
    free(r.body);
    request(srv.port, "POST", "/livez", "application/json", "{}", 2, &r);
    assert_int_equal(r.status, 405);
    free(r.body);
    request(srv.port, "GET", "/nope", NULL, "", 0, &r);
    assert_int_equal(r.status, 404);
    free(r.body);
    still_serving();
}

static void test_one_mib_body(void **state)
{
    (void)state;
    /* Announced with Content-Length: answered from the headers alone. */
    int fd = connect_to(srv.port);
    const char *head = "POST /kubelease.v1.LeaseService/GetHolder HTTP/1.1\r\nHost: x\r\n"
                       "Connection: close\r\nContent-Type: application/json\r\n"
                       "Content-Length: 1048576\r\n\r\n";
    send_all(fd, head, strlen(head));
    response r;
    read_response(fd, &r);
    close(fd);
    expect(&r, 429, "\"resource_exhausted\"", "1 MiB body");
    expect(&r, 429, "limit of 4096 bytes", "1 MiB body");
    free(r.body);
    still_serving();

    /* Chunked, without a length: read, dropped, then refused. */
    fd = connect_to(srv.port);
    head = "POST /kubelease.v1.LeaseService/GetHolder HTTP/1.1\r\nHost: x\r\n"
           "Connection: close\r\nContent-Type: application/json\r\n"
           "Transfer-Encoding: chunked\r\n\r\n";
    send_all(fd, head, strlen(head));
    char *chunk = malloc(65536 + 16);
    int hl = sprintf(chunk, "10000\r\n");
    memset(chunk + hl, ' ', 65536);
    memcpy(chunk + hl + 65536, "\r\n", 2);
    for (int i = 0; i < 16; i++)
        send_all(fd, chunk, (size_t)hl + 65536 + 2);
    send_all(fd, "0\r\n\r\n", 5);
    free(chunk);
    read_response(fd, &r);
    close(fd);
    expect(&r, 429, "limit of 4096 bytes", "1 MiB chunked body");
    free(r.body);

    /* The same on a stream: an end-of-stream error. */
    fd = connect_to(srv.port);
    head = "POST /kubelease.v1.LeaseService/Campaign HTTP/1.1\r\nHost: x\r\n"
           "Connection: close\r\nContent-Type: application/connect+json\r\n"
           "Content-Length: 1048576\r\n\r\n";
    send_all(fd, head, strlen(head));
    read_response(fd, &r);
    close(fd);
    assert_int_equal(r.status, 200);
    assert_true(r.body_len > 5 && (uint8_t)r.body[0] == KL__ENVELOPE_FLAG_END_STREAM);
    assert_non_null(strstr(r.body + 5, "resource_exhausted"));
    free(r.body);
    still_serving();
}

static void test_invalid_names_and_durations(void **state)
{
    (void)state;
    static const struct {
        const char *method, *json, *want;
    } cases[] = {
        {"GetHolder", "{\"namespace\":\"Default\",\"name\":\"db\"}", "namespace"},
        {"GetHolder", "{\"namespace\":\"default\",\"name\":\"-db\"}", "name"},
        {"GetHolder", "{\"namespace\":\"default\"}", "name"},
        {"Resign", "{\"namespace\":\"default\",\"name\":\"db\"}", "identity"},
        {"Confirm", "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"epoch\":0}",
         "epoch"},
    };
    response r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rpc_json(cases[i].method, cases[i].json, &r);
        expect(&r, 400, "\"invalid_argument\"", cases[i].json);
        expect(&r, 400, cases[i].want, cases[i].json);
        free(r.body);
    }
    /* Campaign (a stream): the error is in the end-of-stream frame. */
    static const struct {
        const char *json, *want;
    } camps[] = {
        {"{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"leaseDurationSeconds\":"
         "10,"
         "\"renewDeadlineSeconds\":15,\"retryPeriodSeconds\":2}",
         "lease_duration_seconds"},
        {"{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"leaseDurationSeconds\":"
         "15,"
         "\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":0}",
         "retry_period_seconds"},
        {"{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"\",\"leaseDurationSeconds\":15,"
         "\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":2}",
         "identity"},
    };
    for (size_t i = 0; i < sizeof camps / sizeof camps[0]; i++) {
        uint8_t env[512];
        size_t n = strlen(camps[i].json);
        kl__envelope_header(env, 0, (uint32_t)n);
        memcpy(env + 5, camps[i].json, n);
        request(srv.port, "POST", "/kubelease.v1.LeaseService/Campaign", "application/connect+json",
                env, n + 5, &r);
        assert_int_equal(r.status, 200);
        assert_true(r.body_len > 5 && (uint8_t)r.body[0] == KL__ENVELOPE_FLAG_END_STREAM);
        if (!strstr(r.body + 5, "invalid_argument") || !strstr(r.body + 5, camps[i].want))
            fail_msg("Campaign %s: %s", camps[i].json, r.body + 5);
        free(r.body);
    }
    /* Not an envelope at all, and a truncated one. */
    request(srv.port, "POST", "/kubelease.v1.LeaseService/Campaign", "application/connect+json",
            "{}", 2, &r);
    assert_non_null(strstr(r.body_len > 5 ? r.body + 5 : "", "truncated"));
    free(r.body);
    uint8_t env[8];
    kl__envelope_header(env, 0, 100);
    request(srv.port, "POST", "/kubelease.v1.LeaseService/Campaign", "application/connect+json",
            env, 7, &r);
    assert_non_null(strstr(r.body_len > 5 ? r.body + 5 : "", "truncated"));
    free(r.body);
    /* A compressed body. */
    int cfd = connect_to(srv.port);
    const char *creq = "POST /kubelease.v1.LeaseService/ListLeases HTTP/1.1\r\nHost: x\r\n"
                       "Connection: close\r\nContent-Type: application/json\r\n"
                       "Content-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}";
    send_all(cfd, creq, strlen(creq));
    read_response(cfd, &r);
    close(cfd);
    expect(&r, 501, "\"unimplemented\"", "gzip body");
    free(r.body);
    /* Bad Connect-Timeout-Ms. */
    int fd = connect_to(srv.port);
    const char *req = "POST /kubelease.v1.LeaseService/ListLeases HTTP/1.1\r\nHost: x\r\n"
                      "Connection: close\r\nContent-Type: application/json\r\n"
                      "Connect-Timeout-Ms: soon\r\nContent-Length: 2\r\n\r\n{}";
    send_all(fd, req, strlen(req));
    read_response(fd, &r);
    close(fd);
    expect(&r, 400, "Connect-Timeout-Ms", "bad timeout header");
    free(r.body);
    still_serving();
}

/* Opens a Campaign or watch stream and never reads from it. */
static int open_stream(const char *method, const char *json)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)srv.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[1024];
    size_t n = strlen(json);
    int hl = snprintf(req, sizeof req,
                      "POST /kubelease.v1.LeaseService/%s HTTP/1.1\r\nHost: x\r\n"
                      "Content-Type: application/connect+json\r\nContent-Length: %zu\r\n\r\n",
                      method, n + 5);
    kl__envelope_header((uint8_t *)req + hl, 0, (uint32_t)n);
    memcpy(req + hl + 5, json, n);
    send_all(fd, req, (size_t)hl + 5 + n);
    return fd;
}

static void test_stream_client_that_never_reads(void **state)
{
    (void)state;
    int fds[20];
    for (int i = 0; i < 10; i++) {
        char json[256];
        snprintf(json, sizeof json,
                 "{\"namespace\":\"default\",\"name\":\"silent\",\"identity\":\"c%d\","
                 "\"leaseDurationSeconds\":3,\"renewDeadlineSeconds\":2,\"retryPeriodSeconds\":1}",
                 i);
        fds[i] = open_stream("Campaign", json);
        fds[10 + i] = open_stream("WatchHolder", "{\"namespace\":\"default\",\"name\":\"silent\"}");
    }
    /* The service goes on serving while they sit there (heartbeats to
     * standbys each second pile up unread). */
    int64_t until = now_ms() + 3000;
    while (now_ms() < until) {
        still_serving();
        response r;
        rpc_json("ListLeases", "{}", &r);
        expect(&r, 200, "\"silent\"", "ListLeases with silent streams");
        free(r.body);
        usleep(200000);
    }
    for (int i = 0; i < 20; i++)
        close(fds[i]);
    /* Closing them is noticed: the candidates go away. */
    int64_t deadline = now_ms() + 5000;
    for (;;) {
        response r;
        rpc_json("ListLeases", "{}", &r);
        /* Zero counts are omitted from the row of default/silent. */
        char *row = strstr(r.body, "\"name\":\"silent\"");
        char *end = row ? strchr(row, '}') : NULL;
        if (end)
            *end = '\0';
        bool gone = !row || (!strstr(row, "\"candidates\"") && !strstr(row, "\"watchers\""));
        free(r.body);
        if (gone)
            break;
        if (now_ms() > deadline)
            fail_msg("the closed silent streams were not noticed within 5 s");
        usleep(50000);
    }
    still_serving();
}

static void test_thousand_connections_opened_and_dropped(void **state)
{
    (void)state;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    const char *partial = "POST /kubelease.v1.LeaseService/GetHolder HTTP/1.1\r\nHost: x\r\n"
                          "Content-Type: application/json\r\nContent-Len";
    const char *no_body = "POST /kubelease.v1.LeaseService/GetHolder HTTP/1.1\r\nHost: x\r\n"
                          "Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{\"na";
    int total = 0;
    for (int batch = 0; batch < 4; batch++) {
        int fds[250];
        for (int i = 0; i < 250; i++) {
            fds[i] = connect_to(srv.port);
            if (batch == 1)
                send_all(fds[i], partial, strlen(partial));
            else if (batch == 2)
                send_all(fds[i], no_body, strlen(no_body));
            else if (batch == 3)
                send_all(fds[i], "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11); /* TLS */
        }
        for (int i = 0; i < 250; i++) {
            if (batch == 0 || batch == 3) {
                struct linger lg = {.l_onoff = 1, .l_linger = 0}; /* RST */
                setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
            }
            close(fds[i]);
            total++;
        }
        still_serving();
    }
    assert_int_equal(total, 1000);
}

/* Sends GET /livez on fd (kept alive) and waits for the "ok" answer. */
static bool livez_on(int fd)
{
    const char *get = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
    send_all(fd, get, strlen(get));
    char buf[512];
    size_t got = 0;
    while (got < sizeof buf - 1) {
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            return false;
        got += (size_t)n;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\nok\n"))
            return true;
    }
    return false;
}

#define PER_IP      3
#define PER_IP_HARD (PER_IP + 8) /* the server's headroom: max(8, limit / 8) */

static void test_namespaces_and_per_ip_limit(void **state)
{
    (void)state;
    const char *extra[] = {"--namespaces", "team-a,team-b", "--max-per-ip", "3", NULL};
    server_start(&other, extra);
    /* On a server nobody else has talked to: three connections are served
     * (a kept-alive request proves each is accepted and counted). */
    int held[PER_IP_HARD];
    int n_held = 0;
    for (; n_held < PER_IP; n_held++) {
        held[n_held] = connect_to(other.port);
        if (!livez_on(held[n_held]))
            fail_msg("connection %d of 3 refused by --max-per-ip 3", n_held + 1);
    }
    /* The fourth gets a Connect error naming the limit on its RPC, and is
     * closed after it (the request itself asks to keep it alive). */
    int fd = connect_to(other.port);
    const char *body = "{\"namespace\":\"team-a\",\"name\":\"db\"}";
    char head[256];
    int n = snprintf(head, sizeof head,
                     "POST /kubelease.v1.LeaseService/GetHolder HTTP/1.1\r\nHost: x\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                     strlen(body));
    send_all(fd, head, (size_t)n);
    send_all(fd, body, strlen(body));
    response r = {0};
    read_response(fd, &r);
    close(fd);
    expect(&r, 429, "\"resource_exhausted\"", "an RPC over --max-per-ip");
    expect(&r, 429, "over --max-per-ip 3", "an RPC over --max-per-ip");
    if (!strcasestr(r.headers, "\r\nConnection: close"))
        fail_msg("the refused connection is not closed: %s", r.headers);
    free(r.body);
    /* A stream is refused the Connect way: HTTP 200 and an end-of-stream
     * frame carrying the error. */
    fd = connect_to(other.port);
    const char *campaign = "{\"namespace\":\"team-a\",\"name\":\"db\",\"identity\":\"x\"}";
    uint8_t env[5] = {0, 0, 0, 0, (uint8_t)strlen(campaign)};
    n = snprintf(head, sizeof head,
                 "POST /kubelease.v1.LeaseService/Campaign HTTP/1.1\r\nHost: x\r\n"
                 "Content-Type: application/connect+json\r\nContent-Length: %zu\r\n\r\n",
                 sizeof env + strlen(campaign));
    send_all(fd, head, (size_t)n);
    send_all(fd, env, sizeof env);
    send_all(fd, campaign, strlen(campaign));
    read_response(fd, &r);
    close(fd);
    if (r.status != 200 || r.body_len < 5 || (uint8_t)r.body[0] != 0x02 ||
        !strstr(r.body + 5, "resource_exhausted") || !strstr(r.body + 5, "over --max-per-ip 3"))
        fail_msg("a stream over --max-per-ip: want 200 and an end-of-stream frame with "
                 "resource_exhausted, got %d %s",
                 r.status, r.body_len > 5 ? r.body + 5 : "");
    free(r.body);
    /* Probes are still answered over the limit, up to the hard limit,
     * beyond which libmicrohttpd closes connections at once. */
    for (; n_held < PER_IP_HARD; n_held++) {
        held[n_held] = connect_to(other.port);
        if (!livez_on(held[n_held]))
            fail_msg("/livez on connection %d (hard limit %d) was not answered", n_held + 1,
                     PER_IP_HARD);
    }
    fd = connect_to(other.port);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 3000), 1);
    char c;
    assert_true(recv(fd, &c, 1, 0) <= 0);
    close(fd);
    for (int i = 0; i < n_held; i++)
        close(held[i]);
    /* Closed connections are counted until the server has cleaned them up
     * (until then a new one is over the limit). */
    memset(&r, 0, sizeof r);
    int64_t deadline = now_ms() + 5000;
    do {
        free(r.body);
        request(other.port, "POST", "/kubelease.v1.LeaseService/GetHolder", "application/json",
                "{\"namespace\":\"team-c\",\"name\":\"db\"}", 35, &r);
    } while ((r.status == 0 || r.status == 429) && now_ms() < deadline);
    expect(&r, 403, "\"permission_denied\"", "namespace not served");
    expect(&r, 403, "team-c", "namespace not served");
    free(r.body);
    r.body = NULL;
    do {
        free(r.body);
        request(other.port, "POST", "/kubelease.v1.LeaseService/GetHolder", "application/json",
                "{\"namespace\":\"team-b\",\"name\":\"db\"}", 35, &r);
    } while ((r.status == 0 || r.status == 429) && now_ms() < deadline);
    expect(&r, 404, "\"not_found\"", "namespace served");
    free(r.body);
    server_stop(&other);
}

static int setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    server_start(&srv, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (other.pid > 0) {
        kill(other.pid, SIGKILL);
        waitpid(other.pid, NULL, 0);
        unlink(other.log);
    }
    server_stop(&srv);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_garbage_and_truncated_protobuf),
        cmocka_unit_test(test_malformed_json_and_wrong_types),
        cmocka_unit_test(test_wrong_content_type_method_and_route),
        cmocka_unit_test(test_one_mib_body),
        cmocka_unit_test(test_invalid_names_and_durations),
        cmocka_unit_test(test_stream_client_that_never_reads),
        cmocka_unit_test(test_thousand_connections_opened_and_dropped),
        cmocka_unit_test(test_namespaces_and_per_ip_limit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
