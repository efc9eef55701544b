/* The HTTP server in-process, on the memory store: Connect-Timeout-Ms
 * against a slow store, the probes and the status page, the longest request
 * head, and the shutdown sequence with a stream open. */
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "common/envelope.h"
#include "core/loop.h"
#include "engine/engine.h"
#include "http/server.h"
#include "ops/ops.h"
#include "store/memory.h"
#include "store/store.h"
#include "support/http_call.h"
#include "support/server_backend.h"

typedef struct fixture {
    server_backend b;
    http_server *srv;
    char base[64];
    loop *clock; /* a loop never run, whose clock the deadlines read; NULL: none */
} fixture;

/* The manual clock of the fixtures that have one: read by the timer
 * thread, moved by the test. */
static _Atomic int64_t manual_ms;
static bool manual_clock; /* the next fixture's deadlines read it */

static int64_t manual_read(void *ctx)
{
    (void)ctx;
    return atomic_load(&manual_ms);
}

typedef struct latency_arg {
    store *st;
    int ms;
} latency_arg;

static void set_latency(void *arg)
{
    latency_arg *a = arg;
    store_memory_set_latency(a->st, a->ms);
}

/* A fixture whose server has max_header_bytes of room for a head (0: the
 * default). */
static fixture *start(size_t max_header_bytes)
{
    fixture *f = calloc(1, sizeof *f);
    server_backend_start(&f->b);
    char err[256];
    if (manual_clock) {
        atomic_store(&manual_ms, 1000000);
        f->clock = loop_new();
        loop_set_clock(f->clock, manual_read, NULL);
    }
    http_config hc = {.ops = ops_http_hooks(),
                      .listen = "127.0.0.1:0",
                      .engine = f->b.e,
                      .max_header_bytes = max_header_bytes,
                      .clock = f->clock};
    f->srv = http_server_start(&hc, err, sizeof err);
    if (!f->srv)
        fail_msg("http_server_start: %s", err);
    snprintf(f->base, sizeof f->base, "http://127.0.0.1:%u", (unsigned)http_server_port(f->srv));
    return f;
}

static int setup(void **state)
{
    *state = start(0);
    return 0;
}

/* Connect deadlines on a clock the test moves. */
static int setup_manual_clock(void **state)
{
    manual_clock = true;
    *state = start(0);
    manual_clock = false;
    return 0;
}

/* --max-header-bytes 12288: room for an 8 KiB head. */
static int setup_large_heads(void **state)
{
    *state = start(12288);
    return 0;
}

static void shutdown_fixture(fixture *f)
{
    server_backend_stop(&f->b, f->srv);
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->srv)
        shutdown_fixture(f);
    loop_free(f->clock);
    free(f);
    return 0;
}

typedef http_body body;

/* One request; returns the HTTP status. header may be NULL. */
static long http(const fixture *f, const char *path, const char *ctype, const char *header,
                 const void *data, size_t len, body *out)
{
    return http_call(f->base, path, ctype, header, data, len, out);
}

static long rpc(const fixture *f, const char *method, const char *json, const char *header,
                body *out)
{
    char path[128];
    snprintf(path, sizeof path, "/kubelease.v1.LeaseService/%s", method);
    return http(f, path, "application/json", header, json, strlen(json), out);
}

static void test_http_connect_timeout_ms_answers_deadline_exceeded(void **state)
{
    fixture *f = *state;
    latency_arg a = {f->b.st, 400};
    loop_post(f->b.l, set_latency, &a);
    body b;
    const char *req = "{\"namespace\":\"default\",\"name\":\"slow\",\"consistent\":true}";
    /* The store answers after 400 ms (then: not_found); the deadline first. */
    long st = rpc(f, "GetHolder", req, "Connect-Timeout-Ms: 50", &b);
    assert_int_equal(st, 504);
    assert_non_null(strstr(b.data, "\"deadline_exceeded\""));
    /* Without a deadline the same read waits for the store. */
    st = rpc(f, "GetHolder", req, NULL, &b);
    assert_int_equal(st, 404);
    assert_non_null(strstr(b.data, "\"not_found\""));
    st = rpc(f, "GetHolder", req, "Connect-Timeout-Ms: 0", &b);
    assert_int_equal(st, 504);
    a.ms = 0;
    loop_post(f->b.l, set_latency, &a);
    /* Let the posted task run before a goes out of scope. */
    st = rpc(f, "ListLeases", "{}", NULL, &b);
    assert_int_equal(st, 200);
}

typedef struct slow_call {
    const fixture *f;
    long status;
    body b;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} slow_call;

