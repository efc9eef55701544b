/* libkubelease against a real `kubeleased --dev`: the reference wrapper's
 * scenarios through the kl_* API (single leader, epochs across elections,
 * sequential handoff, concurrent candidates, cancel, holder reads from many
 * threads, empty holder and failover after the leader's death) plus what
 * kubelease promises beyond it: strictly increasing epochs also for the same
 * identity, fast handoff after kl_cancel_election, wait_elected's timeout
 * cancelling, one election per lease, and watches (current state, changes,
 * no callback after kl_cancel_watch). Durations 5/4/1 s as in the reference. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
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

static void run_and_win(kl_client *c, const char *lease, const char *id, int64_t *epoch)
{
    kl_error err;
    h_campaign(c, lease, id, LD, RD, RP);
    int rc = kl_wait_elected(c, h_ns, lease, 15, epoch, &err);
    if (rc != KL_OK)
        fail_msg("kl_wait_elected(%s): %s", id, err.message);
}

/* The holder's identity or "" (NULL holder); fails on errors. */
static void holder_is(kl_client *c, const char *lease, const char *want, int64_t *epoch)
{
    kl_error err;
    char *holder = NULL;
    int rc = kl_get_holder(c, h_ns, lease, &holder, epoch, &err);
    if (rc != KL_OK)
        fail_msg("kl_get_holder(%s): %d %s", lease, rc, err.message);
    if (strcmp(holder ? holder : "", want) != 0)
        fail_msg("holder of %s is \"%s\", want \"%s\"", lease, holder ? holder : "", want);
    kl_free(holder);
}

static void test_single_leader(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    kl_error err;
    int64_t epoch = 0, hepoch = 0, valid = 0;
    run_and_win(c, "single", "node-1:8080", &epoch);
    assert_true(epoch >= 1);
    holder_is(c, "single", "node-1:8080", &hepoch);
    assert_int_equal(hepoch, epoch);
    assert_int_equal(kl_is_leader(c, h_ns, "single", &valid, &err), 1);
    assert_true(valid > 0 && valid <= RD * 1000);

    int64_t t0 = h_now_ms();
    assert_int_equal(kl_cancel_election(c, h_ns, "single", &err), KL_OK);
    assert_int_equal(kl_is_leader(c, h_ns, "single", &valid, &err), 0);
    assert_int_equal(kl_wait_lost(c, h_ns, "single", &err), KL_OK);
    assert_true(h_now_ms() - t0 < 1000);
    /* The resignation released the Lease: no holder, same epoch. */
    int64_t until = h_now_ms() + 2000;
    char *holder = NULL;
    do {
        kl_free(holder);
        assert_int_equal(kl_get_holder(c, h_ns, "single", &holder, &hepoch, &err), KL_OK);
    } while (holder && h_now_ms() < until && (h_sleep_ms(10), 1));
    assert_null(holder);
    assert_int_equal(hepoch, epoch);
    kl_client_free(c);
}

static void test_get_holder_of_missing_lease(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    kl_error err;
    char *holder = (char *)"x";
    int64_t epoch = 9;
    assert_int_equal(kl_get_holder(c, h_ns, "never-created", &holder, &epoch, &err), KL_NOT_FOUND);
    assert_null(holder);
    assert_int_equal(epoch, 0);
    kl_client_free(c);
}

static void test_epochs_strictly_increase_also_for_same_identity(void **state)
{
    (void)state;
    kl_error err;
    int64_t e[5] = {0};
    const char *ids[5] = {"node-epoch-1", "node-epoch-2", "node-epoch-2", "node-epoch-2",
                          "node-epoch-1"};
    kl_client *c = h_client(&srv);
    for (int i = 0; i < 5; i++) {
        /* i == 3: a "restarted" process: a new client, same identity. */
        if (i == 3) {
            kl_client_free(c);
            c = h_client(&srv);
        }
        run_and_win(c, "epochs", ids[i], &e[i]);
        assert_int_equal(kl_cancel_election(c, h_ns, "epochs", &err), KL_OK);
        assert_int_equal(kl_wait_lost(c, h_ns, "epochs", &err), KL_OK);
        if (i > 0 && e[i] <= e[i - 1])
            fail_msg("term %d (%s) got epoch %lld after %lld", i, ids[i], (long long)e[i],
                     (long long)e[i - 1]);
    }
    kl_client_free(c);
}

