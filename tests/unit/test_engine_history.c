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

/* ---------- ListTerms ---------- */

typedef struct terms_box {
    atomic_bool done;
    engine_reply r; /* terms points into rows */
    engine_term_status rows[64];
} terms_box;

static void terms_done(void *ctx, const engine_reply *r)
{
    terms_box *b = ctx;
    b->r = *r;
    b->r.n_terms = r->n_terms < 64 ? r->n_terms : 64;
    if (b->r.n_terms)
        memcpy(b->rows, r->terms, b->r.n_terms * sizeof b->rows[0]);
    b->r.terms = b->rows;
    atomic_store(&b->done, true);
}

static bool terms_box_done(void *arg)
{
    return atomic_load(&((terms_box *)arg)->done);
}

/* ListTerms of default/lease; the box is the caller's to free. */
static terms_box *list_terms(fixture *f, const char *lease)
{
    terms_box *b = calloc(1, sizeof *b);
    assert_non_null(b);
    assert_int_equal(engine_list_terms(f->engine, "default", lease, terms_done, b), 0);
    assert_true(harness_run_until(terms_box_done, b, 5000));
    return b;
}

static void assert_term(const terms_box *b, size_t i, const char *holder, int64_t epoch,
                        engine_lost_reason reason, bool here)
{
    assert_true(i < b->r.n_terms);
    const engine_term_status *t = &b->rows[i];
    assert_string_equal(t->holder, holder);
    assert_int_equal(t->epoch, epoch);
    assert_int_equal(t->end_reason, reason);
    assert_true(t->start_unix_ms > 0);
    if (reason == ENGINE_LOST_UNSPECIFIED)
        assert_int_equal(t->end_unix_ms, 0);
    else
        assert_true(t->end_unix_ms >= t->start_unix_ms);
    if (here)
        assert_true(t->replica[0] != '\0');
    else
        assert_string_equal(t->replica, "");
}

typedef struct store_op {
    store_lease lease;
    store_result res;
    atomic_bool done;
} store_op;

static void store_op_cb(void *ctx, const store_result *r)
{
    store_op *p = ctx;
    p->res = *r;
    atomic_store(&p->done, true);
}

static void update_on_loop(fixture *f, void *arg)
{
    store_op *p = arg;
    f->store->ops->update(f->store, &p->lease, 1000, store_op_cb, p);
}

static void create_on_loop(fixture *f, void *arg)
{
    store_op *p = arg;
    f->store->ops->create(f->store, &p->lease, 1000, store_op_cb, p);
}

/* Writes lease as another writer would (create, or update over its
 * resource_version); returns the record written. */
static store_lease write_as_other(fixture *f, const store_lease *lease, bool create)
{
    store_op p = {.lease = *lease};
    run_on_loop(f, create ? create_on_loop : update_on_loop, &p);
    for (int spins = 0; !atomic_load(&p.done) && spins < 100; spins++)
        run_on_loop(f, harness_noop, NULL);
    assert_true(atomic_load(&p.done));
    assert_int_equal(p.res.status, STORE_OK);
    return p.res.lease;
}

static bool closed_yet(void *arg)
{
    return sink_closed(arg);
}

/* Terms served here end for the engine's own reasons — resigned, expired
 * (a holder that stopped confirming), handed off — each with the gap
 * before the next; the current term goes on (end 0, no reason). */
