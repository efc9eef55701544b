/* The engine on the Kubernetes store, against the real kube-apiserver and
 * etcd of the test control plane, with the ServiceAccount's credentials
 * (only a Role on Leases, and create on Events, in its namespace). Two engines stand for two
 * replicas of kubeleased; a third store writes as a foreign client would.
 *
 * Counterparts of the reference's integration scenarios, plus: same-identity
 * epochs, an apiserver restart within the renew deadline, a foreign holder,
 * and the apiserver requests 20 standbys add over 60 s (none). */
#include <curl/curl.h>
#include <unistd.h>

#include "support/engine_harness.h"
#include "core/metrics.h"
#include "kube_env.h"

/* A replica of the service: an engine over its own Kubernetes store. */
static fixture *replica_start(void)
{
    loop *l = loop_new();
    fixture *f = fixture_start(l, sa_store(l));
    f->ns = test_ns;
    return f;
}

static int setup(void **state)
{
    fixture **two = calloc(2, sizeof *two);
    two[0] = replica_start();
    two[1] = replica_start();
    *state = two;
    return 0;
}

static int teardown(void **state)
{
    fixture **two = *state;
    fixture_stop(two[0]);
    fixture_stop(two[1]);
    free(two);
    return 0;
}

/* A lease name unique to this run (the control plane outlives no run, but
 * reruns against a kept one must not collide). */
static const char *lease_name(const char *base)
{
    static _Thread_local char ring[4][128];
    static _Thread_local int next;
    char *out = ring[next++ % 4];
    snprintf(out, 128, "%s-%s", base, run_id);
    return out;
}

static engine_campaign_req req(const char *lease, const char *identity)
{
    return req_for_ns(test_ns, lease, identity);
}

static void single_leader_and_cancel(fixture *f, const char *lease, const char *identity)
{
    sink *a = sink_new();
    campaign(f, a, req(lease, identity));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 15000);
    assert_true(i >= 0);
    engine_reply h = get_holder(f, lease, true);
    assert_int_equal(h.code, ENGINE_OK);
    assert_string_equal(h.holder, identity);
    int64_t t0 = mono_ms();
    resign(f, lease, identity);
    int k = wait_kind(a, ENGINE_EVENT_LOST, 10000);
    assert_true(k >= 0);
    assert_int_equal(a->events[k].reason, ENGINE_LOST_RESIGNED);
    assert_true(a->at_ms[k] - t0 < 1000);
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

/* Reference: TestSingleLeaderElection, TestCancelElection. */
static void test_kube_single_leader_then_cancel(void **state)
{
    fixture **r = *state;
    single_leader_and_cancel(r[0], lease_name("single"), "node-1:8080");
}

/* Reference: TestLeaderEpoch; and rule 4 for the same identity. */
static void test_kube_epochs_increase_also_for_same_identity(void **state)
{
    fixture **r = *state;
    const char *lease = lease_name("epoch");
    const char *ids[] = {"node-epoch-1:8080", "node-epoch-2:8080", "node-epoch-2:8080",
                         "node-epoch-2:8080"};
    int64_t last = 0;
    for (int k = 0; k < 4; k++) {
        sink *a = sink_new();
        fixture *f = r[k % 2]; /* alternate replicas of the service */
        campaign(f, a, req(lease, ids[k]));
        int i = wait_kind(a, ENGINE_EVENT_ELECTED, 15000);
        assert_true(i >= 0);
        assert_true(a->events[i].epoch > last);
        last = a->events[i].epoch;
        resign(f, lease, ids[k]);
        assert_true(wait_closed(a, 5000));
        sink_free(a);
    }
}

/* Reference: TestSequentialLeadershipHandoff — here the standby is on the
 * other replica and takes over through the watch, without waiting. */