static void test_sequential_handoff_is_fast(void **state)
{
    (void)state;
    kl_client *a = h_client(&srv), *b = h_client(&srv);
    kl_error err;
    int64_t ea = 0, eb = 0;
    run_and_win(a, "handoff", "candidate-a:8080", &ea);
    holder_is(a, "handoff", "candidate-a:8080", NULL);
    assert_int_equal(kl_run_election(b, h_ns, "handoff", "candidate-b:8080", LD, RD, RP, &err),
                     KL_OK);
    assert_int_equal(kl_wait_elected(b, h_ns, "handoff", 0, NULL, &err), KL_ERR_TIMEOUT);
    assert_int_equal(kl_run_election(b, h_ns, "handoff", "candidate-b:8080", LD, RD, RP, &err),
                     KL_OK);
    assert_int_equal(kl_is_leader(b, h_ns, "handoff", NULL, &err), 0);

    int64_t t0 = h_now_ms();
    assert_int_equal(kl_cancel_election(a, h_ns, "handoff", &err), KL_OK);
    assert_int_equal(kl_wait_elected(b, h_ns, "handoff", 15, &eb, &err), KL_OK);
    int64_t took = h_now_ms() - t0;
    printf("handoff after kl_cancel_election: %lld ms (epoch %lld -> %lld)\n", (long long)took,
           (long long)ea, (long long)eb);
    assert_true(eb > ea);
    assert_true(took < 1000);
    holder_is(a, "handoff", "candidate-b:8080", NULL);
    assert_int_equal(kl_wait_lost(a, h_ns, "handoff", &err), KL_OK);
    kl_client_free(a);
    kl_client_free(b);
}

struct contender {
    kl_client *c;
    const char *id;
    int rc;
};

static void *contend(void *arg)
{
    struct contender *k = arg;
    kl_error err;
    k->rc = kl_run_election(k->c, h_ns, "concurrent", k->id, LD, RD, RP, &err);
    if (k->rc == KL_OK)
        k->rc = kl_wait_elected(k->c, h_ns, "concurrent", 3, NULL, &err);
    return NULL;
}

static void test_concurrent_candidates_one_winner(void **state)
{
    (void)state;
    struct contender k[3] = {{NULL, "candidate-a:8080", 0},
                             {NULL, "candidate-b:8080", 0},
                             {NULL, "candidate-c:8080", 0}};
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        k[i].c = h_client(&srv);
        pthread_create(&t[i], NULL, contend, &k[i]);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    int winners = 0, winner = -1;
    for (int i = 0; i < 3; i++) {
        if (k[i].rc == KL_OK) {
            winners++;
            winner = i;
        } else {
            assert_int_equal(k[i].rc, KL_ERR_TIMEOUT);
        }
    }
    assert_int_equal(winners, 1);
    /* The winner still leads: the losers' timeouts cancelled only them. */
    assert_int_equal(kl_is_leader(k[winner].c, h_ns, "concurrent", NULL, NULL), 1);
    holder_is(k[winner].c, "concurrent", k[winner].id, NULL);
    for (int i = 0; i < 3; i++)
        kl_client_free(k[i].c);
}

struct waiter {
    kl_client *c;
    const char *lease;
    int rc;
    int64_t returned_at;
};

static void *wait_lost_thread(void *arg)
{
    struct waiter *w = arg;
    kl_error err;
    w->rc = kl_wait_lost(w->c, h_ns, w->lease, &err);
    w->returned_at = h_now_ms();
    return NULL;
}

static void test_cancel_makes_wait_lost_return_promptly(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    kl_error err;
    struct waiter w = {c, "cancel", 99, 0};
    pthread_t t;
    run_and_win(c, "cancel", "cancel-node:8080", NULL);
    pthread_create(&t, NULL, wait_lost_thread, &w);
    h_sleep_ms(200); /* let it block; a later start only makes it return sooner */
    int64_t t0 = h_now_ms();
    assert_int_equal(kl_cancel_election(c, h_ns, "cancel", &err), KL_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.rc, KL_OK);
    printf("kl_wait_lost returned %lld ms after kl_cancel_election\n",
           (long long)(w.returned_at - t0));
    /* Well before the validity (at least two thirds of 1 s from t0) would
     * have ended it, with room for valgrind and sanitizers. */
    assert_true(w.returned_at - t0 < 500);
    kl_client_free(c);
}

/* kl_wait_ended after a cancel returns once the service has released the
 * Lease: a read right after it finds nobody holding it. */