static void test_engine_history_lists_terms_served_here(void **state)
{
    (void)state;
    metrics_init();
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new(), *b = sink_new(), *c = sink_new(), *d = sink_new();
    campaign(f, a, req_for("story", "a"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    terms_box *l = list_terms(f, "story");
    assert_int_equal(l->r.code, ENGINE_OK);
    assert_int_equal(l->r.n_terms, 1);
    assert_term(l, 0, "a", 1, ENGINE_LOST_UNSPECIFIED, true);
    assert_int_equal(l->r.leaderless_since_unix_ms, 0);
    assert_true(l->r.valid_for_ms > 0);
    assert_int_equal(l->r.lease_duration_s, 15);
    assert_true(l->r.now_unix_ms >= l->rows[0].start_unix_ms);
    free(l);

    /* a resigns; b, standing by, follows at once. */
    campaign(f, b, req_for("story", "b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    resign(f, "story", "a");
    int i = wait_kind(b, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    /* b dies (no goodbye); c, standing by, follows when b's grant ends. */
    campaign(f, c, req_for("story", "c"));
    assert_true(wait_kind(c, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    engine_campaign_detach(f->engine, b->id);
    int j = wait_kind(c, ENGINE_EVENT_ELECTED, 10000);
    assert_true(j >= 0);
    /* c hands off to d. */
    campaign(f, d, req_for("story", "d"));
    assert_true(wait_kind(d, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    char token[ENGINE_TOKEN_MAX];
    harness_token_get(token, "default", "story", "c", c->events[j].epoch);
    reply_box hb = BOX_INIT;
    assert_int_equal(engine_handoff(f->engine, "default", "story", "c", token, "d", box_done, &hb),
                     0);
    box_wait(&hb);
    assert_int_equal(hb.r.code, ENGINE_OK);
    assert_true(wait_kind(d, ENGINE_EVENT_ELECTED, 5000) >= 0);

    l = list_terms(f, "story");
    assert_int_equal(l->r.n_terms, 4);
    assert_term(l, 0, "a", 1, ENGINE_LOST_RESIGNED, true);
    assert_term(l, 1, "b", 2, ENGINE_LOST_EXPIRED, true);
    assert_term(l, 2, "c", 3, ENGINE_LOST_HANDED_OFF, true);
    assert_term(l, 3, "d", 4, ENGINE_LOST_UNSPECIFIED, true);
    assert_int_equal(l->rows[0].gap_before_ms, -1); /* the first term seen */
    /* A release and an acquisition: no time on the manual clock. */
    assert_true(l->rows[1].gap_before_ms >= 0 && l->rows[1].gap_before_ms < 100);
    assert_true(l->rows[3].gap_before_ms >= 0 && l->rows[3].gap_before_ms < 100);
    /* Oldest first, each starting once the one before ended. */
    for (size_t k = 1; k < l->r.n_terms; k++)
        assert_true(l->rows[k].start_unix_ms >= l->rows[k - 1].end_unix_ms - 1000);
    free(l);

    resign(f, "story", "d");
    assert_true(harness_run_until(closed_yet, d, 5000));
    l = list_terms(f, "story");
    assert_term(l, 3, "d", 4, ENGINE_LOST_RESIGNED, true);
    assert_true(l->r.leaderless_since_unix_ms > 0);
    assert_int_equal(l->r.valid_for_ms, 0);
    free(l);
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
    sink_free(c);
    sink_free(d);
    metrics_free_all();
}

/* Terms of other writers are seen in the Lease: the one it shows when it
 * is first followed (as after a restart: holder, acquireTime,
 * leaseTransitions), replaced by another holder (SUPERSEDED, no gap),
 * then not renewed within its duration (EXPIRED, by observed time); none
 * has a replica. A Lease not followed here is NOT_FOUND. */
static void test_engine_history_sees_terms_in_the_lease(void **state)
{
    (void)state;
    metrics_init();
    fixture *f = fixture_start_manual((engine_config){0});
    terms_box *l = list_terms(f, "elsewhere");
    assert_int_equal(l->r.code, ENGINE_NOT_FOUND);
    free(l);

    int64_t acquired_us = harness_wall_us() - 7000 * 1000;
    store_lease x = {.lease_duration_s = 10, .transitions = 3};
    snprintf(x.ns, sizeof x.ns, "default");
    snprintf(x.name, sizeof x.name, "elsewhere");
    snprintf(x.holder, sizeof x.holder, "x");
    x.acquire_time_us = acquired_us;
    x.renew_time_us = harness_wall_us();
    x = write_as_other(f, &x, true);
    sink *w = sink_new();
    uint64_t wid = engine_watch(f->engine, "default", "elsewhere", NULL, listener_of(w));
    assert_true(wait_kind(w, ENGINE_EVENT_HOLDER, 5000) >= 0);
    l = list_terms(f, "elsewhere");
    assert_int_equal(l->r.code, ENGINE_OK);
    assert_int_equal(l->r.n_terms, 1);
    assert_term(l, 0, "x", 3, ENGINE_LOST_UNSPECIFIED, false);
    assert_int_equal(l->rows[0].start_unix_ms, acquired_us / 1000);
    assert_int_equal(l->rows[0].gap_before_ms, -1);
    assert_int_equal(l->r.lease_duration_s, 10);
    assert_int_equal(l->r.valid_for_ms, 0);
    assert_true(gauge("elsewhere") == 0);
    free(l);

    /* y takes over directly. */
    harness_sleep_ms(2000);
    store_lease y = x;
    snprintf(y.holder, sizeof y.holder, "y");
    y.transitions = 4;
    y.acquire_time_us = y.renew_time_us = harness_wall_us();
    y.lease_duration_s = 5;
    y = write_as_other(f, &y, false);
    assert_true(wait_kind(w, ENGINE_EVENT_HOLDER, 5000) >= 0);
    l = list_terms(f, "elsewhere");
    assert_int_equal(l->r.n_terms, 2);
    assert_term(l, 0, "x", 3, ENGINE_LOST_SUPERSEDED, false);
    assert_term(l, 1, "y", 4, ENGINE_LOST_UNSPECIFIED, false);
    assert_int_equal(l->rows[1].gap_before_ms, 0);
    assert_int_equal(l->r.lease_duration_s, 5);
    free(l);

    /* y stops renewing: it expires 5 s after its last renewal seen. */
    int64_t renewed_ms = harness_wall_us() / 1000;
    assert_true(harness_run_until(leaderless_yet, "elsewhere", 10000));
    l = list_terms(f, "elsewhere");
    assert_term(l, 1, "y", 4, ENGINE_LOST_EXPIRED, false);
    assert_true(l->rows[1].end_unix_ms >= renewed_ms + 5000 &&
                l->rows[1].end_unix_ms <= renewed_ms + 5100);
    assert_true(l->r.leaderless_since_unix_ms == l->rows[1].end_unix_ms);
    free(l);
    engine_unwatch(f->engine, wid);
    assert_true(wait_closed(w, 5000));
    fixture_stop(f);
    sink_free(w);
    metrics_free_all();
}

/* The history is bounded: after 40 terms the last 32 are listed, oldest
 * first. */
static void test_engine_history_keeps_the_last_32_terms(void **state)
{
    (void)state;
    metrics_init();
    fixture *f = fixture_start_manual((engine_config){0});
    for (int k = 0; k < 40; k++) {
        sink *s = sink_new();
        char id[16];
        snprintf(id, sizeof id, "n%d", k);
        campaign(f, s, req_for("many", id));
        assert_true(wait_kind(s, ENGINE_EVENT_ELECTED, 5000) >= 0);
        resign(f, "many", id);
        assert_true(wait_closed(s, 5000));
        sink_free(s);
    }
    terms_box *l = list_terms(f, "many");
    assert_int_equal(l->r.n_terms, 32);
    for (int k = 0; k < 32; k++) {
        char id[16];
        snprintf(id, sizeof id, "n%d", k + 8);
        assert_term(l, (size_t)k, id, k + 9, ENGINE_LOST_RESIGNED, true);
    }
    free(l);
    fixture_stop(f);
    metrics_free_all();
}

int main(void)
{
    harness_log_level();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_history_leaderless_time_is_measured_and_dropped),
        cmocka_unit_test(test_engine_history_lists_terms_served_here),
        cmocka_unit_test(test_engine_history_sees_terms_in_the_lease),
        cmocka_unit_test(test_engine_history_keeps_the_last_32_terms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
