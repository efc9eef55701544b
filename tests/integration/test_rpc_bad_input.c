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
#include "raw_http.h"
#include "rpc/connect.h"

static server srv;
static server other; /* a second server with limits; stopped in teardown if a test failed */

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
        {"CheckEpoch", "{\"namespace\":\"default\",\"name\":\"db\"}", "epoch"},
        {"CheckEpoch", "{\"namespace\":\"default\",\"name\":\"db\",\"epoch\":\"-1\"}", "epoch"},
        {"CheckEpoch", "{\"namespace\":\"default\",\"name\":\"DB\",\"epoch\":1}", "name"},
        {"CheckEpoch", "{\"namespace\":\"default\",\"name\":\"db\",\"epoch\":true}", "epoch"},
        {"ListCandidates", "{\"namespace\":\"default\"}", "name"},
        {"ListCandidates", "{\"namespace\":\"de fault\",\"name\":\"db\"}", "namespace"},
        {"ListCandidates", "{\"namespace\":\"default\",\"name\":[\"db\"]}", "name"},
        {"ListTerms", "{\"namespace\":\"default\"}", "name"},
        {"ListTerms", "{\"namespace\":\"de fault\",\"name\":\"db\"}", "namespace"},
        {"ListTerms", "{\"name\":\"db\"}", "namespace"},
        {"ListTerms", "{\"namespace\":\"default\",\"name\":\"DB\"}", "name"},
        {"ListTerms", "{\"namespace\":\"default\",\"name\":7}", "name"},
        {"ListTerms", "{\"namespace\":\"default\",\"name\":\"d\\u0000b\"}", "name"},
        {"Handoff", "{\"namespace\":\"default\"}", "name"},
        {"Handoff", "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\"}", "term_token"},
        {"Handoff", "{\"namespace\":\"default\",\"name\":\"db\",\"termToken\":\"x\"}", "identity"},
        {"Handoff", "{\"namespace\":\"default\",\"name\":\"db\",\"toIdentity\":\"a\\u0001\"}",
         "to_identity"},
        {"SetPodLabel", "{\"namespace\":\"default\",\"name\":\"db\"}", "identity"},
        {"SetPodLabel",
         "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"podName\":\"kv-0\"}",
         "pod_label_key"},
        {"SetPodLabel",
         "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"podName\":\"kv-0\","
         "\"podLabelKey\":\"role\",\"podNamespace\":\"Team\"}",
         "pod_namespace"},
        {"SetPodLabel",
         "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"podNamespace\":\"team\"}",
         "pod_name"},
        {"SetPodLabel",
         "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"podName\":\"kv-0\","
         "\"podLabelKey\":\"role\",\"podLabelValue\":\"a b\"}",
         "pod_label_value"},
        {"SetPodLabel",
         "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"podName\":\"kv\\u0000x\","
         "\"podLabelKey\":\"role\"}",
         "podName"},
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

/* A Campaign stream request: one envelope around msg, with a header that
 * may lie about the length (announce != n). */
static void campaign_raw(const char *ctype, uint32_t announce, const void *msg, size_t n,
                         response *r)
{
    uint8_t env[512];
    kl__envelope_header(env, 0, announce);
    memcpy(env + 5, msg, n);
    request(srv.port, "POST", "/kubelease.v1.LeaseService/Campaign", ctype, env, n + 5, r);
}

static const char *end_frame(const response *r)
{
    if (r->status != 200 || r->body_len <= 5 || (uint8_t)r->body[0] != KL__ENVELOPE_FLAG_END_STREAM)
        fail_msg("want an end-of-stream frame, got %d %s", r->status, r->body);
    return r->body + 5;
}

/* Names are exact: nothing is cut at a NUL, integers are digits, JSON ends
 * where its object does, and an envelope too large is called so. */