static void test_wait_ended_returns_after_the_release(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv), *reader = h_client(&srv);
    kl_error err;
    char *holder = NULL;
    assert_int_equal(kl_wait_ended(c, h_ns, "ended", 0, &err), KL_ERR_NO_ELECTION);
    run_and_win(c, "ended", "ended-node:8080", NULL);
    assert_int_equal(kl_wait_ended(c, h_ns, "ended", 0, &err), KL_ERR_TIMEOUT);
    assert_non_null(strstr(err.message, "still running"));
    int64_t t0 = h_now_ms();
    assert_int_equal(kl_cancel_election(c, h_ns, "ended", &err), KL_OK);
    assert_int_equal(kl_wait_ended(c, h_ns, "ended", 5000, &err), KL_OK);
    printf("kl_wait_ended returned %lld ms after kl_cancel_election\n",
           (long long)(h_now_ms() - t0));
    assert_int_equal(kl_get_holder(reader, h_ns, "ended", &holder, NULL, &err), KL_OK);
    assert_null(holder);
    kl_client_free(reader);
    kl_client_free(c);
}

struct reader {
    kl_client *c;
    int bad;
};

static void *read_holder(void *arg)
{
    struct reader *r = arg;
    for (int i = 0; i < 20; i++) {
        kl_error err;
        char *holder = NULL;
        int64_t epoch = 0;
        if (kl_get_holder(r->c, h_ns, "active-get-holder", &holder, &epoch, &err) != KL_OK ||
            !holder || strcmp(holder, "active-node:8080") != 0 || epoch < 1)
            r->bad++;
        kl_free(holder);
    }
    return NULL;
}

static void test_get_holder_during_election_from_threads(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    struct reader r[5];
    pthread_t t[5];
    run_and_win(c, "active-get-holder", "active-node:8080", NULL);
    for (int i = 0; i < 5; i++) {
        r[i].c = c;
        r[i].bad = 0;
        pthread_create(&t[i], NULL, read_holder, &r[i]);
    }
    for (int i = 0; i < 5; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(r[i].bad, 0);
    }
    assert_int_equal(kl_is_leader(c, h_ns, "active-get-holder", NULL, NULL), 1);
    kl_client_free(c);
}

/* Starts a kl_replica leader for lease and waits until it holds it. */
static pid_t replica_leader(const char *lease, const char *id, char *log, size_t loglen,
                            kl_client *observer)
{
    const char *extra[] = {
        "--lease-duration", "5", "--renew-deadline", "4", "--retry-period", "1", NULL};
    snprintf(log, loglen, "%s/kl-test-replica-%d-%s.log",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), id);
    unlink(log);
    pid_t pid = h_replica(&srv, id, lease, log, extra);
    int64_t until = h_now_ms() + 10000;
    for (;;) {
        char *holder = NULL;
        kl_get_holder(observer, h_ns, lease, &holder, NULL, NULL);
        int ok = holder && strcmp(holder, id) == 0;
        kl_free(holder);
        if (ok)
            return pid;
        if (h_now_ms() > until) {
            h_dump_log(log);
            fail_msg("replica %s did not become leader of %s", id, lease);
        }
        h_sleep_ms(20);
    }
}

static void reap(pid_t pid, const char *log)
{
    int st;
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    unlink(log);
}

static void test_empty_holder_after_leader_dies(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    char log[256];
    pid_t pid = replica_leader("expired-leader", "doomed-leader:8080", log, sizeof(log), c);
    int64_t t0 = h_now_ms();
    kill(pid, SIGKILL);
    char *holder = NULL;
    int64_t until = t0 + LD * 1000 + 2000;
    for (;;) {
        kl_error err;
        assert_int_equal(kl_get_holder(c, h_ns, "expired-leader", &holder, NULL, &err), KL_OK);
        if (!holder)
            break;
        kl_free(holder);
        if (h_now_ms() > until)
            fail_msg("the dead leader still holds the Lease after %d ms", LD * 1000 + 2000);
        h_sleep_ms(20);
    }
    int64_t took = h_now_ms() - t0;
    printf("holder empty %lld ms after SIGKILL of the leader (lease duration %d s)\n",
           (long long)took, LD);
    /* Far below the lease duration: the validity window plus a round trip. */
    assert_true(took < LD * 1000);
    reap(pid, log);
    kl_client_free(c);
}

