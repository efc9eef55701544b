/* libkubelease when the connection or the service misbehaves, against a real
 * `kubeleased --dev`:
 * - the network between client and service breaks (a loopback proxy cuts
 *   every connection): the leader reconnects and resumes its term, same
 *   epoch, without ever reporting a loss (docs/design.md, rules 2 and 5);
 * - on the test control plane, the proxy sends the leader to another
 *   replica of the service: it resumes its term there, presenting the term
 *   token it kept (docs/design.md, rule 8);
 * - a Confirm is never answered (its connection accepted and never read,
 *   as when the service is swamped by new connections): it is sent again
 *   halfway to the deadline and the term goes on (docs/design.md, rule 2);
 * - the service freezes for less than the validity: no loss;
 * - the service is killed and restarted: the host process survives (SIGPIPE
 *   left at its default), the leader reports the loss by its deadline, the
 *   standby and the watch carry on with the new service;
 * - a stream has a connection of its own, never a kept-alive one, and its
 *   connection is not used again (the service serves streams and calls on
 *   separate threads, told apart by a connection's first request:
 *   docs/design.md, section 2);
 * - blocking reads (a standby reading the holder every 200 ms) share one
 *   kept-alive connection instead of opening one each. */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "client_harness.h"
#include "kubelease.h"
#include "tcp_proxy.h"

static struct server srv;

