/* No amplification: reading a Lease that does not exist follows nothing
 * (no state, no store watch) beyond a short, bounded negative cache, and a
 * cap on followed Leases (max_leases) refuses what would follow more with
 * ENGINE_RESOURCE_EXHAUSTED. The engine runs on a manual clock over the
 * memory store (engine_harness.h). */
#include "support/engine_harness.h"
#include "core/metrics.h"
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

typedef struct put_arg {
    store_lease lease;
    store_result res;
    atomic_bool done;
} put_arg;

static void put_cb(void *ctx, const store_result *r)
{
    put_arg *p = ctx;
    p->res = *r;
    atomic_store(&p->done, true);
}

static void create_on_loop(fixture *f, void *arg)
{
    put_arg *p = arg;
    f->store->ops->create(f->store, &p->lease, 1000, put_cb, p);
}

static void noop_on_loop(fixture *f, void *arg)
{
    (void)f;
    (void)arg;
}

/* Creates default/name behind the engine's back, as another client would. */
static void create_lease(fixture *f, const char *name)
{
    put_arg p = {0};
    snprintf(p.lease.ns, sizeof p.lease.ns, "default");
    snprintf(p.lease.name, sizeof p.lease.name, "%s", name);
    run_on_loop(f, create_on_loop, &p);
    for (int spins = 0; !atomic_load(&p.done) && spins < 100; spins++)
        run_on_loop(f, noop_on_loop, NULL);
    assert_int_equal(p.res.status, STORE_OK);
}

static double followed(void)
{
    char *page = metrics_render(NULL);
    assert_non_null(page);
    const char *p = strstr(page, "\nkubelease_leases_followed ");
    double v = p ? strtod(p + strlen("\nkubelease_leases_followed "), NULL) : 0;
    free(page);
    return v;
}

/* 3,000 reads of distinct absent names: nothing followed, no store watch. */
static void test_engine_reads_of_absent_leases_follow_nothing(void **state)
{
    (void)state;
    metrics_init();
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new();
    campaign(f, a, req_for_ns("default", "in-use", "a"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_int_equal(watches_of(f), 1);
    for (int i = 0; i < 3000; i++) {
        char name[32];
        snprintf(name, sizeof name, "absent-%d", i);
        engine_reply r = get_holder(f, name, i % 2 == 0);
        assert_int_equal(r.code, ENGINE_NOT_FOUND);
    }
    assert_int_equal(watches_of(f), 1);
    assert_true(followed() == 1);
    resign(f, "in-use", "a");
    assert_true(wait_closed(a, 5000));
    fixture_stop(f);
    sink_free(a);
    metrics_free_all();
}

/* A read that found a Lease absent answers for ENGINE_ABSENT_TTL_MS from the
 * negative cache (a consistent read goes to the store); then the store is
 * read again, and a Lease that exists by then is followed. */
static void test_engine_absent_lease_is_cached_briefly(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    assert_int_equal(get_holder(f, "late", false).code, ENGINE_NOT_FOUND);
    create_lease(f, "late");
    assert_int_equal(get_holder(f, "late", false).code, ENGINE_NOT_FOUND); /* cached */
    engine_reply r = get_holder(f, "late", true);
    assert_int_equal(r.code, ENGINE_OK);
    assert_true(r.exists);
    harness_sleep_ms(2000); /* ENGINE_ABSENT_TTL_MS */
    r = get_holder(f, "late", false);
    assert_int_equal(r.code, ENGINE_OK);
    assert_int_equal(watches_of(f), 1); /* it exists: followed from now on */
    fixture_stop(f);
}

static void remove_on_loop(fixture *f, void *arg)
{
    put_arg *p = arg;
    f->store->ops->remove(f->store, p->lease.ns, p->lease.name, NULL, 1000, put_cb, p);
}

/* A followed Lease that is deleted and used by nothing is forgotten at the
 * next read instead of staying followed for the idle period. */
static void test_engine_read_forgets_a_deleted_idle_lease(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    create_lease(f, "gone");
    assert_int_equal(get_holder(f, "gone", false).code, ENGINE_OK);
    assert_int_equal(watches_of(f), 1);
    put_arg p = {0};
    snprintf(p.lease.ns, sizeof p.lease.ns, "default");
    snprintf(p.lease.name, sizeof p.lease.name, "gone");
    run_on_loop(f, remove_on_loop, &p);
    for (int spins = 0; !atomic_load(&p.done) && spins < 100; spins++)
        run_on_loop(f, noop_on_loop, NULL);
    assert_int_equal(p.res.status, STORE_OK);
    /* The watch tells the engine; the next read answers and forgets it. */
    engine_reply r;
    for (int spins = 0; spins < 100; spins++) {
        r = get_holder(f, "gone", false);
        if (r.code == ENGINE_NOT_FOUND)
            break;
        run_on_loop(f, noop_on_loop, NULL);
    }
    assert_int_equal(r.code, ENGINE_NOT_FOUND);
    assert_int_equal(watches_of(f), 0);
    fixture_stop(f);
}

static bool refused_with(sink *s, engine_code code)
{
    int i = wait_kind(s, ENGINE_EVENT_REFUSED, 5000);
    return i >= 0 && s->events[i].code == code && strstr(s->events[i].message, "--max-leases") &&
           wait_closed(s, 5000);
}

/* At max_leases, a campaign, a watch or a read of a Lease not followed yet
 * is refused; the followed ones are served as usual. */
static void test_engine_max_leases_refuses_new_leases(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){.max_leases = 2});
    sink *a = sink_new(), *b = sink_new(), *c = sink_new(), *w = sink_new(), *a2 = sink_new();
    campaign(f, a, req_for_ns("default", "one", "a"));
    campaign(f, b, req_for_ns("default", "two", "b"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    campaign(f, c, req_for_ns("default", "three", "c"));
    assert_true(refused_with(c, ENGINE_RESOURCE_EXHAUSTED));
    assert_int_equal(c->n, 1); /* the refusal is all it got */
    w->id = engine_watch(f->engine, "default", "three", NULL, listener_of(w));
    assert_true(refused_with(w, ENGINE_RESOURCE_EXHAUSTED));
    engine_reply r = get_holder(f, "three", false);
    assert_int_equal(r.code, ENGINE_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(r.message, "--max-leases"));
    /* Followed Leases are served. */
    assert_int_equal(get_holder(f, "one", false).code, ENGINE_OK);
    campaign(f, a2, req_for_ns("default", "one", "a2"));
    assert_true(wait_kind(a2, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    assert_int_equal(watches_of(f), 2);
    resign(f, "one", "a");
    resign(f, "one", "a2");
    resign(f, "two", "b");
    fixture_stop(f);
    sink_free(a);
    sink_free(a2);
    sink_free(b);
    sink_free(c);
    sink_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_reads_of_absent_leases_follow_nothing),
        cmocka_unit_test(test_engine_absent_lease_is_cached_briefly),
        cmocka_unit_test(test_engine_read_forgets_a_deleted_idle_lease),
        cmocka_unit_test(test_engine_max_leases_refuses_new_leases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
