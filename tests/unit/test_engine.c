/* The election engine on the in-memory store: acquisition, epochs, grants,
 * release after the granted validity, resumes, renewal failure, watches.
 * The tests talk to the engine through its public API and wait for events
 * with timeouts, in the loop's time: the test thread runs the engine's loop
 * with a manual clock (fixture_start_manual), so a wait of seconds takes
 * no real time and every time a test measures is exact. */
#include "support/engine_harness.h"
#include "core/metrics.h"
#include "store/memory.h"

static int setup(void **state)
{
    *state = fixture_start_manual((engine_config){0});
    return 0;
}

static int teardown(void **state)
{
    fixture_stop(*state);
    return 0;
}

static engine_campaign_req req_for(const char *lease, const char *identity)
{
    return req_for_ns("default", lease, identity);
}

/* ---------- tests ---------- */

static void test_engine_single_candidate_is_elected_with_epoch_1(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    int i = harness_elect(f, a, req_for("single", "node-1:8080"));
    assert_int_equal(a->events[i].epoch, 1);
    assert_true(a->events[i].valid_for_ms > 0 && a->events[i].valid_for_ms <= 2000);

    engine_reply g = get_holder(f, "single", false);
    assert_int_equal(g.code, ENGINE_OK);
    assert_string_equal(g.holder, "node-1:8080");
    assert_int_equal(g.epoch, 1);

    engine_reply c = confirm(f, "single", "node-1:8080", 1);
    assert_int_equal(c.code, ENGINE_OK);
    assert_true(c.valid_for_ms > 0 && c.valid_for_ms <= 2000);

    engine_reply r = resign(f, "single", "node-1:8080");
    assert_true(r.released);
    i = wait_kind(a, ENGINE_EVENT_LOST, 5000);
    assert_true(i >= 0);
    assert_int_equal(a->events[i].reason, ENGINE_LOST_RESIGNED);
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

static void test_engine_release_wakes_next_candidate_with_larger_epoch(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    int j;
    int i = harness_leader_and_standby(f, a, req_for("handoff", "candidate-a"), b,
                                       req_for("handoff", "candidate-b"), &j);
    int64_t epoch_a = a->events[i].epoch;
    assert_string_equal(b->events[j].holder, "candidate-a");

    int64_t t0 = harness_now_ms();
    resign(f, "handoff", "candidate-a");
    j = wait_kind(b, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    assert_true(b->events[j].epoch > epoch_a);
    /* Watch-driven: far below a retry period. */
    assert_true(b->at_ms[j] - t0 < 1000);
    resign(f, "handoff", "candidate-b");
    assert_true(wait_closed(b, 5000));
    assert_true(wait_closed(a, 5000));
    sink_free(a);
    sink_free(b);
}

static void test_engine_same_identity_reacquires_with_larger_epoch(void **state)
{
    fixture *f = *state;
    int64_t last = 0;
    for (int round = 0; round < 3; round++) {
        sink *a = sink_new();
        campaign(f, a, req_for("same-identity", "node-1"));
        int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
        assert_true(i >= 0);
        assert_true(a->events[i].epoch > last);
        last = a->events[i].epoch;
        resign(f, "same-identity", "node-1");
        assert_true(wait_closed(a, 5000));
        sink_free(a);
    }
}

static void test_engine_concurrent_candidates_exactly_one_winner(void **state)
{
    fixture *f = *state;
    enum { N = 8 };
    sink *s[N];
    char id[N][32];
    for (int k = 0; k < N; k++) {
        s[k] = sink_new();
        snprintf(id[k], sizeof id[k], "candidate-%d", k);
        campaign(f, s[k], req_for("concurrent", id[k]));
    }
    int winner = -1;
    for (int k = 0; k < N; k++) {
        if (wait_kind(s[k], ENGINE_EVENT_ELECTED, k == 0 ? 3000 : 200) >= 0) {
            assert_int_equal(winner, -1);
            winner = k;
        }
    }
    /* Give the others a chance to be (wrongly) elected too. */
    for (int k = 0; k < N; k++)
        if (k != winner)
            assert_true(wait_kind(s[k], ENGINE_EVENT_ELECTED, 300) < 0);
    assert_true(winner >= 0);
    for (int k = 0; k < N; k++)
        resign(f, "concurrent", id[k]);
    for (int k = 0; k < N; k++) {
        assert_true(wait_closed(s[k], 5000));
        sink_free(s[k]);
    }
}

static void test_engine_duplicate_campaign_is_refused(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *dup = sink_new();
    harness_elect(f, a, req_for("dup", "node-1"));
    campaign(f, dup, req_for("dup", "node-1"));
    int i = wait_kind(dup, ENGINE_EVENT_LOST, 5000);
    assert_true(i >= 0);
    assert_non_null(strstr(dup->events[i].message, "already campaigning"));
    assert_true(wait_closed(dup, 5000));
    /* The first campaign is untouched. */
    assert_int_equal(confirm(f, "dup", "node-1", 1).code, ENGINE_OK);
    resign(f, "dup", "node-1");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
    sink_free(dup);
}

/* Rule 3: a leader whose stream is gone is released only once the validity
 * it was granted has passed, with 5% of it more for a holder's clock that
 * runs slower than the replica's; then the next candidate takes over. */
static void test_engine_detached_leader_released_after_granted_validity(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    int i = harness_leader_and_standby(f, a, req_for("detach", "leader"), b,
                                       req_for("detach", "standby"), NULL);
    engine_reply c = confirm(f, "detach", "leader", a->events[i].epoch);
    int64_t granted_until = harness_now_ms() + c.valid_for_ms;
    int64_t believed_until = granted_until + (c.valid_for_ms + 19) / 20;
    assert_int_equal(c.code, ENGINE_OK);

    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_closed(a, 5000));
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 10000);
    assert_true(j >= 0);
    assert_true(b->at_ms[j] >= believed_until);
    assert_true(b->events[j].epoch > a->events[i].epoch);
    /* And not much later: liveness (rule 6). */
    assert_true(b->at_ms[j] - granted_until < 1000);
    resign(f, "detach", "standby");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* A holder that stops confirming (frozen) loses the term at granted_until,
 * even though its stream is still attached; the next term waits for rule
 * 3's allowance for clock rates too. */
static void test_engine_unconfirmed_term_expires(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    int i = harness_leader_and_standby(f, a, req_for("frozen", "frozen-leader"), b,
                                       req_for("frozen", "standby"), NULL);
    int64_t granted_until = a->at_ms[i] + a->events[i].valid_for_ms;
    int64_t believed_until = granted_until + (a->events[i].valid_for_ms + 19) / 20;
    int k = wait_kind(a, ENGINE_EVENT_LOST, 10000);
    assert_true(k >= 0);
    assert_int_equal(a->events[k].reason, ENGINE_LOST_EXPIRED);
    assert_true(a->at_ms[k] >= granted_until);
    assert_true(a->at_ms[k] < believed_until); /* Lost at once; only the next term waits */
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 10000);
    assert_true(j >= 0);
    assert_true(b->at_ms[j] >= believed_until);
    resign(f, "frozen", "standby");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* Rule 5: a client whose stream broke resumes its term, same epoch, no
 * transition, if it comes back within the validity. */
static void test_engine_resume_within_validity_keeps_epoch(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *a2 = sink_new();
    int i = harness_elect(f, a, req_for("resume", "node-r"));
    int64_t epoch = a->events[i].epoch;
    assert_int_equal(confirm(f, "resume", "node-r", epoch).code, ENGINE_OK);
    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_closed(a, 5000));
    /* While detached the term cannot be confirmed. */
    assert_int_equal(confirm(f, "resume", "node-r", epoch).code, ENGINE_FAILED_PRECONDITION);

    engine_campaign_req r = req_for("resume", "node-r");
    r.resume_epoch = epoch;
    int j = harness_elect(f, a2, r);
    assert_true(a2->events[j].resumed);
    assert_int_equal(a2->events[j].epoch, epoch);
    assert_int_equal(confirm(f, "resume", "node-r", epoch).code, ENGINE_OK);
    assert_int_equal(get_holder(f, "resume", false).epoch, epoch);
    resign(f, "resume", "node-r");
    assert_true(wait_closed(a2, 5000));
    sink_free(a);
    sink_free(a2);
}

