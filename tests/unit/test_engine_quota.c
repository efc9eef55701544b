/* Quotas (engine/quota.c): a caller over max_leases_per_caller, or a
 * namespace over max_leases_per_namespace, is refused with
 * ENGINE_RESOURCE_EXHAUSTED naming the flag while other callers and
 * namespaces are served; reads of Leases that exist never hoard a slot (the
 * least recently used idle Lease is forgotten to make room), and a Lease
 * someone campaigns on or watches stays. The engine runs on a manual clock
 * over the memory store (engine_harness.h). */
#include "support/engine_harness.h"
#include "store/memory.h"

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

/* Creates default/name behind the engine's back, as another client would. */
static void create_lease(fixture *f, const char *name)
{
    store_lease l = {.ns = "default"};
    snprintf(l.name, sizeof l.name, "%s", name);
    harness_create(f, &l);
}

static engine_campaign_req req_of(const char *caller, const char *ns, const char *lease,
                                  const char *identity)
{
    engine_campaign_req r = req_for_ns(ns, lease, identity);
    snprintf(r.caller, sizeof r.caller, "%s", caller);
    return r;
}

static engine_reply read_as(fixture *f, const char *caller, const char *lease)
{
    reply_box b = BOX_INIT;
    assert_int_equal(engine_get_holder(f->engine, "default", lease, caller, false, box_done, &b),
                     0);
    box_wait(&b);
    return b.r;
}

static bool refused_naming(sink *s, const char *flag)
{
    int i = wait_kind(s, ENGINE_EVENT_REFUSED, 5000);
    if (i < 0 || s->events[i].code != ENGINE_RESOURCE_EXHAUSTED ||
        !strstr(s->events[i].message, flag))
        return false;
    return wait_closed(s, 5000);
}

/* alice at her quota of 2: her third Lease is refused (campaign, watch and
 * read alike) naming --max-leases-per-caller; bob campaigns on that very
 * Lease; alice still campaigns on a Lease on her account. */
static void test_engine_caller_over_its_quota_is_refused_others_served(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){.max_leases_per_caller = 2});
    sink *a1 = sink_new(), *a2 = sink_new(), *a3 = sink_new(), *aw = sink_new();
    sink *b3 = sink_new(), *a1b = sink_new();
    campaign(f, a1, req_of("alice", "default", "q1", "a"));
    campaign(f, a2, req_of("alice", "default", "q2", "a"));
    assert_true(wait_kind(a1, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(wait_kind(a2, ENGINE_EVENT_ELECTED, 5000) >= 0);
    campaign(f, a3, req_of("alice", "default", "q3", "a"));
    assert_true(refused_naming(a3, "--max-leases-per-caller"));
    assert_int_equal(a3->n, 1); /* the refusal is all it got */
    aw->id = engine_watch(f->engine, "default", "q3", "alice", listener_of(aw));
    assert_true(refused_naming(aw, "--max-leases-per-caller"));
    create_lease(f, "q4");
    engine_reply r = read_as(f, "alice", "q4");
    assert_int_equal(r.code, ENGINE_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(r.message, "--max-leases-per-caller"));
    assert_int_equal(watches_of(f), 2);
    /* Another caller is served, on the Lease alice could not have. */
    campaign(f, b3, req_of("bob", "default", "q3", "b"));
    assert_true(wait_kind(b3, ENGINE_EVENT_ELECTED, 5000) >= 0);
    /* A Lease on alice's account stays hers to campaign on. */
    campaign(f, a1b, req_of("alice", "default", "q1", "a-second"));
    assert_true(wait_kind(a1b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    assert_int_equal(watches_of(f), 3);
    fixture_stop(f);
    sink_free(a1);
    sink_free(a2);
    sink_free(a3);
    sink_free(aw);
    sink_free(b3);
    sink_free(a1b);
}

/* Namespace team-a at its quota of 2 (two callers' campaigns): a third
 * Lease there is refused naming --max-leases-per-namespace; team-b is
 * served. */
static void test_engine_namespace_over_its_quota_is_refused_others_served(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){.max_leases_per_namespace = 2});
    sink *a = sink_new(), *b = sink_new(), *c = sink_new(), *d = sink_new();
    campaign(f, a, req_of("alice", "team-a", "one", "a"));
    campaign(f, b, req_of("bob", "team-a", "two", "b"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    campaign(f, c, req_of("carol", "team-a", "three", "c"));
    assert_true(refused_naming(c, "--max-leases-per-namespace"));
    campaign(f, d, req_of("carol", "team-b", "three", "c"));
    assert_true(wait_kind(d, ENGINE_EVENT_ELECTED, 5000) >= 0);
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
    sink_free(c);
    sink_free(d);
}

/* Reads of Leases that exist never cost alice a slot she can hoard: 6 reads
 * of distinct Leases keep at most her quota followed, each answered; then
 * her campaigns get slots (the read Leases are forgotten). A Lease bob
 * watches stays followed however much alice reads. */
static void test_engine_reads_of_existing_leases_do_not_hoard(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){.max_leases_per_caller = 2});
    char name[32];
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "r%d", i);
        create_lease(f, name);
    }
    sink *bw = sink_new(), *c1 = sink_new(), *c2 = sink_new();
    assert_int_equal(read_as(f, "alice", "r0").code, ENGINE_OK);
    bw->id = engine_watch(f->engine, "default", "r0", "bob", listener_of(bw));
    assert_true(wait_kind(bw, ENGINE_EVENT_HOLDER, 5000) >= 0);
    for (int i = 1; i < 6; i++) {
        snprintf(name, sizeof name, "r%d", i);
        engine_reply r = read_as(f, "alice", name);
        assert_int_equal(r.code, ENGINE_OK);
        assert_true(r.exists);
        assert_true(watches_of(f) <= 3); /* r0 (bob's now) and at most 2 of alice's */
    }
    campaign(f, c1, req_of("alice", "default", "c1", "a"));
    campaign(f, c2, req_of("alice", "default", "c2", "a"));
    assert_true(wait_kind(c1, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(wait_kind(c2, ENGINE_EVENT_ELECTED, 5000) >= 0);
    /* bob's watch is untouched: it got nothing but the first state. */
    assert_false(bw->closed);
    assert_int_equal(watches_of(f), 3); /* r0, c1, c2 */
    fixture_stop(f);
    sink_free(bw);
    sink_free(c1);
    sink_free(c2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_caller_over_its_quota_is_refused_others_served),
        cmocka_unit_test(test_engine_namespace_over_its_quota_is_refused_others_served),
        cmocka_unit_test(test_engine_reads_of_existing_leases_do_not_hoard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
