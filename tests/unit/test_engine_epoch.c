/* An exhausted epoch is loud (docs/design.md, rule 4): a Lease whose
 * leaseTransitions is at ENGINE_EPOCH_MAX can start no new term, so every
 * campaign for it ends with FAILED_PRECONDITION saying what to do, nothing
 * is written or retried, it is counted in kubelease_leases_epoch_exhausted
 * and, with --events, one Warning Event says so. The engine runs on a
 * manual clock over the memory store (engine_harness.h). */
#include "support/engine_harness.h"
#include "core/metrics.h"
#include "ops/ops.h"
#include "store/memory.h"

static void events_on_loop(fixture *f, void *arg)
{
    *(int64_t *)arg = store_memory_event_count(f->store);
}

static int64_t events_of(fixture *f)
{
    int64_t n = 0;
    run_on_loop(f, events_on_loop, &n);
    return n;
}

static int64_t writes_of(fixture *f)
{
    int64_t n = 0;
    run_on_loop(f, harness_read_writes, &n);
    return n;
}

static double gauge(const char *name)
{
    char *page = metrics_render(NULL);
    assert_non_null(page);
    char line[128];
    snprintf(line, sizeof line, "\n%s ", name);
    const char *p = strstr(page, line);
    double v = p ? strtod(p + strlen(line), NULL) : -1;
    free(page);
    return v;
}

/* default/name, free, at epoch transitions, as another writer left it. */
static void create_at(fixture *f, const char *name, int64_t transitions)
{
    store_lease l = {.ns = "default", .lease_duration_s = 1, .transitions = transitions};
    snprintf(l.name, sizeof l.name, "%s", name);
    harness_create(f, &l);
}

/* The status page rendered from a ListLeases of the engine. */
typedef struct page {
    bool done;
    char *html;
} page;

static void page_done(void *ctx, const engine_reply *r)
{
    page *p = ctx;
    size_t len;
    const char *ct;
    assert_int_equal(ops_status_page(r, &p->html, &len, &ct), 0);
    p->done = true;
}

static bool page_done_yet(void *arg)
{
    return ((page *)arg)->done;
}

static void assert_refused(sink *s)
{
    int i = wait_kind(s, ENGINE_EVENT_LOST, 5000);
    assert_true(i >= 0);
    assert_int_equal(s->events[i].code, ENGINE_FAILED_PRECONDITION);
    assert_non_null(strstr(s->events[i].message, "2147483647"));
    assert_non_null(strstr(s->events[i].message, "delete the Lease"));
    assert_true(wait_closed(s, 5000));
}

/* Two campaigns for a Lease at the largest epoch: both end saying what to
 * do, nothing is written, one error, one gauge, one Warning Event; a Lease
 * one epoch below is still elected (at the largest epoch). */
static void test_engine_exhausted_epoch_refuses_campaigns_once_and_loudly(void **state)
{
    (void)state;
    metrics_init();
    fixture *f = fixture_start_manual((engine_config){.events = true});
    create_at(f, "worn-out", ENGINE_EPOCH_MAX);
    int64_t writes = writes_of(f), events = events_of(f);
    sink *a = sink_new(), *b = sink_new(), *c = sink_new();
    campaign(f, a, req_for_ns("default", "worn-out", "a"));
    assert_refused(a);
    campaign(f, b, req_for_ns("default", "worn-out", "b"));
    assert_refused(b);
    assert_int_equal(writes_of(f), writes); /* no acquisition tried */
    assert_true(gauge("kubelease_leases_epoch_exhausted") == 1);
    assert_int_equal(events_of(f), events + 1); /* said once */
    run_on_loop(f, harness_noop, NULL);
    const store_lease_event *ev = store_memory_event(f->store, events);
    assert_true(ev->warning);
    assert_non_null(strstr(ev->message, "cannot be elected again"));
    /* The status page says so beside the epoch. */
    page pg = {false, NULL};
    assert_int_equal(engine_list(f->engine, page_done, &pg), 0);
    assert_true(harness_run_until(page_done_yet, &pg, 1000));
    assert_non_null(strstr(pg.html, "2147483647 (exhausted: delete or rename the Lease)"));
    free(pg.html);
    /* The last epoch there is can still be given. */
    create_at(f, "nearly", ENGINE_EPOCH_MAX - 1);
    campaign(f, c, req_for_ns("default", "nearly", "c"));
    int i = wait_kind(c, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_int_equal(c->events[i].epoch, ENGINE_EPOCH_MAX);
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
    sink_free(c);
    metrics_free_all();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_exhausted_epoch_refuses_campaigns_once_and_loudly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