static void test_engine_resume_after_validity_fails(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new(), *a2 = sink_new();
    int i = harness_leader_and_standby(f, a, req_for("resume-late", "node-r"), b,
                                       req_for("resume-late", "node-s"), NULL);
    int64_t epoch = a->events[i].epoch;
    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 10000) >= 0);

    engine_campaign_req r = req_for("resume-late", "node-r");
    r.resume_epoch = epoch;
    campaign(f, a2, r);
    int j = wait_kind(a2, ENGINE_EVENT_LOST, 5000);
    assert_true(j >= 0);
    assert_int_equal(a2->events[j].reason, ENGINE_LOST_RESUME_FAILED);
    resign(f, "resume-late", "node-s");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
    sink_free(a2);
}

/* identity resigns the term event k of s was elected to, on replica e;
 * its stream then closes. */
static void resign_elected(engine *e, const char *lease, const char *identity, sink *s, int k)
{
    reply_box rs = BOX_INIT;
    engine_resign(e, "default", lease, identity, s->events[k].term_token, box_done, &rs);
    box_wait(&rs);
    assert_true(wait_closed(s, 5000));
}

/* A campaign resuming the term event i of sink a was elected to. */
static engine_campaign_req resume_of(const char *lease, const char *identity, const sink *a, int i)
{
    engine_campaign_req r = req_for(lease, identity);
    r.resume_epoch = a->events[i].epoch;
    snprintf(r.term_token, sizeof r.term_token, "%s", a->events[i].term_token);
    return r;
}

/* Rule 1 across replicas of the service: a client that moved to another
 * replica (resume there) keeps its term; the replica it left must not
 * release the Lease when the validity it had granted runs out. */
static void test_engine_resume_on_other_replica_is_not_released_by_the_first(void **state)
{
    fixture *f = *state;
    engine *e2 = fixture_replica_new(f);
    sink *a = sink_new(), *a2 = sink_new(), *b = sink_new();
    int i = harness_elect(f, a, req_for("moved", "mover"));
    int64_t epoch = a->events[i].epoch;
    engine_reply c = confirm(f, "moved", "mover", epoch);
    assert_int_equal(c.code, ENGINE_OK);
    int64_t first_granted_until = harness_now_ms() + c.valid_for_ms;
    engine_campaign_detach(f->engine, a->id); /* the connection to replica 1 broke */

    engine_campaign_req r = resume_of("moved", "mover", a, i);
    a2->id = engine_campaign(e2, &r, listener_of(a2));
    int j = wait_kind(a2, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    assert_true(a2->events[j].resumed);
    assert_int_equal(a2->events[j].epoch, epoch);
    engine_campaign_req rb = req_for("moved", "standby");
    b->id = engine_campaign(e2, &rb, listener_of(b));

    /* Keep confirming on replica 2 well past what replica 1 had granted. */
    while (harness_now_ms() < first_granted_until + 2500) {
        engine_reply c2 = confirm_on(f, e2, "moved", "mover", epoch, a2->events[j].term_token);
        assert_int_equal(c2.code, ENGINE_OK);
        assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 300) < 0);
    }
    engine_reply h = get_holder(f, "moved", true);
    assert_string_equal(h.holder, "mover");
    assert_int_equal(h.epoch, epoch);

    reply_box rs = BOX_INIT;
    engine_resign(e2, "default", "moved", "mover", a2->events[j].term_token, box_done, &rs);
    box_wait(&rs);
    assert_true(rs.r.released);
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    reply_box rs2 = BOX_INIT;
    engine_resign(e2, "default", "moved", "standby", NULL, box_done, &rs2);
    box_wait(&rs2);
    assert_true(wait_closed(b, 5000));
    assert_true(wait_closed(a2, 5000));
    fixture_replica_free(f, e2);
    sink_free(a);
    sink_free(a2);
    sink_free(b);
}

static void set_latency(fixture *f, void *arg)
{
    store_memory_set_latency(f->store, *(int *)arg);
}

/* Rule 3: the replica a term was resumed from may still grant it — a
 * Confirm that reaches it there (a Service's affinity moved the
 * connection) before it notices the stream it had is gone. The replica
 * that resumed it releases only after such grants are over, whatever its
 * own grants say. */
static void test_engine_resumed_term_is_released_after_the_grants_of_its_old_replica(void **state)
{
    fixture *f = *state;
    engine *e2 = fixture_replica_new(f);
    sink *a = sink_new(), *a2 = sink_new(), *b = sink_new();
    int i = harness_elect(f, a, req_for("two-copies", "mover"));
    int64_t epoch = a->events[i].epoch;
    engine_campaign_req rb = req_for("two-copies", "standby");
    b->id = engine_campaign(e2, &rb, listener_of(b));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    /* The mover's stream to replica 1 broke, replica 1 has not noticed:
     * the term resumed on replica 2. */
    engine_campaign_req r = resume_of("two-copies", "mover", a, i);
    a2->id = engine_campaign(e2, &r, listener_of(a2));
    int j = wait_kind(a2, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0 && a2->events[j].resumed);
    /* A Confirm reaching replica 1 later is granted there. */
    harness_sleep_ms(1000);
    engine_reply c = confirm(f, "two-copies", "mover", epoch);
    assert_int_equal(c.code, ENGINE_OK);
    int64_t believed_until = harness_now_ms() + c.valid_for_ms;
    /* The mover leaves replica 2 too: its copy runs out first. */
    engine_campaign_detach(e2, a2->id);
    int k = wait_kind(b, ENGINE_EVENT_ELECTED, 30000);
    assert_true(k >= 0);
    assert_true(b->at_ms[k] >= believed_until);
    resign_elected(e2, "two-copies", "standby", b, k);
    fixture_replica_free(f, e2);
    sink_free(a);
    sink_free(a2);
    sink_free(b);
}

/* Rule 3: a resume whose stream left while its write was in flight is given
 * back, but not before the holder's grants from the replica it came from
 * have run out: the holder was told it leads there, and believes it until
 * then. */
static void test_engine_departed_resume_is_released_after_the_grants_it_replaced(void **state)
{
    fixture *f = *state;
    engine *e2 = fixture_replica_new(f);
    sink *a = sink_new(), *a2 = sink_new(), *b = sink_new();
    int i = harness_elect(f, a, req_for("left", "mover"));
    int64_t epoch = a->events[i].epoch;
    engine_reply c = confirm(f, "left", "mover", epoch);
    assert_int_equal(c.code, ENGINE_OK);
    int64_t believed_until = harness_now_ms() + c.valid_for_ms;
    engine_campaign_detach(f->engine, a->id); /* the connection to replica 1 broke */
    engine_campaign_req rb = req_for("left", "standby");
    b->id = engine_campaign(e2, &rb, listener_of(b));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);

    int latency = 300;
    run_on_loop(f, set_latency, &latency);
    engine_campaign_req r = resume_of("left", "mover", a, i);
    a2->id = engine_campaign(e2, &r, listener_of(a2));
    harness_sleep_ms(50); /* the resume's write is in flight */
    engine_campaign_detach(e2, a2->id);
    latency = 0;
    run_on_loop(f, set_latency, &latency);
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 30000);
    assert_true(j >= 0);
    assert_true(wait_kind(a2, ENGINE_EVENT_ELECTED, 0) < 0);
    assert_true(b->at_ms[j] >= believed_until);
    resign_elected(e2, "left", "standby", b, j);
    fixture_replica_free(f, e2);
    sink_free(a);
    sink_free(a2);
    sink_free(b);
}

/* Liveness: a resume whose write fails after its candidate left still
 * frees the write slot for the resumes that came meanwhile (they are not
 * next in line as standbys are, and a quiet Lease brings no event to serve
 * them). */
static void test_engine_failed_resume_of_a_departed_candidate_serves_the_next_resume(void **state)
{
    fixture *f = *state;
    engine *e2 = fixture_replica_new(f);
    sink *a = sink_new(), *a2 = sink_new(), *a3 = sink_new();
    int i = harness_elect(f, a, req_for("stalled", "mover"));
    engine_reply c = confirm(f, "stalled", "mover", a->events[i].epoch);
    assert_int_equal(c.code, ENGINE_OK);
    engine_campaign_detach(f->engine, a->id);

    int latency = 300;
    run_on_loop(f, set_latency, &latency);
    store_memory_set_writes_fail(f->store, STORE_UNAVAILABLE, 1);
    engine_campaign_req r = resume_of("stalled", "mover", a, i);
    a2->id = engine_campaign(e2, &r, listener_of(a2));
    harness_sleep_ms(50);                              /* its write is in flight */
    a3->id = engine_campaign(e2, &r, listener_of(a3)); /* the holder again, on a new stream */
    harness_sleep_ms(50);
    engine_campaign_detach(e2, a2->id);
    latency = 0;
    run_on_loop(f, set_latency, &latency);
    int j = wait_kind(a3, ENGINE_EVENT_ELECTED, 10000);
    assert_true(j >= 0);
    assert_true(a3->events[j].resumed);
    resign_elected(e2, "stalled", "mover", a3, j);
    fixture_replica_free(f, e2);
    sink_free(a);
    sink_free(a2);
    sink_free(a3);
}

