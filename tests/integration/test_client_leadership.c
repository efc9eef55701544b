/* Leadership that follows the application, through libkubelease against a
 * real kubeleased (--dev, or on the test control plane): the fencing check
 * (kl_check_epoch), the candidates (kl_list_candidates), planned handoff
 * (kl_handoff) and health-gated leadership (kl_health_ok). Durations 5/4/1 s. On the control
 * plane the test replica's ServiceAccount may campaign but not hand off others' terms (verb
 * handoff): its handoff is refused, and the operators' ServiceAccount's goes through. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "client_harness.h"
#include "kubelease.h"
#include "client_calls.h"

static struct server srv;

#define LD 5
#define RD 4
#define RP 1

static int group_setup(void **state)
{
    (void)state;
    h_require_server();
    h_server_start(&srv, 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    h_server_cleanup(&srv);
    return 0;
}

/* kl_check_epoch's answer: 1 current, 0 not; *lease_epoch the Lease's. */
static int check(kl_client *c, const char *lease, int64_t epoch, int64_t *lease_epoch)
{
    kl_error err;
    int current = -1;
    int rc = kl_check_epoch(c, h_ns, lease, epoch, &current, lease_epoch, &err);
    if (rc != KL_OK)
        fail_msg("kl_check_epoch(%s, %lld): %d %s", lease, (long long)epoch, rc, err.message);
    return current;
}

/* Current only for the live term's epoch: not before, not after, not for
 * a Lease that does not exist, not once the next term has begun. */
static void test_check_epoch_follows_the_live_term(void **state)
{
    (void)state;
    kl_client *a = h_client(&srv), *b = h_client(&srv), *storage = h_client(&srv);
    kl_error err;
    int64_t e1 = 0, e2 = 0, seen = -1;
    assert_int_equal(check(storage, "fence-never-created", 1, &seen), 0);
    assert_int_equal(seen, 0);

    h_campaign(a, "fence", "fence-a:8080", LD, RD, RP);
    assert_int_equal(kl_wait_elected(a, h_ns, "fence", 15, &e1, &err), KL_OK);
    h_campaign(b, "fence", "fence-b:8080", LD, RD, RP);
    assert_int_equal(check(storage, "fence", e1, &seen), 1);
    assert_int_equal(seen, e1);
    assert_int_equal(check(storage, "fence", e1 + 1, &seen), 0);
    if (e1 > 1)
        assert_int_equal(check(storage, "fence", e1 - 1, NULL), 0);

    /* a hands over by resigning; b's term makes e1 stale. */
    assert_int_equal(kl_cancel_election(a, h_ns, "fence", &err), KL_OK);
    assert_int_equal(kl_wait_elected(b, h_ns, "fence", 15, &e2, &err), KL_OK);
    assert_true(e2 > e1);
    assert_int_equal(check(storage, "fence", e2, &seen), 1);
    assert_int_equal(seen, e2);
    assert_int_equal(check(storage, "fence", e1, &seen), 0);
    assert_int_equal(seen, e2);
    kl_client_free(a);
    kl_client_free(b);
    kl_client_free(storage);
}

/* Bad arguments are refused before any request, naming what is wrong. */
static void test_check_epoch_bad_arguments(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    kl_error err;
    int current = 7;
    assert_int_equal(kl_check_epoch(c, h_ns, "fence", 0, &current, NULL, &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "epoch"));
    assert_int_equal(current, 0);
    assert_int_equal(kl_check_epoch(c, h_ns, "Fence", 1, &current, NULL, &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "lease"));
    assert_int_equal(kl_check_epoch(c, h_ns, "fence", 1, NULL, NULL, &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "current"));
    kl_client_free(c);
}

/* Waits (5 s at most) until the service lists n candidates for lease. */
static kl_candidate_info *wait_candidates(kl_client *c, const char *lease, size_t n)
{
    int64_t until = h_now_ms() + 5000;
    for (;;) {
        kl_candidate_info *rows = NULL;
        size_t got = 0;
        kl_error err;
        if (kl_list_candidates(c, h_ns, lease, &rows, &got, &err) != KL_OK)
            fail_msg("kl_list_candidates(%s): %s", lease, err.message);
        if (got == n)
            return rows;
        kl_free(rows);
        if (h_now_ms() > until)
            fail_msg("%s has %zu candidates, want %zu", lease, got, n);
        h_sleep_ms(20);
    }
}

/* The leader first, then the standbys in line order; after the leader
 * resigns, the first standby leads and the order follows. */
