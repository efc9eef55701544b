/* libk8s_lease_wrapper against a real `kubeleased --dev`: the Go wrapper's
 * unit scenarios (k8s_lease_wrapper_test.go: holder and transitions of a
 * held, missing, released, expired and active Lease; elections keyed by
 * namespace/name; a Lease's life from creation to release; concurrent holder
 * reads) and its conventions: the process-wide client from
 * $KUBELEASE_ENDPOINT (K8sLeaseInit idempotent and thread-safe), 0 / -1 with
 * a malloc'ed message, idempotent cancels and K8sLeaseWaitLost, the timeout
 * of K8sLeaseWaitElected, and watches on their own threads (blocking
 * callbacks do not stall elections; no callback after K8sLeaseCancelWatch).
 * A second candidate is this program run again (wrapper_harness.h). */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "integration/wrapper_harness.h"

static struct server srv;

static int group_setup(void **state)
{
    (void)state;
    setenv("KL_CLIENT_TEST_DEV", "1", 1); /* always the memory store */
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

/* Fails unless *msg is a message containing want; frees it, *msg = NULL. */
static void msg_has(char **msg, const char *want)
{
    if (!*msg)
        fail_msg("no message (want one containing \"%s\")", want);
    if (!strstr(*msg, want))
        fail_msg("message \"%s\" does not contain \"%s\"", *msg, want);
    free(*msg);
    *msg = NULL;
}

static void *init_thread(void *arg)
{
    char *msg = NULL;
    *(int *)arg = K8sLeaseInit(&msg) == 0 && msg == NULL;
    return NULL;
}

/* First test: no client exists yet. */
static void test_init_reports_a_bad_endpoint_and_is_idempotent(void **state)
{
    (void)state;
    char *msg = NULL;
    long long epoch = 5;

    /* Before any client: nothing runs, so cancels and WaitLost succeed. */
    assert_int_equal(K8sLeaseCancelElection("default", "w-none", &msg), 0);
    assert_int_equal(K8sLeaseWaitLost("default", "w-none", &msg), 0);
    assert_int_equal(K8sLeaseCancelWatch("default", "w-none", &msg), 0);
    assert_null(msg);
    assert_int_equal(K8sLeaseWaitElected("default", "w-none", 1, &epoch, &msg), -1);
    msg_has(&msg, "no election running for default/w-none");
    assert_int_equal(epoch, 5);

    setenv("KUBELEASE_ENDPOINT", "kubeleased:8080", 1);
    assert_int_equal(K8sLeaseInit(&msg), -1);
    msg_has(&msg, "\"kubeleased:8080\" is not a URL");
    char *holder = NULL;
    assert_int_equal(K8sLeaseGetHolder("default", "w-none", &holder, NULL, &msg), -1);
    msg_has(&msg, "KUBELEASE_ENDPOINT");
    assert_int_equal(K8sLeaseInit(NULL), -1); /* a NULL errMsg is allowed */

    /* A failed Init reads the variable again next time. */
    setenv("KUBELEASE_ENDPOINT", srv.endpoint, 1);
    pthread_t t[8];
    int ok[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&t[i], NULL, init_thread, &ok[i]);
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        assert_true(ok[i]);
    }
    assert_int_equal(K8sLeaseInit(&msg), 0);
    assert_null(msg);
    /* The one client stays: a later change of the variable is not used. */
    setenv("KUBELEASE_ENDPOINT", "kubeleased:8080", 1);
    assert_int_equal(K8sLeaseInit(&msg), 0);
    assert_int_equal(K8sLeaseGetHolder("default", "w-none", &holder, NULL, &msg), 1);
    setenv("KUBELEASE_ENDPOINT", srv.endpoint, 1);
}