static void test_kube_handoff_across_replicas_is_watch_driven(void **state)
{
    fixture **r = *state;
    const char *lease = lease_name("handoff");
    sink *a = sink_new(), *b = sink_new();
    campaign(r[0], a, req(lease, "candidate-a:8080"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 15000) >= 0);
    campaign(r[1], b, req(lease, "candidate-b:8080"));
    int j = wait_kind(b, ENGINE_EVENT_CANDIDATE, 15000);
    assert_true(j >= 0);
    int64_t t0 = mono_ms();
    resign(r[0], lease, "candidate-a:8080");
    j = wait_kind(b, ENGINE_EVENT_ELECTED, 15000);
    assert_true(j >= 0);
    int64_t handoff = b->at_ms[j] - t0;
    print_message("handoff after resign across replicas: %lld ms\n", (long long)handoff);
    assert_true(handoff < 1000);
    assert_string_equal(get_holder(r[0], lease, true).holder, "candidate-b:8080");
    resign(r[1], lease, "candidate-b:8080");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* Reference: TestConcurrentCandidateElection, across two replicas. */
static void test_kube_concurrent_candidates_one_winner(void **state)
{
    fixture **r = *state;
    const char *lease = lease_name("concurrent");
    enum { N = 6 };
    sink *s[N];
    char id[N][32];
    for (int k = 0; k < N; k++) {
        s[k] = sink_new();
        snprintf(id[k], sizeof id[k], "candidate-%d:8080", k);
        campaign(r[k % 2], s[k], req(lease, id[k]));
    }
    int winner = -1, ev = -1;
    int64_t until = mono_ms() + 15000;
    while (winner < 0 && mono_ms() < until)
        for (int k = 0; k < N && winner < 0; k++)
            if ((ev = wait_kind(s[k], ENGINE_EVENT_ELECTED, 50)) >= 0)
                winner = k;
    assert_true(winner >= 0);
    int64_t epoch = s[winner]->events[ev].epoch;
    /* Nobody else, for longer than a grant: the winner keeps confirming. */
    for (int round = 0; round < 6; round++) {
        assert_int_equal(confirm(r[winner % 2], lease, id[winner], epoch).code, ENGINE_OK);
        for (int k = 0; k < N; k++)
            if (k != winner)
                assert_true(wait_kind(s[k], ENGINE_EVENT_ELECTED, 80) < 0);
    }
    for (int k = 0; k < N; k++)
        resign(r[k % 2], lease, id[k]);
    for (int k = 0; k < N; k++) {
        assert_true(wait_closed(s[k], 10000));
        sink_free(s[k]);
    }
}

typedef struct reader {
    fixture *f;
    const char *lease;
    const char *want;
    int ok;
} reader;

static void *read_holder(void *arg)
{
    reader *rd = arg;
    for (int k = 0; k < 20; k++) {
        engine_reply h = get_holder(rd->f, rd->lease, k % 2 == 0);
        rd->ok += h.code == ENGINE_OK && strcmp(h.holder, rd->want) == 0;
    }
    return NULL;
}

/* Reference: TestGetHolderDuringElection, from several threads. */
static void test_kube_get_holder_during_election(void **state)
{
    fixture **r = *state;
    const char *lease = lease_name("active-get-holder");
    sink *a = sink_new();
    campaign(r[0], a, req(lease, "active-node:8080"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 15000) >= 0);
    pthread_t t[5];
    reader rd[5];
    for (int k = 0; k < 5; k++) {
        rd[k] = (reader){.f = r[k % 2], .lease = lease, .want = "active-node:8080"};
        pthread_create(&t[k], NULL, read_holder, &rd[k]);
    }
    for (int k = 0; k < 5; k++) {
        pthread_join(t[k], NULL);
        assert_int_equal(rd[k].ok, 20);
    }
    resign(r[0], lease, "active-node:8080");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

/* Reference: TestGetHolderReturnsEmptyAfterLeaderDeath and
 * TestFailoverAfterLeaderDeath: the leader's stream goes away without a
 * resignation; after the validity it was granted (not the lease duration),
 * the holder reads empty and the standby on the other replica leads. */
static void test_kube_leader_death_failover_within_validity(void **state)
{
    fixture **r = *state;
    const char *lease = lease_name("failover");
    sink *a = sink_new(), *b = sink_new(), *w = sink_new();
    uint64_t wid = engine_watch(r[1]->engine, test_ns, lease, NULL, listener_of(w));
    campaign(r[0], a, req(lease, "leader-1:8080"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 15000);
    assert_true(i >= 0);
    campaign(r[1], b, req(lease, "leader-2:8080"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 15000) >= 0);
    engine_reply c = confirm(r[0], lease, "leader-1:8080", a->events[i].epoch);
    assert_int_equal(c.code, ENGINE_OK);
    int64_t died = mono_ms();
    int64_t granted_until = died + c.valid_for_ms;
    engine_campaign_detach(r[0]->engine, a->id); /* the holder process died */

    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 20000);
    assert_true(j >= 0);
    assert_true(b->at_ms[j] >= granted_until);
    int64_t failover = b->at_ms[j] - died;
    print_message("failover after leader death (15/10/2): %lld ms (lease duration 15000 ms)\n",
                  (long long)failover);
    assert_true(failover < 5000);
    assert_true(b->events[j].epoch > a->events[i].epoch);
    /* The watcher saw the holder go empty (released) before the new one. */
    bool saw_empty = false, saw_new = false;
    for (int k = 0; k < 50 && !saw_new; k++) {
        int e = wait_kind(w, ENGINE_EVENT_HOLDER, 2000);
        if (e < 0)
            break;
        if (w->events[e].exists && !w->events[e].holder[0])
            saw_empty = true;
        if (strcmp(w->events[e].holder, "leader-2:8080") == 0)
            saw_new = true;
    }
    assert_true(saw_empty);
    assert_true(saw_new);
    engine_unwatch(r[1]->engine, wid);
    resign(r[1], lease, "leader-2:8080");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
    sink_free(w);
}

static long http_post(const char *url)
{
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
    long code = 0;
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    return code;
}

typedef struct restart_arg {
    char url[512];
    long code;
    atomic_bool done;
} restart_arg;

static void *restart_apiserver(void *arg)
{
    restart_arg *ra = arg;
    ra->code = http_post(ra->url);
    atomic_store(&ra->done, true);
    return NULL;
}

/* An apiserver restart shorter than the renew deadline keeps the leader
 * (it keeps confirming throughout), and the watches resume without missing
 * the next transition. */
static void test_kube_apiserver_restart_keeps_leader(void **state)
{
    fixture **r = *state;
    const char *lease = lease_name("restart");
    sink *a = sink_new(), *b = sink_new();
    campaign(r[0], a, req(lease, "steady:8080"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 15000);
    assert_true(i >= 0);
    int64_t epoch = a->events[i].epoch;
    campaign(r[1], b, req(lease, "standby:8080"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 15000) >= 0);

    /* Killed and restarted: down for about 1 s + its start-up, well within
     * the 10 s renew deadline. */
    restart_arg ra = {.code = 0};
    snprintf(ra.url, sizeof ra.url, "%s/apiserver/restart?down_ms=1000&signal=KILL", control_url);
    pthread_t t;
    pthread_create(&t, NULL, restart_apiserver, &ra);
    /* Confirm as a client would, every ~500 ms, through the restart and a
     * little after it. */
    int64_t after = 0;
    while (!after || mono_ms() < after) {
        engine_reply c = confirm(r[0], lease, "steady:8080", epoch);
        if (c.code != ENGINE_OK)
            fail_msg("confirm failed during the restart: %s", c.message);
        struct timespec ts = {0, 500 * 1000000};
        nanosleep(&ts, NULL);
        if (!after && atomic_load(&ra.done))
            after = mono_ms() + 3000;
    }
    pthread_join(t, NULL);
    assert_int_equal(ra.code, 200);
    assert_true(wait_kind(a, ENGINE_EVENT_LOST, 0) < 0);
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 0) < 0);
    /* Renewals work again, and the standby's watch resumed: a resignation
     * now hands over at once. */
    int64_t t0 = mono_ms();
    resign(r[0], lease, "steady:8080");
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 15000);
    assert_true(j >= 0);
    assert_true(b->at_ms[j] - t0 < 3000);
    assert_int_equal(b->events[j].epoch, epoch + 1);
    resign(r[1], lease, "standby:8080");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* A foreign writer (as client-go would): the Lease is held and renewed,
 * then left to expire, then taken and released; each is respected. */
typedef struct foreign_op {
    store *s;
    store_lease lease;
    int kind; /* 0 get, 1 create, 2 update */
    atomic_bool done;
    store_result res;
} foreign_op;

static void foreign_cb(void *ctx, const store_result *res)
{
    foreign_op *op = ctx;
    op->res = *res;
    atomic_store(&op->done, true);
}

static void foreign_start(fixture *f, void *arg)
{
    (void)f;
    foreign_op *op = arg;
    if (op->kind == 0)
        op->s->ops->get(op->s, op->lease.ns, op->lease.name, 5000, foreign_cb, op);
    else if (op->kind == 1)
        op->s->ops->create(op->s, &op->lease, 5000, foreign_cb, op);
    else
        op->s->ops->update(op->s, &op->lease, 5000, foreign_cb, op);
}

static store_result foreign(fixture *f, store *s, int kind, const store_lease *l)
{
    foreign_op op = {.s = s, .lease = *l, .kind = kind};
    run_on_loop(f, foreign_start, &op);
    for (int k = 0; k < 500 && !atomic_load(&op.done); k++) {
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    assert_true(atomic_load(&op.done));
    return op.res;
}

static void destroy_store(fixture *f, void *arg)
{
    (void)f;
    store_free(arg);
}

static void test_kube_foreign_holder_respected(void **state)
{
    fixture **r = *state;
    fixture *f = r[0];
    /* The foreign client's store runs on replica 0's loop thread. */
    store *other = sa_store(f->loop);
    const char *lease = lease_name("foreign");
    store_lease l = {0};
    snprintf(l.ns, sizeof l.ns, "%s", test_ns);
    snprintf(l.name, sizeof l.name, "%s", lease);
    snprintf(l.holder, sizeof l.holder, "client-go-replica");
    l.lease_duration_s = 3;
    l.transitions = 4;
    l.acquire_time_us = l.renew_time_us = wall_us();
    store_result res = foreign(f, other, 1, &l);
    assert_int_equal(res.status, STORE_OK);

    sink *a = sink_new();
    campaign(r[1], a, req(lease, "kubelease-candidate"));
    /* Held and renewed for 4 s (longer than its 3 s duration): respected. */
    for (int k = 0; k < 4; k++) {
        assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 1000) < 0);
        store_lease cur = foreign(f, other, 0, &l).lease;
        cur.renew_time_us = wall_us();
        assert_int_equal(foreign(f, other, 2, &cur).status, STORE_OK);
    }
    /* Then it stops renewing: taken once 3 s have been observed. */
    int64_t stopped = mono_ms();
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 10000);
    assert_true(i >= 0);
    assert_true(a->at_ms[i] - stopped >= 2900);
    assert_int_equal(a->events[i].epoch, 5);
    resign(r[1], lease, "kubelease-candidate");
    assert_true(wait_closed(a, 5000));

    /* The foreign client takes the released Lease, then releases it. */
    store_lease cur = foreign(f, other, 0, &l).lease;
    snprintf(cur.holder, sizeof cur.holder, "client-go-replica");
    cur.transitions++;
    cur.lease_duration_s = 15;
    cur.renew_time_us = wall_us();
    assert_int_equal(foreign(f, other, 2, &cur).status, STORE_OK);
    sink *b = sink_new();
    campaign(r[1], b, req(lease, "kubelease-candidate"));
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 1500) < 0);
    cur = foreign(f, other, 0, &l).lease;
    cur.holder[0] = '\0';
    cur.lease_duration_s = 1;
    int64_t released = mono_ms();
    assert_int_equal(foreign(f, other, 2, &cur).status, STORE_OK);
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    assert_true(b->at_ms[j] - released < 1000);
    resign(r[1], lease, "kubelease-candidate");
    assert_true(wait_closed(b, 5000));
    run_on_loop(f, destroy_store, other);
    sink_free(a);
    sink_free(b);
}