static void test_list_candidates_in_line_order(void **state)
{
    (void)state;
    kl_client *a = h_client(&srv), *b = h_client(&srv), *c = h_client(&srv),
              *reader = h_client(&srv);
    kl_error err;
    kl_candidate_info *rows = NULL;
    size_t n = 7;
    assert_int_equal(kl_list_candidates(reader, h_ns, "line-never", &rows, &n, &err), KL_OK);
    assert_int_equal(n, 0);
    assert_null(rows);

    h_campaign(a, "line", "line-a:8080", LD, RD, RP);
    assert_int_equal(kl_wait_elected(a, h_ns, "line", 15, NULL, &err), KL_OK);
    h_campaign(b, "line", "line-b:8080", LD, RD, RP);
    kl_free(wait_candidates(reader, "line", 2));
    h_campaign(c, "line", "line-c:8080", LD, RD, RP);
    rows = wait_candidates(reader, "line", 3);
    assert_string_equal(rows[0].identity, "line-a:8080");
    assert_int_equal(rows[0].leader, 1);
    assert_string_equal(rows[1].identity, "line-b:8080");
    assert_int_equal(rows[1].leader, 0);
    assert_string_equal(rows[2].identity, "line-c:8080");
    assert_true(rows[1].campaigning_for_ms >= rows[2].campaigning_for_ms);
    for (int i = 0; i < 3; i++)
        assert_true(rows[i].replica[0] != '\0');
    kl_free(rows);

    assert_int_equal(kl_cancel_election(a, h_ns, "line", &err), KL_OK);
    assert_int_equal(kl_wait_elected(b, h_ns, "line", 15, NULL, &err), KL_OK);
    rows = wait_candidates(reader, "line", 2);
    assert_string_equal(rows[0].identity, "line-b:8080");
    assert_int_equal(rows[0].leader, 1);
    assert_string_equal(rows[1].identity, "line-c:8080");
    kl_free(rows);
    assert_int_equal(kl_list_candidates(reader, h_ns, "line", NULL, &n, &err),
                     KL_ERR_INVALID_ARGUMENT);
    kl_client_free(a);
    kl_client_free(b);
    kl_client_free(c);
    kl_client_free(reader);
}

/* The leader hands its term to a named standby: it stops leading before
 * kl_handoff returns, that standby (not the first in line) leads next with
 * the next epoch, in milliseconds. */
static void test_handoff_by_the_leader(void **state)
{
    (void)state;
    kl_client *a = h_client(&srv), *b = h_client(&srv), *c = h_client(&srv);
    kl_error err;
    int64_t e1 = 0, e2 = 0;
    h_campaign(a, "handoff", "handoff-a:8080", LD, RD, RP);
    assert_int_equal(kl_wait_elected(a, h_ns, "handoff", 15, &e1, &err), KL_OK);
    h_campaign(b, "handoff", "handoff-b:8080", LD, RD, RP);
    h_campaign(c, "handoff", "handoff-c:8080", LD, RD, RP);
    kl_free(wait_candidates(c, "handoff", 3));
    int64_t t0 = h_now_ms();
    assert_int_equal(kl_handoff(a, h_ns, "handoff", "handoff-c:8080", &err), KL_OK);
    assert_int_equal(kl_is_leader(a, h_ns, "handoff", NULL, &err), 0);
    assert_int_equal(kl_wait_elected(c, h_ns, "handoff", 15, &e2, &err), KL_OK);
    int64_t ms = h_now_ms() - t0;
    printf("handoff by the leader: epoch %lld -> %lld in %lld ms\n", (long long)e1, (long long)e2,
           (long long)ms);
    assert_int_equal(e2, e1 + 1);
    assert_int_equal(kl_wait_ended(a, h_ns, "handoff", 5000, &err), KL_OK);
    assert_int_equal(kl_is_leader(b, h_ns, "handoff", NULL, &err), 0);
    kl_client_free(a);
    kl_client_free(b);
    kl_client_free(c);
}

/* A client presenting the operators' token of the test control plane. */
static kl_client *operator_client(void)
{
    char token_file[512];
    if (h_env_value(getenv("KUBELEASE_TEST_ENV"), "KL_OPERATOR_TOKEN_FILE", token_file,
                    sizeof token_file) != 0)
        fail_msg("the control plane's env names no KL_OPERATOR_TOKEN_FILE");
    kl_client_options o;
    kl_client_options_init(&o);
    o.token_file = token_file;
    kl_error err;
    kl_client *c = kl_client_new_opts(srv.endpoint, &o, &err);
    if (!c)
        fail_msg("kl_client_new_opts: %s", err.message);
    return c;
}

/* Someone else hands the term off: the leader learns it lost ("handed
 * off"), and the next in line leads. On the control plane a replica's
 * account lacks the verb handoff (refused, nothing changes), and the
 * operators' account has it. */