/* TestGetHolderWithFakeClient, over several terms. */
static void test_get_holder_returns_holder_and_transitions(void **state)
{
    (void)state;
    long long e[3], he = -1;
    for (int i = 0; i < 3; i++) {
        e[i] = w_win("w-holder", "node-1:8080");
        w_holder_is("w-holder", "node-1:8080", &he);
        assert_int_equal(he, e[i]);
        if (i > 0 && e[i] <= e[i - 1])
            fail_msg("term %d has epoch %lld after %lld", i, e[i], e[i - 1]);
        w_resign("w-holder");
    }
}

/* TestGetHolderNotFound: 1, no holder, transitions 0, no message. */
static void test_get_holder_of_missing_lease_returns_1(void **state)
{
    (void)state;
    char *holder = (char *)"stale", *msg = (char *)"untouched";
    long long epoch = 9;
    assert_int_equal(K8sLeaseGetHolder("default", "w-never-created", &holder, &epoch, &msg), 1);
    assert_null(holder);
    assert_int_equal(epoch, 0);
    assert_string_equal(msg, "untouched");
    assert_int_equal(K8sLeaseGetHolder("default", "w-never-created", &holder, NULL, NULL), 1);
}

/* TestGetHolderEmptyIdentity: a released Lease has no holder and keeps its
 * transitions. */
static void test_get_holder_of_released_lease_is_null(void **state)
{
    (void)state;
    long long e = w_win("w-released", "node-r:8080"), he = -1;
    w_resign("w-released");
    assert_true(w_wait_holder("w-released", "", 2000) >= 0); /* the resignation is async */
    w_holder_is("w-released", "", &he);
    assert_int_equal(he, e);
}

/* TestGetHolderReturnsEmptyForExpiredLease: a holder that died without
 * releasing reads as no holder once its validity passed, transitions kept. */
static void test_get_holder_of_expired_lease_is_null(void **state)
{
    (void)state;
    struct candidate c;
    long long e = 0, he = -1;
    w_candidate_start(&c, "w-expired", "dead-leader:8080", 15);
    assert_int_equal(w_candidate_wait(&c, &e, 15000), 1);
    w_holder_is("w-expired", "dead-leader:8080", &he);
    assert_int_equal(he, e);
    w_candidate_stop(&c, SIGKILL);
    int64_t took = w_wait_holder("w-expired", "", W_LD * 1000 + 2000);
    printf("no holder %lld ms after SIGKILL of the holder\n", (long long)took);
    assert_true(took >= 0 && took < W_LD * 1000);
    w_holder_is("w-expired", "", &he);
    assert_int_equal(he, e);
}

/* TestGetHolderReturnsHolderForActiveLease: a holder that renews keeps the
 * Lease, well past its validity (the retry period, 1 s). */
