/* The client's local behaviour, without a kubelease service: argument
 * validation (messages name the argument, nothing changes), one election and
 * one watch per lease, idempotent cancels, wait_elected's timeout cancelling
 * the election, and actionable messages when the service is unreachable (a
 * closed port) or does not answer (a socket that never accepts). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "kubelease.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A listening socket on a free loopback port; *port set. */
static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* An endpoint where nothing listens: connections are refused. */
static void closed_endpoint(char *buf, size_t n)
{
    int port;
    int fd = listen_any(&port);
    close(fd);
    snprintf(buf, n, "http://127.0.0.1:%d", port);
}

static kl_client *new_closed_client(char *endpoint, size_t n)
{
    kl_error err;
    closed_endpoint(endpoint, n);
    kl_client *c = kl_client_new(endpoint, &err);
    assert_non_null(c);
    assert_int_equal(err.code, KL_OK);
    return c;
}

static void test_client_new_rejects_bad_endpoints(void **state)
{
    (void)state;
    const char *bad[] = {"", "127.0.0.1:8080", "ftp://host", "http://", "http:///x", "http://a b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        kl_error err;
        assert_null(kl_client_new(bad[i], &err));
        assert_int_equal(err.code, KL_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(err.message, "endpoint"));
    }
    assert_null(kl_client_new("nope", NULL)); /* err may be NULL */
    kl_client_options o;
    kl_client_options_init(&o);
    o.connect_timeout_ms = -1;
    kl_error err;
    assert_null(kl_client_new_opts("http://127.0.0.1:1", &o, &err));
    assert_int_equal(err.code, KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "opts"));
}

static void test_client_endpoint_from_environment(void **state)
{
    (void)state;
    kl_error err;
    setenv("KUBELEASE_ENDPOINT", "not-a-url-from-env", 1);
    assert_null(kl_client_new(NULL, &err));
    assert_non_null(strstr(err.message, "not-a-url-from-env"));
    unsetenv("KUBELEASE_ENDPOINT");
    kl_client *c = kl_client_new(NULL, &err); /* the default endpoint */
    assert_non_null(c);
    kl_client_free(c);
    kl_client_free(NULL);
}

/* The CA bundle for https endpoints: an option, else $KUBELEASE_CA_FILE;
 * one that cannot be read is an invalid argument that names it. */
static void test_client_ca_file_must_be_readable(void **state)
{
    (void)state;
    kl_client_options o;
    kl_error err;
    kl_client_options_init(&o);
    o.ca_file = "/nonexistent/ca.crt";
    assert_null(kl_client_new_opts("https://127.0.0.1:1", &o, &err));
    assert_int_equal(err.code, KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "ca_file \"/nonexistent/ca.crt\""));
    setenv("KUBELEASE_CA_FILE", "/nonexistent/env-ca.crt", 1);
    assert_null(kl_client_new("https://127.0.0.1:1", &err));
    assert_int_equal(err.code, KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "$KUBELEASE_CA_FILE"));
    setenv("KUBELEASE_CA_FILE", "", 1); /* empty: unset */
    kl_client *c = kl_client_new("https://127.0.0.1:1", &err);
    assert_non_null(c);
    kl_client_free(c);
    unsetenv("KUBELEASE_CA_FILE");
    o.ca_file = "/dev/null"; /* readable; its use is the handshake's business */
    c = kl_client_new_opts("https://127.0.0.1:1", &o, &err);
    assert_non_null(c);
    kl_client_free(c);
}

