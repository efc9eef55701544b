/* Leader Pod labels (docs/design.md, rule 9): set after the term starts,
 * removed before the next term starts — on resignation, after a detached
 * holder's last grant, and when an earlier run left one recorded — other
 * labels kept, and a campaign's Pod checked against the caller's address.
 * The engine runs on a manual clock over the memory store
 * (engine_harness.h); the checks at Elected run inside the event callback,
 * on the loop thread, so they see the store as it was at that instant. */
#include "support/engine_harness.h"
#include "http/http_ops.h"
#include "store/memory.h"

#define KEY "example.com/role"

/* A sink that, at Elected, records which of two Pods carry the label. */
typedef struct watched {
    sink *s;
    fixture *f;
    const char *pods[2];
    bool labelled_at_elected[2];
    bool elected;
} watched;

static void watched_on_event(void *ctx, const engine_event *ev)
{
    watched *w = ctx;
    if (ev->kind == ENGINE_EVENT_ELECTED && !w->elected) {
        w->elected = true;
        for (int i = 0; i < 2; i++)
            w->labelled_at_elected[i] =
                store_memory_pod_label(w->f->store, "default", w->pods[i], KEY) != NULL;
    }
    sink_on_event(w->s, ev);
}

static void watched_on_close(void *ctx)
{
    sink_on_close(((watched *)ctx)->s);
}

static engine_campaign_req labelled(const char *lease, const char *identity, const char *pod)
{
    engine_campaign_req r = req_for_ns("default", lease, identity);
    snprintf(r.pod, sizeof r.pod, "%s", pod);
    snprintf(r.label_key, sizeof r.label_key, "%s", KEY);
    snprintf(r.label_value, sizeof r.label_value, "leader");
    return r;
}

typedef struct pod_arg {
    const char *pod, *key, *ip;
    const char *value; /* out */
} pod_arg;

static void put_pod_on_loop(fixture *f, void *arg)
{
    pod_arg *p = arg;
    store_memory_pod_put(f->store, "default", p->pod, p->ip);
}

static void read_label_on_loop(fixture *f, void *arg)
{
    pod_arg *p = arg;
    p->value = store_memory_pod_label(f->store, "default", p->pod, p->key);
}

static void put_pod(fixture *f, const char *pod, const char *ip)
{
    pod_arg p = {pod, NULL, ip, NULL};
    run_on_loop(f, put_pod_on_loop, &p);
}

static const char *label_of(fixture *f, const char *pod, const char *key)
{
    pod_arg p = {pod, key, NULL, NULL};
    run_on_loop(f, read_label_on_loop, &p);
    return p.value;
}

typedef struct other_label {
    const char *pod;
    bool done;
} other_label;

static void other_done(void *ctx, const store_result *r)
{
    other_label *o = ctx;
    assert_int_equal(r->status, STORE_OK);
    o->done = true;
}

static void set_other_on_loop(fixture *f, void *arg)
{
    other_label *o = arg;
    f->store->ops->pod_label(f->store, "default", o->pod, "app", "kv", 1000, other_done, o);
}

static bool other_done_yet(void *arg)
{
    return ((other_label *)arg)->done;
}

/* Someone else's label on the Pod: kubelease must leave it alone. */
static void set_other_label(fixture *f, const char *pod)
{
    other_label o = {pod, false};
    run_on_loop(f, set_other_on_loop, &o);
    assert_true(harness_run_until(other_done_yet, &o, 1000));
}

static int setup(void **state)
{
    engine_config cfg = {0};
    fixture *f = fixture_start_manual(cfg);
    put_pod(f, "pod-a", "10.0.0.1");
    put_pod(f, "pod-b", "10.0.0.2");
    set_other_label(f, "pod-a");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_stop(*state);
    return 0;
}