/* Liveness: an acquisition that fails unanswered after its standby left
 * still decides the resume that came while it was in flight (no standby is
 * left for a retry to serve, and the failed write brings no event). The
 * term to resume had expired: the resume ends, it does not wait. */
static void test_engine_failed_acquisition_of_a_departed_standby_decides_the_resume(void **state)
{
    fixture *f = *state;
    store_lease l = {.ns = "default",
                     .name = "expiring",
                     .holder = "mover",
                     .lease_duration_s = 1,
                     .transitions = 5};
    harness_create(f, &l);
    int latency = 500;
    run_on_loop(f, set_latency, &latency);
    sink *s = sink_new(), *m = sink_new();
    campaign(f, s, req_for("expiring", "standby"));
    assert_true(wait_kind(s, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    /* Expired a second after it was read: the standby's acquisition is then
     * in flight for 500 ms; it will fail with its answer lost. */
    harness_sleep_ms(1200);
    store_memory_set_writes_fail(f->store, STORE_UNAVAILABLE, 1);
    engine_campaign_req r = req_for("expiring", "mover");
    r.resume_epoch = 5;
    snprintf(r.term_token, sizeof r.term_token, "%s", "not-the-term-token");
    m->id = engine_campaign(f->engine, &r, listener_of(m));
    assert_true(m->id > 0);
    engine_campaign_detach(f->engine, s->id);
    int j = wait_kind(m, ENGINE_EVENT_LOST, 10000);
    assert_true(j >= 0);
    assert_int_equal(m->events[j].reason, ENGINE_LOST_RESUME_FAILED);
    assert_true(wait_kind(m, ENGINE_EVENT_ELECTED, 0) < 0);
    sink_free(s);
    sink_free(m);
}

/* Liveness: a claim of a handed-to term that fails after the Lease went
 * away meanwhile (deleted while the claim's slow write was in flight) still
 * serves the standby: a Lease that is gone has no expiry to wait for, and
 * its deletion came while the write slot was taken. */
static void test_engine_failed_claim_serves_the_standby_of_a_lease_gone_meanwhile(void **state)
{
    fixture *f = *state;
    store_lease l = {.ns = "default",
                     .name = "handed",
                     .holder = "heir",
                     .lease_duration_s = 15,
                     .transitions = 7,
                     .handed_to = 7,
                     .term_nonce = "handed-term-nonce"};
    l.acquire_time_us = l.renew_time_us = harness_wall_us();
    harness_create(f, &l);
    int latency = 500;
    run_on_loop(f, set_latency, &latency);
    sink *s = sink_new();
    campaign(f, s, req_for("handed", "heir"));
    assert_true(wait_kind(s, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    /* The claim is in flight for 500 ms; the Lease is deleted before it
     * lands, so the claim fails. */
    harness_sleep_ms(100);
    latency = 0;
    run_on_loop(f, set_latency, &latency);
    harness_remove(f, "default", "handed");
    int j = wait_kind(s, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    assert_false(s->events[j].resumed);
    assert_int_equal(s->events[j].epoch, 1); /* a new Lease, its first term */
    resign_elected(f->engine, "handed", "heir", s, j);
    sink_free(s);
}

/* A wall clock the test sets: two replicas' writes carry the same
 * renewTime, as they do when the replicas' clocks differ by the time
 * between the writes. */
static int64_t set_wall_us = HARNESS_WALL_START_US;

static int64_t set_wall_clock(void *ctx)
{
    (void)ctx;
    return set_wall_us;
}

/* Rule 1 across replicas: a renewal of replica 1 that never landed (its
 * answer lost), then the holder's resume on replica 2 with the same
 * renewTime. Replica 1's next write conflicts and it reads the Lease back:
 * what it finds is replica 2's write, not its own (the write id tells), so
 * it neither keeps its copy of the term nor releases the Lease from under
 * the holder. */
static void test_engine_lost_renewal_is_not_taken_for_a_resume_with_its_renew_time(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){.wall_clock = set_wall_clock});
    engine_config cfg2 = fixture_engine_config(f, (engine_config){.wall_clock = set_wall_clock});
    engine *e2 = engine_new(&cfg2);
    assert_non_null(e2);
    sink *a = sink_new(), *a2 = sink_new();
    int i = harness_elect(f, a, req_for("same-time", "mover"));
    int64_t epoch = a->events[i].epoch;
    /* Replica 1's renewals fail unanswered, applied nowhere, while the
     * holder confirms there until one of them has been tried (one is due
     * every 5 s); then its stream to replica 1 breaks. */
    int64_t writes = 0, now = 0;
    run_on_loop(f, harness_read_writes, &writes);
    store_memory_set_writes_fail(f->store, STORE_UNAVAILABLE, -1);
    set_wall_us += 1000000;
    while (harness_now_ms() < a->at_ms[i] + 6000) {
        assert_int_equal(confirm(f, "same-time", "mover", epoch).code, ENGINE_OK);
        harness_sleep_ms(500);
    }
    store_memory_set_writes_fail(f->store, STORE_OK, 0);
    run_on_loop(f, harness_read_writes, &now);
    assert_int_equal(now, writes);
    engine_campaign_detach(f->engine, a->id);
    /* The holder resumes on replica 2, whose clock reads what replica 1's
     * did at its renewal. */
    engine_campaign_req r = resume_of("same-time", "mover", a, i);
    a2->id = engine_campaign(e2, &r, listener_of(a2));
    int j = wait_kind(a2, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0 && a2->events[j].resumed);
    /* It keeps its term on replica 2 well past replica 1's grants. */
    for (int waited = 0; waited < 20000; waited += 500) {
        engine_reply c2 = confirm_on(f, e2, "same-time", "mover", epoch, a2->events[j].term_token);
        assert_int_equal(c2.code, ENGINE_OK);
        harness_sleep_ms(500);
    }
    engine_reply h = get_holder(f, "same-time", true);
    assert_string_equal(h.holder, "mover");
    assert_int_equal(h.epoch, epoch);
    assert_true(wait_kind(a2, ENGINE_EVENT_LOST, 0) < 0);
    resign_elected(e2, "same-time", "mover", a2, j);
    fixture_replica_free(f, e2);
    fixture_stop(f);
    sink_free(a);
    sink_free(a2);
}

/* A resignation that arrives while a renewal is in flight releases once the
 * renewal has landed (with its new resourceVersion), instead of failing
 * with a conflict and leaving the Lease to expire. */
static void test_engine_resign_during_renewal_still_releases(void **state)
{
    fixture *f = *state;
    int latency = 800;
    run_on_loop(f, set_latency, &latency);
    sink *a = sink_new(), *b = sink_new();
    engine_campaign_req r = req_for("slow-store", "leader");
    r.lease_duration_s = 6;
    r.renew_deadline_s = 4;
    r.retry_period_s = 1;
    int i = harness_elect(f, a, r);
    int64_t epoch = a->events[i].epoch;
    engine_campaign_req rb = req_for("slow-store", "standby");
    rb.lease_duration_s = 6;
    rb.renew_deadline_s = 4;
    rb.retry_period_s = 1;
    campaign(f, b, rb);
    /* The first renewal is sent 1 s after the acquisition and takes 0.8 s:
     * resign in the middle of it, confirming until then. */
    while (harness_now_ms() < a->at_ms[i] + 1300) {
        assert_int_equal(confirm(f, "slow-store", "leader", epoch).code, ENGINE_OK);
        harness_sleep_ms(100);
    }
    engine_reply res = resign(f, "slow-store", "leader");
    assert_true(res.released);
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 4000);
    assert_true(j >= 0);
    assert_int_equal(b->events[j].epoch, epoch + 1);
    latency = 0;
    run_on_loop(f, set_latency, &latency);
    resign(f, "slow-store", "standby");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* --dev: the memory store forgets everything on restart, so a new process
 * grants no term before a previous run's grants could have run out. */
static void test_engine_volatile_store_holds_first_acquisition_for_a_grant(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){.volatile_store = true});
    engine *e = f->engine;
    int64_t started = harness_now_ms();
    sink *a = sink_new();
    engine_campaign_req r = req_for("after-restart", "a");
    a->id = engine_campaign(e, &r, listener_of(a));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_true(a->at_ms[i] - started >= 2000); /* the retry period: the default grant */
    assert_true(a->at_ms[i] - started < 3000);
    fixture_stop(f);
    sink_free(a);
}

typedef struct put_arg {
    store_lease lease;
    bool create;
    store_result res;
    atomic_bool done; /* set on the engine thread, read on the test thread */
} put_arg;

static void put_cb(void *ctx, const store_result *r)
{
    put_arg *p = ctx;
    p->res = *r;
    atomic_store(&p->done, true);
}

static void put_on_loop(fixture *f, void *arg)
{
    put_arg *p = arg;
    if (p->create)
        f->store->ops->create(f->store, &p->lease, 1000, put_cb, p);
    else
        f->store->ops->update(f->store, &p->lease, 1000, put_cb, p);
}

static void get_on_loop(fixture *f, void *arg)
{
    put_arg *p = arg;
    f->store->ops->get(f->store, p->lease.ns, p->lease.name, 1000, put_cb, p);
}

static void noop_on_loop(fixture *f, void *arg)
{
    (void)f;
    (void)arg;
}

/* Completes p on the loop (memory-store operations complete in a later task). */
static void finish_store_op(fixture *f, put_arg *p)
{
    for (int spins = 0; !atomic_load(&p->done) && spins < 100; spins++)
        run_on_loop(f, noop_on_loop, NULL);
    assert_true(atomic_load(&p->done));
}

static store_lease foreign_lease(const char *name, const char *holder, int duration_s,
                                 int64_t renew_us)
{
    store_lease l = {0};
    snprintf(l.ns, sizeof l.ns, "default");
    snprintf(l.name, sizeof l.name, "%s", name);
    snprintf(l.holder, sizeof l.holder, "%s", holder);
    l.lease_duration_s = duration_s;
    l.transitions = 7;
    l.acquire_time_us = l.renew_time_us = renew_us;
    return l;
}

static void count_watches(fixture *f, void *arg)
{
    *(int *)arg = store_memory_watch_count(f->store);
}

static int watches_of(fixture *f)
{
    int n = -1;
    run_on_loop(f, count_watches, &n);
    return n;
}

static bool metrics_has(const char *text)
{
    char *page = metrics_render(NULL);
    assert_non_null(page);
    bool has = strstr(page, text) != NULL;
    free(page);
    return has;
}

static size_t listed_count(engine *e)
{
    reply_box b = BOX_INIT;
    assert_int_equal(engine_list(e, box_done, &b), 0);
    box_wait(&b);
    return b.r.n_leases;
}

/* A lease nobody campaigns on, watches or reads any more is forgotten after
 * the idle period (its store watch stopped); one in use is kept, and a
 * forgotten lease is followed again on the next read. */
static void test_engine_forgets_idle_leases(void **state)
{
    (void)state;
    metrics_init(); /* the per-lease series follow the leases too */
    fixture *f = fixture_start_manual((engine_config){.idle_forget_ms = 300});

    sink *a = sink_new(), *w = sink_new();
    int elected = harness_elect(f, a, req_for("idle-held", "a"));
    int64_t epoch = a->events[elected].epoch;
    uint64_t wid = engine_watch(f->engine, "default", "idle-watched", NULL, listener_of(w));
    assert_true(wait_kind(w, ENGINE_EVENT_HOLDER, 5000) >= 0);
    /* A read follows a Lease that exists; one of a Lease that does not
     * exist follows nothing (test_engine_absent.c). */
    put_arg p = {.lease = foreign_lease("idle-read", "", 0, 0), .create = true};
    run_on_loop(f, put_on_loop, &p);
    finish_store_op(f, &p);
    assert_int_equal(get_holder(f, "idle-read", false).code, ENGINE_OK);
    assert_int_equal(get_holder(f, "idle-absent", false).code, ENGINE_NOT_FOUND);
    assert_int_equal(watches_of(f), 3);

    /* The read-only lease goes; the held and the watched ones stay. */
    int64_t until = harness_now_ms() + 5000;
    while (watches_of(f) > 2 && harness_now_ms() < until) {
        assert_int_equal(wait_kind(a, ENGINE_EVENT_LOST, 50), -1);
        assert_int_equal(confirm(f, "idle-held", "a", epoch).code, ENGINE_OK);
    }
    assert_int_equal(watches_of(f), 2);
    assert_int_equal(listed_count(f->engine), 2);
    assert_true(
        metrics_has("kubelease_terms_started_total{namespace=\"default\",lease=\"idle-held\"}"));

    /* Released and unwatched: both are forgotten too. */
    resign(f, "idle-held", "a");
    assert_true(wait_closed(a, 5000));
    engine_unwatch(f->engine, wid);
    assert_true(wait_closed(w, 5000));
    until = harness_now_ms() + 5000;
    while (watches_of(f) > 0 && harness_now_ms() < until)
        harness_sleep_ms(20);
    assert_int_equal(watches_of(f), 0);
    assert_int_equal(listed_count(f->engine), 0);
    assert_false(metrics_has("lease=\"idle-held\""));

    /* A forgotten lease is followed again on demand, from the store. */
    engine_reply r = get_holder(f, "idle-held", false);
    assert_int_equal(r.code, ENGINE_OK);
    assert_true(r.exists);
    assert_string_equal(r.holder, "");
    assert_int_equal(r.epoch, 1);
    assert_int_equal(watches_of(f), 1);
    fixture_stop(f);
    sink_free(a);
    sink_free(w);
    metrics_free_all();
}

/* kubelease_failover_seconds{...}_sum and _count, from the rendered page. */
static void failover_metric(double *sum, double *count)
{
    char *page = metrics_render(NULL);
    assert_non_null(page);
    const char *s = strstr(page, "kubelease_failover_seconds_sum ");
    const char *c = strstr(page, "kubelease_failover_seconds_count ");
    assert_non_null(s);
    assert_non_null(c);
    *sum = strtod(s + strlen("kubelease_failover_seconds_sum "), NULL);
    *count = strtod(c + strlen("kubelease_failover_seconds_count "), NULL);
    free(page);
}

/* kubelease_failover_seconds is the leaderless gap users suffer: after a
 * holder that stopped confirming, from its last confirmation (about the
 * validity it was granted); after a resignation, from the resignation
 * (nothing, on one replica). */
static void test_engine_failover_metric_measures_from_the_last_sign_of_life(void **state)
{
    (void)state;
    metrics_init();
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new(), *b = sink_new(), *c = sink_new();
    int i = harness_leader_and_standby(f, a, req_for("gap", "a"), b, req_for("gap", "b"), NULL);
    campaign(f, c, req_for("gap", "c"));
    assert_true(wait_kind(c, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    harness_sleep_ms(500);
    int64_t confirmed = harness_now_ms();
    assert_int_equal(confirm(f, "gap", "a", a->events[i].epoch).code, ENGINE_OK);

    /* a dies: no goodbye, no further confirmation. */
    engine_campaign_detach(f->engine, a->id);
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 10000);
    assert_true(j >= 0);
    double sum, count;
    failover_metric(&sum, &count);
    assert_int_equal((int)count, 1);
    double gap = (double)(b->at_ms[j] - confirmed) / 1000.0;
    assert_true(sum >= gap - 0.01 && sum <= gap + 0.01);
    assert_true(sum >= 1.0); /* the grant (the 2 s retry period), not the 0 after it ran out */

    /* b resigns: c takes over at once, and so does the metric. */
    resign(f, "gap", "b");
    int k = wait_kind(c, ENGINE_EVENT_ELECTED, 5000);
    assert_true(k >= 0);
    double sum2, count2;
    failover_metric(&sum2, &count2);
    assert_int_equal((int)count2, 2);
    assert_true(sum2 - sum < 0.05);

    resign(f, "gap", "c");
    assert_true(wait_closed(c, 5000));
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
    sink_free(c);
    metrics_free_all();
}

static void set_watch_delay(fixture *f, void *arg)
{
    store_memory_set_watch_delay(f->store, *(int *)arg);
}

/* The watch lags behind the answers to the engine's own writes: events older
 * than the record the engine holds must not end a term as "superseded". */
static void test_engine_lagging_watch_does_not_supersede_a_new_term(void **state)
{
    fixture *f = *state;
    int delay = 300;
    run_on_loop(f, set_watch_delay, &delay);
    sink *a = sink_new(), *b = sink_new();
    int i = harness_leader_and_standby(f, a, req_for("lagging", "first"), b,
                                       req_for("lagging", "second"), NULL);
    resign(f, "lagging", "first");
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    int64_t epoch = b->events[j].epoch;
    assert_int_equal(epoch, a->events[i].epoch + 1);
    /* The late events (first's acquisition and release) arrive meanwhile. */
    int64_t until = harness_now_ms() + 1000;
    while (harness_now_ms() < until) {
        engine_reply c = confirm(f, "lagging", "second", epoch);
        if (c.code != ENGINE_OK)
            fail_msg("the term ended: %s", c.message);
        harness_sleep_ms(100);
    }
    assert_true(wait_kind(b, ENGINE_EVENT_LOST, 0) < 0);
    assert_string_equal(get_holder(f, "lagging", false).holder, "second");
    delay = 0;
    run_on_loop(f, set_watch_delay, &delay);
    resign(f, "lagging", "second");
    assert_true(wait_closed(b, 5000));
    assert_true(wait_closed(a, 5000));
    sink_free(a);
    sink_free(b);
}

/* Rules 3 and 5: a holder comes back to replica 1, whose copy of its term
 * has not yet seen the resume replica 2 wrote meanwhile (the watch lags).
 * Replica 1 reattaches the term but grants nothing until a renewal of its
 * own lands; that renewal conflicts with replica 2's write, and the copy
 * ends instead of granting from a record that is no longer the Lease's. */
static void test_engine_reattached_term_grants_nothing_until_its_renewal_lands(void **state)
{
    fixture *f = *state;
    engine *e2 = fixture_replica_new(f);
    sink *a = sink_new(), *a2 = sink_new(), *a3 = sink_new();
    int i = harness_elect(f, a, req_for("returned", "mover"));
    int64_t epoch = a->events[i].epoch;
    assert_int_equal(confirm(f, "returned", "mover", epoch).code, ENGINE_OK);
    engine_campaign_detach(f->engine, a->id);
    int delay = 3000;
    run_on_loop(f, set_watch_delay, &delay);
    engine_campaign_req r = resume_of("returned", "mover", a, i);
    a2->id = engine_campaign(e2, &r, listener_of(a2));
    int j = wait_kind(a2, ENGINE_EVENT_ELECTED, 1000);
    assert_true(j >= 0 && a2->events[j].resumed);
    engine_campaign_detach(e2, a2->id);
    /* Back on replica 1 before its watch brings replica 2's write; its
     * renewal then takes 500 ms. */
    int latency = 500;
    run_on_loop(f, set_latency, &latency);
    a3->id = engine_campaign(f->engine, &r, listener_of(a3));
    int k = wait_kind(a3, ENGINE_EVENT_ELECTED, 100);
    assert_true(k >= 0 && a3->events[k].resumed);
    assert_int_equal(a3->events[k].valid_for_ms, 0);
    engine_reply c = confirm(f, "returned", "mover", epoch);
    assert_int_equal(c.code, ENGINE_UNAVAILABLE);
    assert_true(wait_kind(a3, ENGINE_EVENT_LOST, 1000) >= 0);
    latency = 0;
    run_on_loop(f, set_latency, &latency);
    delay = 0;
    run_on_loop(f, set_watch_delay, &delay);
    fixture_replica_free(f, e2);
    sink_free(a);
    sink_free(a2);
    sink_free(a3);
}

/* A candidate that leaves while its acquisition is being written was never
 * told it won: the Lease is given back at once, and the next one takes it. */
static void test_engine_acquisition_for_a_departed_candidate_is_released(void **state)
{
    fixture *f = *state;
    int latency = 300;
    run_on_loop(f, set_latency, &latency);
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, req_for("departed", "gone-early"));
    /* Standing by means synced: its acquisition (300 ms) is now in flight. */
    assert_true(wait_kind(a, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_closed(a, 5000));
    int j = harness_elect(f, b, req_for("departed", "next"));
    assert_int_equal(b->events[j].epoch, 2); /* after gone-early's unclaimed epoch 1 */
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 0) < 0);
    latency = 0;
    run_on_loop(f, set_latency, &latency);
    resign(f, "departed", "next");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* ---------- foreign writers, observed time ---------- */

/* Expiry is judged by observed time: a renewTime far in the future must not
 * keep the Lease alive, nor one far in the past end it early. */
static void test_engine_expiry_by_observed_time_ignores_renew_time(void **state)
{
    fixture *f = *state;
    int64_t far_future = (int64_t)32503680000 * 1000000; /* year 3000 */
    int64_t far_past = (int64_t)86400 * 1000000;         /* 1970-01-02 */
    const int64_t times[2] = {far_future, far_past};
    const char *names[2] = {"observed-future", "observed-past"};
    for (int k = 0; k < 2; k++) {
        put_arg p = {.lease = foreign_lease(names[k], "client-go-replica", 2, times[k]),
                     .create = true};
        run_on_loop(f, put_on_loop, &p);
        finish_store_op(f, &p);
        assert_int_equal(p.res.status, STORE_OK);

        sink *a = sink_new();
        int64_t t0 = harness_now_ms();
        campaign(f, a, req_for(names[k], "kubelease-candidate"));
        int i = wait_kind(a, ENGINE_EVENT_ELECTED, 6000);
        assert_true(i >= 0);
        int64_t waited = a->at_ms[i] - t0;
        assert_true(waited >= 2000); /* the record's own leaseDurationSeconds */
        assert_true(waited < 4000);
        assert_int_equal(a->events[i].epoch, 8);
        resign(f, names[k], "kubelease-candidate");
        assert_true(wait_closed(a, 5000));
        sink_free(a);
    }
}

/* A Lease another client holds, renews, then releases is respected. */
static void test_engine_respects_foreign_holder_until_release(void **state)
{
    fixture *f = *state;
    put_arg p = {.lease = foreign_lease("foreign", "other-client", 2, harness_wall_us()),
                 .create = true};
    run_on_loop(f, put_on_loop, &p);
    finish_store_op(f, &p);
    sink *a = sink_new();
    campaign(f, a, req_for("foreign", "kubelease-candidate"));
    /* The foreign holder renews every second for 3 s: longer than its
     * leaseDurationSeconds, so only the renewals keep it. */
    for (int k = 0; k < 3; k++) {
        assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 1000) < 0);
        put_arg g = {.lease = p.lease};
        run_on_loop(f, get_on_loop, &g);
        finish_store_op(f, &g);
        put_arg u = {.lease = g.res.lease};
        u.lease.renew_time_us = harness_wall_us();
        run_on_loop(f, put_on_loop, &u);
        finish_store_op(f, &u);
        assert_int_equal(u.res.status, STORE_OK);
    }
    /* It releases: the candidate takes over at once. */
    put_arg g = {.lease = p.lease};
    run_on_loop(f, get_on_loop, &g);
    finish_store_op(f, &g);
    put_arg rel = {.lease = g.res.lease};
    rel.lease.holder[0] = '\0';
    rel.lease.lease_duration_s = 1;
    int64_t t0 = harness_now_ms();
    run_on_loop(f, put_on_loop, &rel);
    finish_store_op(f, &rel);
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 2000);
    assert_true(i >= 0);
    assert_true(a->at_ms[i] - t0 < 500);
    assert_int_equal(a->events[i].epoch, 8);
    resign(f, "foreign", "kubelease-candidate");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