static void test_nul_bytes_numbers_and_envelope_lengths(void **state)
{
    (void)state;
    response r;
    /* JSON: "pod-a\u0000evil" would be cut to "pod-a". */
    const char *json = "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":"
                       "\"pod-a\\u0000evil\",\"leaseDurationSeconds\":15,"
                       "\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":2}";
    campaign_raw("application/connect+json", (uint32_t)strlen(json), json, strlen(json), &r);
    const char *e = end_frame(&r);
    if (!strstr(e, "invalid_argument") || !strstr(e, "field \\\"identity\\\": contains a NUL"))
        fail_msg("identity with \\u0000 (JSON): %s", e);
    free(r.body);
    rpc_json("Resign", "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"pod-a\\u0000\"}",
             &r);
    expect(&r, 400, "field \\\"identity\\\": contains a NUL", "identity with \\u0000 (Resign)");
    free(r.body);
    /* protobuf: identity "pod-a\0zzz". */
    Kubelease__V1__CampaignRequest c = KUBELEASE__V1__CAMPAIGN_REQUEST__INIT;
    c.namespace_ = "default";
    c.name = "db";
    c.lease_duration_seconds = 15;
    c.renew_deadline_seconds = 10;
    c.retry_period_seconds = 2;
    uint8_t pb[256];
    size_t n = kubelease__v1__campaign_request__pack(&c, pb);
    static const uint8_t identity[] = {0x1a, 9, 'p', 'o', 'd', '-', 'a', 0, 'z', 'z', 'z'};
    memcpy(pb + n, identity, sizeof identity);
    n += sizeof identity;
    campaign_raw("application/connect+proto", (uint32_t)n, pb, n, &r);
    e = end_frame(&r);
    if (!strstr(e, "invalid_argument") || !strstr(e, "field \\\"identity\\\": contains a NUL"))
        fail_msg("identity with a NUL (protobuf): %s", e);
    free(r.body);
    /* An envelope announcing 0xFFFFFFFF bytes is too large, not truncated. */
    campaign_raw("application/connect+json", 0xFFFFFFFFu, "{}", 2, &r);
    e = end_frame(&r);
    if (!strstr(e, "resource_exhausted") || !strstr(e, "4294967295 bytes") ||
        !strstr(e, "limit of 4096 bytes (--max-body-bytes)"))
        fail_msg("envelope length 0xFFFFFFFF: %s", e);
    free(r.body);
    /* proto3 JSON integers in strings: no leading whitespace. */
    rpc_json("Confirm",
             "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"epoch\":\"\\t5\"}",
             &r);
    expect(&r, 400, "field \\\"epoch\\\": expected an integer", "epoch \"\\t5\"");
    free(r.body);
    /* NUL bytes after the JSON object. */
    static const char trailing[] = "{\"namespace\":\"default\",\"name\":\"probe\"}\0\0\0";
    request(srv.port, "POST", "/kubelease.v1.LeaseService/GetHolder", "application/json", trailing,
            sizeof trailing - 1, &r);
    expect(&r, 400, "trailing data", "NUL bytes after the JSON body");
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
    /* A Confirm over it is served all the same (terms before strangers):
     * this one names no live term, and is told so. */
    fd = connect_to(other.port);
    const char *confirm = "{\"namespace\":\"team-a\",\"name\":\"db\",\"identity\":\"x\","
                          "\"epoch\":\"1\"}";
    n = snprintf(head, sizeof head,
                 "POST /kubelease.v1.LeaseService/Confirm HTTP/1.1\r\nHost: x\r\n"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                 strlen(confirm));
    send_all(fd, head, (size_t)n);
    send_all(fd, confirm, strlen(confirm));
    read_response(fd, &r);
    close(fd);
    if (r.status == 0 || r.status == 429 || strstr(r.body, "--max-per-ip"))
        fail_msg("a Confirm over --max-per-ip was refused for the limit: %d %s", r.status, r.body);
    printf("a Confirm over --max-per-ip 3: %d %s\n", r.status, r.body);
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
    /* Past it, a request is not served: its connection is closed as it is
     * handed to libmicrohttpd (once its head is in: the acceptor holds a
     * silent one in no slot of the limit). */
    fd = connect_to(other.port);
    const char *get = "GET /livez HTTP/1.1\r\nHost: x\r\n\r\n";
    send_all(fd, get, strlen(get));
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
                "{\"namespace\":\"team-c\",\"name\":\"db\"}", 34, &r);
    } while ((r.status == 0 || r.status == 429) && now_ms() < deadline);
    expect(&r, 403, "\"permission_denied\"", "namespace not served");
    expect(&r, 403, "team-c", "namespace not served");
    free(r.body);
    r.body = NULL;
    do {
        free(r.body);
        request(other.port, "POST", "/kubelease.v1.LeaseService/GetHolder", "application/json",
                "{\"namespace\":\"team-b\",\"name\":\"db\"}", 34, &r);
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
        cmocka_unit_test(test_nul_bytes_numbers_and_envelope_lengths),
        cmocka_unit_test(test_stream_client_that_never_reads),
        cmocka_unit_test(test_thousand_connections_opened_and_dropped),
        cmocka_unit_test(test_namespaces_and_per_ip_limit),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