static void *call_slow(void *arg)
{
    slow_call *c = arg;
    const char *req = "{\"namespace\":\"default\",\"name\":\"slow\",\"consistent\":true}";
    c->status = rpc(c->f, "GetHolder", req, "Connect-Timeout-Ms: 60000", &c->b);
    pthread_mutex_lock(&c->mu);
    c->done = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Connect-Timeout-Ms is read on the loop's clock: a minute of it passes in
 * no time when the clock is moved, and the call waiting for a store that
 * answers in 3 s is answered deadline_exceeded at once. The clock is moved
 * on until the call is answered (it may not have started when first
 * moved). */
static void test_http_connect_timeout_ms_reads_the_loops_clock(void **state)
{
    fixture *f = *state;
    latency_arg a = {f->b.st, 3000};
    loop_post(f->b.l, set_latency, &a);
    slow_call c = {.f = f};
    pthread_mutex_init(&c.mu, NULL);
    pthread_cond_init(&c.cv, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t t;
    pthread_create(&t, NULL, call_slow, &c);
    pthread_mutex_lock(&c.mu);
    while (!c.done) {
        atomic_fetch_add(&manual_ms, 60001);
        http_server_clock_moved(f->srv);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 20 * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&c.cv, &c.mu, &until); /* the answer, or move on */
    }
    pthread_mutex_unlock(&c.mu);
    pthread_join(t, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    printf("a 60 s Connect-Timeout-Ms on a moved clock ended the call in %ld ms\n", ms);
    assert_int_equal(c.status, 504);
    assert_non_null(strstr(c.b.data, "\"deadline_exceeded\""));
    assert_true(ms < 2500); /* before the store's answer */
    a.ms = 0;
    loop_post(f->b.l, set_latency, &a);
    body b;
    assert_int_equal(rpc(f, "ListLeases", "{}", NULL, &b), 200); /* a's task has run */
    pthread_cond_destroy(&c.cv);
    pthread_mutex_destroy(&c.mu);
}

/* A server stream honours Connect-Timeout-Ms too: a holder watch that
 * would run forever ends at its deadline with deadline_exceeded in the
 * end-of-stream frame, after the current state. */
static void test_http_stream_connect_timeout_ms_ends_the_stream(void **state)
{
    fixture *f = *state;
    const char *req = "{\"namespace\":\"default\",\"name\":\"watched\"}";
    char env[128];
    size_t n = strlen(req);
    env[0] = 0;
    env[1] = env[2] = env[3] = 0;
    env[4] = (char)n;
    memcpy(env + 5, req, n);
    body b;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long st = http(f, "/kubelease.v1.LeaseService/WatchHolder", "application/connect+json",
                   "Connect-Timeout-Ms: 300", env, 5 + n, &b);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(st, 200);
    /* The first frame is the current state (flags 0), the last the end. */
    assert_true(b.len > 10);
    assert_int_equal((unsigned char)b.data[0], 0);
    size_t first = 5 + (((size_t)(unsigned char)b.data[3] << 8) | (unsigned char)b.data[4]);
    assert_true(first + 5 < b.len);
    assert_int_equal((unsigned char)b.data[first], 2);
    assert_non_null(strstr(b.data + first + 5, "\"deadline_exceeded\""));
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    printf("the watch ended %ld ms after it began (Connect-Timeout-Ms: 300)\n", ms);
    assert_true(ms >= 300);
}

static void test_http_probes_and_status_page(void **state)
{
    fixture *f = *state;
    body b;
    assert_int_equal(http(f, "/livez", NULL, NULL, NULL, 0, &b), 200);
    assert_string_equal(b.data, "ok\n");
    assert_int_equal(http(f, "/readyz", NULL, NULL, NULL, 0, &b), 200);
    assert_int_equal(http(f, "/nope", NULL, NULL, NULL, 0, &b), 404);
    assert_int_equal(http(f, "/livez", NULL, NULL, "x", 1, &b), 405);
}

/* The connection's memory holds a Connect request's head with a long
 * bearer token (ServiceAccount tokens are about 1 KiB) next to a body of
 * --max-body-bytes; a head far past it is refused with 431. */
static void test_http_long_head_is_served_and_a_huge_one_refused(void **state)
{
    fixture *f = *state;
    body b;
    char header[8192], json[4096 + 1];
    size_t h = (size_t)snprintf(header, sizeof header, "Authorization: Bearer ");
    memset(header + h, 'a', 2500);
    header[h + 2500] = '\0';
    int n = snprintf(json, sizeof json, "{\"namespace\":\"default\",\"name\":\"absent\"}");
    memset(json + n, ' ', sizeof json - 1 - (size_t)n); /* JSON white space up to 4 KiB */
    json[sizeof json - 1] = '\0';
    assert_int_equal(rpc(f, "GetHolder", json, header, &b), 404);
    assert_non_null(strstr(b.data, "not_found"));
    memset(header + h, 'a', sizeof header - 1 - h);
    header[sizeof header - 1] = '\0';
    assert_int_equal(rpc(f, "GetHolder", json, header, &b), 431);
}

/* With --max-header-bytes raised, the 8 KiB head the default refuses is
 * served. */
static void test_http_max_header_bytes_makes_room_for_a_larger_head(void **state)
{
    fixture *f = *state;
    body b;
    char header[8192];
    size_t h = (size_t)snprintf(header, sizeof header, "Authorization: Bearer ");
    memset(header + h, 'a', sizeof header - 1 - h);
    header[sizeof header - 1] = '\0';
    const char *json = "{\"namespace\":\"default\",\"name\":\"absent\"}";
    assert_int_equal(rpc(f, "GetHolder", json, header, &b), 404);
    assert_non_null(strstr(b.data, "not_found"));
}

/* Once quiesced, the server closes new connections at once (clients go to
 * another replica), without libmicrohttpd's racy MHD_quiesce_daemon. */
static void test_http_quiesce_closes_new_connections(void **state)
{
    fixture *f = *state;
    body b;
    assert_int_equal(http(f, "/livez", NULL, NULL, NULL, 0, &b), 200);
    http_server_quiesce(f->srv);
    assert_int_equal(http(f, "/livez", NULL, NULL, NULL, 0, &b), -1);
    assert_int_equal(b.len, 0);
}

/* A stream open at shutdown ends with Lost SHUTDOWN and an end frame. */
typedef struct stream_result {
    const fixture *f;
    body b;
    long status;
} stream_result;

static void *campaign_client(void *arg)
{
    stream_result *r = arg;
    const char *json = "{\"namespace\":\"default\",\"name\":\"bye\",\"identity\":\"a\","
                       "\"leaseDurationSeconds\":15,\"renewDeadlineSeconds\":10,"
                       "\"retryPeriodSeconds\":2}";
    uint8_t env[512];
    size_t n = strlen(json);
    kl__envelope_header(env, 0, (uint32_t)n);
    memcpy(env + 5, json, n);
    r->status = http(r->f, "/kubelease.v1.LeaseService/Campaign", "application/connect+json", NULL,
                     env, n + 5, &r->b);
    return NULL;
}

static void test_http_status_page_and_shutdown_ending_streams_cleanly(void **state)
{
    fixture *f = *state;
    stream_result r = {.f = f};
    pthread_t t;
    pthread_create(&t, NULL, campaign_client, &r);
    /* Wait until the engine has elected it. */
    body b;
    for (int i = 0; i < 200; i++) {
        rpc(f, "GetHolder", "{\"namespace\":\"default\",\"name\":\"bye\"}", NULL, &b);
        if (strstr(b.data, "\"holder\":\"a\""))
            break;
        usleep(10000);
    }
    assert_non_null(strstr(b.data, "\"holder\":\"a\""));
    /* The lease and its holder show on the status page. */
    assert_int_equal(http(f, "/", NULL, NULL, NULL, 0, &b), 200);
    assert_non_null(strstr(b.data, "<html"));
    assert_non_null(strstr(b.data, "<div class=\"lease\">bye</div>"));
    assert_non_null(strstr(b.data, "<span class=\"holder\">a</span>"));
    shutdown_fixture(f);
    f->srv = NULL;
    pthread_join(t, NULL);
    assert_int_equal(r.status, 200);
    assert_non_null(memmem(r.b.data, r.b.len, "\"elected\"", 9));
    assert_non_null(memmem(r.b.data, r.b.len, "LOST_REASON_SHUTDOWN", 20));
    assert_true(r.b.len >= 7);
    assert_memory_equal(r.b.data + r.b.len - 7, "\x02\x00\x00\x00\x02{}", 7);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_http_stream_connect_timeout_ms_ends_the_stream, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_connect_timeout_ms_answers_deadline_exceeded,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_connect_timeout_ms_reads_the_loops_clock,
                                        setup_manual_clock, teardown),
        cmocka_unit_test_setup_teardown(test_http_probes_and_status_page, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_long_head_is_served_and_a_huge_one_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_http_max_header_bytes_makes_room_for_a_larger_head,
                                        setup_large_heads, teardown),
        cmocka_unit_test_setup_teardown(test_http_quiesce_closes_new_connections, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_status_page_and_shutdown_ending_streams_cleanly,
                                        setup, teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
