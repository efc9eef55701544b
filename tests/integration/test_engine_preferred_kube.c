/* Handoffs between two replicas of kubeleased: the Lease's
 * spec.preferredHolder (Kubernetes' coordinated leader election), and a
 * Handoff asked of the replica that does not serve the term, against the
 * real kube-apiserver of the test control plane,
 * which keeps the field only with the CoordinatedLeaderElection gate (the
 * harness turns it on). Two engines stand for two replicas of kubeleased,
 * with the ServiceAccount's credentials; a foreign writer (cluster admin,
 * as kubectl would) sets the field with a merge patch (docs/design.md,
 * rule 3). */
#include "support/engine_harness.h"
#include "kube/lease_json.h"
#include "kube_env.h"

static fixture *replica_start(void)
{
    loop *l = loop_new();
    fixture *f = fixture_start(l, sa_store(l));
    f->ns = test_ns;
    return f;
}

/* ---------- the foreign writer: the apiserver as cluster admin ---------- */

/* GET (patch NULL) or merge-PATCH the Lease as cluster admin; returns it
 * as decoded. */
static kube_lease lease_request(const char *lease, const char *patch)
{
    char path[512];
    snprintf(path, sizeof path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", test_ns,
             lease);
    size_t len;
    char *body = admin_request(path, patch, &len);
    kube_lease l;
    char err[256];
    if (kube_lease_decode(body, len, &l, err, sizeof err) != 0)
        fail_msg("bad Lease: %s", err);
    free(body);
    return l;
}

static void set_preferred(const char *lease, const char *holder)
{
    char patch[512];
    snprintf(patch, sizeof patch,
             "{\"spec\":{\"preferredHolder\":\"%s\",\"strategy\":\"OldestEmulationVersion\"}}",
             holder);
    kube_lease l = lease_request(lease, patch);
    /* The apiserver drops the field without the CoordinatedLeaderElection gate. */
    assert_string_equal(l.preferred_holder, holder);
}

/* Keeps identity confirming its term (as its library does, every third of
 * the validity) until the Lease shows two renewals after `after` (µs of
 * wall time), each keeping the preferred holder; every Confirm is granted. */
static void lead_through_renewals(fixture *f, const char *lease, const char *identity,
                                  int64_t epoch, int64_t after, const char *preferred)
{
    int renewals = 0;
    int64_t last = after, deadline = mono_ms() + 15000;
    while (renewals < 2) {
        assert_true(mono_ms() < deadline);
        assert_int_equal(confirm(f, lease, identity, epoch).code, ENGINE_OK);
        kube_lease l = lease_request(lease, NULL);
        assert_string_equal(l.holder_identity, identity);
        assert_int_equal(l.lease_transitions, epoch);
        assert_string_equal(l.preferred_holder, preferred);
        assert_string_equal(l.strategy, "OldestEmulationVersion");
        if (l.renew_time_us > last) {
            last = l.renew_time_us;
            renewals++;
        }
        harness_sleep_ms(300);
    }
}

/* A preferredHolder campaigning through the other replica changes nothing;
 * one standing by on the holder's replica gets the term at the holder's
 * next Confirm, once the holder acknowledged (its Resign with the token,
 * as its library sends on Lost HANDED_OFF), with the next epoch; its
 * renewals keep the field, and it is not handed off again. */