static void test_get_holder_of_active_lease_is_the_holder(void **state)
{
    (void)state;
    struct candidate c;
    long long e = 0, he = -1;
    w_candidate_start(&c, "w-active", "active-leader:8080", 15);
    assert_int_equal(w_candidate_wait(&c, &e, 15000), 1);
    for (int64_t until = h_now_ms() + 3 * W_RP * 1000; h_now_ms() < until; h_sleep_ms(100)) {
        w_holder_is("w-active", "active-leader:8080", &he);
        assert_int_equal(he, e);
    }
    int st = w_candidate_stop(&c, SIGTERM);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* TestElectionKeyFormat: elections are keyed by namespace and name, and
 * messages name them "namespace/name". */
static void test_elections_are_keyed_by_namespace_and_name(void **state)
{
    (void)state;
    char *msg = NULL;
    long long e1 = 0, e2 = 0, e3 = 0;
    assert_int_equal(K8sLeaseRunElection("default", "w-leader", "k1", 5, 4, 1, &msg), 0);
    assert_int_equal(K8sLeaseRunElection("kube-system", "w-leader", "k2", 5, 4, 1, &msg), 0);
    assert_int_equal(K8sLeaseRunElection("default", "w-my-lock", "k3", 5, 4, 1, &msg), 0);
    assert_null(msg);
    assert_int_equal(K8sLeaseRunElection("default", "w-leader", "k4", 5, 4, 1, &msg), -1);
    msg_has(&msg, "default/w-leader already running");
    assert_int_equal(K8sLeaseWaitElected("kube-system", "w-my-lock", 0, NULL, &msg), -1);
    msg_has(&msg, "kube-system/w-my-lock");
    assert_int_equal(K8sLeaseRunElection("", "bare", "k5", 5, 4, 1, &msg), -1);
    msg_has(&msg, "namespace");
    assert_int_equal(K8sLeaseWaitElected("default", "w-leader", 15, &e1, &msg), 0);
    assert_int_equal(K8sLeaseWaitElected("kube-system", "w-leader", 15, &e2, &msg), 0);
    assert_int_equal(K8sLeaseWaitElected("default", "w-my-lock", 15, &e3, &msg), 0);
    assert_true(e1 >= 1 && e2 >= 1 && e3 >= 1);
    w_holder_is("w-leader", "k1", NULL);
    w_resign("w-leader");
    w_resign("w-my-lock");
    assert_int_equal(K8sLeaseCancelElection("kube-system", "w-leader", NULL), 0);
    assert_int_equal(K8sLeaseWaitLost("kube-system", "w-leader", NULL), 0);
}

/* TestLeaseCRUDWithFakeClient, through the wrapper: no Lease; created by the
 * first term; handed over to another process (new holder, larger
 * transitions); released. */
static void test_lease_lifecycle(void **state)
{
    (void)state;
    char holder[64];
    struct candidate b;
    long long ea, eb = 0, he = -1;
    assert_int_equal(w_holder("w-lifecycle", holder, sizeof(holder), NULL), 1);
    ea = w_win("w-lifecycle", "node-a:9090");
    w_holder_is("w-lifecycle", "node-a:9090", &he);
    assert_int_equal(he, ea);

    w_candidate_start(&b, "w-lifecycle", "node-b:9090", 15);
    /* B campaigns but A holds: B is not elected while A leads. */
    for (int64_t until = h_now_ms() + 1500; h_now_ms() < until; h_sleep_ms(50))
        assert_int_equal(w_candidate_state(&b, &eb), 0);
    int64_t t0 = h_now_ms();
    w_resign("w-lifecycle");
    assert_int_equal(w_candidate_wait(&b, &eb, 5000), 1);
    int64_t took = h_now_ms() - t0;
    printf("handoff to another process after K8sLeaseCancelElection: %lld ms\n", (long long)took);
    assert_true(took < 1000);
    assert_true(eb > ea);
    w_holder_is("w-lifecycle", "node-b:9090", &he);
    assert_int_equal(he, eb);

    int st = w_candidate_stop(&b, SIGTERM); /* B resigns */
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_true(w_wait_holder("w-lifecycle", "", 2000) >= 0);
    w_holder_is("w-lifecycle", "", &he);
    assert_int_equal(he, eb);
}

/* K8sPatchPodLabel and K8sRemovePodLabel: arguments checked with a message;
 * without an election they only record (and forget) the label; the label
 * goes with the next K8sLeaseRunElection, and this kubeleased (no
 * --pod-label-keys) refuses it, which never costs the election: it is
 * elected, and a K8sPatchPodLabel while it leads returns -1 with the cause
 * while the term goes on. */
static void test_pod_label_functions(void **state)
{
    (void)state;
    char *msg = NULL;
    assert_int_equal(K8sPatchPodLabel("default", NULL, "role", "leader", &msg), -1);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "K8sPatchPodLabel"));
    free(msg);
    msg = NULL;
    assert_int_equal(K8sRemovePodLabel("default", "kv-0", "", &msg), -1);
    assert_non_null(msg);
    free(msg);
    msg = NULL;
    /* Nothing runs: recorded, then forgotten; after a loss there is nothing to do. */
    assert_int_equal(K8sPatchPodLabel("default", "kv-0", "example.com/role", "leader", &msg), 0);
    assert_int_equal(K8sRemovePodLabel("default", "kv-0", "example.com/role", &msg), 0);
    assert_int_equal(K8sRemovePodLabel("default", "kv-0", "example.com/role", &msg), 0);
    assert_null(msg);

    assert_int_equal(K8sPatchPodLabel("default", "kv-0", "example.com/role", "leader", &msg), 0);
    assert_int_equal(K8sLeaseRunElection("default", "w-labelled", "kv-0", 15, 10, 2, &msg), 0);
    long long epoch = 0, he = 0;
    assert_int_equal(K8sLeaseWaitElected("default", "w-labelled", 10, &epoch, &msg), 0);
    assert_int_equal(K8sPatchPodLabel("default", "kv-0", "example.com/role", "leader", &msg), -1);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "labels no Pods"));
    free(msg);
    msg = NULL;
    w_holder_is("w-labelled", "kv-0", &he);
    assert_int_equal(he, epoch); /* the same term */
    assert_int_equal(K8sRemovePodLabel("default", "kv-0", "example.com/role", &msg), 0);
    assert_int_equal(K8sLeaseCancelElection("default", "w-labelled", &msg), 0);
    assert_int_equal(K8sLeaseWaitLost("default", "w-labelled", &msg), 0);
    assert_null(msg);
}