static void test_client_null_client_is_named(void **state)
{
    (void)state;
    kl_error err;
    char *holder = (char *)"untouched";
    int64_t epoch = 5;
    assert_int_equal(kl_run_election(NULL, "default", "x", "id", 15, 10, 2, &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "client"));
    assert_int_equal(kl_wait_elected(NULL, "default", "x", 1, &epoch, &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_int_equal(kl_wait_lost(NULL, "default", "x", &err), KL_ERR_INVALID_ARGUMENT);
    assert_int_equal(kl_cancel_election(NULL, "default", "x", &err), KL_ERR_INVALID_ARGUMENT);
    assert_int_equal(kl_is_leader(NULL, "default", "x", NULL, &err), KL_ERR_INVALID_ARGUMENT);
    assert_int_equal(kl_get_holder(NULL, "default", "x", &holder, &epoch, &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_null(holder);
    assert_int_equal(epoch, 0);
    assert_int_equal(kl_cancel_watch(NULL, "default", "x", &err), KL_ERR_INVALID_ARGUMENT);
}

static void test_client_names_and_durations_are_validated(void **state)
{
    (void)state;
    char ep[64];
    kl_client *c = new_closed_client(ep, sizeof(ep));
    kl_error err;
    char long_label[80], long_id[300];
    memset(long_label, 'a', 64);
    long_label[64] = 0;
    memset(long_id, 'i', 254);
    long_id[254] = 0;

    struct {
        const char *ns, *lease, *identity;
        int d, r, p;
        const char *names;
    } cases[] = {
        {NULL, "x", "id", 15, 10, 2, "ns"},
        {"", "x", "id", 15, 10, 2, "ns"},
        {"Default", "x", "id", 15, 10, 2, "ns"},
        {"a_b", "x", "id", 15, 10, 2, "ns"},
        {long_label, "x", "id", 15, 10, 2, "ns"},
        {"default", NULL, "id", 15, 10, 2, "lease"},
        {"default", "-x", "id", 15, 10, 2, "lease"},
        {"default", "x..y", "id", 15, 10, 2, "lease"},
        {"default", "x.", "id", 15, 10, 2, "lease"},
        {"default", "x", NULL, 15, 10, 2, "identity"},
        {"default", "x", "", 15, 10, 2, "identity"},
        {"default", "x", "a\nb", 15, 10, 2, "identity"},
        {"default", "x", long_id, 15, 10, 2, "identity"},
        {"default", "x", "id", 10, 10, 2, "lease_duration_s"},
        {"default", "x", "id", 15, 2, 2, "renew_deadline_s"},
        {"default", "x", "id", 15, 12, 10, "renew_deadline_s"},
        {"default", "x", "id", 15, 10, 0, "retry_period_s"},
        {"default", "x", "id", 15, 10, -3, "retry_period_s"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = kl_run_election(c, cases[i].ns, cases[i].lease, cases[i].identity, cases[i].d,
                                 cases[i].r, cases[i].p, &err);
        assert_int_equal(rc, KL_ERR_INVALID_ARGUMENT);
        assert_int_equal(err.code, KL_ERR_INVALID_ARGUMENT);
        if (!strstr(err.message, cases[i].names))
            fail_msg("case %zu: \"%s\" does not name %s", i, err.message, cases[i].names);
    }
    /* The leader label's names go together, within the service's limits. */
    kl_election_options o;
    kl_election_options_init(&o);
    o.pod_name = "kv-0";
    assert_int_equal(kl_run_election_opts(c, "default", "x", "id", &o, &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "pod_label_key"));
    o.pod_name = NULL;
    o.pod_label_key = "role";
    assert_int_equal(kl_run_election_opts(c, "default", "x", "id", &o, &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "pod_name"));
    char long_value[80];
    memset(long_value, 'v', sizeof long_value - 1);
    long_value[sizeof long_value - 1] = '\0';
    o.pod_name = "kv-0";
    o.pod_label_value = long_value;
    assert_int_equal(kl_run_election_opts(c, "default", "x", "id", &o, &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "too long"));
    o.retry_period_s = 5; /* durations set partly: checked as given */
    o.pod_label_value = "leader";
    assert_int_equal(kl_run_election_opts(c, "default", "x", "id", &o, &err),
                     KL_ERR_INVALID_ARGUMENT);
    /* Nothing was started by the rejected calls, so no label can change. */
    assert_int_equal(kl_set_pod_label(c, "default", "x", "kv-0", "role", "leader", &err),
                     KL_ERR_NO_ELECTION);
    assert_int_equal(kl_set_pod_label(c, "default", "x", "kv-0", NULL, "leader", &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_int_equal(kl_wait_lost(c, "default", "x", &err), KL_ERR_NO_ELECTION);
    /* Valid: a dotted Lease name and the smallest durations. */
    assert_int_equal(kl_run_election(c, "default", "a.b-c", "id", 3, 2, 1, &err), KL_OK);
    assert_int_equal(kl_wait_lost_timeout(c, "default", "a.b-c", -1, &err),
                     KL_ERR_INVALID_ARGUMENT);
    kl_client_free(c);
}

static void test_client_one_election_per_lease_and_idempotent_cancel(void **state)
{
    (void)state;
    char ep[64];
    kl_client *c = new_closed_client(ep, sizeof(ep));
    kl_error err;
    int64_t valid = 99;

    assert_int_equal(kl_cancel_election(c, "default", "x", &err), KL_OK); /* none yet */
    assert_int_equal(kl_run_election(c, "default", "x", "a", 15, 10, 2, &err), KL_OK);
    assert_int_equal(kl_run_election(c, "default", "x", "b", 15, 10, 2, &err),
                     KL_ERR_ALREADY_RUNNING);
    assert_non_null(strstr(err.message, "default/x already running"));
    /* Another lease is independent. */
    assert_int_equal(kl_run_election(c, "default", "y", "a", 15, 10, 2, &err), KL_OK);
    assert_int_equal(kl_is_leader(c, "default", "x", &valid, &err), 0);
    assert_int_equal(valid, 0);
    assert_int_equal(kl_wait_elected(c, "default", "z", 1, NULL, &err), KL_ERR_NO_ELECTION);

    int64_t t0 = now_ms();
    assert_int_equal(kl_cancel_election(c, "default", "x", &err), KL_OK);
    assert_int_equal(kl_cancel_election(c, "default", "x", &err), KL_OK);
    assert_int_equal(kl_wait_lost(c, "default", "x", &err), KL_OK);
    assert_int_equal(kl_wait_elected(c, "default", "x", 5, NULL, &err), KL_ERR_CANCELLED);
    assert_true(now_ms() - t0 < 1000);
    /* After the end, the lease can be campaigned for again. */
    assert_int_equal(kl_run_election(c, "default", "x", "b", 15, 10, 2, &err), KL_OK);
    t0 = now_ms();
    kl_client_free(c); /* cancels both elections; the service is unreachable */
    assert_true(now_ms() - t0 < 3000);
}

static void test_client_wait_elected_timeout_cancels(void **state)
{
    (void)state;
    char ep[64];
    kl_client *c = new_closed_client(ep, sizeof(ep));
    kl_error err;
    int64_t epoch = 77;

    assert_int_equal(kl_run_election(c, "default", "x", "a", 15, 10, 2, &err), KL_OK);
    int64_t t0 = now_ms();
    assert_int_equal(kl_wait_elected(c, "default", "x", 1, &epoch, &err), KL_ERR_TIMEOUT);
    int64_t took = now_ms() - t0;
    assert_true(took >= 1000 && took < 2500);
    assert_int_equal(epoch, 77); /* untouched on failure */
    assert_non_null(strstr(err.message, "not won within 1 s"));
    /* The reason the candidate could not win is in the message. */
    assert_non_null(strstr(err.message, "unreachable"));
    assert_non_null(strstr(err.message, ep));
    /* Cancelled: wait_lost reports a normal end, a new election may start. */
    assert_int_equal(kl_wait_lost(c, "default", "x", &err), KL_OK);
    assert_int_equal(kl_is_leader(c, "default", "x", NULL, &err), 0);
    assert_int_equal(kl_run_election(c, "default", "x", "a", 15, 10, 2, &err), KL_OK);
    assert_int_equal(kl_wait_elected(c, "default", "x", 0, &epoch, &err), KL_ERR_TIMEOUT);
    kl_client_free(c);
}

static void test_client_get_holder_unreachable_message(void **state)
{
    (void)state;
    char ep[64], want[128];
    kl_client *c = new_closed_client(ep, sizeof(ep));
    kl_error err;
    char *holder = (char *)"untouched";
    int64_t epoch = 3;

    assert_int_equal(kl_get_holder(c, "default", "x", &holder, &epoch, &err), KL_ERR_UNAVAILABLE);
    assert_null(holder);
    assert_int_equal(epoch, 0);
    snprintf(want, sizeof(want), "kubelease service at %s unreachable: Connection refused", ep);
    assert_string_equal(err.message, want);
    assert_int_equal(kl_get_holder(c, "default", "x", NULL, &epoch, &err), KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "holder"));
    kl_client_free(c);
}

static void test_client_get_holder_times_out_on_silent_service(void **state)
{
    (void)state;
    int port;
    int fd = listen_any(&port); /* accepts in the kernel, never answers */
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", port);
    kl_client_options o;
    kl_client_options_init(&o);
    o.request_timeout_ms = 300;
    kl_error err;
    kl_client *c = kl_client_new_opts(ep, &o, &err);
    assert_non_null(c);
    char *holder = NULL;
    int64_t t0 = now_ms();
    assert_int_equal(kl_get_holder(c, "default", "x", &holder, NULL, &err), KL_ERR_TIMEOUT);
    int64_t took = now_ms() - t0;
    assert_true(took >= 250 && took < 2000);
    assert_non_null(strstr(err.message, ep));
    kl_client_free(c);
    close(fd);
}

static int calls;
static void count_cb(void *ctx, const char *holder, size_t len, int64_t epoch)
{
    (void)ctx;
    (void)holder;
    (void)len;
    (void)epoch;
    calls++;
}

static void test_client_one_watch_per_lease(void **state)
{
    (void)state;
    char ep[64];
    kl_client *c = new_closed_client(ep, sizeof(ep));
    kl_error err;
    assert_int_equal(kl_watch_holder(c, "default", "x", NULL, NULL, &err), KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "cb"));
    assert_int_equal(kl_watch_holder(c, "default", "x", count_cb, NULL, &err), KL_OK);
    assert_int_equal(kl_watch_holder(c, "default", "x", count_cb, NULL, &err),
                     KL_ERR_ALREADY_WATCHING);
    assert_int_equal(kl_cancel_watch(c, "default", "x", &err), KL_OK);
    assert_int_equal(kl_cancel_watch(c, "default", "x", &err), KL_OK);
    /* A new watch after the cancel is allowed; freeing the client ends it. */
    assert_int_equal(kl_watch_holder(c, "default", "x", count_cb, NULL, &err), KL_OK);
    kl_client_free(c);
    assert_int_equal(calls, 0); /* nothing ever answered */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_new_rejects_bad_endpoints),
        cmocka_unit_test(test_client_endpoint_from_environment),
        cmocka_unit_test(test_client_ca_file_must_be_readable),
        cmocka_unit_test(test_client_null_client_is_named),
        cmocka_unit_test(test_client_names_and_durations_are_validated),
        cmocka_unit_test(test_client_one_election_per_lease_and_idempotent_cancel),
        cmocka_unit_test(test_client_wait_elected_timeout_cancels),
        cmocka_unit_test(test_client_get_holder_unreachable_message),
        cmocka_unit_test(test_client_get_holder_times_out_on_silent_service),
        cmocka_unit_test(test_client_one_watch_per_lease),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
