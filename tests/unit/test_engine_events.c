/* Kubernetes Events on the Lease (--events; docs/design.md, "Events"):
 * "<identity> became leader" at each new term, "<identity> stopped
 * leading" with the reason at its end, none for a resume, none without
 * --events, and no more than the rate limits allow. The engine runs on a
 * manual clock over the memory store (engine_harness.h), which keeps the
 * Events it is asked to record. */
#include "support/engine_harness.h"
#include "store/memory.h"

#define REPLICA "kubeleased-test-0"

/* The Events the memory store holds, copied on the loop thread. */
typedef struct recorded {
    int64_t n;
    store_lease_event ev[64];
} recorded;

static void read_events_on_loop(fixture *f, void *arg)
{
    recorded *r = arg;
    r->n = store_memory_event_count(f->store);
    for (int64_t i = 0; i < r->n && i < 64; i++) {
        const store_lease_event *ev = store_memory_event(f->store, i);
        if (ev) /* the store keeps the last 64 */
            r->ev[i] = *ev;
    }
}

static recorded events_of(fixture *f)
{
    static recorded r; /* large: not on the stack */
    run_on_loop(f, read_events_on_loop, &r);
    return r;
}

typedef struct count_arg {
    fixture *f;
    int64_t want;
} count_arg;

static bool events_reached(void *arg)
{
    count_arg *c = arg;
    return store_memory_event_count(c->f->store) >= c->want;
}

/* Runs the loop until the store holds want Events (or 5 s of clock). */
static bool wait_events(fixture *f, int64_t want)
{
    count_arg c = {f, want};
    return harness_run_until(events_reached, &c, 5000);
}

static fixture *start(bool events)
{
    engine_config cfg = {.events = events, .replica_name = REPLICA};
    return fixture_start_manual(cfg);
}

static int setup_on(void **state)
{
    *state = start(true);
    return 0;
}

static int setup_off(void **state)
{
    *state = start(false);
    return 0;
}

static int teardown(void **state)
{
    fixture_stop(*state);
    return 0;
}

static int elected(sink *s)
{
    int i = wait_kind(s, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    return i;
}

static void assert_event(const store_lease_event *ev, const char *lease, bool warning,
                         const char *message)
{
    assert_string_equal(ev->lease.ns, "default");
    assert_string_equal(ev->lease.name, lease);
    assert_true(ev->lease.uid[0] != '\0'); /* the Lease kubectl describe shows */
    assert_int_equal(ev->warning, warning);
    assert_string_equal(ev->reason, "LeaderElection");
    assert_string_equal(ev->message, message);
    assert_string_equal(ev->component, "kubeleased");
    assert_string_equal(ev->instance, REPLICA);
    assert_true(ev->time_us >= HARNESS_WALL_START_US);
}

/* One campaign's term from election to resignation (the stream closed). */
static void elect_and_resign(fixture *f, const char *lease, const char *identity)
{
    sink *s = sink_new();
    campaign(f, s, req_for_ns("default", lease, identity));
    elected(s);
    resign(f, lease, identity);
    assert_true(wait_closed(s, 5000));
    sink_free(s);
}

static void test_engine_events_at_term_start_and_end_with_identity_and_reason(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, req_for_ns("default", "events", "node-a"));
    elected(a);
    campaign(f, b, req_for_ns("default", "events", "node-b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    resign(f, "events", "node-a");
    elected(b);
    assert_true(wait_events(f, 3));
    recorded r = events_of(f);
    assert_int_equal(r.n, 3);
    assert_event(&r.ev[0], "events", false, "node-a became leader (epoch 1)");
    assert_event(&r.ev[1], "events", false, "node-a stopped leading (epoch 1): resigned");
    assert_event(&r.ev[2], "events", false, "node-b became leader (epoch 2)");
    resign(f, "events", "node-b");
    assert_true(wait_closed(b, 5000));
    assert_true(wait_events(f, 4));
    sink_free(a);
    sink_free(b);
}

/* A holder that stops confirming loses its term: a Warning says so. */
static void test_engine_events_warn_when_a_term_expires(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    campaign(f, a, req_for_ns("default", "expiring", "node-a"));
    elected(a);
    int k = wait_kind(a, ENGINE_EVENT_LOST, 60000);
    assert_true(k >= 0);
    assert_int_equal(a->events[k].reason, ENGINE_LOST_EXPIRED);
    assert_true(wait_events(f, 2));
    recorded r = events_of(f);
    assert_event(&r.ev[0], "expiring", false, "node-a became leader (epoch 1)");
    assert_event(&r.ev[1], "expiring", true, "node-a stopped leading (epoch 1): expired");
    sink_free(a);
}

/* A resume goes on with the same term: no second "became leader". */
static void test_engine_events_none_for_a_resume(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *a2 = sink_new();
    campaign(f, a, req_for_ns("default", "resumed", "node-a"));
    int i = elected(a);
    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_closed(a, 5000));
    engine_campaign_req r = req_for_ns("default", "resumed", "node-a");
    r.resume_epoch = a->events[i].epoch;
    campaign(f, a2, r);
    int j = elected(a2);
    assert_true(a2->events[j].resumed);
    resign(f, "resumed", "node-a");
    assert_true(wait_closed(a2, 5000));
    assert_true(wait_events(f, 2));
    recorded rec = events_of(f);
    assert_int_equal(rec.n, 2);
    assert_event(&rec.ev[0], "resumed", false, "node-a became leader (epoch 1)");
    assert_event(&rec.ev[1], "resumed", false, "node-a stopped leading (epoch 1): resigned");
    sink_free(a);
    sink_free(a2);
}

/* A term that moves to another replica of the service (rule 5) goes on:
 * the replica it left says nothing when its grant runs out (its release
 * finds the other replica's writes), the other says nothing at the resume,
 * and the end is told once, by the replica it ended on. */
static void test_engine_events_none_when_a_term_moves_to_another_replica(void **state)
{
    fixture *f = *state;
    engine_config cfg = fixture_engine_config(f, (engine_config){0});
    cfg.events = true;
    cfg.replica_name = REPLICA "-other";
    engine *e2 = engine_new(&cfg); /* same key, loop and store */
    sink *a = sink_new(), *a2 = sink_new();
    campaign(f, a, req_for_ns("default", "moving", "node-a"));
    int i = elected(a);
    int64_t epoch = a->events[i].epoch;
    char token[ENGINE_TOKEN_MAX];
    snprintf(token, sizeof token, "%s", a->events[i].term_token);
    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_closed(a, 5000));
    engine_campaign_req r = req_for_ns("default", "moving", "node-a");
    r.resume_epoch = epoch;
    snprintf(r.term_token, sizeof r.term_token, "%s", token);
    a2->id = engine_campaign(e2, &r, listener_of(a2));
    assert_true(a2->events[elected(a2)].resumed);
    /* The holder confirms on e2 while the first replica's grant runs out. */
    for (int k = 0; k < 5; k++) {
        assert_int_equal(confirm_on(f, e2, "moving", "node-a", epoch, token).code, ENGINE_OK);
        harness_sleep_ms(1000);
    }
    reply_box b = BOX_INIT;
    assert_int_equal(engine_resign(e2, "default", "moving", "node-a", token, box_done, &b), 0);
    box_wait(&b);
    assert_true(b.r.released);
    assert_true(wait_events(f, 2));
    harness_sleep_ms(1000);
    recorded rec = events_of(f);
    assert_int_equal(rec.n, 2);
    assert_event(&rec.ev[0], "moving", false, "node-a became leader (epoch 1)");
    assert_string_equal(rec.ev[1].message, "node-a stopped leading (epoch 1): resigned");
    assert_string_equal(rec.ev[1].instance, REPLICA "-other");
    /* Stop the other replica first (its stop also stops the shared loop). */
    engine_stop(e2);
    fixture_join(f);
    engine_stop(f->engine);
    loop_drain(f->loop);
    engine_free(e2);
    sink_free(a);
    sink_free(a2);
}