/* $KUBELEASE_GRANT_MS: the grant of the process's elections; a value that
 * is not one is an error naming it. */
static void test_grant_from_the_environment(void **state)
{
    (void)state;
    char *msg = NULL;
    setenv("KUBELEASE_GRANT_MS", "soon", 1);
    assert_int_equal(K8sLeaseRunElection("default", "w-grant", "g-0", 15, 10, 2, &msg), -1);
    assert_non_null(msg);
    assert_non_null(strstr(msg, "KUBELEASE_GRANT_MS"));
    free(msg);
    msg = NULL;
    setenv("KUBELEASE_GRANT_MS", "100", 1); /* below 200 ms */
    assert_int_equal(K8sLeaseRunElection("default", "w-grant", "g-0", 15, 10, 2, &msg), -1);
    assert_non_null(strstr(msg, "grant_ms"));
    free(msg);
    msg = NULL;
    setenv("KUBELEASE_GRANT_MS", "500", 1);
    assert_int_equal(K8sLeaseRunElection("default", "w-grant", "g-0", 15, 10, 2, &msg), 0);
    long long epoch = 0;
    assert_int_equal(K8sLeaseWaitElected("default", "w-grant", 10, &epoch, &msg), 0);
    unsetenv("KUBELEASE_GRANT_MS");
    assert_int_equal(K8sLeaseCancelElection("default", "w-grant", &msg), 0);
    assert_int_equal(K8sLeaseWaitLost("default", "w-grant", &msg), 0);
    assert_null(msg);
}

struct reader {
    long long want;
    int bad;
};

static void *read_holder(void *arg)
{
    struct reader *r = arg;
    for (int i = 0; i < 10; i++) {
        char *holder = NULL, *msg = NULL;
        long long epoch = 0;
        if (K8sLeaseGetHolder("default", "w-concurrent", &holder, &epoch, &msg) != 0 || !holder ||
            strcmp(holder, "concurrent-node:8080") != 0 || epoch != r->want)
            r->bad++;
        free(holder);
        free(msg);
    }
    return NULL;
}

/* TestConcurrentGetHolder: ten threads read at once. */
static void test_concurrent_get_holder(void **state)
{
    (void)state;
    struct reader r[10];
    pthread_t t[10];
    long long e = w_win("w-concurrent", "concurrent-node:8080");
    for (int i = 0; i < 10; i++) {
        r[i].want = e;
        r[i].bad = 0;
        pthread_create(&t[i], NULL, read_holder, &r[i]);
    }
    for (int i = 0; i < 10; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(r[i].bad, 0);
    }
    w_resign("w-concurrent");
}