static void test_kube_preferred_holder_gets_the_term_at_the_next_confirm(void **state)
{
    (void)state;
    fixture *r0 = replica_start(), *r1 = replica_start();
    char lease[128];
    snprintf(lease, sizeof lease, "preferred-%s", run_id);
    sink *a = sink_new(), *b = sink_new(), *x = sink_new();
    campaign(r0, a, req_for_ns(test_ns, lease, "a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 15000);
    assert_true(i >= 0);
    int64_t e1 = a->events[i].epoch;
    campaign(r0, b, req_for_ns(test_ns, lease, "b"));
    campaign(r1, x, req_for_ns(test_ns, lease, "x"));
    assert_true(wait_kind(b, ENGINE_EVENT_CANDIDATE, 15000) >= 0);
    assert_true(wait_kind(x, ENGINE_EVENT_CANDIDATE, 15000) >= 0);

    /* Preferred, but campaigning through the other replica: nothing. */
    set_preferred(lease, "x");
    lead_through_renewals(r0, lease, "a", e1, wall_us(), "x");
    assert_int_equal(take_kind(a, ENGINE_EVENT_LOST), -1);

    /* Preferred and standing by here: handed off at a's next Confirm. */
    set_preferred(lease, "b");
    int64_t deadline = mono_ms() + 10000;
    engine_reply c;
    while ((c = confirm(r0, lease, "a", e1)).code == ENGINE_OK) {
        assert_true(mono_ms() < deadline);
        harness_sleep_ms(100);
    }
    assert_int_equal(c.code, ENGINE_FAILED_PRECONDITION);
    i = wait_kind(a, ENGINE_EVENT_LOST, 5000);
    assert_true(i >= 0);
    assert_int_equal(a->events[i].reason, ENGINE_LOST_HANDED_OFF);
    assert_true(resign(r0, lease, "a").released); /* the acknowledgement */
    int j = wait_kind(b, ENGINE_EVENT_ELECTED, 5000);
    assert_true(j >= 0);
    assert_int_equal(b->events[j].epoch, e1 + 1);
    assert_int_equal(take_kind(x, ENGINE_EVENT_ELECTED), -1);
    lead_through_renewals(r0, lease, "b", e1 + 1, wall_us(), "b");
    assert_int_equal(take_kind(b, ENGINE_EVENT_LOST), -1);

    resign(r0, lease, "b");
    assert_true(wait_kind(x, ENGINE_EVENT_ELECTED, 5000) >= 0);
    assert_string_equal(lease_request(lease, NULL).preferred_holder, "b");
    resign(r1, lease, "x");
    fixture_stop(r0);
    fixture_stop(r1);
    sink_free(a);
    sink_free(b);
    sink_free(x);
}

/* An operator's Handoff that reaches the replica not serving the term,
 * naming a standby campaigning there: that replica writes the request into
 * the Lease (kubelease.io/handoff-to); the serving one ends the term
 * (HANDED_OFF), and once the holder acknowledged, transfers it to the
 * standby at the next epoch (kubelease.io/handed-to); the standby's replica
 * claims it and elects its standby, whose token confirms the term there
 * (docs/design.md, rule 3). */
static void test_kube_handoff_to_a_standby_of_the_other_replica(void **state)
{
    (void)state;
    fixture *r0 = replica_start(), *r1 = replica_start();
    char lease[128];
    snprintf(lease, sizeof lease, "xhandoff-%s", run_id);
    sink *a = sink_new(), *x = sink_new();
    campaign(r0, a, req_for_ns(test_ns, lease, "a"));
    int i = wait_kind(a, ENGINE_EVENT_ELECTED, 15000);
    assert_true(i >= 0);
    int64_t e1 = a->events[i].epoch;
    campaign(r1, x, req_for_ns(test_ns, lease, "x"));
    assert_true(wait_kind(x, ENGINE_EVENT_CANDIDATE, 15000) >= 0);

    reply_box b = BOX_INIT;
    int64_t t0 = mono_ms();
    assert_int_equal(engine_handoff(r1->engine, test_ns, lease, NULL, NULL, "x", box_done, &b), 0);
    box_wait(&b);
    assert_int_equal(b.r.code, ENGINE_OK);
    i = wait_kind(a, ENGINE_EVENT_LOST, 10000);
    assert_true(i >= 0);
    assert_int_equal(a->events[i].reason, ENGINE_LOST_HANDED_OFF);
    resign(r0, lease, "a"); /* the acknowledgement, as a's library sends it */
    int j = wait_kind(x, ENGINE_EVENT_ELECTED, 10000);
    assert_true(j >= 0);
    assert_int_equal(x->events[j].epoch, e1 + 1);
    print_message("handoff to a standby of the other replica: epoch %lld -> %lld in %lld ms\n",
                  (long long)e1, (long long)(e1 + 1), (long long)(mono_ms() - t0));
    assert_int_equal(confirm(r1, lease, "x", e1 + 1).code, ENGINE_OK);
    kube_lease l = lease_request(lease, NULL);
    assert_string_equal(l.holder_identity, "x");
    assert_int_equal(l.lease_transitions, e1 + 1);
    assert_string_equal(l.handoff_to, "");
    assert_int_equal(l.handed_to, 0);

    resign(r1, lease, "x");
    fixture_stop(r0);
    fixture_stop(r1);
    sink_free(a);
    sink_free(x);
}

int main(void)
{
    if (!kube_env_read()) {
        fprintf(stderr, "KUBELEASE_TEST_ENV is not set: skipped (needs the test control plane)\n");
        return 77;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kube_preferred_holder_gets_the_term_at_the_next_confirm),
        cmocka_unit_test(test_kube_handoff_to_a_standby_of_the_other_replica),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