static int group_setup(void **state)
{
    (void)state;
    h_require_server();
    signal(SIGPIPE, SIG_DFL); /* the library must not rely on the host ignoring it */
    h_server_start(&srv, 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    h_server_cleanup(&srv);
    return 0;
}

static kl_client *client_at(const char *endpoint)
{
    kl_error err;
    kl_client *c = kl_client_new(endpoint, &err);
    if (!c)
        fail_msg("kl_client_new: %s", err.message);
    return c;
}

/* Starts p in front of the service and a client through it. */
static kl_client *client_via(struct tcp_proxy *p)
{
    char ep[64];
    proxy_start(p, srv.port);
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", p->port);
    return client_at(ep);
}

static void win(kl_client *c, const char *lease, const char *id, int64_t *epoch)
{
    kl_error err;
    if (kl_run_election(c, h_ns, lease, id, 5, 4, 1, &err) != KL_OK ||
        kl_wait_elected(c, h_ns, lease, 15, epoch, &err) != KL_OK)
        fail_msg("%s could not win %s: %s", id, lease, err.message);
}

static atomic_int events;

static void count_event(void *ctx, const char *holder, size_t holder_len, int64_t epoch)
{
    (void)ctx;
    (void)holder;
    (void)holder_len;
    (void)epoch;
    atomic_fetch_add(&events, 1);
}

/* Waits (10 s at most) until *v counts n of what. */
static void count_wait(atomic_int *v, int n, const char *what)
{
    for (int64_t guard = h_now_ms() + 10000; atomic_load(v) < n;) {
        if (h_now_ms() > guard)
            fail_msg("%d %s in 10 s, %d expected", atomic_load(v), what, n);
        poll(NULL, 0, 10);
    }
}

static void test_stream_has_a_connection_of_its_own(void **state)
{
    (void)state;
    struct tcp_proxy p;
    kl_error err;
    int64_t epoch = 0;
    kl_client *c = client_via(&p);
    win(c, "own-connection", "streamer", &epoch);
    /* The campaign's stream, and the Confirms' connection, kept alive
     * between them (one a third of a validity apart). */
    count_wait(&p.accepted, 2, "connection(s) through the proxy");
    atomic_store(&events, 0);
    assert_int_equal(kl_watch_holder(c, h_ns, "own-connection", count_event, NULL, &err), KL_OK);
    count_wait(&events, 1, "watch event(s)");
    /* The watch did not take the Confirms' idle connection: a third. */
    assert_int_equal(atomic_load(&p.accepted), 3);
    assert_int_equal(kl_cancel_watch(c, h_ns, "own-connection", &err), KL_OK);
    assert_int_equal(kl_cancel_election(c, h_ns, "own-connection", &err), KL_OK);
    assert_int_equal(kl_wait_lost(c, h_ns, "own-connection", &err), KL_OK);
    kl_client_free(c);
    proxy_stop(&p);
}

static void test_holder_reads_share_a_connection(void **state)
{
    (void)state;
    struct tcp_proxy p;
    kl_error err;
    kl_client *c = client_via(&p);
    for (int i = 0; i < 5; i++) {
        char *holder = NULL;
        int rc = kl_get_holder(c, h_ns, "read-often", &holder, NULL, &err);
        if (rc < 0)
            fail_msg("kl_get_holder: %s", err.message);
        kl_free(holder);
    }
    assert_int_equal(atomic_load(&p.accepted), 1);
    kl_client_free(c);
    proxy_stop(&p);
}

static void test_resume_after_broken_connection(void **state)
{
    (void)state;
    struct tcp_proxy p;
    kl_error err;
    int64_t epoch = 0, hepoch = 0;
    kl_client *c = client_via(&p), *direct = client_at(srv.endpoint);
    win(c, "resume", "resumer", &epoch);
    for (int round = 0; round < 3; round++) {
        int before = atomic_load(&p.accepted);
        proxy_cut(&p);
        /* Leadership survives the break: no loss reported for 3 s (three
         * validities), and the client reconnected. */
        int rc = kl_wait_lost_timeout(c, h_ns, "resume", 3000, &err);
        if (rc != KL_ERR_TIMEOUT)
            fail_msg("round %d: leadership lost after a broken connection: %s", round, err.message);
        assert_true(atomic_load(&p.accepted) > before);
        assert_int_equal(kl_is_leader(c, h_ns, "resume", NULL, &err), 1);
        char *holder = NULL;
        assert_int_equal(kl_get_holder(direct, h_ns, "resume", &holder, &hepoch, &err), KL_OK);
        assert_non_null(holder);
        assert_string_equal(holder, "resumer");
        kl_free(holder);
        assert_int_equal(hepoch, epoch); /* resumed, not a new term */
    }
    assert_int_equal(kl_cancel_election(c, h_ns, "resume", &err), KL_OK);
    assert_int_equal(kl_wait_lost(c, h_ns, "resume", &err), KL_OK);
    kl_client_free(c);
    kl_client_free(direct);
    proxy_stop(&p);
}

/* Rule 2: the proxy swallows one Confirm (the service never reads it, the
 * connection stays open). Without a second attempt the leader would wait
 * for the first until its own timeout, a whole grant, past the deadline,
 * and step down; with it, the term goes on. Done when two Confirms went
 * through after the swallowed one (the second attempt and the next). */
static void test_unanswered_confirm_is_sent_again_in_time(void **state)
{
    (void)state;
    struct tcp_proxy p;
    kl_error err;
    int64_t epoch = 0;
    kl_client *c = client_via(&p);
    if (kl_run_election(c, h_ns, "unanswered", "patient", 15, 10, 6, &err) != KL_OK ||
        kl_wait_elected(c, h_ns, "unanswered", 15, &epoch, &err) != KL_OK)
        fail_msg("patient could not win: %s", err.message);
    proxy_swallow(&p, "/kubelease.v1.LeaseService/Confirm ", 1);
    int64_t guard = h_now_ms() + 30000;
    while (atomic_load(&p.swallowed) < 1 || atomic_load(&p.passed) < 2) {
        if (kl_wait_lost_timeout(c, h_ns, "unanswered", 50, &err) != KL_ERR_TIMEOUT)
            fail_msg("leadership lost after %d unanswered Confirm(s): %s",
                     atomic_load(&p.swallowed), err.message);
        if (h_now_ms() > guard)
            fail_msg("no Confirm went through in 30 s (%d swallowed, %d passed)",
                     atomic_load(&p.swallowed), atomic_load(&p.passed));
    }
    assert_int_equal(kl_is_leader(c, h_ns, "unanswered", NULL, &err), 1);
    assert_int_equal(kl_cancel_election(c, h_ns, "unanswered", &err), KL_OK);
    assert_int_equal(kl_wait_lost(c, h_ns, "unanswered", &err), KL_OK);
    kl_client_free(c);
    proxy_stop(&p);
}

/* Rules 5 and 8: a leader whose connection moves to another replica (the
 * Lease in the apiserver, the term key shared) resumes its term there with
 * the token the library kept, and keeps leading. */
static void test_resume_on_another_replica(void **state)
{
    (void)state;
    if (!h_kubeconfig[0]) {
        printf("the --dev store is per process: needs the test control plane\n");
        skip();
    }
    struct server other = {0};
    struct tcp_proxy p;
    kl_error err;
    int64_t epoch = 0, hepoch = 0;
    snprintf(other.log, sizeof(other.log), "%s/kl-test-server-%d-other.log",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    unlink(other.log);
    h_server_start(&other, 0);
    kl_client *c = client_via(&p), *there = client_at(other.endpoint);
    win(c, "moving", "mover", &epoch);
    proxy_retarget(&p, other.port);
    int rc = kl_wait_lost_timeout(c, h_ns, "moving", 3000, &err);
    if (rc != KL_ERR_TIMEOUT)
        fail_msg("leadership lost on moving to another replica: %s", err.message);
    assert_int_equal(kl_is_leader(c, h_ns, "moving", NULL, &err), 1);
    char *holder = NULL;
    assert_int_equal(kl_get_holder(there, h_ns, "moving", &holder, &hepoch, &err), KL_OK);
    assert_non_null(holder);
    assert_string_equal(holder, "mover");
    kl_free(holder);
    assert_int_equal(hepoch, epoch); /* resumed there, not a new term */
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "grep -q 'event=term_resumed.*identity=mover' '%s'", other.log);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(kl_cancel_election(c, h_ns, "moving", &err), KL_OK);
    assert_int_equal(kl_wait_lost(c, h_ns, "moving", &err), KL_OK);
    kl_client_free(c);
    kl_client_free(there);
    proxy_stop(&p);
    h_server_cleanup(&other);
}

static void test_brief_freeze_is_not_a_loss(void **state)
{
    (void)state;
    kl_client *c = client_at(srv.endpoint);
    kl_error err;
    int64_t epoch = 0, epoch2 = 0;
    win(c, "freeze", "freezer", &epoch);
    for (int i = 0; i < 3; i++) {
        h_server_signal(&srv, SIGSTOP);
        h_sleep_ms(250);
        h_server_signal(&srv, SIGCONT);
        if (kl_wait_lost_timeout(c, h_ns, "freeze", 1500, &err) != KL_ERR_TIMEOUT)
            fail_msg("a 250 ms freeze cost the leadership: %s", err.message);
    }
    char *holder = NULL;
    assert_int_equal(kl_get_holder(c, h_ns, "freeze", &holder, &epoch2, &err), KL_OK);
    assert_string_equal(holder, "freezer");
    kl_free(holder);
    assert_int_equal(epoch2, epoch);
    kl_client_free(c);
}

struct last_holder {
    pthread_mutex_t mu;
    char holder[64];
    int calls;
};

static void remember(void *ctx, const char *holder, size_t len, int64_t epoch)
{
    struct last_holder *l = ctx;
    (void)epoch;
    pthread_mutex_lock(&l->mu);
    snprintf(l->holder, sizeof(l->holder), "%.*s", (int)len, holder ? holder : "");
    l->calls++;
    pthread_mutex_unlock(&l->mu);
}

static void test_service_crash_and_restart(void **state)
{
    (void)state;
    kl_client *a = client_at(srv.endpoint), *b = client_at(srv.endpoint);
    kl_error err;
    int64_t valid = 0;
    struct last_holder seen = {PTHREAD_MUTEX_INITIALIZER, "", 0};
    win(a, "crash", "crash-a", NULL);
    assert_int_equal(kl_run_election(b, h_ns, "crash", "crash-b", 5, 4, 1, &err), KL_OK);
    assert_int_equal(kl_watch_holder(b, h_ns, "crash", remember, &seen, &err), KL_OK);
    assert_int_equal(kl_is_leader(a, h_ns, "crash", &valid, &err), 1);

    int64_t t0 = h_now_ms();
    h_server_stop(&srv, 1);
    /* Without the service the leader must step down by its deadline. */
    int rc = kl_wait_lost(a, h_ns, "crash", &err);
    int64_t lost_after = h_now_ms() - t0;
    assert_int_equal(rc, KL_ERR_LOST);
    printf("leader stepped down %lld ms after the service died (validity %lld ms): %s\n",
           (long long)lost_after, (long long)valid, err.message);
    assert_true(lost_after <= valid + 300);
    h_server_start(&srv, srv.port);
    /* The standby campaigns on the new service and wins. */
    int64_t epoch = 0;
    assert_int_equal(kl_wait_elected(b, h_ns, "crash", 15, &epoch, &err), KL_OK);
    printf("standby elected %lld ms after the service died\n", (long long)(h_now_ms() - t0));
    /* The watch reconnected and reports the new holder. */
    int64_t until = h_now_ms() + 5000;
    for (;;) {
        pthread_mutex_lock(&seen.mu);
        int ok = strcmp(seen.holder, "crash-b") == 0;
        pthread_mutex_unlock(&seen.mu);
        if (ok)
            break;
        if (h_now_ms() > until)
            fail_msg("the watch did not report crash-b after the restart");
        h_sleep_ms(20);
    }
    kl_client_free(a);
    kl_client_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_has_a_connection_of_its_own),
        cmocka_unit_test(test_holder_reads_share_a_connection),
        cmocka_unit_test(test_resume_after_broken_connection),
        cmocka_unit_test(test_resume_on_another_replica),
        cmocka_unit_test(test_unanswered_confirm_is_sent_again_in_time),
        cmocka_unit_test(test_brief_freeze_is_not_a_loss),
        cmocka_unit_test(test_service_crash_and_restart),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
