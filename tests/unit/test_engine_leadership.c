/* Leadership that follows the application, in the engine: the fencing
 * check (CheckEpoch), the candidates (ListCandidates) and planned handoff
 * (Handoff; docs/design.md, rules 2, 3 and 8), also as the Lease's
 * spec.preferredHolder asks it. The engine runs on a manual clock over the
 * memory store (engine_harness.h). */
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

static engine_reply check_epoch(fixture *f, const char *lease, int64_t epoch)
{
    reply_box b = BOX_INIT;
    assert_int_equal(engine_check_epoch(f->engine, f->ns, lease, NULL, epoch, box_done, &b), 0);
    box_wait(&b);
    return b.r;
}

/* Current only while the live term has exactly that epoch: not an older
 * one, not a newer one, not once the term has ended. */
static void test_engine_check_epoch_current_only_for_the_live_term(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, req_for_ns("default", "fenced", "a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    int64_t e1 = a->events[i].epoch;
    engine_reply r = check_epoch(f, "fenced", e1);
    assert_int_equal(r.code, ENGINE_OK);
    assert_true(r.current);
    assert_int_equal(r.epoch, e1);
    r = check_epoch(f, "fenced", e1 + 1);
    assert_int_equal(r.code, ENGINE_OK);
    assert_false(r.current);
    assert_int_equal(r.epoch, e1);
    /* The next term: the old epoch is no longer current. */
    campaign(f, b, req_for_ns("default", "fenced", "b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    assert_int_equal(resign(f, "fenced", "a").code, ENGINE_OK);
    i = wait_kind(b, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    int64_t e2 = b->events[i].epoch;
    assert_true(e2 > e1);
    r = check_epoch(f, "fenced", e1);
    assert_false(r.current);
    assert_int_equal(r.epoch, e2);
    assert_true(check_epoch(f, "fenced", e2).current);
    /* No term at all once b resigns. */
    assert_int_equal(resign(f, "fenced", "b").code, ENGINE_OK);
    r = check_epoch(f, "fenced", e2);
    assert_int_equal(r.code, ENGINE_OK);
    assert_false(r.current);
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
}

/* Checks of Leases that do not exist answer "not current, epoch 0", follow
 * nothing and go to the negative cache, as reads do. */
static void test_engine_check_epoch_of_absent_leases_follows_nothing(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    for (int i = 0; i < 1000; i++) {
        char name[32];
        snprintf(name, sizeof name, "absent-%d", i % 100);
        engine_reply r = check_epoch(f, name, 1 + i);
        assert_int_equal(r.code, ENGINE_OK);
        assert_false(r.current);
        assert_int_equal(r.epoch, 0);
    }
    assert_int_equal(watches_of(f), 0);
    fixture_stop(f);
}

typedef struct cand_box {
    reply_box box;
    engine_candidate_status rows[8];
    size_t n;
} cand_box;

static void cand_done(void *ctx, const engine_reply *r)
{
    cand_box *b = ctx;
    b->n = r->n_candidates < 8 ? r->n_candidates : 8;
    memcpy(b->rows, r->candidates, b->n * sizeof b->rows[0]);
    box_done(&b->box, r);
}

static cand_box *list_candidates(fixture *f, const char *lease)
{
    static cand_box b;
    memset(&b, 0, sizeof b);
    b.box = (reply_box)BOX_INIT;
    assert_int_equal(engine_list_candidates(f->engine, f->ns, lease, cand_done, &b), 0);
    box_wait(&b.box);
    assert_int_equal(b.box.r.code, ENGINE_OK);
    assert_string_equal(b.box.r.replica, "replica-0");
    return &b;
}

/* The leader first, then the standbys in the order they would be elected,
 * each with how long it has campaigned and the replica holding it; the
 * order is the one a resignation follows. */
static void test_engine_list_candidates_in_line_order(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){.replica_name = "replica-0"});
    sink *a = sink_new(), *b = sink_new(), *c = sink_new();
    campaign(f, a, req_for_ns("default", "line", "a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    campaign(f, b, req_for_ns("default", "line", "b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    /* Time passes; a keeps confirming its term (grants last 2 s). */
    int64_t e1 = a->events[i].epoch;
    manual_clock_advance(&f->clock, 1000);
    assert_int_equal(confirm(f, "line", "a", e1).code, ENGINE_OK);
    manual_clock_advance(&f->clock, 500);
    campaign(f, c, req_for_ns("default", "line", "c"));
    assert_true(wait_kind(c, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    manual_clock_advance(&f->clock, 500);
    assert_int_equal(confirm(f, "line", "a", e1).code, ENGINE_OK);
    cand_box *l = list_candidates(f, "line");
    assert_int_equal(l->n, 3);
    assert_int_equal(l->box.r.epoch, a->events[i].epoch);
    assert_string_equal(l->rows[0].identity, "a");
    assert_true(l->rows[0].leader);
    assert_string_equal(l->rows[1].identity, "b");
    assert_false(l->rows[1].leader);
    assert_int_equal(l->rows[1].campaigning_for_ms, 2000);
    assert_string_equal(l->rows[2].identity, "c");
    assert_int_equal(l->rows[2].campaigning_for_ms, 500);
    for (size_t k = 0; k < 3; k++)
        assert_string_equal(l->rows[k].replica, "replica-0");
    /* a resigns: b, the first in line, leads; c is next. */
    resign(f, "line", "a");
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    l = list_candidates(f, "line");
    assert_int_equal(l->n, 2);
    assert_string_equal(l->rows[0].identity, "b");
    assert_true(l->rows[0].leader);
    assert_string_equal(l->rows[1].identity, "c");
    resign(f, "line", "b");
    resign(f, "line", "c");
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
    sink_free(c);
}

/* A Lease not followed here is not read: an empty list, nothing followed. */
static void test_engine_list_candidates_of_unfollowed_lease_reads_nothing(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){.replica_name = "replica-0"});
    for (int i = 0; i < 100; i++) {
        char name[32];
        snprintf(name, sizeof name, "unknown-%d", i);
        cand_box *l = list_candidates(f, name);
        assert_int_equal(l->n, 0);
        assert_int_equal(l->box.r.epoch, 0);
    }
    assert_int_equal(watches_of(f), 0);
    fixture_stop(f);
}

/* A Handoff as the holder (its token) or, with by_holder false, as an
 * operator (no identity, no token). */
static engine_reply handoff(fixture *f, const char *lease, const char *holder, bool by_holder,
                            const char *to)
{
    reply_box b = BOX_INIT;
    char token[ENGINE_TOKEN_MAX] = "";
    if (by_holder)
        harness_token_get(token, f->ns, lease, holder, 0);
    assert_int_equal(
        engine_handoff(f->engine, f->ns, lease, by_holder ? holder : "", token, to, box_done, &b),
        0);
    box_wait(&b);
    return b.r;
}

static engine_reply resign_with(fixture *f, const char *lease, const char *identity,
                                const char *token)
{
    reply_box b = BOX_INIT;
    assert_int_equal(engine_resign(f->engine, f->ns, lease, identity, token, box_done, &b), 0);
    box_wait(&b);
    return b.r;
}

static int64_t elected_epoch(sink *s)
{
    int i = wait_kind(s, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    return s->events[i].epoch;
}

static bool lost_handed_off(sink *s)
{
    int i = wait_kind(s, ENGINE_EVENT_LOST, 5000);
    return i >= 0 && s->events[i].reason == ENGINE_LOST_HANDED_OFF;
}

/* The holder hands off to a named standby: its term ends (Lost HANDED_OFF)
 * and that standby, not the first in line, leads at once (no time passes)
 * with the next epoch. */
static void test_engine_handoff_by_holder_elects_the_named_standby_at_once(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new(), *b = sink_new(), *c = sink_new();
    campaign(f, a, req_for_ns("default", "ho", "a"));
    int64_t e1 = elected_epoch(a);
    campaign(f, b, req_for_ns("default", "ho", "b"));
    campaign(f, c, req_for_ns("default", "ho", "c"));
    assert_true(wait_kind(c, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    engine_reply r = handoff(f, "ho", "a", true, "c");
    assert_int_equal(r.code, ENGINE_OK);
    assert_int_equal(r.epoch, e1);
    assert_string_equal(r.holder, "c");
    assert_true(lost_handed_off(a));
    assert_int_equal(elected_epoch(c), e1 + 1);
    assert_int_equal(take_kind(b, ENGINE_EVENT_ELECTED), -1);
    assert_true(check_epoch(f, "ho", e1 + 1).current);
    /* Empty to_identity: the next in line (b). */
    r = handoff(f, "ho", "c", true, "");
    assert_int_equal(r.code, ENGINE_OK);
    assert_string_equal(r.holder, "b");
    assert_int_equal(elected_epoch(b), e1 + 2);
    resign(f, "ho", "b");
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
    sink_free(c);
}

/* Someone else hands off: the holder is told at once and no longer
 * confirmed, but the standby is elected only when the holder acknowledges
 * (a Resign with its token), never before (rules 2 and 3). */
static void test_engine_handoff_by_operator_waits_for_the_holder(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, req_for_ns("default", "ho-op", "a"));
    int64_t e1 = elected_epoch(a);
    assert_int_equal(confirm(f, "ho-op", "a", e1).code, ENGINE_OK);
    campaign(f, b, req_for_ns("default", "ho-op", "b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    char token[ENGINE_TOKEN_MAX];
    harness_token_get(token, "default", "ho-op", "a", e1);
    engine_reply r = handoff(f, "ho-op", "a", false, "b");
    assert_int_equal(r.code, ENGINE_OK);
    assert_true(lost_handed_off(a));
    assert_int_not_equal(confirm(f, "ho-op", "a", e1).code, ENGINE_OK);
    manual_clock_advance(&f->clock, 1000); /* within a's grant (2 s) */
    assert_int_equal(take_kind(b, ENGINE_EVENT_ELECTED), -1);
    engine_reply ack = resign_with(f, "ho-op", "a", token);
    assert_int_equal(ack.code, ENGINE_OK);
    assert_true(ack.released);
    assert_int_equal(elected_epoch(b), e1 + 1);
    resign(f, "ho-op", "b");
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
}

/* Without the holder's acknowledgement (dead, cut off), the standby is
 * elected when the holder's last grant has passed, not before. */
static void test_engine_handoff_by_operator_without_ack_waits_the_grant(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, req_for_ns("default", "ho-dead", "a"));
    int64_t e1 = elected_epoch(a);
    assert_int_equal(confirm(f, "ho-dead", "a", e1).code, ENGINE_OK); /* grants 2 s */
    campaign(f, b, req_for_ns("default", "ho-dead", "b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    assert_int_equal(handoff(f, "ho-dead", "a", false, "").code, ENGINE_OK);
    manual_clock_advance(&f->clock, 1999);
    assert_int_equal(take_kind(b, ENGINE_EVENT_ELECTED), -1);
    manual_clock_advance(&f->clock, 1);
    assert_int_equal(elected_epoch(b), e1 + 1);
    resign(f, "ho-dead", "b");
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
}

/* Refusals change nothing: another token, an unknown standby, no standby,
 * nobody holding the Lease. */
static void test_engine_handoff_refusals_change_nothing(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new(), *b = sink_new();
    assert_int_equal(handoff(f, "ho-no", "a", false, "").code, ENGINE_FAILED_PRECONDITION);
    campaign(f, a, req_for_ns("default", "ho-no", "a"));
    int64_t e1 = elected_epoch(a);
    engine_reply r = handoff(f, "ho-no", "a", false, "");
    assert_int_equal(r.code, ENGINE_FAILED_PRECONDITION);
    assert_non_null(strstr(r.message, "no standby"));
    campaign(f, b, req_for_ns("default", "ho-no", "b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    r = handoff(f, "ho-no", "a", false, "zed");
    assert_int_equal(r.code, ENGINE_FAILED_PRECONDITION);
    assert_non_null(strstr(r.message, "to_identity: zed"));
    reply_box bx = BOX_INIT;
    assert_int_equal(
        engine_handoff(f->engine, f->ns, "ho-no", "a", "not-the-token", "b", box_done, &bx), 0);
    box_wait(&bx);
    assert_int_equal(bx.r.code, ENGINE_PERMISSION_DENIED);
    /* a still leads and is confirmed; b still stands by. */
    assert_int_equal(confirm(f, "ho-no", "a", e1).code, ENGINE_OK);
    assert_int_equal(take_kind(a, ENGINE_EVENT_LOST), -1);
    assert_int_equal(take_kind(b, ENGINE_EVENT_ELECTED), -1);
    resign(f, "ho-no", "a");
    assert_int_equal(elected_epoch(b), e1 + 1);
    resign(f, "ho-no", "b");
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
}

typedef struct remove_arg {
    store_result res;
    atomic_bool done;
} remove_arg;

static void remove_cb(void *ctx, const store_result *r)
{
    remove_arg *a = ctx;
    a->res = *r;
    atomic_store(&a->done, true);
}

static void remove_on_loop(fixture *f, void *arg)
{
    f->store->ops->remove(f->store, "default", "ho-gone", NULL, 1000, remove_cb, arg);
}

static void noop_on_loop(fixture *f, void *arg)
{
    (void)f;
    (void)arg;
}

/* A handoff whose term ends without a release (the Lease was deleted
 * meanwhile) is dropped with it: the next term's release goes to the next
 * in line, not to the standby that handoff named. */
static void test_engine_handoff_is_dropped_with_a_term_that_was_not_released(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new(), *b = sink_new(), *c = sink_new(), *d = sink_new();
    campaign(f, a, req_for_ns("default", "ho-gone", "a"));
    int64_t e1 = elected_epoch(a);
    assert_int_equal(confirm(f, "ho-gone", "a", e1).code, ENGINE_OK);
    campaign(f, b, req_for_ns("default", "ho-gone", "b"));
    campaign(f, c, req_for_ns("default", "ho-gone", "c"));
    campaign(f, d, req_for_ns("default", "ho-gone", "d"));
    assert_true(wait_kind(d, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    assert_int_equal(handoff(f, "ho-gone", "a", false, "d").code, ENGINE_OK);
    remove_arg rm = {0};
    run_on_loop(f, remove_on_loop, &rm);
    for (int spins = 0; !atomic_load(&rm.done) && spins < 100; spins++)
        run_on_loop(f, noop_on_loop, NULL);
    assert_int_equal(rm.res.status, STORE_OK);
    manual_clock_advance(&f->clock, 2000); /* a's grant: the term ends, not released */
    elected_epoch(b);                      /* the first in line creates the Lease again */
    resign(f, "ho-gone", "b");
    elected_epoch(c);
    assert_int_equal(take_kind(d, ENGINE_EVENT_ELECTED), -1);
    resign(f, "ho-gone", "c");
    resign(f, "ho-gone", "d");
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
    sink_free(c);
    sink_free(d);
}

/* ---------- the Lease's spec.preferredHolder ---------- */

typedef struct preferred_arg {
    const char *lease;
    const char *holder;
    int rc;
} preferred_arg;

static void preferred_on_loop(fixture *f, void *arg)
{
    preferred_arg *p = arg;
    p->rc = store_memory_set_preferred_holder(f->store, f->ns, p->lease, p->holder,
                                              "OldestEmulationVersion");
}

/* Sets the Lease's spec.preferredHolder (and strategy) as another writer
 * would (kubectl, the coordinated leader election controller). */
static void set_preferred(fixture *f, const char *lease, const char *holder)
{
    preferred_arg p = {.lease = lease, .holder = holder, .rc = -1};
    run_on_loop(f, preferred_on_loop, &p);
    assert_int_equal(p.rc, 0);
}

typedef struct read_arg {
    const char *lease;
    store_result res;
    atomic_bool done;
} read_arg;

static void read_cb(void *ctx, const store_result *r)
{
    read_arg *a = ctx;
    a->res = *r;
    atomic_store(&a->done, true);
}

static void read_on_loop(fixture *f, void *arg)
{
    read_arg *a = arg;
    f->store->ops->get(f->store, f->ns, a->lease, 1000, read_cb, a);
}

/* The Lease as the store has it. */
static store_lease read_lease(fixture *f, const char *lease)
{
    read_arg a = {.lease = lease};
    run_on_loop(f, read_on_loop, &a);
    for (int spins = 0; !atomic_load(&a.done) && spins < 100; spins++)
        run_on_loop(f, noop_on_loop, NULL);
    assert_true(atomic_load(&a.done));
    assert_int_equal(a.res.status, STORE_OK);
    return a.res.lease;
}

static void assert_preferred_kept(fixture *f, const char *lease, const char *holder)
{
    store_lease l = read_lease(f, lease);
    assert_string_equal(l.preferred_holder, holder);
    assert_string_equal(l.strategy, "OldestEmulationVersion");
}

/* The Lease names a standby campaigning here: the holder's next Confirm is
 * refused and its term handed off to that standby (not the first in line)
 * with the next epoch, once the holder's last grant has run out (rule 3;
 * its acknowledgement would end the wait sooner, as for any Handoff). A
 * renewal between the preferredHolder write and the Confirm does not end
 * the term: the write kept every field the term wrote. After the handoff,
 * the new holder is the preferred one: nothing more happens, and its
 * renewals and its release keep preferredHolder and strategy. */
/* 5/3/1 s: renewals every 1.5 s, grants of 1 s. */
static engine_campaign_req fast_req(const char *lease, const char *identity)
{
    engine_campaign_req r = req_for_ns("default", lease, identity);
    r.lease_duration_s = 5;
    r.renew_deadline_s = 3;
    r.retry_period_s = 1;
    return r;
}

static void test_engine_preferred_standby_gets_the_term_at_the_next_confirm(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new(), *b = sink_new(), *c = sink_new();
    campaign(f, a, fast_req("pref", "a"));
    int64_t e1 = elected_epoch(a);
    campaign(f, b, fast_req("pref", "b"));
    campaign(f, c, fast_req("pref", "c"));
    assert_true(wait_kind(c, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    manual_clock_advance(&f->clock, 900);
    assert_int_equal(confirm(f, "pref", "a", e1).code, ENGINE_OK); /* grants until +1900 */
    set_preferred(f, "pref", "c");
    manual_clock_advance(&f->clock, 700); /* a renewal (at +1500) lands meanwhile */
    assert_int_equal(take_kind(a, ENGINE_EVENT_LOST), -1);
    engine_reply r = confirm(f, "pref", "a", e1);
    assert_int_equal(r.code, ENGINE_FAILED_PRECONDITION);
    assert_non_null(strstr(r.message, "preferredHolder"));
    assert_true(lost_handed_off(a));
    manual_clock_advance(&f->clock, 299); /* a's last grant has not run out */
    assert_int_equal(take_kind(c, ENGINE_EVENT_ELECTED), -1);
    manual_clock_advance(&f->clock, 1);
    assert_int_equal(elected_epoch(c), e1 + 1);
    assert_int_equal(take_kind(b, ENGINE_EVENT_ELECTED), -1);
    assert_preferred_kept(f, "pref", "c");
    /* The preferred holder leads: confirmed and renewed, never handed off. */
    for (int k = 0; k < 8; k++) {
        manual_clock_advance(&f->clock, 500);
        assert_int_equal(confirm(f, "pref", "c", e1 + 1).code, ENGINE_OK);
    }
    assert_int_equal(take_kind(c, ENGINE_EVENT_LOST), -1);
    assert_true(read_lease(f, "pref").renew_time_us > harness_wall_us() - 2000000);
    assert_preferred_kept(f, "pref", "c");
    assert_true(resign(f, "pref", "c").released);
    assert_int_equal(elected_epoch(b), e1 + 2);
    assert_preferred_kept(f, "pref", "c");
    resign(f, "pref", "b");
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
    sink_free(c);
}

/* A preferredHolder that does not campaign here (perhaps through another
 * replica), or that already leads, changes nothing: the holder is
 * confirmed and renewed, the standby waits. */
static void test_engine_preferred_holder_not_a_standby_here_changes_nothing(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, req_for_ns("default", "pref-no", "a"));
    int64_t e1 = elected_epoch(a);
    campaign(f, b, req_for_ns("default", "pref-no", "b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    const char *preferred[] = {"elsewhere", "a"};
    for (int p = 0; p < 2; p++) {
        set_preferred(f, "pref-no", preferred[p]);
        for (int k = 0; k < 4; k++) {
            manual_clock_advance(&f->clock, 1000);
            assert_int_equal(confirm(f, "pref-no", "a", e1).code, ENGINE_OK);
        }
        assert_preferred_kept(f, "pref-no", preferred[p]);
    }
    assert_int_equal(take_kind(a, ENGINE_EVENT_LOST), -1);
    assert_int_equal(take_kind(b, ENGINE_EVENT_ELECTED), -1);
    assert_int_equal(read_lease(f, "pref-no").transitions, e1);
    resign(f, "pref-no", "a");
    assert_int_equal(elected_epoch(b), e1 + 1);
    resign(f, "pref-no", "b");
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
}

/* When the Lease falls free, the preferred standby is next in line, ahead
 * of those who waited longer, and ListCandidates shows it so. */
static void test_engine_next_in_line_is_the_preferred_holder(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){.replica_name = "replica-0"});
    sink *a = sink_new(), *b = sink_new(), *c = sink_new();
    campaign(f, a, req_for_ns("default", "pref-line", "a"));
    int64_t e1 = elected_epoch(a);
    campaign(f, b, req_for_ns("default", "pref-line", "b"));
    campaign(f, c, req_for_ns("default", "pref-line", "c"));
    assert_true(wait_kind(c, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    set_preferred(f, "pref-line", "c");
    cand_box *l = list_candidates(f, "pref-line");
    assert_int_equal(l->n, 3);
    assert_string_equal(l->rows[0].identity, "a");
    assert_string_equal(l->rows[1].identity, "c");
    assert_string_equal(l->rows[2].identity, "b");
    assert_true(resign(f, "pref-line", "a").released); /* no Confirm: no handoff */
    assert_int_equal(elected_epoch(c), e1 + 1);
    assert_int_equal(take_kind(b, ENGINE_EVENT_ELECTED), -1);
    assert_preferred_kept(f, "pref-line", "c");
    resign(f, "pref-line", "c");
    assert_int_equal(elected_epoch(b), e1 + 2);
    resign(f, "pref-line", "b");
    fixture_stop(f);
    sink_free(a);
    sink_free(b);
    sink_free(c);
}

/* ---------- handoffs across replicas (docs/design.md, rule 3) ---------- */

/* Stops both replicas and frees the fixture. */
static void replicas_stop(fixture *f, engine *e2)
{
    fixture_replica_free(f, e2);
    fixture_stop(f);
}

/* A campaign through replica e (its Elected tokens are noted, as campaign()). */
static void campaign_at(engine *e, sink *s, engine_campaign_req r)
{
    s->req = r;
    s->has_req = true;
    s->id = engine_campaign(e, &r, listener_of(s));
    assert_true(s->id > 0);
}

static engine_reply handoff_at(engine *e, const char *lease, const char *to)
{
    reply_box b = BOX_INIT;
    assert_int_equal(engine_handoff(e, "default", lease, "", "", to, box_done, &b), 0);
    box_wait(&b);
    return b.r;
}

static engine_reply confirm_at(engine *e, const char *lease, const char *identity, int64_t epoch)
{
    reply_box b = BOX_INIT;
    char token[ENGINE_TOKEN_MAX];
    harness_token_get(token, "default", lease, identity, epoch);
    assert_int_equal(engine_confirm(e, "default", lease, identity, epoch, token, box_done, &b), 0);
    box_wait(&b);
    return b.r;
}

typedef struct lease_io {
    store_lease lease;
    store_status status;
    bool done;
} lease_io;

static void lease_io_done(void *ctx, const store_result *r)
{
    lease_io *io = ctx;
    io->status = r->status;
    if (r->status == STORE_OK)
        io->lease = r->lease;
    io->done = true;
}

static void lease_create_on_loop(fixture *f, void *arg)
{
    lease_io *io = arg;
    f->store->ops->create(f->store, &io->lease, 1000, lease_io_done, io);
}

static bool lease_io_done_yet(void *arg)
{
    return ((lease_io *)arg)->done;
}

/* Writes a Lease as another replica would have: holder at epoch, with a
 * nonce, handed_to as given (0: unmarked). */
static void put_lease(fixture *f, const char *name, const char *holder, int64_t epoch,
                      int64_t handed_to)
{
    lease_io io = {0};
    snprintf(io.lease.ns, sizeof io.lease.ns, "default");
    snprintf(io.lease.name, sizeof io.lease.name, "%s", name);
    snprintf(io.lease.holder, sizeof io.lease.holder, "%s", holder);
    snprintf(io.lease.term_nonce, sizeof io.lease.term_nonce, "bm9uY2Utb2YtYW5vdGhlcg");
    io.lease.lease_duration_s = 15;
    io.lease.transitions = epoch;
    io.lease.acquire_time_us = io.lease.renew_time_us = harness_wall_us();
    io.lease.handed_to = handed_to;
    run_on_loop(f, lease_create_on_loop, &io);
    assert_true(harness_run_until(lease_io_done_yet, &io, 5000));
    assert_int_equal(io.status, STORE_OK);
}

static void fail_next_write_on_loop(fixture *f, void *arg)
{
    store_memory_set_writes_fail(f->store, *(store_status *)arg, 1);
}

static int64_t writes_of(fixture *f)
{
    int64_t n = 0;
    run_on_loop(f, harness_read_writes, &n);
    return n;
}

/* An operator's Handoff reaches the replica that does not serve the term
 * (R), naming a standby campaigning through R: R asks through the Lease
 * (handoff-to, answered at once), the serving replica (S) ends the term
 * (Lost HANDED_OFF) and, once the holder's last grant has passed (it does
 * not acknowledge), writes the next term for that standby, which R claims
 * and starts: epoch + 1, a token that confirms, never before the holder's
 * last grant ran out, nobody else in between (a standby on S stays one). */
static void test_engine_handoff_at_the_other_replica_elects_its_standby(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    engine *r = fixture_replica_new(f);
    sink *a = sink_new(), *b = sink_new(), *x = sink_new();
    campaign(f, a, req_for_ns("default", "xh", "a"));
    int64_t e1 = elected_epoch(a);
    campaign(f, b, req_for_ns("default", "xh", "b")); /* a standby on S */
    campaign_at(r, x, req_for_ns("default", "xh", "x"));
    assert_true(wait_kind(x, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    engine_reply c = confirm(f, "xh", "a", e1);
    assert_int_equal(c.code, ENGINE_OK);
    int64_t granted_until = harness_now_ms() + c.valid_for_ms;

    engine_reply h = handoff_at(r, "xh", "x");
    assert_int_equal(h.code, ENGINE_OK);
    assert_string_equal(h.holder, "x");
    assert_int_equal(h.epoch, e1);
    assert_true(lost_handed_off(a));
    assert_int_equal(
        wait_kind(x, ENGINE_EVENT_ELECTED, (int)(granted_until - harness_now_ms() - 1)), -1);
    int i = wait_kind(x, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_int_equal(x->events[i].epoch, e1 + 1);
    assert_false(x->events[i].resumed);
    assert_true(x->at_ms[i] >= granted_until); /* a's last grant never overlaps */
    assert_int_equal(take_kind(b, ENGINE_EVENT_ELECTED), -1);
    assert_int_equal(confirm_at(r, "xh", "x", e1 + 1).code, ENGINE_OK);
    store_lease l = read_lease(f, "xh");
    assert_string_equal(l.holder, "x");
    assert_int_equal(l.transitions, e1 + 1);
    assert_string_equal(l.handoff_to, "");
    assert_int_equal(l.handed_to, 0); /* claimed */
    /* x's term lives on R: confirmed past a renewal there (every 5 s), and
     * b on S stays a standby. */
    int64_t until = harness_now_ms() + 6000;
    while (harness_now_ms() < until) {
        assert_int_equal(confirm_at(r, "xh", "x", e1 + 1).code, ENGINE_OK);
        assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 500) < 0);
    }
    assert_true(read_lease(f, "xh").renew_time_us > harness_wall_us() - 2000000);
    replicas_stop(f, r);
    sink_free(a);
    sink_free(b);
    sink_free(x);
}

/* Without to_identity, R picks its own next in line; the holder's
 * acknowledgement (its library's Resign with the token) lets S transfer at
 * once. */
static void test_engine_handoff_at_the_other_replica_picks_its_next_in_line(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    engine *r = fixture_replica_new(f);
    sink *a = sink_new(), *p = sink_new(), *q = sink_new();
    campaign(f, a, req_for_ns("default", "xh-next", "a"));
    int64_t e1 = elected_epoch(a);
    assert_int_equal(confirm(f, "xh-next", "a", e1).code, ENGINE_OK);
    campaign_at(r, p, req_for_ns("default", "xh-next", "p"));
    assert_true(wait_kind(p, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    campaign_at(r, q, req_for_ns("default", "xh-next", "q"));
    assert_true(wait_kind(q, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    char token[ENGINE_TOKEN_MAX];
    harness_token_get(token, "default", "xh-next", "a", e1);

    engine_reply h = handoff_at(r, "xh-next", "");
    assert_int_equal(h.code, ENGINE_OK);
    assert_string_equal(h.holder, "p");
    assert_true(lost_handed_off(a));
    int64_t acked = harness_now_ms();
    engine_reply ack = resign_with(f, "xh-next", "a", token);
    assert_int_equal(ack.code, ENGINE_OK);
    assert_true(ack.released);
    int i = wait_kind(p, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_int_equal(p->events[i].epoch, e1 + 1);
    assert_true(p->at_ms[i] - acked < 100); /* at once, not at the grant's end */
    assert_int_equal(take_kind(q, ENGINE_EVENT_ELECTED), -1);
    replicas_stop(f, r);
    sink_free(a);
    sink_free(p);
    sink_free(q);
}

/* R does not serve the term and the standby named does not campaign
 * through R: failed_precondition, and nothing is written. */
static void test_engine_handoff_at_the_other_replica_for_a_stranger_writes_nothing(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    engine *r = fixture_replica_new(f);
    sink *a = sink_new(), *x = sink_new();
    campaign(f, a, req_for_ns("default", "xh-no", "a"));
    int64_t e1 = elected_epoch(a);
    campaign_at(r, x, req_for_ns("default", "xh-no", "x"));
    assert_true(wait_kind(x, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    int64_t before = writes_of(f);
    engine_reply h = handoff_at(r, "xh-no", "zed");
    assert_int_equal(h.code, ENGINE_FAILED_PRECONDITION);
    assert_non_null(strstr(h.message, "call Handoff on the replica it campaigns through"));
    assert_int_equal(handoff_at(r, "xh-no", "a").code, ENGINE_FAILED_PRECONDITION); /* the holder */
    assert_int_equal(writes_of(f), before);
    assert_int_equal(confirm(f, "xh-no", "a", e1).code, ENGINE_OK);
    replicas_stop(f, r);
    sink_free(a);
    sink_free(x);
}

/* A transfer handed to a standby here whose claim conflicts: nothing
 * starts, the claim is not tried again, and the Lease expires as usual
 * (its leaseDurationSeconds after it was seen), then the standby acquires
 * a new term. */
static void test_engine_handed_to_claim_that_conflicts_starts_nothing(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    sink *x = sink_new(), *y = sink_new();
    put_lease(f, "xh-conflict", "x", 5, 5);
    store_status st = STORE_CONFLICT;
    run_on_loop(f, fail_next_write_on_loop, &st);
    int64_t seen = harness_now_ms();
    campaign(f, x, req_for_ns("default", "xh-conflict", "x"));
    assert_int_equal(wait_kind(x, ENGINE_EVENT_ELECTED, 1000), -1);
    /* Another campaign arriving tries the next acquisition: no new claim. */
    campaign(f, y, req_for_ns("default", "xh-conflict", "y"));
    assert_int_equal(wait_kind(x, ENGINE_EVENT_ELECTED, 13900), -1);
    int i = wait_kind(x, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_true(x->at_ms[i] >= seen + 15000);
    assert_int_equal(x->events[i].epoch, 6);
    assert_int_equal(take_kind(y, ENGINE_EVENT_ELECTED), -1);
    resign(f, "xh-conflict", "x");
    resign(f, "xh-conflict", "y");
    fixture_stop(f);
    sink_free(x);
    sink_free(y);
}

/* A record naming a standby here without the handed-to mark is another
 * replica's term: never claimed (nothing written), acquired only once it
 * has expired. A mark for another epoch is no mark. */
static void test_engine_unmarked_record_naming_a_standby_is_not_claimed(void **state)
{
    (void)state;
    fixture *f = fixture_start_manual((engine_config){0});
    sink *x = sink_new(), *y = sink_new();
    put_lease(f, "xh-plain", "x", 5, 0);
    put_lease(f, "xh-stale", "y", 5, 4);
    int64_t before = writes_of(f);
    campaign(f, x, req_for_ns("default", "xh-plain", "x"));
    campaign(f, y, req_for_ns("default", "xh-stale", "y"));
    assert_int_equal(wait_kind(x, ENGINE_EVENT_ELECTED, 14900), -1);
    assert_int_equal(take_kind(y, ENGINE_EVENT_ELECTED), -1);
    assert_int_equal(writes_of(f), before);
    int i = wait_kind(x, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_int_equal(x->events[i].epoch, 6);
    assert_int_equal(elected_epoch(y), 6);
    resign(f, "xh-plain", "x");
    resign(f, "xh-stale", "y");
    fixture_stop(f);
    sink_free(x);
    sink_free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_engine_check_epoch_current_only_for_the_live_term),
        cmocka_unit_test(test_engine_check_epoch_of_absent_leases_follows_nothing),
        cmocka_unit_test(test_engine_list_candidates_in_line_order),
        cmocka_unit_test(test_engine_list_candidates_of_unfollowed_lease_reads_nothing),
        cmocka_unit_test(test_engine_handoff_by_holder_elects_the_named_standby_at_once),
        cmocka_unit_test(test_engine_handoff_by_operator_waits_for_the_holder),
        cmocka_unit_test(test_engine_handoff_by_operator_without_ack_waits_the_grant),
        cmocka_unit_test(test_engine_handoff_refusals_change_nothing),
        cmocka_unit_test(test_engine_handoff_is_dropped_with_a_term_that_was_not_released),
        cmocka_unit_test(test_engine_preferred_standby_gets_the_term_at_the_next_confirm),
        cmocka_unit_test(test_engine_preferred_holder_not_a_standby_here_changes_nothing),
        cmocka_unit_test(test_engine_next_in_line_is_the_preferred_holder),
        cmocka_unit_test(test_engine_handoff_at_the_other_replica_elects_its_standby),
        cmocka_unit_test(test_engine_handoff_at_the_other_replica_picks_its_next_in_line),
        cmocka_unit_test(test_engine_handoff_at_the_other_replica_for_a_stranger_writes_nothing),
        cmocka_unit_test(test_engine_handed_to_claim_that_conflicts_starts_nothing),
        cmocka_unit_test(test_engine_unmarked_record_naming_a_standby_is_not_claimed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