/* A Lease another client left at leaseTransitions 2147483647: campaigns for
 * it end failed_precondition saying to delete or rename it, before and
 * after its holder expired, instead of standing by while every acquisition
 * fails as out of range. */
static void test_kube_exhausted_epoch_refuses_campaigns(void **state)
{
    fixture **r = *state;
    fixture *f = r[0];
    store *other = sa_store(f->loop);
    const char *lease = lease_name("worn-out");
    store_lease l = {0};
    snprintf(l.ns, sizeof l.ns, "%s", test_ns);
    snprintf(l.name, sizeof l.name, "%s", lease);
    snprintf(l.holder, sizeof l.holder, "client-go-replica");
    l.lease_duration_s = 1;
    l.transitions = ENGINE_EPOCH_MAX;
    l.acquire_time_us = l.renew_time_us = wall_us();
    assert_int_equal(foreign(f, other, 1, &l).status, STORE_OK);
    for (int k = 0; k < 2; k++) {
        sink *a = sink_new();
        campaign(r[1], a, req(lease, "kubelease-candidate"));
        int i = wait_kind(a, ENGINE_EVENT_LOST, 5000);
        assert_true(i >= 0);
        assert_int_equal(a->events[i].code, ENGINE_FAILED_PRECONDITION);
        assert_non_null(strstr(a->events[i].message, "delete the Lease"));
        assert_true(wait_closed(a, 5000));
        sink_free(a);
        harness_sleep_ms(1500); /* the holder's 1 s expires */
    }
    assert_int_equal(foreign(f, other, 0, &l).lease.transitions, ENGINE_EPOCH_MAX);
    run_on_loop(f, destroy_store, other);
}

