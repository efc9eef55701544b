/* What the leader says about itself, and the grant it chooses
 * (docs/design.md, rule 10 and rules 2 and 6): the leader value written
 * with the term and read by GetHolder, holder watches and ListLeases; a
 * Proclaim by the holder changes it without a new term, seen by watchers
 * as an event of its own, and anyone else's changes nothing; a value over
 * the limit is refused; the value goes with a resume to another replica;
 * a campaign's grant_ms bounds every grant, within the engine's bounds.
 * The memory store and a manual clock (engine_harness.h). */
#include "support/engine_harness.h"

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

static engine_campaign_req valued(const char *lease, const char *identity, const char *value)
{
    engine_campaign_req r = req_for_ns("default", lease, identity);
    r.value_len = (uint16_t)strlen(value);
    memcpy(r.value, value, r.value_len);
    return r;
}

static void assert_value(const uint8_t *got, size_t got_len, const char *want)
{
    if (got_len != strlen(want) || memcmp(got, want, got_len) != 0)
        fail_msg("value \"%.*s\", want \"%s\"", (int)got_len, (const char *)got, want);
}

static engine_reply proclaim(fixture *f, const char *lease, const char *identity, const char *token,
                             const char *value)
{
    reply_box b = BOX_INIT;
    assert_int_equal(engine_proclaim(f->engine, "default", lease, identity, token,
                                     (const uint8_t *)value, strlen(value), box_done, &b),
                     0);
    box_wait(&b);
    return b.r;
}

typedef struct rec_arg {
    bool done;
    store_lease lease;
} rec_arg;

static void rec_done(void *ctx, const store_result *r)
{
    rec_arg *a = ctx;
    a->lease = r->lease;
    a->done = true;
}

static bool rec_done_yet(void *arg)
{
    return ((rec_arg *)arg)->done;
}

static store_lease stored(fixture *f, const char *name)
{
    rec_arg r;
    memset(&r, 0, sizeof r);
    f->store->ops->get(f->store, "default", name, 1000, rec_done, &r);
    assert_true(harness_run_until(rec_done_yet, &r, 1000));
    return r.lease;
}

/* The value goes with the term into the Lease, Elected, GetHolder, the
 * watch and ListLeases; Proclaim changes it at the same epoch, and a
 * watcher hears it as an event of its own. */