static void test_failover_after_leader_death(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    kl_error err;
    char log[256];
    int64_t e1 = 0, e2 = 0;
    pid_t pid = replica_leader("failover", "leader-1:8080", log, sizeof(log), c);
    holder_is(c, "failover", "leader-1:8080", &e1);
    assert_int_equal(kl_run_election(c, h_ns, "failover", "leader-2:8080", LD, RD, RP, &err),
                     KL_OK);
    assert_int_equal(kl_wait_lost_timeout(c, h_ns, "failover", 300, &err), KL_ERR_TIMEOUT);
    assert_int_equal(kl_is_leader(c, h_ns, "failover", NULL, NULL), 0);
    int64_t t0 = h_now_ms();
    kill(pid, SIGKILL);
    assert_int_equal(kl_wait_elected(c, h_ns, "failover", 15, &e2, &err), KL_OK);
    int64_t took = h_now_ms() - t0;
    printf("failover after SIGKILL of the leader: %lld ms (lease duration %d s)\n", (long long)took,
           LD);
    assert_true(e2 > e1);
    assert_true(took < LD * 1000);
    holder_is(c, "failover", "leader-2:8080", NULL);
    reap(pid, log);
    kl_client_free(c);
}

static void test_wait_elected_timeout_cancels_the_election(void **state)
{
    (void)state;
    kl_client *a = h_client(&srv), *b = h_client(&srv);
    kl_error err;
    run_and_win(a, "timeout", "holder-a", NULL);
    assert_int_equal(kl_run_election(b, h_ns, "timeout", "hopeful-b", LD, RD, RP, &err), KL_OK);
    int64_t t0 = h_now_ms();
    assert_int_equal(kl_wait_elected(b, h_ns, "timeout", 1, NULL, &err), KL_ERR_TIMEOUT);
    assert_true(h_now_ms() - t0 < 2000);
    assert_int_equal(kl_wait_lost(b, h_ns, "timeout", &err), KL_OK);
    /* B no longer campaigns: after A resigns nobody takes over. */
    assert_int_equal(kl_cancel_election(a, h_ns, "timeout", &err), KL_OK);
    int64_t until = h_now_ms() + 2000;
    for (;;) { /* the resignation is asynchronous: wait for the release */
        char *holder = NULL;
        assert_int_equal(kl_get_holder(a, h_ns, "timeout", &holder, NULL, &err), KL_OK);
        int released = holder == NULL;
        kl_free(holder);
        if (released)
            break;
        if (h_now_ms() > until)
            fail_msg("holder-a did not release the Lease");
        h_sleep_ms(10);
    }
    until = h_now_ms() + 1500;
    while (h_now_ms() < until) {
        holder_is(a, "timeout", "", NULL);
        h_sleep_ms(100);
    }
    kl_client_free(a);
    kl_client_free(b);
}

static void test_double_run_election_is_refused(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    kl_error err;
    run_and_win(c, "double", "dbl", NULL);
    assert_int_equal(kl_run_election(c, h_ns, "double", "dbl", LD, RD, RP, &err),
                     KL_ERR_ALREADY_RUNNING);
    assert_non_null(strstr(err.message, "/double already running"));
    /* The running election is untouched. */
    assert_int_equal(kl_is_leader(c, h_ns, "double", NULL, NULL), 1);
    kl_client_free(c);
}

/* --- watches -------------------------------------------------------------- */

#define MAX_CB 64
struct seen {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    char holder[MAX_CB][64];
    int64_t epoch[MAX_CB];
    int cancel_inside; /* cancel the watch from the first callback */
    kl_client *c;
    const char *lease;
};

static void on_holder(void *ctx, const char *holder, size_t len, int64_t epoch)
{
    struct seen *s = ctx;
    pthread_mutex_lock(&s->mu);
    if (s->n < MAX_CB) {
        snprintf(s->holder[s->n], sizeof(s->holder[0]), "%.*s", (int)len, holder ? holder : "");
        if (holder && strlen(holder) != len)
            snprintf(s->holder[s->n], sizeof(s->holder[0]), "BAD LENGTH");
        s->epoch[s->n] = epoch;
        s->n++;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->cancel_inside)
        kl_cancel_watch(s->c, h_ns, s->lease, NULL);
}

/* Waits until at least n callbacks were seen (5 s at most). */
static int seen_wait(struct seen *s, int n)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&s->mu);
    while (s->n < n && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
        ;
    int got = s->n;
    pthread_mutex_unlock(&s->mu);
    return got;
}

