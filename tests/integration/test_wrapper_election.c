/* libk8s_lease_wrapper through kubeleased on the real apiserver (with
 * $KUBELEASE_TEST_ENV; else on --dev): the Go wrapper's integration
 * scenarios (k8s_lease_integration_test.go) with its durations 5/4/1 s:
 * single leader, epochs across elections, sequential handoff, concurrent
 * candidates with exactly one winner, cancel, holder reads during an
 * election, no holder after the leader died, and failover after its death.
 * The library has one client per process, so other candidates are this
 * program run again (wrapper_harness.h); a leader "dies" by SIGKILL. Where
 * the Go tests slept for the lease to expire, these wait for the condition
 * and check it came within the validity kubelease grants, not the lease
 * duration. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "wrapper_harness.h"

static struct server srv;

static int group_setup(void **state)
{
    (void)state;
    h_require_server();
    w_server_start(&srv);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    h_server_cleanup(&srv);
    return 0;
}

/* TestSingleLeaderElection */
static void test_single_leader_election(void **state)
{
    (void)state;
    long long epoch = w_win("w-single", "node-1:8080"), he = -1;
    assert_true(epoch >= 1);
    w_holder_is("w-single", "node-1:8080", &he);
    assert_int_equal(he, epoch);
    int64_t t0 = h_now_ms();
    w_resign("w-single");
    assert_true(h_now_ms() - t0 < 1000);
    /* K8sLeaseWaitLost returned after the release landed. */
    w_holder_is("w-single", "", &he);
    assert_int_equal(he, epoch);
}

/* TestLeaderEpoch: a later term has larger transitions, also for the same
 * identity (a restarted process). */
static void test_leader_epoch_increments(void **state)
{
    (void)state;
    const char *ids[3] = {"node-epoch-1:8080", "node-epoch-2:8080", "node-epoch-2:8080"};
    long long prev = 0, he = -1;
    for (int i = 0; i < 3; i++) {
        long long e = w_win("w-epoch", ids[i]);
        w_holder_is("w-epoch", ids[i], &he);
        assert_int_equal(he, e);
        if (e <= prev)
            fail_msg("term %d (%s) has epoch %lld after %lld", i, ids[i], e, prev);
        prev = e;
        w_resign("w-epoch");
    }
}

/* TestSequentialLeadershipHandoff, in this process as in the Go test, then
 * from this process to another one waiting (no lease expiry to wait for). */
static void test_sequential_leadership_handoff(void **state)
{
    (void)state;
    struct candidate c;
    long long ea, eb, ec = 0;
    ea = w_win("w-two-candidates", "candidate-a:8080");
    w_holder_is("w-two-candidates", "candidate-a:8080", NULL);
    w_resign("w-two-candidates");
    eb = w_win("w-two-candidates", "candidate-b:8080");
    w_holder_is("w-two-candidates", "candidate-b:8080", NULL);
    assert_true(eb > ea);

    w_candidate_start(&c, "w-two-candidates", "candidate-c:8080", 30);
    int64_t t0 = h_now_ms();
    w_resign("w-two-candidates");
    assert_int_equal(w_candidate_wait(&c, &ec, 10000), 1);
    int64_t took = h_now_ms() - t0;
    printf("handoff to a waiting process: %lld ms\n", (long long)took);
    assert_true(ec > eb);
    assert_true(took < 1000);
    w_holder_is("w-two-candidates", "candidate-c:8080", NULL);
    int st = w_candidate_stop(&c, SIGTERM);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* TestConcurrentCandidateElection: three processes campaign at once with an
 * 8 s timeout; exactly one is elected, the others time out (the winner
 * keeps the Lease meanwhile). */
static void test_concurrent_candidates_exactly_one_winner(void **state)
{
    (void)state;
    struct candidate c[3];
    const char *ids[3] = {"candidate-a:8080", "candidate-b:8080", "candidate-c:8080"};
    long long e[3] = {0};
    int result[3], winners = 0, winner = -1;
    for (int i = 0; i < 3; i++)
        w_candidate_start(&c[i], "w-concurrent-election", ids[i], 8);
    for (int i = 0; i < 3; i++) {
        result[i] = w_candidate_wait(&c[i], &e[i], 20000);
        if (result[i] == 1) {
            winners++;
            winner = i;
        } else {
            assert_int_equal(result[i], -1);
        }
    }
    assert_int_equal(winners, 1);
    w_holder_is("w-concurrent-election", ids[winner], NULL);
    for (int i = 0; i < 3; i++) {
        int st = w_candidate_stop(&c[i], SIGTERM);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == (i == winner ? 0 : 3));
    }
}

struct lost_waiter {
    const char *lease;
    int rc;
    int64_t returned_at;
};

