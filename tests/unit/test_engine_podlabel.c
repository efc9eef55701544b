/* Leader Pod labels (docs/design.md, rule 9): set after the term starts,
 * removed before the next term starts — on resignation, after a detached
 * holder's last grant, and when an earlier run left one recorded — other
 * labels kept, and a campaign's Pod checked against the caller's address.
 * The engine runs on a manual clock over the memory store
 * (engine_harness.h); the checks at Elected run inside the event callback,
 * on the loop thread, so they see the store as it was at that instant. */
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "support/engine_harness.h"
#include "ops/ops.h"
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
    snprintf(r.label.ns, sizeof r.label.ns, "default");
    snprintf(r.label.pod, sizeof r.label.pod, "%s", pod);
    snprintf(r.label.key, sizeof r.label.key, "%s", KEY);
    snprintf(r.label.value, sizeof r.label.value, "leader");
    return r;
}

/* The record a replica writes for label key=value on ns/pod for Lease
 * default/lease, computed here as docs/design.md (rule 9) specifies it,
 * independently of the engine: HMAC-SHA256 under the term key over the
 * NUL-separated context, Lease and label, base64url without padding. */
static void signed_record(const char *lease, const char *ns, const char *pod, const char *key,
                          const char *value, char *out, size_t n)
{
    const char *parts[] = {"kubelease-pod-label-v1", "default", lease, ns, pod, key, value};
    unsigned char msg[2048], mac[32];
    size_t len = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        size_t m = strlen(parts[i]) + 1;
        memcpy(msg + len, parts[i], m);
        len += m;
    }
    unsigned mac_len = 0;
    assert_non_null(HMAC(EVP_sha256(), harness_term_key, (int)sizeof harness_term_key - 1, msg, len,
                         mac, &mac_len));
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    char b64[48];
    size_t o = 0;
    for (size_t i = 0; i < mac_len; i += 3) {
        unsigned v = (unsigned)mac[i] << 16 | (i + 1 < mac_len ? (unsigned)mac[i + 1] << 8 : 0) |
                     (i + 2 < mac_len ? mac[i + 2] : 0);
        b64[o++] = abc[(v >> 18) & 63];
        b64[o++] = abc[(v >> 12) & 63];
        if (i + 1 < mac_len)
            b64[o++] = abc[(v >> 6) & 63];
        if (i + 2 < mac_len)
            b64[o++] = abc[v & 63];
    }
    b64[o] = '\0';
    snprintf(out, n, "%s/%s %s=%s %s", ns, pod, key, value, b64);
}

/* Whether s has seen a POD_LABEL event in state st (any, from the start). */
typedef struct label_seen {
    sink *s;
    engine_label_state st;
    int found;
} label_seen;

static bool label_event_seen(void *arg)
{
    label_seen *w = arg;
    pthread_mutex_lock(&w->s->mu);
    for (int i = 0; i < w->s->n && w->found < 0; i++)
        if (w->s->events[i].kind == ENGINE_EVENT_POD_LABEL && w->s->events[i].label_state == w->st)
            w->found = i;
    pthread_mutex_unlock(&w->s->mu);
    return w->found >= 0;
}

/* The index of s's first POD_LABEL event in state st, waited for; -1. */
static int wait_label(sink *s, engine_label_state st, int timeout_ms)
{
    label_seen w = {s, st, -1};
    harness_run_until(label_event_seen, &w, timeout_ms);
    return w.found;
}

/* SetPodLabel (pod NULL: no label), answered. */
static engine_reply set_label(fixture *f, const char *lease, const char *identity,
                              const char *token, const char *ns, const char *pod, const char *peer)
{
    engine_pod_label l = {0};
    if (pod) {
        snprintf(l.ns, sizeof l.ns, "%s", ns);
        snprintf(l.pod, sizeof l.pod, "%s", pod);
        snprintf(l.key, sizeof l.key, "%s", KEY);
        snprintf(l.value, sizeof l.value, "leader");
    }
    reply_box b = BOX_INIT;
    assert_int_equal(
        engine_set_pod_label(f->engine, "default", lease, identity, token, &l, peer, box_done, &b),
        0);
    box_wait(&b);
    return b.r;
}

typedef struct pod_arg {
    const char *ns, *pod, *key, *ip;
    const char *value; /* out */
} pod_arg;

static void put_pod_on_loop(fixture *f, void *arg)
{
    pod_arg *p = arg;
    store_memory_pod_put(f->store, p->ns, p->pod, p->ip);
}

static void read_label_on_loop(fixture *f, void *arg)
{
    pod_arg *p = arg;
    p->value = store_memory_pod_label(f->store, p->ns, p->pod, p->key);
}

static void put_pod_in(fixture *f, const char *ns, const char *pod, const char *ip)
{
    pod_arg p = {ns, pod, NULL, ip, NULL};
    run_on_loop(f, put_pod_on_loop, &p);
}

static void put_pod(fixture *f, const char *pod, const char *ip)
{
    put_pod_in(f, "default", pod, ip);
}

