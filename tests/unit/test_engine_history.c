/* The story of each Lease (history.c): the kubelease_lease_* series an
 * alert reads — leaderless time as a gauge and a counter, the last renewal
 * served here, the lease duration — and the terms ListTerms lists. Same
 * harness as test_engine.c: the memory store and a manual clock, so the
 * seconds of a gap pass without the test waiting for them. */
#include "support/engine_harness.h"
#include "core/metrics.h"

static engine_campaign_req req_for(const char *lease, const char *identity)
{
    return req_for_ns("default", lease, identity);
}

/* The value of the sample "name{namespace="default",lease="lease"}"; -1
 * when the page has none. */
static double sample_of(const char *name, const char *lease)
{
    char key[256];
    snprintf(key, sizeof key, "%s{namespace=\"default\",lease=\"%s\"} ", name, lease);
    char *page = metrics_render(NULL);
    assert_non_null(page);
    const char *at = strstr(page, key);
    double v = at ? strtod(at + strlen(key), NULL) : -1;
    free(page);
    return v;
}

static double gauge(const char *lease)
{
    return sample_of("kubelease_lease_leaderless_seconds", lease);
}

static double total(const char *lease)
{
    return sample_of("kubelease_lease_leaderless_seconds_total", lease);
}

static bool page_names(const char *text)
{
    char *page = metrics_render(NULL);
    assert_non_null(page);
    bool has = strstr(page, text) != NULL;
    free(page);
    return has;
}

static bool leaderless_yet(void *arg)
{
    return gauge(arg) > 0;
}

static bool forgotten_yet(void *arg)
{
    (void)arg;
    return !page_names("lease=\"lonely\"");
}

/* A leader that dies with no standby leaves its Lease leaderless: the
 * gauge grows every second while nobody leads, the counter adds the same
 * time up, both stop when the next term starts (the gauge back to 0, the
 * counter keeping the gap), and every per-lease sample goes when the Lease
 * is forgotten. */
static void test_engine_history_leaderless_time_is_measured_and_dropped(void **state)
{
    (void)state;
    metrics_init();
    fixture *f = fixture_start_manual((engine_config){.idle_forget_ms = 20000});
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, req_for("lonely", "a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_true(gauge("lonely") == 0);
    assert_true(total("lonely") == 0);
    assert_true(sample_of("kubelease_lease_duration_seconds", "lonely") == 15);
    double renewed = sample_of("kubelease_lease_last_renewal_timestamp_seconds", "lonely");
    assert_true(renewed >= (double)harness_wall_us() / 1e6 - 1 &&
                renewed <= (double)harness_wall_us() / 1e6);

    /* a dies: its term ends when its grant runs out; nobody stands by. */
    engine_campaign_detach(f->engine, a->id);
    assert_true(harness_run_until(leaderless_yet, "lonely", 10000));
    int64_t gap_start = harness_now_ms();
    double g1 = gauge("lonely"), t1 = total("lonely");
    harness_sleep_ms(5000);
    double g2 = gauge("lonely"), t2 = total("lonely");
    /* Refreshed at least once a second: within a second of the truth. */
    assert_true(g2 - g1 >= 4.0 && g2 - g1 <= 6.0);
    assert_true(t2 - t1 >= 4.0 && t2 - t1 <= 6.0);
    assert_true(t2 >= g2 - 1.0 && t2 <= g2 + 1.0);

    /* b is elected: the gap is over and fully counted. */
    campaign(f, b, req_for("lonely", "b"));
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    double gap = (double)(b->at_ms[j] - gap_start) / 1000.0;
    assert_true(gauge("lonely") == 0);
    double t3 = total("lonely");
    assert_true(t3 >= gap + g1 - 0.01 && t3 <= gap + g1 + 1.0);
    for (int k = 0; k < 3; k++) { /* b leads on, confirming */
        harness_sleep_ms(1000);
        assert_int_equal(confirm(f, "lonely", "b", b->events[j].epoch).code, ENGINE_OK);
    }
    assert_true(total("lonely") == t3);
    assert_true(gauge("lonely") == 0);

    /* Released and idle: the Lease is forgotten, its samples with it. */
    resign(f, "lonely", "b");
    assert_true(wait_closed(b, 5000));
    assert_true(harness_run_until(forgotten_yet, NULL, 30000));
    assert_false(page_names("kubelease_lease_leaderless_seconds{"));
    assert_false(page_names("kubelease_lease_leaderless_seconds_total{"));
    assert_false(page_names("kubelease_lease_last_renewal_timestamp_seconds{"));
    assert_false(page_names("kubelease_lease_duration_seconds{"));
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
    metrics_free_all();
}

int main(void)
{
    harness_log_level();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_history_leaderless_time_is_measured_and_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