static void test_engine_value_written_with_the_term_and_proclaimed(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *w = sink_new();
    w->id = engine_watch(f->engine, "default", "valued", NULL, listener_of(w));
    campaign(f, a, valued("valued", "a", "10.0.0.1:6379"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_value(a->events[i].value, a->events[i].value_len, "10.0.0.1:6379");
    int64_t epoch = a->events[i].epoch;
    store_lease l = stored(f, "valued");
    assert_value(l.value, l.value_len, "10.0.0.1:6379");
    engine_reply g = get_holder(f, "valued", false);
    assert_string_equal(g.holder, "a");
    assert_value(g.value, g.value_len, "10.0.0.1:6379");
    int k;
    while ((k = wait_kind(w, ENGINE_EVENT_HOLDER, 1000)) >= 0 && !w->events[k].holder[0])
        ;
    assert_true(k >= 0);
    assert_value(w->events[k].value, w->events[k].value_len, "10.0.0.1:6379");

    engine_reply p = proclaim(f, "valued", "a", a->events[i].term_token, "10.0.0.2:6379");
    assert_int_equal(p.code, ENGINE_OK);
    assert_int_equal(p.epoch, epoch);
    l = stored(f, "valued"); /* written when answered */
    assert_value(l.value, l.value_len, "10.0.0.2:6379");
    assert_int_equal(l.transitions, epoch);
    k = wait_kind(w, ENGINE_EVENT_HOLDER, 1000);
    assert_true(k >= 0);
    assert_value(w->events[k].value, w->events[k].value_len, "10.0.0.2:6379");
    assert_int_equal(w->events[k].epoch, epoch); /* no new term */
    assert_value(get_holder(f, "valued", false).value, get_holder(f, "valued", false).value_len,
                 "10.0.0.2:6379");
    /* Renewals keep it. */
    assert_true(confirm_through_a_renewal(f, "valued", "a", epoch));
    l = stored(f, "valued");
    assert_value(l.value, l.value_len, "10.0.0.2:6379");
    /* No value: it goes. */
    assert_int_equal(proclaim(f, "valued", "a", a->events[i].term_token, "").code, ENGINE_OK);
    assert_int_equal(stored(f, "valued").value_len, 0);
    resign(f, "valued", "a");
    assert_true(wait_closed(a, 5000));
    engine_unwatch(f->engine, w->id);
    assert_true(wait_closed(w, 1000));
    sink_free(a);
    sink_free(w);
}

/* Only the holder proclaims: without the term's token, or without a term,
 * nothing changes; a value over the limit is no request at all. */
static void test_engine_proclaim_refusals_change_nothing(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, valued("refused-value", "a", "mine"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    campaign(f, b, valued("refused-value", "b", "theirs"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    engine_reply r = proclaim(f, "refused-value", "a", "not-the-token", "forged");
    assert_int_equal(r.code, ENGINE_PERMISSION_DENIED);
    assert_non_null(strstr(r.message, "term_token"));
    r = proclaim(f, "refused-value", "b", "", "forged"); /* a standby */
    assert_int_equal(r.code, ENGINE_FAILED_PRECONDITION);
    r = proclaim(f, "no-such-lease", "a", a->events[i].term_token, "forged");
    assert_int_equal(r.code, ENGINE_FAILED_PRECONDITION);
    uint8_t big[STORE_VALUE_MAX + 1] = {0};
    reply_box box = BOX_INIT;
    assert_int_equal(engine_proclaim(f->engine, "default", "refused-value", "a",
                                     a->events[i].term_token, big, sizeof big, box_done, &box),
                     -1);
    store_lease l = stored(f, "refused-value");
    assert_value(l.value, l.value_len, "mine");
    assert_string_equal(l.holder, "a");
    resign(f, "refused-value", "a");
    /* b's own value comes with its term. */
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    assert_value(b->events[j].value, b->events[j].value_len, "theirs");
    resign(f, "refused-value", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* The holder's value goes with a resume to another replica (the library
 * sends its current one), and a resume here with another value writes it. */
static void test_engine_value_survives_a_resume_on_another_replica(void **state)
{
    fixture *f = *state;
    engine_config cfg = fixture_engine_config(f, (engine_config){0});
    engine *e2 = engine_new(&cfg); /* same key, loop and store */
    sink *a = sink_new(), *a2 = sink_new(), *w = sink_new();
    campaign(f, a, valued("moved-value", "a", "v1"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    int64_t epoch = a->events[i].epoch;
    char token[ENGINE_TOKEN_MAX];
    snprintf(token, sizeof token, "%s", a->events[i].term_token);
    assert_int_equal(proclaim(f, "moved-value", "a", token, "v2").code, ENGINE_OK);
    engine_campaign_detach(f->engine, a->id);
    assert_true(wait_closed(a, 5000));

    w->id = engine_watch(e2, "default", "moved-value", NULL, listener_of(w));
    engine_campaign_req r = valued("moved-value", "a", "v2");
    r.resume_epoch = epoch;
    snprintf(r.term_token, sizeof r.term_token, "%s", token);
    a2->id = engine_campaign(e2, &r, listener_of(a2));
    int j = wait_kind(a2, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    assert_true(a2->events[j].resumed);
    assert_int_equal(a2->events[j].epoch, epoch);
    assert_value(a2->events[j].value, a2->events[j].value_len, "v2");
    store_lease l = stored(f, "moved-value");
    assert_value(l.value, l.value_len, "v2");
    reply_box rb = BOX_INIT;
    assert_int_equal(engine_resign(e2, "default", "moved-value", "a", token, box_done, &rb), 0);
    box_wait(&rb);
    assert_true(wait_closed(a2, 5000));
    engine_unwatch(e2, w->id);
    assert_true(wait_closed(w, 1000));
    engine_stop(e2);
    fixture_join(f);
    engine_stop(f->engine);
    loop_drain(f->loop);
    engine_free(e2);
    sink_free(a);
    sink_free(a2);
    sink_free(w);
}

/* grant_ms: every grant is at most what the campaign asked for, and at
 * most the engine's own bound (--max-grant-ms); validation keeps it from
 * 200 ms to the retry period. */
static void test_engine_grant_is_the_campaigns_within_bounds(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    engine_campaign_req r = req_for_ns("default", "granted", "a");
    r.grant_ms = 500;
    campaign(f, a, r);
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_true(a->events[i].valid_for_ms <= 500 && a->events[i].valid_for_ms > 0);
    for (int k = 0; k < 5; k++) {
        engine_reply c = confirm(f, "granted", "a", a->events[i].epoch);
        assert_int_equal(c.code, ENGINE_OK);
        assert_true(c.valid_for_ms <= 500 && c.valid_for_ms > 400);
        harness_sleep_ms(150);
    }
    /* Unconfirmed, the term ends at its last grant: 500 ms, not 2 s. */
    int64_t t0 = harness_now_ms();
    engine_campaign_detach(f->engine, a->id);
    sink *b = sink_new();
    campaign(f, b, req_for_ns("default", "granted", "b"));
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(harness_now_ms() - t0 <= 600);
    resign(f, "granted", "b");
    assert_true(wait_closed(b, 5000));

    char msg[256];
    engine_campaign_req v = req_for_ns("default", "granted", "c");
    v.grant_ms = 199;
    assert_int_equal(engine_validate_campaign(&v, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "grant_ms"));
    v.grant_ms = 2001; /* more than the retry period, 2 s */
    assert_int_equal(engine_validate_campaign(&v, msg, sizeof msg), -1);
    v.grant_ms = 2000;
    assert_int_equal(engine_validate_campaign(&v, msg, sizeof msg), 0);
    v.grant_ms = 0;
    assert_int_equal(engine_validate_campaign(&v, msg, sizeof msg), 0);
    sink_free(a);
    sink_free(b);
}

/* A replica's --max-grant-ms bounds a campaign's grant_ms too. */
static void test_engine_grant_within_the_replicas_bound(void **state)
{
    fixture *f = *state;
    engine_config cfg = fixture_engine_config(f, (engine_config){.max_grant_ms = 300});
    engine *e2 = engine_new(&cfg);
    sink *a = sink_new();
    engine_campaign_req r = req_for_ns("default", "tight", "a");
    r.grant_ms = 1000;
    a->id = engine_campaign(e2, &r, listener_of(a));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_true(a->events[i].valid_for_ms <= 300);
    engine_reply c = confirm_on(f, e2, "tight", "a", a->events[i].epoch, a->events[i].term_token);
    assert_int_equal(c.code, ENGINE_OK);
    assert_true(c.valid_for_ms <= 300 && c.valid_for_ms > 0);
    engine_stop(e2);
    fixture_join(f);
    engine_stop(f->engine);
    loop_drain(f->loop);
    engine_free(e2);
    sink_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_engine_value_written_with_the_term_and_proclaimed,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_proclaim_refusals_change_nothing, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_value_survives_a_resume_on_another_replica,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_grant_is_the_campaigns_within_bounds, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_grant_within_the_replicas_bound, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