static void test_watch_current_state_then_changes_then_silence(void **state)
{
    (void)state;
    kl_client *w = h_client(&srv), *a = h_client(&srv), *b = h_client(&srv);
    kl_error err;
    struct seen s = {
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {{0}}, {0}, 0, w, "watched"};
    int64_t ea = 0;
    assert_int_equal(kl_watch_holder(w, h_ns, "watched", on_holder, &s, &err), KL_OK);
    assert_int_equal(kl_watch_holder(w, h_ns, "watched", on_holder, &s, &err),
                     KL_ERR_ALREADY_WATCHING);
    assert_true(seen_wait(&s, 1) >= 1); /* the current state: no Lease */
    assert_string_equal(s.holder[0], "");
    run_and_win(a, "watched", "watch-a", &ea);
    int n = seen_wait(&s, 2);
    assert_true(n >= 2);
    assert_string_equal(s.holder[n - 1], "watch-a");
    assert_int_equal(s.epoch[n - 1], ea);
    assert_int_equal(kl_cancel_election(a, h_ns, "watched", &err), KL_OK);
    n = seen_wait(&s, n + 1);
    assert_string_equal(s.holder[n - 1], "");
    assert_int_equal(s.epoch[n - 1], ea);

    assert_int_equal(kl_cancel_watch(w, h_ns, "watched", &err), KL_OK);
    pthread_mutex_lock(&s.mu);
    int frozen = s.n;
    pthread_mutex_unlock(&s.mu);
    run_and_win(b, "watched", "watch-b", NULL);
    holder_is(b, "watched", "watch-b", NULL);
    assert_int_equal(kl_cancel_election(b, h_ns, "watched", &err), KL_OK);
    /* A fresh watch (another client) sees the final state, proving the
     * changes were published; the cancelled one saw nothing. */
    kl_client *w2 = h_client(&srv);
    struct seen s2 = {
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {{0}}, {0}, 0, w2, "watched"};
    assert_int_equal(kl_watch_holder(w2, h_ns, "watched", on_holder, &s2, &err), KL_OK);
    assert_true(seen_wait(&s2, 1) >= 1);
    kl_client_free(w2);
    pthread_mutex_lock(&s.mu);
    assert_int_equal(s.n, frozen);
    pthread_mutex_unlock(&s.mu);
    kl_client_free(w);
    kl_client_free(a);
    kl_client_free(b);
}

static void test_watch_cancelled_from_its_callback(void **state)
{
    (void)state;
    kl_client *w = h_client(&srv), *a = h_client(&srv);
    kl_error err;
    struct seen s = {
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {{0}}, {0}, 1, w, "self-cancel"};
    assert_int_equal(kl_watch_holder(w, h_ns, "self-cancel", on_holder, &s, &err), KL_OK);
    assert_int_equal(seen_wait(&s, 1), 1);
    run_and_win(a, "self-cancel", "sc-a", NULL);
    holder_is(a, "self-cancel", "sc-a", NULL);
    /* A new watch is allowed after the self-cancel. */
    struct seen s2 = {
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {{0}}, {0}, 0, w, "self-cancel"};
    assert_int_equal(kl_watch_holder(w, h_ns, "self-cancel", on_holder, &s2, &err), KL_OK);
    assert_true(seen_wait(&s2, 1) >= 1);
    assert_string_equal(s2.holder[0], "sc-a");
    kl_client_free(w);
    assert_int_equal(s.n, 1);
    kl_client_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_leader),
        cmocka_unit_test(test_get_holder_of_missing_lease),
        cmocka_unit_test(test_epochs_strictly_increase_also_for_same_identity),
        cmocka_unit_test(test_sequential_handoff_is_fast),
        cmocka_unit_test(test_concurrent_candidates_one_winner),
        cmocka_unit_test(test_cancel_makes_wait_lost_return_promptly),
        cmocka_unit_test(test_wait_ended_returns_after_the_release),
        cmocka_unit_test(test_get_holder_during_election_from_threads),
        cmocka_unit_test(test_empty_holder_after_leader_dies),
        cmocka_unit_test(test_failover_after_leader_death),
        cmocka_unit_test(test_wait_elected_timeout_cancels_the_election),
        cmocka_unit_test(test_double_run_election_is_refused),
        cmocka_unit_test(test_watch_current_state_then_changes_then_silence),
        cmocka_unit_test(test_watch_cancelled_from_its_callback),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