/* ---------- apiserver request counting ---------- */

/* The sum of the apiserver's series of family (as "name{") that concern
 * Leases and whose labels include also ("" any), from its /metrics (as
 * cluster admin). */
static double apiserver_lease_metric(const char *family, const char *also)
{
    char *page = admin_request("/metrics", NULL, NULL);
    double total = 0;
    for (char *line = strtok(page, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, family, strlen(family)) != 0 || !strstr(line, "resource=\"leases\"") ||
            !strstr(line, "group=\"coordination.k8s.io\"") || !strstr(line, also))
            continue;
        char *sp = strrchr(line, ' ');
        if (sp)
            total += strtod(sp + 1, NULL);
    }
    free(page);
    return total;
}

/* Requests on Leases so far (every namespace's, the apiserver's own among
 * them). */
static double lease_requests(void)
{
    return apiserver_lease_metric("apiserver_request_total{", "");
}

/* Watches on Leases open now. */
static double lease_watches(void)
{
    return apiserver_lease_metric("apiserver_longrunning_requests{", "verb=\"WATCH\"");
}

/* The apiserver requests this process's kubeleased replicas made (their
 * kubelease_apiserver_requests_total, every verb): the apiserver's own
 * counter above also counts its own Leases (its identity Lease, the
 * coordinated leader election's). */
