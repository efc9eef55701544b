/* engine_free with requests still posted to its loop (posted after the
 * loop's last pass, or never run: a crash in the simulator, a stop that
 * could not post its command): they are freed unrun, their callbacks never
 * called, CheckEpoch's own context included; an engine sharing the loop
 * keeps its requests. The leak half is what ASan's LeakSanitizer checks.
 * The engine runs on a manual clock over the memory store
 * (engine_harness.h). */
#include "support/engine_harness.h"

typedef struct answers {
    int n;
    engine_code code;
} answers;

static void count_done(void *ctx, const engine_reply *r)
{
    answers *a = ctx;
    a->n++;
    a->code = r->code;
}

/* One of each kind of posting: unary, CheckEpoch (its context is the
 * engine's), urgent (Confirm), by id (detach). */
static void post_some(engine *e, answers *a)
{
    assert_int_equal(engine_get_holder(e, "default", "l1", "t", false, count_done, a), 0);
    assert_int_equal(engine_check_epoch(e, "default", "l1", "t", 3, count_done, a), 0);
    assert_int_equal(engine_confirm(e, "default", "l1", "me", 3, "token", count_done, a), 0);
    assert_int_equal(engine_list(e, count_done, a), 0);
    engine_campaign_detach(e, 42);
}

static void test_engine_free_drops_posted_requests(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    answers a = {0};
    post_some(f->engine, &a);
    engine_free(f->engine);
    f->engine = NULL;
    /* nothing of the engine's is left to run on the loop */
    assert_int_equal(loop_drain(f->loop), 0);
    assert_int_equal(a.n, 0);
    store_free(f->store);
    loop_free(f->loop);
    harness_manual = NULL;
    free(f);
}

static void test_engine_free_keeps_other_engines_requests(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    engine_config cfg = fixture_engine_config(f, (engine_config){0});
    engine *other = engine_new(&cfg);
    assert_non_null(other);
    answers mine = {0}, theirs = {0};
    post_some(f->engine, &mine);
    assert_int_equal(engine_get_holder(other, "default", "l1", "t", false, count_done, &theirs), 0);
    engine_free(f->engine);
    f->engine = NULL;
    manual_clock_settle(&f->clock);
    assert_int_equal(mine.n, 0);
    assert_int_equal(theirs.n, 1);
    assert_int_equal(theirs.code, ENGINE_NOT_FOUND);
    engine_free(other);
    store_free(f->store);
    loop_free(f->loop);
    harness_manual = NULL;
    free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_free_drops_posted_requests),
        cmocka_unit_test(test_engine_free_keeps_other_engines_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