/* The Go wrapper's idempotence: cancelling nothing and waiting for the loss
 * of an election that ended (or never ran) return 0 at once. */
static void test_cancel_and_wait_lost_are_idempotent(void **state)
{
    (void)state;
    char *msg = NULL;
    long long e = 0;
    assert_int_equal(K8sLeaseCancelElection("default", "w-idem", &msg), 0);
    assert_int_equal(K8sLeaseWaitLost("default", "w-idem", &msg), 0);
    assert_int_equal(K8sLeaseCancelElection(NULL, NULL, &msg), 0);
    assert_int_equal(K8sLeaseWaitLost("default", "Not A Name", &msg), 0);
    assert_null(msg);
    long long won = w_win("w-idem", "idem");
    assert_int_equal(K8sLeaseWaitElected("default", "w-idem", 0, &e, &msg), 0);
    assert_int_equal(e, won); /* again, while the term lasts */
    int64_t t0 = h_now_ms();
    assert_int_equal(K8sLeaseCancelElection("default", "w-idem", &msg), 0);
    assert_int_equal(K8sLeaseWaitLost("default", "w-idem", &msg), 0);
    assert_true(h_now_ms() - t0 < 500);
    assert_int_equal(K8sLeaseWaitLost("default", "w-idem", &msg), 0);
    assert_int_equal(K8sLeaseCancelElection("default", "w-idem", &msg), 0);
    assert_null(msg);
    assert_int_equal(K8sLeaseWaitElected("default", "w-idem", 5, &e, &msg), -1);
    msg_has(&msg, "w-idem");
    /* The ended election does not block a new one. */
    assert_true(w_win("w-idem", "idem") > won);
    w_resign("w-idem");
}

/* K8sLeaseWaitElected's timeout cancels the election; 0 or less does not
 * wait (the Go wrapper's time.After of 0). */
static void test_wait_elected_timeout_cancels_the_election(void **state)
{
    (void)state;
    struct candidate c;
    char *msg = NULL;
    long long e = 0;
    w_candidate_start(&c, "w-timeout", "holder-a", 15);
    assert_int_equal(w_candidate_wait(&c, &e, 15000), 1);
    assert_int_equal(K8sLeaseRunElection("default", "w-timeout", "hopeful", 5, 4, 1, &msg), 0);
    int64_t t0 = h_now_ms();
    assert_int_equal(K8sLeaseWaitElected("default", "w-timeout", 1, &e, &msg), -1);
    int64_t took = h_now_ms() - t0;
    assert_true(took >= 900 && took < 2500);
    msg_has(&msg, "w-timeout");
    t0 = h_now_ms();
    assert_int_equal(K8sLeaseWaitLost("default", "w-timeout", NULL), 0);
    for (int timeout = 0; timeout >= -1; timeout--) {
        assert_int_equal(K8sLeaseRunElection("default", "w-timeout", "hopeful", 5, 4, 1, &msg), 0);
        assert_int_equal(K8sLeaseWaitElected("default", "w-timeout", timeout, &e, &msg), -1);
        msg_has(&msg, "w-timeout");
        assert_int_equal(K8sLeaseWaitLost("default", "w-timeout", NULL), 0);
    }
    assert_true(h_now_ms() - t0 < 1000);
    w_holder_is("w-timeout", "holder-a", NULL);
    w_candidate_stop(&c, SIGTERM);
}