/* A foreign writer taking the Lease ends our term (superseded), and the
 * engine does not release what is no longer its own. */
static void test_engine_foreign_takeover_supersedes_term(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    harness_elect(f, a, req_for("takeover", "ours"));
    put_arg g = {.lease = foreign_lease("takeover", "", 0, 0)};
    run_on_loop(f, get_on_loop, &g);
    finish_store_op(f, &g);
    put_arg u = {.lease = g.res.lease};
    snprintf(u.lease.holder, sizeof u.lease.holder, "intruder");
    u.lease.transitions++;
    run_on_loop(f, put_on_loop, &u);
    finish_store_op(f, &u);
    int i = wait_kind(a, ENGINE_EVENT_LOST, 5000);
    assert_true(i >= 0);
    assert_int_equal(a->events[i].reason, ENGINE_LOST_SUPERSEDED);
    engine_reply h = get_holder(f, "takeover", true);
    assert_string_equal(h.holder, "intruder");
    sink_free(a);
}

static void set_unavailable(fixture *f, void *arg)
{
    (void)arg;
    store_memory_set_available(f->store, false);
}

static void set_available(fixture *f, void *arg)
{
    (void)arg;
    store_memory_set_available(f->store, true);
}

/* A renewal that cannot succeed within the renew deadline ends the term. */
static void test_engine_renew_failure_ends_term_by_deadline(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    engine_campaign_req r = req_for("renew-fail", "leader");
    r.lease_duration_s = 4;
    r.renew_deadline_s = 3;
    r.retry_period_s = 1;
    int i = harness_elect(f, a, r);
    int64_t epoch = a->events[i].epoch;
    run_on_loop(f, set_unavailable, NULL);
    int64_t t0 = harness_now_ms();
    /* Keep confirming, as a live client does, until the engine says no. */
    int64_t deadline_seen = 0;
    for (;;) {
        engine_reply c = confirm(f, "renew-fail", "leader", epoch);
        if (c.code != ENGINE_OK)
            break;
        deadline_seen = harness_now_ms() + c.valid_for_ms;
        harness_sleep_ms(200); /* the client's confirm cadence */
        assert_true(harness_now_ms() - t0 < 5000);
    }
    int k = wait_kind(a, ENGINE_EVENT_LOST, 5000);
    assert_true(k >= 0);
    assert_int_equal(a->events[k].reason, ENGINE_LOST_RENEW_FAILED);
    /* Never vouched beyond the last renewal + renew deadline. */
    assert_true(deadline_seen <= t0 + 3000 + 50);
    run_on_loop(f, set_available, NULL);
    sink_free(a);
}