static void *wait_lost_thread(void *arg)
{
    struct lost_waiter *w = arg;
    w->rc = K8sLeaseWaitLost((char *)h_ns, (char *)w->lease, NULL);
    w->returned_at = h_now_ms();
    return NULL;
}

/* TestCancelElection: K8sLeaseWaitLost in another thread returns promptly
 * after the cancel, with 0. */
static void test_cancel_election(void **state)
{
    (void)state;
    struct lost_waiter w = {"w-cancel", 99, 0};
    pthread_t t;
    w_win("w-cancel", "cancel-node:8080");
    pthread_create(&t, NULL, wait_lost_thread, &w);
    h_sleep_ms(200); /* let it block; starting later only makes it return sooner */
    int64_t t0 = h_now_ms();
    assert_int_equal(K8sLeaseCancelElection((char *)h_ns, "w-cancel", NULL), 0);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, 0);
    printf("K8sLeaseWaitLost returned %lld ms after K8sLeaseCancelElection\n",
           (long long)(w.returned_at - t0));
    assert_true(w.returned_at - t0 < 1000);
}

struct reader {
    int bad;
};

static void *read_holder(void *arg)
{
    struct reader *r = arg;
    for (int i = 0; i < 10; i++) {
        char *holder = NULL, *msg = NULL;
        if (K8sLeaseGetHolder((char *)h_ns, "w-active-get-holder", &holder, NULL, &msg) != 0 ||
            !holder || strcmp(holder, "active-node:8080") != 0)
            r->bad++;
        free(holder);
        free(msg);
    }
    return NULL;
}

/* TestGetHolderDuringElection: five threads read while the term runs. */
static void test_get_holder_during_election(void **state)
{
    (void)state;
    struct reader r[5] = {{0}};
    pthread_t t[5];
    w_win("w-active-get-holder", "active-node:8080");
    for (int i = 0; i < 5; i++)
        pthread_create(&t[i], NULL, read_holder, &r[i]);
    for (int i = 0; i < 5; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(r[i].bad, 0);
    }
    w_resign("w-active-get-holder");
}

/* TestGetHolderReturnsEmptyAfterLeaderDeath: the leader process is killed;
 * the holder reads as nobody well before the lease duration. */
static void test_get_holder_empty_after_leader_death(void **state)
{
    (void)state;
    struct candidate c;
    long long e = 0, he = -1;
    w_candidate_start(&c, "w-expired-leader", "doomed-leader:8080", 15);
    assert_int_equal(w_candidate_wait(&c, &e, 15000), 1);
    w_holder_is("w-expired-leader", "doomed-leader:8080", NULL);
    w_candidate_stop(&c, SIGKILL);
    int64_t took = w_wait_holder("w-expired-leader", "", W_LD * 1000 + 2000);
    printf("no holder %lld ms after SIGKILL of the leader (lease duration %d s)\n", (long long)took,
           W_LD);
    assert_true(took >= 0 && took < W_LD * 1000);
    w_holder_is("w-expired-leader", "", &he);
    assert_int_equal(he, e);
}

/* TestFailoverAfterLeaderDeath: this process campaigns while another leads;
 * the leader is killed; this one is elected within the validity window. */
static void test_failover_after_leader_death(void **state)
{
    (void)state;
    struct candidate c;
    char *msg = NULL;
    long long e1 = 0, e2 = 0;
    w_candidate_start(&c, "w-failover", "leader-1:8080", 15);
    assert_int_equal(w_candidate_wait(&c, &e1, 15000), 1);
    assert_int_equal(
        K8sLeaseRunElection((char *)h_ns, "w-failover", "leader-2:8080", W_LD, W_RD, W_RP, &msg),
        0);
    int64_t t0 = h_now_ms();
    w_candidate_stop(&c, SIGKILL);
    if (K8sLeaseWaitElected((char *)h_ns, "w-failover", 15, &e2, &msg) != 0)
        fail_msg("leader-2 not elected after the death of leader-1: %s", msg);
    int64_t took = h_now_ms() - t0;
    printf("failover after SIGKILL of the leader: %lld ms (lease duration %d s)\n", (long long)took,
           W_LD);
    assert_true(e2 > e1);
    assert_true(took < W_LD * 1000);
    w_holder_is("w-failover", "leader-2:8080", NULL);
    w_resign("w-failover");
}

int main(int argc, char **argv)
{
    w_candidate_main(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_leader_election),
        cmocka_unit_test(test_leader_epoch_increments),
        cmocka_unit_test(test_sequential_leadership_handoff),
        cmocka_unit_test(test_concurrent_candidates_exactly_one_winner),
        cmocka_unit_test(test_cancel_election),
        cmocka_unit_test(test_get_holder_during_election),
        cmocka_unit_test(test_get_holder_empty_after_leader_death),
        cmocka_unit_test(test_failover_after_leader_death),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