static void test_bad_arguments_are_refused_with_a_message(void **state)
{
    (void)state;
    char *msg = NULL;
    assert_int_equal(K8sLeaseRunElection("default", "w-bad", "x", 4, 5, 1, &msg), -1);
    msg_has(&msg, "lease_duration");
    assert_int_equal(K8sLeaseRunElection("default", "w-bad", "", 5, 4, 1, &msg), -1);
    msg_has(&msg, "identity");
    assert_int_equal(K8sLeaseRunElection("default", "w-bad", NULL, 5, 4, 1, NULL), -1);
    assert_int_equal(K8sLeaseGetHolder("default", "w-bad", NULL, NULL, &msg), -1);
    msg_has(&msg, "holderIdentity");
    char *holder = (char *)"stale";
    assert_int_equal(K8sLeaseGetHolder("default", "Bad_Name", &holder, NULL, &msg), -1);
    assert_null(holder);
    msg_has(&msg, "Bad_Name");
    assert_int_equal(K8sLeaseWatchHolder("default", "w-bad", NULL, NULL, &msg), -1);
    msg_has(&msg, "callbackFunc");
}

/* --- watches -------------------------------------------------------------- */

#define MAX_SEEN 64
struct seen {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n;
    char holder[MAX_SEEN][64];
    long long epoch[MAX_SEEN];
    pthread_t thread;
    int gate_closed;     /* callbacks wait while set */
    int in_callback;     /* a callback is running */
    int returned;        /* callbacks that returned */
    int cancel_inside;   /* the first callback cancels its watch */
    const char *lease;   /* for cancel_inside and elected_rc */
    const char *self_id; /* when the holder is this, call K8sLeaseWaitElected */
    int elected_rc;
    int cancel_rc;
};

static void seen_init(struct seen *s, const char *lease)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->lease = lease;
    s->elected_rc = 99;
}

static void on_holder(void *ctx, const char *holder, size_t len, int64_t epoch)
{
    struct seen *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->in_callback = 1;
    pthread_cond_broadcast(&s->cv);
    while (s->gate_closed)
        pthread_cond_wait(&s->cv, &s->mu);
    if (s->n < MAX_SEEN) {
        snprintf(s->holder[s->n], sizeof(s->holder[0]), "%.*s", (int)len, holder ? holder : "");
        if ((holder && strlen(holder) != len) || (!holder && len != 0))
            snprintf(s->holder[s->n], sizeof(s->holder[0]), "BAD LENGTH");
        s->epoch[s->n] = epoch;
        s->n++;
    }
    s->thread = pthread_self();
    int cancel = s->cancel_inside;
    int wait_elected = s->self_id && holder && strcmp(holder, s->self_id) == 0;
    pthread_mutex_unlock(&s->mu);
    /* The Go wrapper's callbacks could block and call anything. */
    if (wait_elected) {
        long long e = 0;
        int rc = K8sLeaseWaitElected("default", (char *)s->lease, 5, &e, NULL);
        pthread_mutex_lock(&s->mu);
        s->elected_rc = rc == 0 && e == epoch ? 0 : -1;
        pthread_mutex_unlock(&s->mu);
    }
    int cancel_rc = cancel ? K8sLeaseCancelWatch("default", (char *)s->lease, NULL) : 0;
    pthread_mutex_lock(&s->mu);
    s->cancel_rc |= cancel_rc;
    s->in_callback = 0;
    s->returned++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Waits (5 s at most) until a callback reported holder with epoch (any
 * epoch when epoch < 0); returns its index or -1. */
static int seen_wait_for(struct seen *s, const char *holder, long long epoch)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&s->mu);
    for (int i = 0;;) {
        for (; i < s->n; i++)
            if (strcmp(s->holder[i], holder) == 0 && (epoch < 0 || s->epoch[i] == epoch)) {
                pthread_mutex_unlock(&s->mu);
                return i;
            }
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0)
            break;
    }
    pthread_mutex_unlock(&s->mu);
    return -1;
}