static void test_engine_pod_label_moves_on_resign_never_on_two_pods(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    watched wb = {b, f, {"pod-a", "pod-b"}, {false, false}, false};
    campaign(f, a, labelled("podlabel", "a", "pod-a"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    /* Set after the term started: by the time the loop settles. */
    harness_sleep_ms(10);
    assert_non_null(label_of(f, "pod-a", KEY));
    assert_string_equal(label_of(f, "pod-a", KEY), "leader");
    engine_campaign_req rb = labelled("podlabel", "b", "pod-b");
    b->req = rb;
    b->has_req = true; /* the harness keeps its term token */
    b->id =
        engine_campaign(f->engine, &rb, (engine_listener){watched_on_event, watched_on_close, &wb});
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);

    resign(f, "podlabel", "a");
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    /* At b's election a's label was already gone, b's not yet set. */
    assert_false(wb.labelled_at_elected[0]);
    assert_false(wb.labelled_at_elected[1]);
    harness_sleep_ms(10);
    assert_null(label_of(f, "pod-a", KEY));
    assert_string_equal(label_of(f, "pod-b", KEY), "leader");
    assert_string_equal(label_of(f, "pod-a", "app"), "kv"); /* others' labels survive */

    resign(f, "podlabel", "b");
    assert_true(wait_closed(b, 5000));
    harness_sleep_ms(10);
    assert_null(label_of(f, "pod-b", KEY)); /* a resignation with nobody waiting, too */
    assert_true(wait_closed(a, 5000));
    sink_free(a);
    sink_free(b);
}

static void test_engine_pod_label_of_detached_holder_removed_before_next_term(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    watched wb = {b, f, {"pod-a", "pod-b"}, {false, false}, false};
    campaign(f, a, labelled("crash", "a", "pod-a"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    engine_campaign_req rb = labelled("crash", "b", "pod-b");
    b->req = rb;
    b->has_req = true; /* the harness keeps its term token */
    b->id =
        engine_campaign(f->engine, &rb, (engine_listener){watched_on_event, watched_on_close, &wb});
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    harness_sleep_ms(10);
    assert_string_equal(label_of(f, "pod-a", KEY), "leader");

    engine_campaign_detach(f->engine, a->id); /* the holder crashed */
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 10000) >= 0);
    assert_false(wb.labelled_at_elected[0]);
    harness_sleep_ms(10);
    assert_null(label_of(f, "pod-a", KEY));
    assert_string_equal(label_of(f, "pod-b", KEY), "leader");
    resign(f, "crash", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* A handoff (issue 15) moves the label like a resignation: off the old
 * holder's Pod before the named standby is elected. */
static void test_engine_pod_label_moves_on_handoff(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    watched wb = {b, f, {"pod-a", "pod-b"}, {false, false}, false};
    campaign(f, a, labelled("handoff", "a", "pod-a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    engine_campaign_req rb = labelled("handoff", "b", "pod-b");
    b->req = rb;
    b->has_req = true; /* the harness keeps its term token */
    b->id =
        engine_campaign(f->engine, &rb, (engine_listener){watched_on_event, watched_on_close, &wb});
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    harness_sleep_ms(10);
    assert_string_equal(label_of(f, "pod-a", KEY), "leader");
    reply_box box = BOX_INIT;
    assert_int_equal(engine_handoff(f->engine, "default", "handoff", "a", a->events[i].term_token,
                                    "b", box_done, &box),
                     0);
    box_wait(&box);
    assert_int_equal(box.r.code, ENGINE_OK);
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_false(wb.labelled_at_elected[0]);
    harness_sleep_ms(10);
    assert_null(label_of(f, "pod-a", KEY));
    assert_string_equal(label_of(f, "pod-b", KEY), "leader");
    resign(f, "handoff", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* A label someone removes during the term is back after the next renewal. */
static void test_engine_pod_label_reapplied_at_renewal(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    campaign(f, a, labelled("reapply", "a", "pod-b"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    harness_sleep_ms(10);
    assert_non_null(label_of(f, "pod-b", KEY));
    /* Remove it behind the engine's back (manual time: the loop is ours). */
    other_label o = {"pod-b", false};
    f->store->ops->pod_label(f->store, "default", "pod-b", KEY, NULL, 1000, other_done, &o);
    assert_true(harness_run_until(other_done_yet, &o, 1000));
    assert_null(label_of(f, "pod-b", KEY));
    assert_true(confirm_through_a_renewal(f, "reapply", "a", a->events[i].epoch));
    harness_sleep_ms(10);
    assert_string_equal(label_of(f, "pod-b", KEY), "leader");
    resign(f, "reapply", "a");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

/* The holder changes its label on a resume (the client library's
 * kl_set_pod_label): the old Pod's label comes off before the new Pod's is
 * set; a resume without a label clears it. */
static void test_engine_pod_label_changed_on_resume(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *a2 = sink_new(), *a3 = sink_new();
    campaign(f, a, labelled("change", "a", "pod-a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    harness_sleep_ms(10);
    assert_string_equal(label_of(f, "pod-a", KEY), "leader");
    engine_campaign_req r = labelled("change", "a", "pod-b");
    r.resume_epoch = a->events[i].epoch;
    snprintf(r.term_token, sizeof r.term_token, "%s", a->events[i].term_token);
    campaign(f, a2, r);
    int j = wait_kind(a2, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    assert_int_equal(a2->events[j].epoch, a->events[i].epoch); /* the same term */
    for (int k = 0; k < 50 && !label_of(f, "pod-b", KEY); k++)
        harness_sleep_ms(10);
    assert_null(label_of(f, "pod-a", KEY));
    assert_string_equal(label_of(f, "pod-b", KEY), "leader");

    engine_campaign_req none = req_for_ns("default", "change", "a");
    none.resume_epoch = r.resume_epoch;
    snprintf(none.term_token, sizeof none.term_token, "%s", a->events[i].term_token);
    campaign(f, a3, none);
    assert_true(wait_kind(a3, ENGINE_EVENT_ELECTED, 5000) >= 0);
    for (int k = 0; k < 50 && label_of(f, "pod-b", KEY); k++)
        harness_sleep_ms(10);
    assert_null(label_of(f, "pod-b", KEY));
    resign(f, "change", "a");
    assert_true(wait_closed(a3, 5000));
    sink_free(a);
    sink_free(a2);
    sink_free(a3);
}

/* The status page (and ListLeases) show each Lease's labelled Pod. */
typedef struct page {
    bool done;
    char *html;
    char label[STORE_POD_LABEL_MAX];
} page;

static void page_done(void *ctx, const engine_reply *r)
{
    page *p = ctx;
    size_t len;
    const char *ct;
    assert_int_equal(r->n_leases, 1);
    snprintf(p->label, sizeof p->label, "%s", r->leases[0].pod_label);
    assert_int_equal(http_ops_status_page(r, &p->html, &len, &ct), 0);
    p->done = true;
}

static bool page_done_yet(void *arg)
{
    return ((page *)arg)->done;
}

static void test_engine_pod_label_on_status_page(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    campaign(f, a, labelled("shown", "a", "pod-a"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    page p = {false, NULL, ""};
    assert_int_equal(engine_list(f->engine, page_done, &p), 0);
    assert_true(harness_run_until(page_done_yet, &p, 1000));
    assert_string_equal(p.label, "pod-a " KEY "=leader");
    assert_non_null(strstr(p.html, "<th>Leader Pod</th>"));
    assert_non_null(strstr(p.html, "pod-a \xc2\xb7 " KEY "=leader"));
    free(p.html);
    resign(f, "shown", "a");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

/* --auth none: the Pod must have the caller's address. */
static void test_engine_pod_label_refused_for_another_pods_address(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    engine_campaign_req ra = labelled("address", "a", "pod-a");
    snprintf(ra.peer_ip, sizeof ra.peer_ip, "10.0.0.2"); /* pod-b's address */
    campaign(f, a, ra);
    int i = wait_kind(a, ENGINE_EVENT_REFUSED, 5000);
    assert_true(i >= 0);
    assert_int_equal(a->events[i].code, ENGINE_PERMISSION_DENIED);
    assert_non_null(strstr(a->events[i].message, "pod-a"));
    assert_true(wait_closed(a, 5000));
    assert_null(label_of(f, "pod-a", KEY));

    engine_campaign_req rm = labelled("address", "m", "no-such-pod");
    snprintf(rm.peer_ip, sizeof rm.peer_ip, "10.0.0.2");
    sink *m = sink_new();
    campaign(f, m, rm);
    i = wait_kind(m, ENGINE_EVENT_REFUSED, 5000);
    assert_true(i >= 0);
    assert_non_null(strstr(m->events[i].message, "no pod"));

    /* Dual-stack: any of the Pod's addresses, whole. */
    put_pod(f, "pod-d", "10.0.0.4 fd00::44");
    engine_campaign_req rp = labelled("address", "p", "pod-d");
    snprintf(rp.peer_ip, sizeof rp.peer_ip, "fd00::4");
    sink *p = sink_new();
    campaign(f, p, rp);
    assert_true(wait_kind(p, ENGINE_EVENT_REFUSED, 5000) >= 0);
    engine_campaign_req rb = labelled("address", "b", "pod-d");
    snprintf(rb.peer_ip, sizeof rb.peer_ip, "fd00::44");
    campaign(f, b, rb);
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    harness_sleep_ms(10);
    assert_string_equal(label_of(f, "pod-d", KEY), "leader");
    resign(f, "address", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
    sink_free(m);
    sink_free(p);
}

typedef struct create_arg {
    store_lease lease;
    bool done;
} create_arg;

static void create_done(void *ctx, const store_result *r)
{
    create_arg *c = ctx;
    assert_int_equal(r->status, STORE_OK);
    c->done = true;
}

static void create_on_loop(fixture *f, void *arg)
{
    create_arg *c = arg;
    f->store->ops->create(f->store, &c->lease, 1000, create_done, c);
}

static bool create_done_yet(void *arg)
{
    return ((create_arg *)arg)->done;
}

/* An earlier run left pod-a labelled and recorded in the Lease: the next
 * acquisition removes it first. */
static void test_engine_stale_pod_label_cleared_before_acquisition(void **state)
{
    fixture *f = *state;
    create_arg c = {.lease = {.ns = "default",
                              .name = "stale",
                              .holder = "gone",
                              .lease_duration_s = 1,
                              .transitions = 4,
                              .pod_label = "pod-a " KEY "=leader"}};
    run_on_loop(f, create_on_loop, &c);
    assert_true(harness_run_until(create_done_yet, &c, 1000));
    other_label o = {"pod-a", false};
    f->store->ops->pod_label(f->store, "default", "pod-a", KEY, "leader", 1000, other_done, &o);
    assert_true(harness_run_until(other_done_yet, &o, 1000));

    sink *b = sink_new();
    watched wb = {b, f, {"pod-a", "pod-b"}, {false, false}, false};
    engine_campaign_req rb = labelled("stale", "b", "pod-b");
    b->req = rb;
    b->has_req = true; /* the harness keeps its term token */
    b->id =
        engine_campaign(f->engine, &rb, (engine_listener){watched_on_event, watched_on_close, &wb});
    int i = wait_kind(b, ENGINE_EVENT_ELECTED, 10000);
    assert_true(i >= 0);
    assert_int_equal(b->events[i].epoch, 5);
    assert_false(wb.labelled_at_elected[0]);
    harness_sleep_ms(10);
    assert_string_equal(label_of(f, "pod-b", KEY), "leader");
    assert_string_equal(label_of(f, "pod-a", "app"), "kv");
    resign(f, "stale", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(b);
}

/* The same with nobody campaigning: a Lease seen (here by a holder watch)
 * whose term is over loses its stale label and then the annotation. */
typedef struct rec_arg {
    bool done;
    store_lease lease;
} rec_arg;

static void rec_done(void *ctx, const store_result *r)
{
    rec_arg *a = ctx;
    assert_int_equal(r->status, STORE_OK);
    a->lease = r->lease;
    a->done = true;
}

static bool rec_done_yet(void *arg)
{
    return ((rec_arg *)arg)->done;
}

static void test_engine_stale_pod_label_cleared_when_seen(void **state)
{
    fixture *f = *state;
    create_arg c = {.lease = {.ns = "default",
                              .name = "seen",
                              .holder = "gone",
                              .lease_duration_s = 1,
                              .transitions = 2,
                              .pod_label = "pod-a " KEY "=leader"}};
    run_on_loop(f, create_on_loop, &c);
    assert_true(harness_run_until(create_done_yet, &c, 1000));
    other_label o = {"pod-a", false};
    f->store->ops->pod_label(f->store, "default", "pod-a", KEY, "leader", 1000, other_done, &o);
    assert_true(harness_run_until(other_done_yet, &o, 1000));

    sink *w = sink_new();
    w->id = engine_watch(f->engine, "default", "seen", listener_of(w));
    assert_true(wait_kind(w, ENGINE_EVENT_HOLDER, 1000) >= 0);
    harness_sleep_ms(500);
    assert_string_equal(label_of(f, "pod-a", KEY), "leader"); /* not expired yet */
    harness_sleep_ms(1500);
    assert_null(label_of(f, "pod-a", KEY));
    assert_string_equal(label_of(f, "pod-a", "app"), "kv");
    rec_arg r;
    memset(&r, 0, sizeof r);
    f->store->ops->get(f->store, "default", "seen", 1000, rec_done, &r);
    assert_true(harness_run_until(rec_done_yet, &r, 1000));
    assert_string_equal(r.lease.pod_label, "");
    assert_string_equal(r.lease.holder, "gone"); /* nothing else written */
    assert_int_equal(r.lease.transitions, 2);
    engine_unwatch(f->engine, w->id);
    assert_true(wait_closed(w, 1000));
    sink_free(w);
}

static void test_engine_validate_pod_label(void **state)
{
    (void)state;
    char msg[256];
    assert_int_equal(engine_validate_pod_label("", "", "", msg, sizeof msg), 0);
    assert_int_equal(engine_validate_pod_label("kv-0", KEY, "leader", msg, sizeof msg), 0);
    assert_int_equal(engine_validate_pod_label("kv-0", "role", "", msg, sizeof msg), 0);
    const struct {
        const char *pod, *key, *value, *field;
    } bad[] = {
        {"kv-0", "", "", "pod_label_key"},
        {"", "role", "x", "pod_name"},
        {"", "", "x", "pod_name"},
        {"KV", "role", "x", "pod_name"},
        {"kv-0", "/role", "x", "pod_label_key"},
        {"kv-0", "Bad_Prefix/role", "x", "pod_label_key"},
        {"kv-0", "role-", "x", "pod_label_key"},
        {"kv-0", "a=b", "x", "pod_label_key"},
        {"kv-0", "role", "-x", "pod_label_value"},
        {"kv-0", "role", "a b", "pod_label_value"},
        {"kv-0", "role", "0123456789012345678901234567890123456789012345678901234567890123",
         "pod_label_value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(
            engine_validate_pod_label(bad[i].pod, bad[i].key, bad[i].value, msg, sizeof msg), -1);
        assert_non_null(strstr(msg, bad[i].field));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_engine_pod_label_moves_on_resign_never_on_two_pods,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_engine_pod_label_of_detached_holder_removed_before_next_term, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_pod_label_moves_on_handoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_pod_label_reapplied_at_renewal, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_pod_label_changed_on_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_pod_label_on_status_page, setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_pod_label_refused_for_another_pods_address,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_stale_pod_label_cleared_before_acquisition,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_engine_stale_pod_label_cleared_when_seen, setup,
                                        teardown),
        cmocka_unit_test(test_engine_validate_pod_label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