/* A flapping election: 20 terms would make 40 Events; the Lease's bucket
 * lets 25 through, then one per 5 minutes. */
static void test_engine_events_rate_limited_per_lease(void **state)
{
    fixture *f = *state;
    for (int k = 0; k < 20; k++)
        elect_and_resign(f, "flapping", k % 2 ? "node-b" : "node-a");
    assert_true(wait_events(f, 25));
    harness_sleep_ms(1000); /* anything still on its way lands */
    assert_int_equal(events_of(f).n, 25);

    /* Another Lease has its own bucket. */
    elect_and_resign(f, "quiet", "node-c");
    assert_true(wait_events(f, 27));

    /* Five minutes later the flapping Lease has one Event more. */
    harness_sleep_ms(5 * 60 * 1000);
    elect_and_resign(f, "flapping", "node-a");
    assert_true(wait_events(f, 28));
    harness_sleep_ms(1000);
    recorded r = events_of(f);
    assert_int_equal(r.n, 28);
    assert_string_equal(r.ev[27].lease.name, "flapping");
    assert_string_equal(r.ev[27].message, "node-a became leader (epoch 21)");
}

/* Many Leases at once: all of them together get no more than 100 Events
 * at a time. */
static void test_engine_events_rate_limited_for_all_leases(void **state)
{
    fixture *f = *state;
    for (int k = 0; k < 60; k++) {
        char lease[32];
        snprintf(lease, sizeof lease, "many-%02d", k);
        elect_and_resign(f, lease, "node-a");
    }
    assert_true(wait_events(f, 100));
    harness_sleep_ms(200); /* less than a refill */
    assert_int_equal(events_of(f).n, 100);
}

static void test_engine_events_none_without_the_flag(void **state)
{
    fixture *f = *state;
    elect_and_resign(f, "silent", "node-a");
    elect_and_resign(f, "silent", "node-b");
    harness_sleep_ms(1000);
    assert_int_equal(events_of(f).n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_engine_events_at_term_start_and_end_with_identity_and_reason, setup_on, teardown),
        cmocka_unit_test_setup_teardown(test_engine_events_warn_when_a_term_expires, setup_on,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_events_none_for_a_resume, setup_on, teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_events_none_when_a_term_moves_to_another_replica, setup_on, teardown),
        cmocka_unit_test_setup_teardown(test_engine_events_rate_limited_per_lease, setup_on,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_events_rate_limited_for_all_leases, setup_on,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_events_none_without_the_flag, setup_off,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