static int seen_count(struct seen *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void gate(struct seen *s, int closed)
{
    pthread_mutex_lock(&s->mu);
    s->gate_closed = closed;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Waits until a callback is running (blocked at the gate). */
static void wait_in_callback(struct seen *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 5;
    pthread_mutex_lock(&s->mu);
    while (!s->in_callback && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
        ;
    int in = s->in_callback;
    pthread_mutex_unlock(&s->mu);
    assert_true(in);
}

static void test_watch_reports_current_state_then_changes(void **state)
{
    (void)state;
    struct seen s;
    char *msg = NULL;
    seen_init(&s, "w-watched");
    assert_int_equal(K8sLeaseWatchHolder("default", "w-watched", &s, on_holder, &msg), 0);
    assert_int_equal(K8sLeaseWatchHolder("default", "w-watched", &s, on_holder, &msg), -1);
    msg_has(&msg, "default/w-watched is already running");
    assert_int_equal(seen_wait_for(&s, "", 0), 0); /* the current state: no Lease */
    long long e = w_win("w-watched", "watch-a");
    assert_true(seen_wait_for(&s, "watch-a", e) > 0);
    pthread_mutex_lock(&s.mu);
    assert_false(pthread_equal(s.thread, pthread_self()));
    pthread_mutex_unlock(&s.mu);
    w_resign("w-watched");
    assert_true(seen_wait_for(&s, "", e) > 0);
    assert_int_equal(K8sLeaseCancelWatch("default", "w-watched", &msg), 0);
    assert_null(msg);
}

struct lost_waiter {
    const char *lease;
    int rc;
    int done;
};

static void *wait_lost_thread(void *arg)
{
    struct lost_waiter *w = arg;
    w->rc = K8sLeaseWaitLost("default", (char *)w->lease, NULL);
    __atomic_store_n(&w->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* A callback that blocks delays only its own watch: the election in the same
 * process keeps being confirmed well past its validity (1 s), and the
 * callback itself may wait for the election. */
static void test_blocked_callback_does_not_stall_elections(void **state)
{
    (void)state;
    struct seen s;
    struct lost_waiter lw = {"w-blocked", 99, 0};
    pthread_t t;
    long long he = -1;
    seen_init(&s, "w-blocked");
    s.self_id = "busy-leader";
    gate(&s, 1);
    assert_int_equal(K8sLeaseWatchHolder("default", "w-blocked", &s, on_holder, NULL), 0);
    wait_in_callback(&s);
    long long e = w_win("w-blocked", "busy-leader");
    pthread_create(&t, NULL, wait_lost_thread, &lw);
    for (int64_t until = h_now_ms() + 3 * W_RP * 1000; h_now_ms() < until; h_sleep_ms(100)) {
        assert_false(__atomic_load_n(&lw.done, __ATOMIC_SEQ_CST));
        w_holder_is("w-blocked", "busy-leader", &he);
        assert_int_equal(he, e);
    }
    gate(&s, 0);
    assert_true(seen_wait_for(&s, "busy-leader", e) > 0);
    pthread_mutex_lock(&s.mu);
    while (s.elected_rc == 99)
        pthread_cond_wait(&s.cv, &s.mu);
    assert_int_equal(s.elected_rc, 0); /* K8sLeaseWaitElected from the callback */
    pthread_mutex_unlock(&s.mu);
    w_resign("w-blocked");
    pthread_join(t, NULL);
    assert_int_equal(lw.rc, 0);
    assert_int_equal(K8sLeaseCancelWatch("default", "w-blocked", NULL), 0);
}

struct canceller {
    struct seen *s;
    int returned_seen; /* callbacks returned when K8sLeaseCancelWatch returned */
    int done;
};

static void *cancel_thread(void *arg)
{
    struct canceller *k = arg;
    K8sLeaseCancelWatch("default", (char *)k->s->lease, NULL);
    pthread_mutex_lock(&k->s->mu);
    k->returned_seen = k->s->returned;
    pthread_mutex_unlock(&k->s->mu);
    __atomic_store_n(&k->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* K8sLeaseCancelWatch waits for the running callback, and no callback runs
 * after it returned; the same lease may be watched again at once. */
static void test_cancel_watch_waits_for_the_callback_then_silence(void **state)
{
    (void)state;
    struct seen s, s2;
    struct canceller k = {&s, -1, 0};
    pthread_t t;
    assert_int_equal(K8sLeaseCancelWatch("default", "w-cancel", NULL), 0);
    seen_init(&s, "w-cancel");
    gate(&s, 1);
    assert_int_equal(K8sLeaseWatchHolder("default", "w-cancel", &s, on_holder, NULL), 0);
    wait_in_callback(&s);
    pthread_create(&t, NULL, cancel_thread, &k);
    for (int64_t until = h_now_ms() + 300; h_now_ms() < until; h_sleep_ms(20))
        assert_false(__atomic_load_n(&k.done, __ATOMIC_SEQ_CST));
    gate(&s, 0);
    pthread_join(t, NULL);
    assert_int_equal(k.returned_seen, 1);

    int frozen = seen_count(&s);
    seen_init(&s2, "w-cancel");
    assert_int_equal(K8sLeaseWatchHolder("default", "w-cancel", &s2, on_holder, NULL), 0);
    long long e = w_win("w-cancel", "cancel-a");
    assert_true(seen_wait_for(&s2, "cancel-a", e) >= 0);
    w_resign("w-cancel");
    assert_true(seen_wait_for(&s2, "", e) >= 0);
    assert_int_equal(K8sLeaseCancelWatch("default", "w-cancel", NULL), 0);
    assert_int_equal(seen_count(&s), frozen);
}

static void test_watch_cancelled_from_its_callback(void **state)
{
    (void)state;
    struct seen s, s2;
    seen_init(&s, "w-self-cancel");
    s.cancel_inside = 1;
    assert_int_equal(K8sLeaseWatchHolder("default", "w-self-cancel", &s, on_holder, NULL), 0);
    assert_int_equal(seen_wait_for(&s, "", 0), 0);
    /* Once it returned, a new watch of the lease is allowed and sees the
     * change the cancelled one does not. */
    pthread_mutex_lock(&s.mu);
    while (s.returned < 1)
        pthread_cond_wait(&s.cv, &s.mu);
    pthread_mutex_unlock(&s.mu);
    seen_init(&s2, "w-self-cancel");
    assert_int_equal(K8sLeaseWatchHolder("default", "w-self-cancel", &s2, on_holder, NULL), 0);
    long long e = w_win("w-self-cancel", "sc-a");
    assert_true(seen_wait_for(&s2, "sc-a", e) >= 0);
    w_resign("w-self-cancel");
    assert_int_equal(K8sLeaseCancelWatch("default", "w-self-cancel", NULL), 0);
    assert_int_equal(seen_count(&s), 1);
    assert_int_equal(s.cancel_rc, 0);
}

int main(int argc, char **argv)
{
    w_candidate_main(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_reports_a_bad_endpoint_and_is_idempotent),
        cmocka_unit_test(test_get_holder_returns_holder_and_transitions),
        cmocka_unit_test(test_get_holder_of_missing_lease_returns_1),
        cmocka_unit_test(test_pod_label_functions),
        cmocka_unit_test(test_grant_from_the_environment),
        cmocka_unit_test(test_get_holder_of_released_lease_is_null),
        cmocka_unit_test(test_get_holder_of_expired_lease_is_null),
        cmocka_unit_test(test_get_holder_of_active_lease_is_the_holder),
        cmocka_unit_test(test_elections_are_keyed_by_namespace_and_name),
        cmocka_unit_test(test_lease_lifecycle),
        cmocka_unit_test(test_concurrent_get_holder),
        cmocka_unit_test(test_cancel_and_wait_lost_are_idempotent),
        cmocka_unit_test(test_wait_elected_timeout_cancels_the_election),
        cmocka_unit_test(test_bad_arguments_are_refused_with_a_message),
        cmocka_unit_test(test_watch_reports_current_state_then_changes),
        cmocka_unit_test(test_blocked_callback_does_not_stall_elections),
        cmocka_unit_test(test_cancel_watch_waits_for_the_callback_then_silence),
        cmocka_unit_test(test_watch_cancelled_from_its_callback),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