static const char *label_in(fixture *f, const char *ns, const char *pod, const char *key)
{
    pod_arg p = {ns, pod, key, NULL, NULL};
    run_on_loop(f, read_label_on_loop, &p);
    return p.value;
}

static const char *label_of(fixture *f, const char *pod, const char *key)
{
    return label_in(f, "default", pod, key);
}

/* Runs the loop until Pod pod carries (on) or does not carry (!on) KEY. */
typedef struct label_wait {
    fixture *f;
    const char *ns, *pod;
    bool on;
} label_wait;

static bool label_is(void *arg)
{
    label_wait *w = arg;
    return (label_in(w->f, w->ns, w->pod, KEY) != NULL) == w->on;
}

static bool wait_pod_label(fixture *f, const char *ns, const char *pod, bool on)
{
    label_wait w = {f, ns, pod, on};
    return harness_run_until(label_is, &w, 5000);
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

static const char *const label_keys[] = {KEY, "other.example.com/role", NULL};

static fixture *start(const char *const *keys)
{
    engine_config cfg = {.pod_label_keys = keys};
    fixture *f = fixture_start_manual(cfg);
    put_pod(f, "pod-a", "10.0.0.1");
    put_pod(f, "pod-b", "10.0.0.2");
    set_other_label(f, "pod-a");
    return f;
}

static int setup(void **state)
{
    *state = start(label_keys);
    return 0;
}

/* --pod-label-keys empty: the feature is off. */
static int setup_off(void **state)
{
    *state = start(NULL);
    return 0;
}

static int teardown(void **state)
{
    fixture_stop(*state);
    return 0;
}

/* Starts b's campaign with a sink that notes, at Elected, which Pods carry
 * the label. */
static void campaign_watched(fixture *f, sink *b, watched *wb, engine_campaign_req rb)
{
    b->req = rb;
    b->has_req = true; /* the harness keeps its term token */
    b->id =
        engine_campaign(f->engine, &rb, (engine_listener){watched_on_event, watched_on_close, wb});
}

static void test_engine_pod_label_moves_on_resign_never_on_two_pods(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    watched wb = {b, f, {"pod-a", "pod-b"}, {false, false}, false};
    campaign(f, a, labelled("podlabel", "a", "pod-a"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(wait_label(a, ENGINE_LABEL_ACCEPTED, 1000) >= 0);
    /* Set after the term started, and the stream hears of it. */
    assert_true(wait_label(a, ENGINE_LABEL_SET, 1000) >= 0);
    assert_string_equal(label_of(f, "pod-a", KEY), "leader");
    campaign_watched(f, b, &wb, labelled("podlabel", "b", "pod-b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);

    resign(f, "podlabel", "a");
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    /* At b's election a's label was already gone, b's not yet set. */
    assert_false(wb.labelled_at_elected[0]);
    assert_false(wb.labelled_at_elected[1]);
    assert_true(wait_pod_label(f, "default", "pod-b", true));
    assert_null(label_of(f, "pod-a", KEY));
    assert_string_equal(label_of(f, "pod-b", KEY), "leader");
    assert_string_equal(label_of(f, "pod-a", "app"), "kv"); /* others' labels survive */

    resign(f, "podlabel", "b");
    assert_true(wait_closed(b, 5000));
    assert_true(wait_pod_label(f, "default", "pod-b", false)); /* with nobody waiting, too */
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
    campaign_watched(f, b, &wb, labelled("crash", "b", "pod-b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    assert_true(wait_pod_label(f, "default", "pod-a", true));

    engine_campaign_detach(f->engine, a->id); /* the holder crashed */
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 10000) >= 0);
    assert_false(wb.labelled_at_elected[0]);
    assert_true(wait_pod_label(f, "default", "pod-b", true));
    assert_null(label_of(f, "pod-a", KEY));
    resign(f, "crash", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* A handoff moves the label like a resignation: off the old holder's Pod
 * before the named standby is elected. */
static void test_engine_pod_label_moves_on_handoff(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    watched wb = {b, f, {"pod-a", "pod-b"}, {false, false}, false};
    campaign(f, a, labelled("handoff", "a", "pod-a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    campaign_watched(f, b, &wb, labelled("handoff", "b", "pod-b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    assert_true(wait_pod_label(f, "default", "pod-a", true));
    reply_box box = BOX_INIT;
    assert_int_equal(engine_handoff(f->engine, "default", "handoff", "a", a->events[i].term_token,
                                    "b", box_done, &box),
                     0);
    box_wait(&box);
    assert_int_equal(box.r.code, ENGINE_OK);
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_false(wb.labelled_at_elected[0]);
    assert_true(wait_pod_label(f, "default", "pod-b", true));
    assert_null(label_of(f, "pod-a", KEY));
    resign(f, "handoff", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

typedef struct writes_wait {
    fixture *f;
    int64_t above;
} writes_wait;

static bool writes_above(void *arg)
{
    writes_wait *w = arg;
    int64_t n = 0;
    run_on_loop(w->f, harness_read_writes, &n);
    return n > w->above;
}

static void slow_store(fixture *f, void *arg)
{
    store_memory_set_latency(f->store, *(int *)arg);
}

/* Rule 3 (release only after the holder's deadline): an operator's handoff
 * that the holder does not acknowledge writes nothing, and takes no label
 * off, before the holder's last grant has run out, even when a Pod request
 * of the term ends during that wait (here the label's re-application after
 * a renewal, on a slow apiserver) and so asks the Lease what comes next. */
static void test_engine_handoff_waits_the_grant_when_a_pod_request_ends_first(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    watched wb = {b, f, {"pod-a", "pod-b"}, {false, false}, false};
    campaign(f, a, labelled("ho-pod", "a", "pod-a"));
    int64_t e1 = a->events[wait_kind(a, ENGINE_EVENT_ELECTED, 5000)].epoch;
    campaign_watched(f, b, &wb, labelled("ho-pod", "b", "pod-b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);
    assert_true(wait_pod_label(f, "default", "pod-a", true));
    int latency = 300;
    run_on_loop(f, slow_store, &latency);
    /* The holder confirms until the next renewal lands; its label's
     * re-application is then in flight. */
    writes_wait w = {f, 0};
    run_on_loop(f, harness_read_writes, &w.above);
    for (int k = 0; k < 10 && !writes_above(&w); k++) {
        assert_int_equal(confirm(f, "ho-pod", "a", e1).code, ENGINE_OK);
        harness_run_until(writes_above, &w, 1000);
    }
    assert_true(writes_above(&w));
    int64_t writes = w.above + 1;
    int64_t at = harness_now_ms();
    engine_reply c = confirm(f, "ho-pod", "a", e1);
    assert_int_equal(c.code, ENGINE_OK);
    assert_true(c.valid_for_ms > latency);
    int64_t granted_until = at + c.valid_for_ms;
    reply_box box = BOX_INIT;
    assert_int_equal(engine_handoff(f->engine, "default", "ho-pod", "", "", "b", box_done, &box),
                     0);
    box_wait(&box);
    assert_int_equal(box.r.code, ENGINE_OK);
    assert_true(wait_kind(a, ENGINE_EVENT_LOST, 1000) >= 0);
    /* Up to the last grant's end: no Lease write, the label on a's Pod. */
    manual_clock_advance(&f->clock, granted_until - 1 - harness_now_ms());
    assert_int_equal(take_kind(b, ENGINE_EVENT_ELECTED), -1);
    assert_non_null(label_of(f, "pod-a", KEY));
    int64_t now_writes = 0;
    run_on_loop(f, harness_read_writes, &now_writes);
    assert_int_equal(now_writes, writes);
    /* Then the label comes off, and the standby gets the next term. */
    int i = wait_kind(b, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_int_equal(b->events[i].epoch, e1 + 1);
    assert_true(b->at_ms[i] >= granted_until);
    assert_false(wb.labelled_at_elected[0]);
    resign(f, "ho-pod", "b");
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
    assert_true(wait_pod_label(f, "default", "pod-b", true));
    /* Remove it behind the engine's back (manual time: the loop is ours). */
    other_label o = {"pod-b", false};
    f->store->ops->pod_label(f->store, "default", "pod-b", KEY, NULL, 1000, other_done, &o);
    assert_true(harness_run_until(other_done_yet, &o, 1000));
    assert_null(label_of(f, "pod-b", KEY));
    assert_true(confirm_through_a_renewal(f, "reapply", "a", a->events[i].epoch));
    assert_true(wait_pod_label(f, "default", "pod-b", true));
    resign(f, "reapply", "a");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

/* A renewal answered late is no licence to label (rule 9; the simulator's
 * seed 306): the replica pauses with its renewal in flight, past the
 * term's renew deadline, and on resuming takes the renewal's OK answer
 * before its timers (the answer's timer is due first). A set sent then
 * lands after the grant has ended, when another replica may already have
 * removed the label and elected the next holder. A set goes out only with
 * enough of the grant, from the renewal's send time, left to land within
 * it. Manual clock: renewals every 5 s, renewDeadline 10 s, grants 2 s. */
static void test_engine_pod_label_not_set_on_a_late_renewal_answer(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    campaign(f, a, labelled("late-answer", "a", "pod-a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    int64_t epoch = a->events[i].epoch;
    int64_t t0 = harness_now_ms(); /* the term's acquisition was sent now */
    assert_true(wait_pod_label(f, "default", "pod-a", true));
    /* Off behind the engine's back; the next renewal would put it back. */
    other_label o = {"pod-a", false};
    f->store->ops->pod_label(f->store, "default", "pod-a", KEY, NULL, 1000, other_done, &o);
    assert_true(harness_run_until(other_done_yet, &o, 1000));
    assert_null(label_of(f, "pod-a", KEY));
    assert_int_equal(harness_now_ms(), t0);
    /* Every request now takes 1 s; the holder confirms until the renewal
     * sent at t0 + 5 s is in flight. */
    store_memory_set_latency(f->store, 1000);
    for (int64_t t = t0 + 1000; t <= t0 + 5200; t += 700) {
        manual_clock_advance_to(&f->clock, t);
        assert_int_equal(confirm(f, "late-answer", "a", epoch).code, ENGINE_OK);
    }
    int64_t writes = 0;
    run_on_loop(f, harness_read_writes, &writes);
    /* The pause: 10 s pass at once, nothing runs meanwhile. */
    f->clock.now_ms += 10000;
    int64_t after = 0;
    for (int waited = 0; waited < 5000; waited += 50) {
        harness_sleep_ms(50);
        assert_null(label_of(f, "pod-a", KEY));
    }
    run_on_loop(f, harness_read_writes, &after);
    assert_true(after > writes); /* the renewal landed, answered after its deadline */
    assert_true(take_kind(a, ENGINE_EVENT_LOST) >= 0); /* and the term ended */
    store_memory_set_latency(f->store, 0);
    assert_true(wait_closed(a, 20000));
    sink_free(a);
}

/* A resume may carry another label: the old Pod's comes off before the new
 * Pod's is set; a resume without a label clears it. */
static void test_engine_pod_label_changed_on_resume(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *a2 = sink_new(), *a3 = sink_new();
    campaign(f, a, labelled("change", "a", "pod-a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_true(wait_pod_label(f, "default", "pod-a", true));
    engine_campaign_req r = labelled("change", "a", "pod-b");
    r.resume_epoch = a->events[i].epoch;
    snprintf(r.term_token, sizeof r.term_token, "%s", a->events[i].term_token);
    campaign(f, a2, r);
    int j = wait_kind(a2, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    assert_int_equal(a2->events[j].epoch, a->events[i].epoch); /* the same term */
    assert_true(wait_pod_label(f, "default", "pod-b", true));
    assert_null(label_of(f, "pod-a", KEY));

    engine_campaign_req none = req_for_ns("default", "change", "a");
    none.resume_epoch = r.resume_epoch;
    snprintf(none.term_token, sizeof none.term_token, "%s", a->events[i].term_token);
    campaign(f, a3, none);
    assert_true(wait_kind(a3, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(wait_pod_label(f, "default", "pod-b", false));
    resign(f, "change", "a");
    assert_true(wait_closed(a3, 5000));
    sink_free(a);
    sink_free(a2);
    sink_free(a3);
}

/* SetPodLabel: a standby's label is accepted for its term; the holder's
 * moves (the old Pod's off before the new one's is set, answered once on)
 * and goes; never two Pods, and the term goes on throughout. */
static void test_engine_set_pod_label_moves_the_holders_label(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    campaign(f, a, req_for_ns("default", "setl", "a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    int64_t epoch = a->events[i].epoch;
    const char *token = a->events[i].term_token;
    campaign(f, b, req_for_ns("default", "setl", "b"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 5000) >= 0);

    engine_reply r = set_label(f, "setl", "b", "", "default", "pod-b", NULL);
    assert_int_equal(r.code, ENGINE_OK);
    assert_int_equal(r.label_state, ENGINE_LABEL_ACCEPTED);
    assert_null(label_of(f, "pod-b", KEY)); /* not before b leads */

    r = set_label(f, "setl", "a", token, "default", "pod-a", NULL);
    assert_int_equal(r.code, ENGINE_OK);
    assert_int_equal(r.label_state, ENGINE_LABEL_SET);
    assert_string_equal(label_of(f, "pod-a", KEY), "leader"); /* on when answered */
    assert_int_equal(get_holder(f, "setl", true).epoch, epoch);

    r = set_label(f, "setl", "a", token, "default", "pod-b", NULL);
    assert_int_equal(r.code, ENGINE_OK);
    assert_int_equal(r.label_state, ENGINE_LABEL_SET);
    assert_null(label_of(f, "pod-a", KEY));
    assert_string_equal(label_of(f, "pod-b", KEY), "leader");
    assert_true(wait_label(a, ENGINE_LABEL_REMOVED, 1000) >= 0); /* pod-a's, on its stream */

    r = set_label(f, "setl", "a", token, "default", NULL, NULL);
    assert_int_equal(r.code, ENGINE_OK);
    assert_int_equal(r.label_state, ENGINE_LABEL_REMOVED);
    assert_null(label_of(f, "pod-b", KEY));
    assert_int_equal(confirm(f, "setl", "a", epoch).code, ENGINE_OK); /* the same term */

    /* b's accepted label is set when it leads. */
    resign(f, "setl", "a");
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(wait_pod_label(f, "default", "pod-b", true));
    resign(f, "setl", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* Refused SetPodLabels change nothing: not the term's token, a key not
 * allowed, no campaign here, an address that is not the Pod's. */
static void test_engine_set_pod_label_refusals_change_nothing(void **state)
{
    fixture *f = *state;
    sink *a = sink_new();
    campaign(f, a, labelled("refuse", "a", "pod-a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    assert_true(wait_pod_label(f, "default", "pod-a", true));
    int64_t epoch = a->events[i].epoch;
    const char *token = a->events[i].term_token;

    engine_reply r = set_label(f, "refuse", "a", "not-the-token", "default", "pod-b", NULL);
    assert_int_equal(r.code, ENGINE_PERMISSION_DENIED);
    assert_non_null(strstr(r.message, "term_token"));
    r = set_label(f, "refuse", "nobody", "", "default", "pod-b", NULL);
    assert_int_equal(r.code, ENGINE_NOT_FOUND);
    r = set_label(f, "refuse", "a", token, "default", "pod-b", "10.0.0.1"); /* pod-a's address */
    assert_int_equal(r.code, ENGINE_PERMISSION_DENIED);
    assert_null(strstr(r.message, "10.0.0.2")); /* pod-b's address is not told */
    engine_pod_label other = {.ns = "default", .pod = "pod-b", .key = "app", .value = "x"};
    reply_box box = BOX_INIT;
    assert_int_equal(engine_set_pod_label(f->engine, "default", "refuse", "a", token, &other, NULL,
                                          box_done, &box),
                     0);
    box_wait(&box);
    assert_int_equal(box.r.code, ENGINE_PERMISSION_DENIED);
    assert_non_null(strstr(box.r.message, "--pod-label-keys"));

    assert_string_equal(label_of(f, "pod-a", KEY), "leader");
    assert_null(label_of(f, "pod-b", KEY));
    assert_string_equal(label_of(f, "pod-a", "app"), "kv");
    assert_int_equal(confirm(f, "refuse", "a", epoch).code, ENGINE_OK);
    resign(f, "refuse", "a");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

/* A label that cannot be set (kubeleased lacks RBAC on pods) costs nothing
 * but the label: the stream and the SetPodLabel hear why, the term goes
 * on through renewals, and the label is set at the renewal after the Pod
 * permission is back. */
static void pods_forbidden(fixture *f, void *arg)
{
    store_memory_set_pod_labels_fail(f->store, *(store_status *)arg);
}

static void test_engine_pod_label_that_fails_never_costs_the_term(void **state)
{
    fixture *f = *state;
    store_status st = STORE_FORBIDDEN;
    run_on_loop(f, pods_forbidden, &st);
    sink *a = sink_new();
    campaign(f, a, labelled("fails", "a", "pod-a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    int f_i = wait_label(a, ENGINE_LABEL_FAILED, 1000);
    assert_true(f_i >= 0);
    assert_non_null(strstr(a->events[f_i].message, "pod-a"));
    int64_t epoch = a->events[i].epoch;
    engine_reply r = set_label(f, "fails", "a", a->events[i].term_token, "default", "pod-a", NULL);
    assert_int_equal(r.code, ENGINE_OK); /* taken on, not on the Pod */
    assert_int_equal(r.label_state, ENGINE_LABEL_FAILED);
    assert_non_null(strstr(r.message, "forbidden"));
    assert_true(confirm_through_a_renewal(f, "fails", "a", epoch));
    assert_null(label_of(f, "pod-a", KEY));
    st = STORE_OK;
    run_on_loop(f, pods_forbidden, &st);
    assert_true(confirm_through_a_renewal(f, "fails", "a", epoch));
    assert_true(wait_pod_label(f, "default", "pod-a", true));
    assert_int_equal(get_holder(f, "fails", true).epoch, epoch);
    resign(f, "fails", "a");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

/* A label in another namespace than the Lease's: that namespace's Pod. */
static void test_engine_pod_label_in_another_namespace(void **state)
{
    fixture *f = *state;
    put_pod_in(f, "team-a", "pod-a", "10.0.1.1");
    sink *a = sink_new();
    engine_campaign_req r = labelled("crossns", "a", "pod-a");
    snprintf(r.label.ns, sizeof r.label.ns, "team-a");
    campaign(f, a, r);
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(wait_pod_label(f, "team-a", "pod-a", true));
    assert_null(label_of(f, "pod-a", KEY)); /* not default/pod-a */
    resign(f, "crossns", "a");
    assert_true(wait_closed(a, 5000));
    assert_true(wait_pod_label(f, "team-a", "pod-a", false));
    sink_free(a);
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
    assert_int_equal(ops_status_page(r, &p->html, &len, &ct), 0);
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
    assert_string_equal(p.label, "default/pod-a " KEY "=leader");
    assert_non_null(strstr(p.html, "<th>Leader Pod</th>"));
    assert_non_null(strstr(p.html, "default/pod-a \xc2\xb7 " KEY "=leader"));
    free(p.html);
    resign(f, "shown", "a");
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

/* Refused labels never refuse the campaign: a key not allowed, a Pod the
 * HTTP layer found is not the caller's, an address that is not the Pod's.
 * The campaign is elected without a label and its stream hears why; the
 * refusal by address tells nothing of the Pod (whether it exists, its
 * address). */
static void expect_label_refused(fixture *f, engine_campaign_req r, const char *why)
{
    sink *a = sink_new();
    campaign(f, a, r);
    int i = wait_label(a, ENGINE_LABEL_REFUSED, 5000);
    assert_true(i >= 0);
    assert_non_null(strstr(a->events[i].message, why));
    assert_null(strstr(a->events[i].message, "10.0.0.1"));
    assert_string_equal(a->events[i].label.pod, r.label.pod);
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_int_equal(confirm(f, r.name, r.identity, get_holder(f, r.name, true).epoch).code,
                     ENGINE_OK);
    assert_null(label_of(f, r.label.pod, KEY));
    resign(f, r.name, r.identity);
    assert_true(wait_closed(a, 5000));
    sink_free(a);
}

static void test_engine_refused_label_never_refuses_the_campaign(void **state)
{
    fixture *f = *state;
    engine_campaign_req r = labelled("refused-key", "a", "pod-a");
    snprintf(r.label.key, sizeof r.label.key, "app");
    expect_label_refused(f, r, "--pod-label-keys");

    r = labelled("refused-claim", "a", "pod-a");
    snprintf(r.label_refused, sizeof r.label_refused, "pod_name: not the caller's pod");
    expect_label_refused(f, r, "not the caller's pod");

    r = labelled("refused-address", "a", "pod-a");
    snprintf(r.peer_ip, sizeof r.peer_ip, "10.0.0.2"); /* pod-b's address */
    expect_label_refused(f, r, "status.podIP");
    r = labelled("refused-absent", "a", "no-such-pod");
    snprintf(r.peer_ip, sizeof r.peer_ip, "10.0.0.2");
    expect_label_refused(f, r, "status.podIP");
    assert_string_equal(label_of(f, "pod-a", "app"), "kv");
}

/* Dual-stack: any of the Pod's addresses, whole. */
static void test_engine_pod_label_address_of_a_dual_stack_pod(void **state)
{
    fixture *f = *state;
    put_pod(f, "pod-d", "10.0.0.4 fd00::44");
    engine_campaign_req rp = labelled("dual", "p", "pod-d");
    snprintf(rp.peer_ip, sizeof rp.peer_ip, "fd00::4");
    expect_label_refused(f, rp, "status.podIP");
    sink *b = sink_new();
    engine_campaign_req rb = labelled("dual", "b", "pod-d");
    snprintf(rb.peer_ip, sizeof rb.peer_ip, "fd00::44");
    campaign(f, b, rb);
    assert_true(wait_label(b, ENGINE_LABEL_ACCEPTED, 5000) >= 0);
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(wait_pod_label(f, "default", "pod-d", true));
    resign(f, "dual", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(b);
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

/* An expired Lease recording label (as written by someone), with that label
 * on pod-a (key key, value leader). */
static void leave_record(fixture *f, const char *lease, const char *label, const char *key)
{
    create_arg c = {
        .lease = {.ns = "default", .holder = "gone", .lease_duration_s = 1, .transitions = 4}};
    snprintf(c.lease.name, sizeof c.lease.name, "%s", lease);
    snprintf(c.lease.pod_label, sizeof c.lease.pod_label, "%s", label);
    run_on_loop(f, create_on_loop, &c);
    assert_true(harness_run_until(create_done_yet, &c, 1000));
    other_label o = {"pod-a", false};
    f->store->ops->pod_label(f->store, "default", "pod-a", key, "leader", 1000, other_done, &o);
    assert_true(harness_run_until(other_done_yet, &o, 1000));
}

/* An earlier run left pod-a labelled and recorded in the Lease: the next
 * acquisition removes it first. */
static void test_engine_stale_pod_label_cleared_before_acquisition(void **state)
{
    fixture *f = *state;
    char rec[STORE_POD_LABEL_MAX];
    signed_record("stale", "default", "pod-a", KEY, "leader", rec, sizeof rec);
    leave_record(f, "stale", rec, KEY);

    sink *b = sink_new();
    watched wb = {b, f, {"pod-a", "pod-b"}, {false, false}, false};
    campaign_watched(f, b, &wb, labelled("stale", "b", "pod-b"));
    int i = wait_kind(b, ENGINE_EVENT_ELECTED, 10000);
    assert_true(i >= 0);
    assert_int_equal(b->events[i].epoch, 5);
    assert_false(wb.labelled_at_elected[0]);
    assert_true(wait_pod_label(f, "default", "pod-b", true));
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

static store_lease read_lease(fixture *f, const char *name)
{
    rec_arg r;
    memset(&r, 0, sizeof r);
    f->store->ops->get(f->store, "default", name, 1000, rec_done, &r);
    assert_true(harness_run_until(rec_done_yet, &r, 1000));
    return r.lease;
}

static void watch_until_cleared(fixture *f, const char *lease)
{
    sink *w = sink_new();
    w->id = engine_watch(f->engine, "default", lease, NULL, listener_of(w));
    assert_true(wait_kind(w, ENGINE_EVENT_HOLDER, 1000) >= 0);
    harness_sleep_ms(2000); /* past the record's 1 s by observed time */
    for (int k = 0; k < 100 && read_lease(f, lease).pod_label[0]; k++)
        harness_sleep_ms(100);
    engine_unwatch(f->engine, w->id);
    assert_true(wait_closed(w, 1000));
    sink_free(w);
}

static void test_engine_stale_pod_label_cleared_when_seen(void **state)
{
    fixture *f = *state;
    char rec[STORE_POD_LABEL_MAX];
    signed_record("seen", "default", "pod-a", KEY, "leader", rec, sizeof rec);
    leave_record(f, "seen", rec, KEY);
    watch_until_cleared(f, "seen");
    assert_null(label_of(f, "pod-a", KEY));
    assert_string_equal(label_of(f, "pod-a", "app"), "kv");
    store_lease l = read_lease(f, "seen");
    assert_string_equal(l.pod_label, "");
    assert_string_equal(l.holder, "gone"); /* nothing else written */
    assert_int_equal(l.transitions, 4);
}

/* The term resumed on another replica while this one's copy of it runs
 * out (its stream reset): this replica takes the label off, but the other
 * replica's set, sent within its grant from that resume, lands after the
 * removal. That removal was sent while the record was another replica's
 * live term, so it is not taken as final for that record: when the record
 * has expired and a standby here is elected, the label comes off first
 * (kl_sim seed 6216 of 3600 s). */
typedef struct lease_write {
    store_lease lease;
    bool done;
} lease_write;

static void lease_write_done(void *ctx, const store_result *r)
{
    lease_write *w = ctx;
    assert_int_equal(r->status, STORE_OK);
    w->done = true;
}

static void lease_write_on_loop(fixture *f, void *arg)
{
    lease_write *w = arg;
    f->store->ops->update(f->store, &w->lease, 1000, lease_write_done, w);
}

static bool lease_write_done_yet(void *arg)
{
    return ((lease_write *)arg)->done;
}

static void test_engine_pod_label_removed_during_a_resume_elsewhere_removed_again(void **state)
{
    fixture *f = *state;
    sink *a = sink_new(), *b = sink_new();
    watched wb = {b, f, {"pod-a", "pod-b"}, {false, false}, false};
    campaign(f, a, labelled("resumed-away", "a", "pod-a"));
    assert_true(wait_kind(a, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_true(wait_pod_label(f, "default", "pod-a", true));
    engine_campaign_detach(f->engine, a->id); /* a's stream reset */
    /* a resumes its term on another replica: the same holder and epoch, a
     * later renewTime, written on this replica's last write. */
    lease_write w = {0};
    w.lease = read_lease(f, "resumed-away");
    w.lease.renew_time_us += 1000000;
    run_on_loop(f, lease_write_on_loop, &w);
    assert_true(harness_run_until(lease_write_done_yet, &w, 1000));
    /* This replica's copy of the term runs out and takes the label off. */
    assert_true(wait_pod_label(f, "default", "pod-a", false));
    /* The other replica's set, sent within its grant, lands after that. */
    other_label o = {"pod-a", false};
    f->store->ops->pod_label(f->store, "default", "pod-a", KEY, "leader", 1000, other_done, &o);
    assert_true(harness_run_until(other_done_yet, &o, 1000));
    /* That replica dies; a standby here is elected once the record expired. */
    campaign_watched(f, b, &wb, labelled("resumed-away", "b", "pod-b"));
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 30000) >= 0);
    assert_false(wb.labelled_at_elected[0]);
    assert_true(wait_pod_label(f, "default", "pod-b", true));
    assert_null(label_of(f, "pod-a", KEY));
    resign(f, "resumed-away", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(a);
    sink_free(b);
}

/* Whoever may write a Lease may write its annotation: a record this service
 * did not write (a bad MAC, the old unsigned form, another Lease's), or one
 * naming a key not in --pod-label-keys, is never acted on — the Pod keeps
 * its label — and the annotation is dropped. */
static void test_engine_forged_pod_label_annotation_touches_no_pod(void **state)
{
    fixture *f = *state;
    char good[STORE_POD_LABEL_MAX], rec[STORE_POD_LABEL_MAX + 8];
    const struct {
        const char *lease, *key;
        char label[STORE_POD_LABEL_MAX];
    } cases[] = {{"forged-mac", KEY, ""},
                 {"forged-old", KEY, "pod-a " KEY "=leader"},
                 {"forged-lease", KEY, ""},
                 {"forged-key", "app", ""},
                 {"forged-trunc", KEY, ""}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *lease = cases[i].lease;
        snprintf(rec, sizeof rec, "%s", cases[i].label);
        if (i == 0) { /* a MAC made without the key */
            signed_record(lease, "default", "pod-a", KEY, "leader", good, sizeof good);
            snprintf(rec, sizeof rec, "%.*sAAAA", (int)strlen(good) - 4, good);
        } else if (i == 2) { /* copied from another Lease */
            signed_record("elsewhere", "default", "pod-a", KEY, "leader", rec, sizeof rec);
        } else if (i == 3) { /* kubeleased's, but not a key it may touch now */
            signed_record(lease, "default", "pod-a", "app", "leader", rec, sizeof rec);
        } else if (i == 4) { /* no MAC */
            signed_record(lease, "default", "pod-a", KEY, "leader", good, sizeof good);
            snprintf(rec, sizeof rec, "%.*s", (int)(strrchr(good, ' ') - good), good);
        }
        leave_record(f, lease, rec, cases[i].key);
        watch_until_cleared(f, lease);
        assert_string_equal(label_of(f, "pod-a", cases[i].key), "leader");
        assert_string_equal(read_lease(f, lease).pod_label, "");
    }
    assert_string_equal(label_of(f, "pod-a", "app"), "leader");
}

/* --pod-label-keys empty: a label is refused at campaign time, and not even
 * a record this service signed makes it write a Pod. */
static void test_engine_labels_off_never_write_a_pod(void **state)
{
    fixture *f = *state;
    char rec[STORE_POD_LABEL_MAX];
    signed_record("off", "default", "pod-a", KEY, "leader", rec, sizeof rec);
    leave_record(f, "off", rec, KEY);
    sink *b = sink_new();
    campaign(f, b, labelled("off", "b", "pod-b"));
    int i = wait_label(b, ENGINE_LABEL_REFUSED, 5000);
    assert_true(i >= 0);
    assert_non_null(strstr(b->events[i].message, "--pod-label-keys is empty"));
    assert_true(wait_kind(b, ENGINE_EVENT_ELECTED, 10000) >= 0);
    assert_string_equal(label_of(f, "pod-a", KEY), "leader");
    assert_null(label_of(f, "pod-b", KEY));
    resign(f, "off", "b");
    assert_true(wait_closed(b, 5000));
    sink_free(b);
}

static engine_pod_label pl(const char *ns, const char *pod, const char *key, const char *value)
{
    engine_pod_label l = {0};
    snprintf(l.ns, sizeof l.ns, "%s", ns);
    snprintf(l.pod, sizeof l.pod, "%s", pod);
    snprintf(l.key, sizeof l.key, "%s", key);
    snprintf(l.value, sizeof l.value, "%s", value);
    return l;
}

static void test_engine_validate_pod_label(void **state)
{
    (void)state;
    char msg[256];
    engine_pod_label ok[] = {pl("", "", "", ""), pl("default", "kv-0", KEY, "leader"),
                             pl("team-a", "kv-0", "role", "")};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        assert_int_equal(engine_validate_pod_label(&ok[i], msg, sizeof msg), 0);
    const struct {
        engine_pod_label l;
        const char *field;
    } bad[] = {
        {pl("d", "kv-0", "", ""), "pod_label_key"},
        {pl("d", "", "role", "x"), "pod_name"},
        {pl("", "", "", "x"), "pod_name"},
        {pl("d", "KV", "role", "x"), "pod_name"},
        {pl("", "kv-0", "role", "x"), "pod_namespace"},
        {pl("Team", "kv-0", "role", "x"), "pod_namespace"},
        {pl("d", "kv-0", "/role", "x"), "pod_label_key"},
        {pl("d", "kv-0", "Bad_Prefix/role", "x"), "pod_label_key"},
        {pl("d", "kv-0", "role-", "x"), "pod_label_key"},
        {pl("d", "kv-0", "a=b", "x"), "pod_label_key"},
        {pl("d", "kv-0", "role", "-x"), "pod_label_value"},
        {pl("d", "kv-0", "role", "a b"), "pod_label_value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(engine_validate_pod_label(&bad[i].l, msg, sizeof msg), -1);
        assert_non_null(strstr(msg, bad[i].field));
    }
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_engine_pod_label_moves_on_resign_never_on_two_pods),
        T(test_engine_pod_label_of_detached_holder_removed_before_next_term),
        T(test_engine_pod_label_moves_on_handoff),
        T(test_engine_handoff_waits_the_grant_when_a_pod_request_ends_first),
        T(test_engine_pod_label_reapplied_at_renewal),
        T(test_engine_pod_label_not_set_on_a_late_renewal_answer),
        T(test_engine_pod_label_changed_on_resume),
        T(test_engine_pod_label_removed_during_a_resume_elsewhere_removed_again),
        T(test_engine_set_pod_label_moves_the_holders_label),
        T(test_engine_set_pod_label_refusals_change_nothing),
        T(test_engine_pod_label_that_fails_never_costs_the_term),
        T(test_engine_pod_label_in_another_namespace),
        T(test_engine_pod_label_on_status_page),
        T(test_engine_refused_label_never_refuses_the_campaign),
        T(test_engine_pod_label_address_of_a_dual_stack_pod),
        T(test_engine_stale_pod_label_cleared_before_acquisition),
        T(test_engine_stale_pod_label_cleared_when_seen),
        T(test_engine_forged_pod_label_annotation_touches_no_pod),
        cmocka_unit_test_setup_teardown(test_engine_labels_off_never_write_a_pod, setup_off,
                                        teardown),
        cmocka_unit_test(test_engine_validate_pod_label),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