static double own_requests(void)
{
    char *page = metrics_render(NULL);
    assert_non_null(page);
    double total = 0;
    for (char *line = strtok(page, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "kubelease_apiserver_requests_total{", 35) != 0)
            continue;
        char *sp = strrchr(line, ' ');
        if (sp)
            total += strtod(sp + 1, NULL);
    }
    free(page);
    return total;
}

/* Keeps a leader confirming for ms milliseconds. */
static void lead_for(fixture *f, const char *lease, const char *identity, int64_t epoch, int ms)
{
    int64_t until = mono_ms() + ms;
    while (mono_ms() < until) {
        assert_int_equal(confirm(f, lease, identity, epoch).code, ENGINE_OK);
        struct timespec ts = {0, 500 * 1000000};
        nanosleep(&ts, NULL);
    }
}

/* 1 leader, then 1 leader + 20 standbys, 60 s each: the standbys add no
 * apiserver requests (they wait on the one watch). Reported, with what
 * client-go's pollers would have sent. */
#define STANDBY_WINDOW_MS 60000

static void test_kube_standbys_add_no_apiserver_requests(void **state)
{
    fixture **r = *state;
    const char *lease = lease_name("standbys");
    sink *a = sink_new();
    campaign(r[0], a, req(lease, "leader"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 15000);
    assert_true(i >= 0);
    int64_t epoch = a->events[i].epoch;

    double before = lease_requests(), own_before = own_requests();
    lead_for(r[0], lease, "leader", epoch, STANDBY_WINDOW_MS);
    double alone = lease_requests() - before, own_alone = own_requests() - own_before;

    enum { N = 20 };
    sink *s[N];
    for (int k = 0; k < N; k++) {
        char id[32];
        snprintf(id, sizeof id, "standby-%02d", k);
        s[k] = sink_new();
        campaign(r[0], s[k], req(lease, id));
    }
    for (int k = 0; k < N; k++)
        assert_true(wait_kind(s[k], ENGINE_EVENT_CANDIDATE, 15000) >= 0);
    before = lease_requests();
    own_before = own_requests();
    lead_for(r[0], lease, "leader", epoch, STANDBY_WINDOW_MS);
    double with_standbys = lease_requests() - before, own_with = own_requests() - own_before;
    print_message("apiserver lease requests in %d s: leader alone %.0f, leader + 20 standbys "
                  "%.0f (client-go standbys polling every 2 s would add ~%d); kubeleased's own: "
                  "%.0f and %.0f\n",
                  STANDBY_WINDOW_MS / 1000, alone, with_standbys, N * STANDBY_WINDOW_MS / 2000,
                  own_alone, own_with);
    assert_true(with_standbys <= alone + 2);
    assert_true(own_alone > 0 && own_with <= own_alone + 1);

    resign(r[0], lease, "leader");
    for (int k = 0; k < N; k++) {
        char id[32];
        snprintf(id, sizeof id, "standby-%02d", k);
        resign(r[0], lease, id);
    }
    for (int k = 0; k < N; k++) {
        assert_true(wait_closed(s[k], 10000));
        sink_free(s[k]);
    }
    sink_free(a);
}

/* 60 elections in one namespace on one replica, their holders read on the
 * other: each replica holds one apiserver watch for them all. */
static void test_kube_one_apiserver_watch_per_namespace(void **state)
{
    fixture **r = *state;
    enum { N = 60 };
    double before = lease_watches();
    sink *s[N];
    char lease[N][64];
    for (int k = 0; k < N; k++) {
        snprintf(lease[k], sizeof lease[k], "%s", lease_name("many"));
        snprintf(lease[k] + strlen(lease[k]), sizeof lease[k] - strlen(lease[k]), "-%d", k);
        s[k] = sink_new();
        campaign(r[0], s[k], req(lease[k], "leader"));
    }
    for (int k = 0; k < N; k++) {
        assert_true(wait_kind(s[k], ENGINE_EVENT_ELECTED, 15000) >= 0);
        engine_reply h = get_holder(r[1], lease[k], true);
        assert_int_equal(h.code, ENGINE_OK);
        assert_string_equal(h.holder, "leader");
    }
    double during = lease_watches();
    print_message("apiserver watches on Leases: %.0f before, %.0f with %d elections followed by "
                  "two replicas\n",
                  before, during, N);
    assert_true(during - before <= 2);
    for (int k = 0; k < N; k++) {
        resign(r[0], lease[k], "leader");
        assert_true(wait_closed(s[k], 10000));
        sink_free(s[k]);
    }
}

int main(void)
{
    if (!kube_env_read()) {
        fprintf(stderr, "KUBELEASE_TEST_ENV is not set: skipped (needs the test control plane)\n");
        return 77;
    }
    metrics_init(); /* kubelease_apiserver_requests_total, for own_requests */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kube_single_leader_then_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kube_epochs_increase_also_for_same_identity, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kube_handoff_across_replicas_is_watch_driven, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kube_concurrent_candidates_one_winner, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kube_get_holder_during_election, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kube_leader_death_failover_within_validity, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kube_foreign_holder_respected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kube_exhausted_epoch_refuses_campaigns, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kube_apiserver_restart_keeps_leader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kube_one_apiserver_watch_per_namespace, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_kube_standbys_add_no_apiserver_requests, setup,
                                        teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