static void test_handoff_by_an_operator(void **state)
{
    (void)state;
    kl_client *a = h_client(&srv), *b = h_client(&srv), *op = h_client(&srv);
    kl_error err;
    int64_t e1 = 0, e2 = 0;
    /* Authorization comes first (rule 7): these checks only without it. */
    if (!h_kubeconfig[0]) {
        assert_int_equal(kl_handoff(op, h_ns, "handoff-op", NULL, &err), KL_ERR_LOST);
        assert_non_null(strstr(err.message, "nobody holds"));
    }
    h_campaign(a, "handoff-op", "handoff-op-a:8080", LD, RD, RP);
    assert_int_equal(kl_wait_elected(a, h_ns, "handoff-op", 15, &e1, &err), KL_OK);
    h_campaign(b, "handoff-op", "handoff-op-b:8080", LD, RD, RP);
    kl_free(wait_candidates(op, "handoff-op", 2));
    if (!h_kubeconfig[0]) {
        assert_int_equal(kl_handoff(op, h_ns, "handoff-op", "nobody:1", &err), KL_ERR_LOST);
        assert_non_null(strstr(err.message, "to_identity"));
    }
    assert_int_equal(kl_handoff(op, h_ns, "handoff-op", "Bad Identity\n", &err),
                     KL_ERR_INVALID_ARGUMENT);
    if (h_kubeconfig[0]) {
        /* The replicas' account may campaign, not hand off others' terms;
         * the operators' account may (tests/controlplane). */
        assert_int_equal(kl_handoff(op, h_ns, "handoff-op", NULL, &err), KL_ERR_PERMISSION_DENIED);
        assert_non_null(strstr(err.message, "handoff"));
        assert_int_equal(kl_is_leader(a, h_ns, "handoff-op", NULL, &err), 1);
        kl_client_free(op);
        op = operator_client();
    }
    {
        int64_t t0 = h_now_ms();
        assert_int_equal(kl_handoff(op, h_ns, "handoff-op", NULL, &err), KL_OK);
        assert_int_equal(kl_wait_lost(a, h_ns, "handoff-op", &err), KL_ERR_LOST);
        assert_non_null(strstr(err.message, "handed off"));
        assert_int_equal(kl_wait_elected(b, h_ns, "handoff-op", 15, &e2, &err), KL_OK);
        printf("handoff by an operator: epoch %lld -> %lld in %lld ms\n", (long long)e1,
               (long long)e2, (long long)(h_now_ms() - t0));
        assert_int_equal(e2, e1 + 1);
    }
    kl_client_free(a);
    kl_client_free(b);
    kl_client_free(op);
}

/* The application's heartbeat, until it "wedges" (stop set). */
struct beat {
    kl_client *c;
    atomic_int stop;
    _Atomic int64_t last_ms;
};

static void *beat_thread(void *arg)
{
    struct beat *b = arg;
    while (!atomic_load(&b->stop)) {
        kl_health_ok(b->c);
        atomic_store(&b->last_ms, h_now_ms());
        h_sleep_ms(20);
    }
    return NULL;
}

/* A leader whose application keeps reporting health keeps leading past its
 * health deadline; once it wedges, it stops leading within the deadline
 * (plus a few ms) and a standby leads next, milliseconds later. */
static void test_health_gated_leader_steps_down_when_wedged(void **state)
{
    (void)state;
    kl_client_options o;
    kl_client_options_init(&o);
    o.health_deadline_ms = 400;
    kl_error err;
    kl_client *a = kl_client_new_opts(srv.endpoint, &o, &err), *b = h_client(&srv);
    assert_non_null(a);
    struct beat beat = {.c = a};
    pthread_t t;
    kl_health_ok(a);
    assert_int_equal(pthread_create(&t, NULL, beat_thread, &beat), 0);
    int64_t e1 = 0, e2 = 0;
    h_campaign(a, "health", "health-a:8080", LD, RD, RP);
    assert_int_equal(kl_wait_elected(a, h_ns, "health", 15, &e1, &err), KL_OK);
    h_campaign(b, "health", "health-b:8080", LD, RD, RP);
    /* Three deadlines of healthy leadership. */
    assert_int_equal(kl_wait_lost_timeout(a, h_ns, "health", 1200, &err), KL_ERR_TIMEOUT);
    assert_int_equal(kl_is_leader(a, h_ns, "health", NULL, &err), 1);
    atomic_store(&beat.stop, 1);
    pthread_join(t, NULL);
    int64_t hang = atomic_load(&beat.last_ms);
    assert_int_equal(kl_wait_lost(a, h_ns, "health", &err), KL_ERR_LOST);
    int64_t lost = h_now_ms();
    assert_non_null(strstr(err.message, "unhealthy"));
    assert_int_equal(kl_wait_elected(b, h_ns, "health", 15, &e2, &err), KL_OK);
    int64_t elected = h_now_ms();
    printf("health-gated failover: hang -> lost %lld ms, hang -> standby elected %lld ms "
           "(deadline 400 ms)\n",
           (long long)(lost - hang), (long long)(elected - hang));
    assert_true(lost - hang >= 400 - 25); /* not before the deadline (one beat of slack) */
    assert_true(e2 > e1);
    kl_client_free(a);
    kl_client_free(b);
    kl_client_options_init(&o);
    o.health_deadline_ms = -1;
    assert_null(kl_client_new_opts(srv.endpoint, &o, &err));
    assert_int_equal(err.code, KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "health_deadline_ms"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_epoch_follows_the_live_term),
        cmocka_unit_test(test_check_epoch_bad_arguments),
        cmocka_unit_test(test_list_candidates_in_line_order),
        cmocka_unit_test(test_handoff_by_the_leader),
        cmocka_unit_test(test_handoff_by_an_operator),
        cmocka_unit_test(test_health_gated_leader_steps_down_when_wedged),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