static void refuse_writes(fixture *f, void *arg)
{
    (void)arg;
    store_memory_set_writes_fail(f->store, STORE_FORBIDDEN, -1);
}

static void accept_writes(fixture *f, void *arg)
{
    (void)arg;
    store_memory_set_writes_fail(f->store, STORE_OK, 0);
}

/* The leader resigns while the store fails (break), and it recovers a
 * second later (mend): the release is tried again, so the standby leads
 * within a retry rather than a whole lease duration later. */
static void release_retried_after(fixture *f, const char *lease, void (*brk)(fixture *, void *),
                                  void (*mend)(fixture *, void *))
{
    sink *a = sink_new(), *b = sink_new();
    engine_campaign_req r = req_for(lease, "leader");
    r.lease_duration_s = 10;
    r.renew_deadline_s = 8;
    r.retry_period_s = 1;
    int i = harness_elect(f, a, r);
    int64_t epoch = a->events[i].epoch;
    engine_campaign_req rb = req_for(lease, "standby");
    rb.lease_duration_s = 10;
    rb.renew_deadline_s = 8;
    rb.retry_period_s = 1;
    campaign(f, b, rb);
    run_on_loop(f, brk, NULL);
    assert_false(resign(f, lease, "leader").released);
    harness_sleep_ms(1000);
    assert_int_equal(wait_kind(b, ENGINE_EVENT_ELECTED, 0), -1);
    int64_t back = harness_now_ms();
    run_on_loop(f, mend, NULL);
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    assert_int_equal(b->events[j].epoch, epoch + 1);
    /* A retry comes every half retry period: far from the 10 s lease. */
    assert_true(b->at_ms[j] - back < 2000);
    resign(f, lease, "standby");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* The nemesis found the gap: a handoff during a reset of kubeleased's
 * apiserver connection left nobody leading for 4 s. */
static void test_engine_release_retried_after_store_outage(void **state)
{
    release_retried_after(*state, "release-retry", set_unavailable, set_available);
}

/* Right after a restart the apiserver answers 403 until its RBAC caches
 * have synced (seen by the nemesis after apiserver crashes). */
static void test_engine_release_retried_after_apiserver_refusal(void **state)
{
    release_retried_after(*state, "release-refused", refuse_writes, accept_writes);
}

static void conflict_writes(fixture *f, void *arg)
{
    (void)arg;
    store_memory_set_writes_fail(f->store, STORE_CONFLICT, -1);
}

static void conflict_next_write(fixture *f, void *arg)
{
    (void)arg;
    store_memory_set_writes_fail(f->store, STORE_CONFLICT, 1);
}

static void lose_answers(fixture *f, void *arg)
{
    store_memory_set_answers_lost(f->store, arg != NULL);
}

static engine_campaign_req slow_req(const char *lease, const char *identity)
{
    engine_campaign_req r = req_for(lease, identity);
    r.lease_duration_s = 10;
    r.renew_deadline_s = 8;
    r.retry_period_s = 1;
    return r;
}

/* harness_leader_and_standby with slow_req's timings, the identities
 * "leader" and "standby"; returns the leader's epoch. */
static int64_t leader_and_standby(fixture *f, const char *lease, sink *a, sink *b)
{
    int i = harness_leader_and_standby(f, a, slow_req(lease, "leader"), b,
                                       slow_req(lease, "standby"), NULL);
    return a->events[i].epoch;
}

/* The standby b is elected within within_ms at epoch, then resigns; returns
 * the index of its ELECTED event. */
static int standby_takes_over(fixture *f, const char *lease, sink *b, int64_t epoch, int within_ms)
{
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, within_ms);
    assert_true(j >= 0);
    assert_int_equal(b->events[j].epoch, epoch);
    resign(f, lease, "standby");
    assert_true(wait_closed(b, 5000));
    return j;
}

/* An acquisition refused as a conflict that no write explains (seen in the
 * nemesis: an apiserver answering 409 for 5 s left nobody leading for 48 s,
 * as the engine waited for the watch to bring a winner that did not exist):
 * the Lease is read back, and the acquisition tried again a retry period
 * later. */
static void test_engine_acquisition_retried_after_an_unexplained_conflict(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    run_on_loop(f, conflict_writes, NULL);
    campaign(f, a, slow_req("conflict-unexplained", "leader"));
    harness_sleep_ms(2500); /* the create and two retries are refused */
    assert_int_equal(wait_kind(a, ENGINE_EVENT_ELECTED, 0), -1);
    int64_t back = harness_now_ms();
    run_on_loop(f, accept_writes, NULL);
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_int_equal(a->events[i].epoch, 1);
    assert_true(a->at_ms[i] - back <= 1000); /* within a retry period */
    resign(f, "conflict-unexplained", "leader");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

/* An acquisition that was written but whose answer was lost (an apiserver
 * timing out after etcd committed it): the engine knows its own write in
 * the Lease by the term's nonce and keeps the term, instead of waiting a
 * lease duration for a record that names its own candidate. */
static void test_engine_acquisition_whose_answer_was_lost_keeps_the_term(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    run_on_loop(f, lose_answers, f);
    int64_t t0 = harness_now_ms();
    campaign(f, a, slow_req("answer-lost", "leader"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 3000);
    run_on_loop(f, lose_answers, NULL);
    assert_true(i >= 0);
    assert_int_equal(a->events[i].epoch, 1);
    assert_true(a->at_ms[i] - t0 < 100);
    /* The term is a term like any other: confirmed, renewed, released. */
    campaign(f, b, slow_req("answer-lost", "standby"));
    for (int k = 0; k < 15; k++) { /* 3 s: renewals */
        assert_int_equal(confirm(f, "answer-lost", "leader", 1).code, ENGINE_OK);
        harness_sleep_ms(200);
    }
    assert_int_equal(wait_kind(b, ENGINE_EVENT_ELECTED, 0), -1);
    assert_true(resign(f, "answer-lost", "leader").released);
    standby_takes_over(f, "answer-lost", b, 2, 1000);
    sink_free(a);
    sink_free(b);
}

/* A renewal refused as a conflict ends the term (superseded, most likely);
 * the release is still tried once the holder's grant has run out, so that
 * if nobody else wrote the Lease, the standby leads then, not a lease
 * duration later — and never before the holder's last deadline. */
static void test_engine_release_tried_after_a_renewal_conflict(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    int64_t epoch = leader_and_standby(f, "renew-conflict", a, b);
    run_on_loop(f, conflict_next_write, NULL);
    int64_t deadline_seen = 0, t0 = harness_now_ms();
    for (;;) {
        engine_reply c = confirm(f, "renew-conflict", "leader", epoch);
        if (c.code != ENGINE_OK)
            break;
        deadline_seen = harness_now_ms() + c.valid_for_ms;
        harness_sleep_ms(200);
        assert_true(harness_now_ms() - t0 < 5000);
    }
    int k = wait_kind(a, ENGINE_EVENT_LOST, 5000);
    assert_true(k >= 0);
    assert_int_equal(a->events[k].reason, ENGINE_LOST_SUPERSEDED);
    int j = standby_takes_over(f, "renew-conflict", b, epoch + 1, 5000);
    assert_true(b->at_ms[j] >= deadline_seen);
    assert_true(b->at_ms[j] - deadline_seen < 500);
    sink_free(a);
    sink_free(b);
}

/* Confirms as a live holder does, every 200 ms for ms; true while every
 * confirmation was granted. */
static bool keep_confirming(fixture *f, const char *lease, const char *identity, int64_t epoch,
                            int ms)
{
    for (int waited = 0; waited < ms; waited += 200) {
        if (confirm(f, lease, identity, epoch).code != ENGINE_OK)
            return false;
        harness_sleep_ms(200);
    }
    return true;
}

/* A renewal that landed but whose answer was lost makes the next renewal
 * conflict (it is compare-and-swap on the write before): the engine reads
 * the Lease back, finds its own renewal there, and the term goes on. */
static void test_engine_renewal_whose_answer_was_lost_keeps_the_term(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    int64_t epoch = leader_and_standby(f, "renewal-lost", a, b);
    run_on_loop(f, lose_answers, f);
    assert_true(confirm_through_a_renewal(f, "renewal-lost", "leader", epoch));
    run_on_loop(f, lose_answers, NULL);
    /* The next renewal conflicts: the engine finds its own in the Lease. */
    assert_true(confirm_through_a_renewal(f, "renewal-lost", "leader", epoch));
    assert_true(keep_confirming(f, "renewal-lost", "leader", epoch, 1000));
    assert_int_equal(wait_kind(a, ENGINE_EVENT_LOST, 0), -1);
    assert_int_equal(wait_kind(b, ENGINE_EVENT_ELECTED, 0), -1);
    assert_true(resign(f, "renewal-lost", "leader").released);
    standby_takes_over(f, "renewal-lost", b, epoch + 1, 1000);
    sink_free(a);
    sink_free(b);
}

/* The leader resigns after a renewal whose answer was lost but which
 * landed: the release (compare-and-swap on the write before) conflicts,
 * the engine finds its own renewal in the Lease and releases again, so the
 * standby leads at once rather than a lease duration later. */
static void test_engine_release_after_a_renewal_whose_answer_was_lost(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    int64_t epoch = leader_and_standby(f, "release-late", a, b);
    run_on_loop(f, lose_answers, f);
    /* A renewal lands, unanswered; its retry would come half a retry
     * period later. */
    assert_true(confirm_through_a_renewal(f, "release-late", "leader", epoch));
    run_on_loop(f, lose_answers, NULL);
    int64_t t0 = harness_now_ms();
    assert_true(resign(f, "release-late", "leader").released);
    int j = standby_takes_over(f, "release-late", b, epoch + 1, 5000);
    assert_true(b->at_ms[j] - t0 < 100);
    sink_free(a);
    sink_free(b);
}

/* Lease writes while a leader holds lease with durations l/r/p for a
 * minute, confirming every 200 ms; every grant must be a full one. */
static int64_t renewals_per_minute(fixture *f, const char *lease, int l, int r, int p)
{
    sink *a = sink_new();
    engine_campaign_req req = req_for(lease, "leader");
    req.lease_duration_s = l;
    req.renew_deadline_s = r;
    req.retry_period_s = p;
    int i = harness_elect(f, a, req);
    int64_t before = 0, after = 0;
    run_on_loop(f, harness_read_writes, &before);
    for (int waited = 0; waited < 60000; waited += 200) {
        engine_reply c = confirm(f, lease, "leader", a->events[i].epoch);
        assert_int_equal(c.code, ENGINE_OK);
        assert_int_equal(c.valid_for_ms, (int64_t)p * 1000); /* never a shrunken grant */
        harness_sleep_ms(200);
    }
    run_on_loop(f, harness_read_writes, &after);
    resign(f, lease, "leader");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
    return after - before;
}

/* The Lease is renewed every third of its duration (as often as other
 * observers need), not every retry period as client-go does: 12 writes a
 * minute at 15/10/2 (client-go: 30), 40 at the first users' 5/3/1 (where
 * the renew deadline allows no more than 1.5 s between renewals). */
static void test_engine_renews_every_third_of_the_lease_duration(void **state)
{
    fixture *f = *state;
    assert_int_equal(renewals_per_minute(f, "cadence-15", 15, 10, 2), 12);
    assert_int_equal(renewals_per_minute(f, "cadence-5", 5, 3, 1), 40);
}

/* A ListLeases answer: the count and the first row. */
typedef struct listed {
    reply_box box;
    engine_lease_status row;
} listed;

static void list_done(void *ctx, const engine_reply *r)
{
    listed *l = ctx;
    if (r->n_leases > 0)
        l->row = r->leases[0];
    box_done(&l->box, r);
}

static void test_engine_holder_watch_current_state_then_changes(void **state)
{
    fixture *f = *state;
    sink *w = sink_new(), *a = sink_new();
    uint64_t wid = engine_watch(f->engine, "default", "watched", NULL, listener_of(w));
    assert_true(wid > 0);
    int i = wait_kind(w, ENGINE_EVENT_HOLDER, 5000);
    assert_true(i >= 0);
    assert_false(w->events[i].exists);
    /* Listed while it is watched, though it does not exist yet. */
    listed l = {.box = BOX_INIT};
    assert_int_equal(engine_list(f->engine, list_done, &l), 0);
    box_wait(&l.box);
    assert_int_equal(l.box.r.n_leases, 1);
    assert_string_equal(l.row.name, "watched");
    assert_int_equal(l.row.watchers, 1);
    assert_int_equal(l.row.candidates, 0);
    harness_elect(f, a, req_for("watched", "watched-leader"));
    i = wait_kind(w, ENGINE_EVENT_HOLDER, 5000);
    assert_true(i >= 0);
    assert_true(w->events[i].exists);
    assert_string_equal(w->events[i].holder, "watched-leader");
    resign(f, "watched", "watched-leader");
    i = wait_kind(w, ENGINE_EVENT_HOLDER, 5000);
    assert_true(i >= 0);
    assert_string_equal(w->events[i].holder, "");
    engine_unwatch(f->engine, wid);
    assert_true(wait_closed(w, 5000));
    assert_true(wait_closed(a, 5000));
    sink_free(w);
    sink_free(a);
}

static void test_engine_get_holder_not_found_vs_no_holder(void **state)
{
    fixture *f = *state;
    engine_reply r = get_holder(f, "never-created", false);
    assert_int_equal(r.code, ENGINE_NOT_FOUND);
    sink *a = sink_new();
    harness_elect(f, a, req_for("released", "x"));
    resign(f, "released", "x");
    assert_true(wait_closed(a, 5000));
    r = get_holder(f, "released", false);
    assert_int_equal(r.code, ENGINE_OK);
    assert_true(r.exists);
    assert_string_equal(r.holder, "");
    sink_free(a);
}

static void test_engine_stop_keeps_held_leases(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    harness_elect(f, a, req_for("kept", "leader"));
    engine_stop(f->engine);
    fixture_join(f);
    int i = wait_kind(a, ENGINE_EVENT_LOST, 0);
    assert_true(i >= 0);
    assert_int_equal(a->events[i].reason, ENGINE_LOST_SHUTDOWN);
    assert_true(wait_closed(a, 0));
    /* The store still says "leader" holds it: a resume elsewhere can succeed. */
    put_arg g = {0};
    f->store->ops->get(f->store, "default", "kept", 1000, put_cb, &g);
    loop_drain(f->loop);
    assert_true(atomic_load(&g.done));
    assert_int_equal(g.res.status, STORE_OK);
    assert_string_equal(g.res.lease.holder, "leader");
    sink_free(a);
}

/* The stop ends every stream on the engine thread, before engine_run
 * returns (the engine on its own thread here, as in kubeleased). */
static void test_engine_stop_ends_streams_on_the_engine_thread(void **state)
{
    (void)state;
    loop *l = loop_new();
    fixture *f = fixture_start(l, store_memory_new(l));
    sink *a = sink_new(), *w = sink_new();
    harness_elect(f, a, req_for("stopping", "leader"));
    w->id = engine_watch(f->engine, "default", "stopping", NULL, listener_of(w));
    assert_true(wait_kind(w, ENGINE_EVENT_HOLDER, 5000) >= 0);
    engine_stop(f->engine);
    fixture_join(f);
    int i = wait_kind(a, ENGINE_EVENT_LOST, 0);
    assert_true(i >= 0);
    assert_int_equal(a->events[i].reason, ENGINE_LOST_SHUTDOWN);
    assert_true(wait_closed(a, 0));
    assert_true(wait_closed(w, 0));
    assert_true(pthread_equal(a->closed_by, f->thread));
    assert_true(pthread_equal(w->closed_by, f->thread));
    fixture_stop(f);
    sink_free(a);
    sink_free(w);
}

/* The stop answers the requests still waiting (a Resign whose release is in
 * flight, a consistent GetHolder) and refuses what comes after it; then
 * engine_free calls nothing. */
static void test_engine_stop_answers_waiting_requests_and_refuses_later_ones(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *late = sink_new(), *late_w = sink_new();
    harness_elect(f, a, req_for("stop-waiting", "leader"));
    int latency = 5000;
    run_on_loop(f, set_latency, &latency);
    reply_box rs = BOX_INIT, g = BOX_INIT, lc = BOX_INIT;
    char token[ENGINE_TOKEN_MAX];
    harness_token_get(token, "default", "stop-waiting", "leader", 0);
    assert_int_equal(
        engine_resign(f->engine, "default", "stop-waiting", "leader", token, box_done, &rs), 0);
    assert_int_equal(
        engine_get_holder(f->engine, "default", "stop-waiting", NULL, true, box_done, &g), 0);
    run_on_loop(f, noop_on_loop, NULL);
    assert_false(rs.done); /* the release takes 5 s */
    assert_false(g.done);

    engine_stop(f->engine);
    campaign(f, late, req_for("stop-waiting", "late"));
    late_w->id = engine_watch(f->engine, "default", "stop-waiting", NULL, listener_of(late_w));
    assert_int_equal(
        engine_confirm(f->engine, "default", "stop-waiting", "leader", 1, token, box_done, &lc), 0);
    fixture_join(f);
    assert_true(rs.done);
    assert_int_equal(rs.r.code, ENGINE_OK);
    assert_false(rs.r.released);
    assert_true(g.done);
    assert_int_equal(g.r.code, ENGINE_UNAVAILABLE);
    int i = wait_kind(late, ENGINE_EVENT_LOST, 0);
    assert_true(i >= 0);
    assert_int_equal(late->events[i].reason, ENGINE_LOST_SHUTDOWN);
    assert_true(wait_closed(late, 0));
    assert_true(wait_closed(late_w, 0));
    assert_int_equal(late_w->n, 0);
    assert_true(lc.done);
    assert_int_equal(lc.r.code, ENGINE_UNAVAILABLE);

    int events = a->n + late->n + late_w->n;
    loop_drain(f->loop);
    engine_free(f->engine);
    f->engine = NULL; /* freed: teardown frees the rest */
    assert_int_equal(a->n + late->n + late_w->n, events);
    sink_free(a);
    sink_free(late);
    sink_free(late_w);
}

static void test_engine_validation_names_the_field(void **state)
{
    (void)state;
    char msg[256];
    static const struct {
        const char *ns, *name, *identity;
        int lease, renew, retry;
        const char *field;
    } cases[] = {
        {"", "x", "id", 15, 10, 2, "namespace"},
        {"Default", "x", "id", 15, 10, 2, "namespace"},
        {"ns.with.dots", "x", "id", 15, 10, 2, "namespace"},
        {"default", "", "id", 15, 10, 2, "name"},
        {"default", "bad_name", "id", 15, 10, 2, "name"},
        {"default", "a..b", "id", 15, 10, 2, "name"},
        {"default", "-a", "id", 15, 10, 2, "name"},
        {"default", "x", "", 15, 10, 2, "identity"},
        {"default", "x", "tab\there", 15, 10, 2, "identity"},
        {"default", "x", "id", 10, 10, 2, "lease_duration_seconds"},
        {"default", "x", "id", 15, 2, 2, "renew_deadline_seconds"},
        {"default", "x", "id", 15, 12, 10, "renew_deadline_seconds"},
        {"default", "x", "id", 15, 10, 0, "retry_period_seconds"},
        {"default", "x", "id", 15, 10, -1, "retry_period_seconds"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        engine_campaign_req r = {.lease_duration_s = cases[k].lease,
                                 .renew_deadline_s = cases[k].renew,
                                 .retry_period_s = cases[k].retry};
        snprintf(r.ns, sizeof r.ns, "%s", cases[k].ns);
        snprintf(r.name, sizeof r.name, "%s", cases[k].name);
        snprintf(r.identity, sizeof r.identity, "%s", cases[k].identity);
        msg[0] = '\0';
        if (engine_validate_campaign(&r, msg, sizeof msg) != -1)
            fail_msg("case %zu was accepted", k);
        if (strncmp(msg, cases[k].field, strlen(cases[k].field)) != 0)
            fail_msg("case %zu: message \"%s\" does not name %s", k, msg, cases[k].field);
    }
    /* Lengths: 64-byte namespaces and 254-byte names are refused. */
    char long_ns[65], long_name[255];
    memset(long_ns, 'a', 64);
    long_ns[64] = '\0';
    memset(long_name, 'b', 254);
    long_name[254] = '\0';
    assert_int_equal(engine_validate_lease_ref(long_ns, "x", msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "namespace"));
    assert_int_equal(engine_validate_lease_ref("default", long_name, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "name"));
    long_ns[63] = '\0';
    assert_int_equal(engine_validate_lease_ref(long_ns, "x", msg, sizeof msg), 0);

    engine_campaign_req ok = req_for("kv.master-lease", "node-1:8080");
    assert_int_equal(engine_validate_campaign(&ok, msg, sizeof msg), 0);
    ok.lease_duration_s = 5;
    ok.renew_deadline_s = 4;
    ok.retry_period_s = 1;
    assert_int_equal(engine_validate_campaign(&ok, msg, sizeof msg), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_validation_names_the_field),
        cmocka_unit_test(test_engine_volatile_store_holds_first_acquisition_for_a_grant),
        cmocka_unit_test_setup_teardown(test_engine_single_candidate_is_elected_with_epoch_1, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_release_wakes_next_candidate_with_larger_epoch,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_same_identity_reacquires_with_larger_epoch,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_concurrent_candidates_exactly_one_winner, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_duplicate_campaign_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_detached_leader_released_after_granted_validity,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_unconfirmed_term_expires, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_resume_within_validity_keeps_epoch, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_resume_after_validity_fails, setup, teardown),
        cmocka_unit_test(test_engine_lost_renewal_is_not_taken_for_a_resume_with_its_renew_time),
        cmocka_unit_test_setup_teardown(test_engine_resign_during_renewal_still_releases, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_lagging_watch_does_not_supersede_a_new_term,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_reattached_term_grants_nothing_until_its_renewal_lands, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_acquisition_for_a_departed_candidate_is_released, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_resume_on_other_replica_is_not_released_by_the_first, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_departed_resume_is_released_after_the_grants_it_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_failed_resume_of_a_departed_candidate_serves_the_next_resume, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_failed_acquisition_of_a_departed_standby_decides_the_resume, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_failed_claim_serves_the_standby_of_a_lease_gone_meanwhile, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_resumed_term_is_released_after_the_grants_of_its_old_replica, setup,
            teardown),
        cmocka_unit_test_setup_teardown(test_engine_expiry_by_observed_time_ignores_renew_time,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_respects_foreign_holder_until_release, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_foreign_takeover_supersedes_term, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_renew_failure_ends_term_by_deadline, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_release_retried_after_store_outage, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_release_retried_after_apiserver_refusal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_acquisition_retried_after_an_unexplained_conflict, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_acquisition_whose_answer_was_lost_keeps_the_term, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_release_tried_after_a_renewal_conflict, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_renewal_whose_answer_was_lost_keeps_the_term,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_release_after_a_renewal_whose_answer_was_lost,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_renews_every_third_of_the_lease_duration, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_holder_watch_current_state_then_changes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_get_holder_not_found_vs_no_holder, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_stop_keeps_held_leases, setup, teardown),
        cmocka_unit_test(test_engine_stop_ends_streams_on_the_engine_thread),
        cmocka_unit_test_setup_teardown(
            test_engine_stop_answers_waiting_requests_and_refuses_later_ones, setup, teardown),
        cmocka_unit_test(test_engine_forgets_idle_leases),
        cmocka_unit_test(test_engine_failover_metric_measures_from_the_last_sign_of_life),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
