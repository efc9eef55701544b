/* The leader label through libkubelease against a real kubeleased (--dev, or
 * on the test control plane, both with --pod-label-keys example.com/role):
 * kl_wait_pod_label reports what became of the label asked for, and no
 * outcome costs the election, which keeps leading; the library's log hook
 * (kl_client_options.log) hears the refusals. In --dev a Pod named is one
 * the memory store makes; on the control plane the test replica's token is
 * not bound to a Pod, so every label is refused as not the caller's.
 * Durations 5/3/1 s (the first users'). */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "client_harness.h"
#include "kubelease.h"
#include "client_calls.h"

static struct server srv;

#define KEY "example.com/role"

static int group_setup(void **state)
{
    (void)state;
    h_require_server();
    srv.args[0] = "--pod-label-keys";
    srv.args[1] = KEY;
    h_server_start(&srv, 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    h_server_cleanup(&srv);
    return 0;
}

/* The log hook: every message at KL_LOG_WARN and up, kept. */
typedef struct heard {
    pthread_mutex_t mu;
    char text[8192];
    size_t len;
} heard;

static void hear(void *ctx, int level, const char *message)
{
    heard *h = ctx;
    if (level < KL_LOG_WARN)
        return;
    pthread_mutex_lock(&h->mu);
    int n = snprintf(h->text + h->len, sizeof(h->text) - h->len, "%s\n", message);
    if (n > 0 && h->len + (size_t)n < sizeof(h->text))
        h->len += (size_t)n;
    pthread_mutex_unlock(&h->mu);
}

static int heard_it(heard *h, const char *what)
{
    pthread_mutex_lock(&h->mu);
    int yes = strstr(h->text, what) != NULL;
    pthread_mutex_unlock(&h->mu);
    return yes;
}

static kl_client *client_hearing(heard *h)
{
    kl_client_options o;
    kl_client_options_init(&o);
    o.log = hear;
    o.log_ctx = h;
    kl_error err;
    kl_client *c = kl_client_new_opts(srv.endpoint, &o, &err);
    if (!c)
        fail_msg("kl_client_new_opts: %s", err.message);
    return c;
}

static void campaign_labelled(kl_client *c, const char *lease, const char *id, const char *pod,
                              const char *key)
{
    kl_election_options o;
    kl_election_options_init(&o);
    o.lease_duration_s = 5;
    o.renew_deadline_s = 3;
    o.retry_period_s = 1;
    o.pod_name = pod;
    o.pod_label_key = key;
    o.pod_label_value = "leader";
    kl_error err;
    if (kl_run_election_opts(c, h_ns, lease, id, &o, &err) != KL_OK)
        fail_msg("kl_run_election_opts(%s): %s", id, err.message);
}

static int64_t elected(kl_client *c, const char *lease)
{
    kl_error err;
    int64_t epoch = 0;
    if (kl_wait_elected(c, h_ns, lease, 20, &epoch, &err) != KL_OK)
        fail_msg("kl_wait_elected(%s): %s", lease, err.message);
    return epoch;
}

/* Still leading the same term a lease duration later (two of its
 * renewals and five of its grants). */
static void still_leading(kl_client *c, const char *lease, int64_t epoch)
{
    kl_error err;
    assert_int_equal(kl_wait_lost_timeout(c, h_ns, lease, 5000, &err), KL_ERR_TIMEOUT);
    assert_int_equal(kl_is_leader(c, h_ns, lease, NULL, NULL), 1);
    char *holder = NULL;
    int64_t now = 0;
    assert_true(kl_get_holder(c, h_ns, lease, &holder, &now, &err) >= 0);
    kl_free(holder);
    assert_int_equal(now, epoch);
}

/* The campaign's label: on the Pod in --dev; refused as not the caller's
 * Pod on the control plane. Either way the term goes on, and a refusal is
 * logged. */
static void test_campaign_label_outcome_never_costs_the_term(void **state)
{
    (void)state;
    heard h = {PTHREAD_MUTEX_INITIALIZER, "", 0};
    kl_client *c = client_hearing(&h);
    campaign_labelled(c, "cpl-outcome", "a", "kv-0", KEY);
    int64_t epoch = elected(c, "cpl-outcome");
    kl_error err;
    int rc = kl_wait_pod_label(c, h_ns, "cpl-outcome", 5000, &err);
    if (h_kubeconfig[0]) {
        assert_int_equal(rc, KL_ERR_PERMISSION_DENIED);
        assert_non_null(strstr(err.message, "not bound to a pod"));
        assert_true(heard_it(&h, "not bound to a pod"));
    } else {
        if (rc != KL_OK)
            fail_msg("kl_wait_pod_label: %d %s", rc, err.message);
    }
    still_leading(c, "cpl-outcome", epoch);
    kl_cancel_election(c, h_ns, "cpl-outcome", NULL);
    kl_client_free(c);
}

/* A label the service refuses while leading (a key it does not allow):
 * kl_wait_pod_label says why, the log hook heard it, the term goes on; a
 * label asked again with an allowed key gets its own outcome; no label is
 * always fine. */
static void test_refused_set_pod_label_reports_and_keeps_the_term(void **state)
{
    (void)state;
    heard h = {PTHREAD_MUTEX_INITIALIZER, "", 0};
    kl_client *c = client_hearing(&h);
    campaign_labelled(c, "cpl-refused", "a", NULL, NULL);
    int64_t epoch = elected(c, "cpl-refused");
    kl_error err;
    assert_int_equal(kl_wait_pod_label(c, h_ns, "cpl-refused", 0, &err), KL_OK); /* none asked */
    assert_int_equal(
        kl_set_pod_label(c, h_ns, "cpl-refused", "kv-0", "other.example.com/x", "leader", &err),
        KL_OK);
    assert_int_equal(kl_wait_pod_label(c, h_ns, "cpl-refused", 5000, &err),
                     KL_ERR_PERMISSION_DENIED);
    /* On the control plane the Pod is refused first (the token names none). */
    const char *why = h_kubeconfig[0] ? "not bound to a pod" : "--pod-label-keys";
    assert_non_null(strstr(err.message, why));
    assert_true(heard_it(&h, why));
    still_leading(c, "cpl-refused", epoch);

    assert_int_equal(kl_set_pod_label(c, h_ns, "cpl-refused", "kv-0", KEY, "leader", &err), KL_OK);
    int rc = kl_wait_pod_label(c, h_ns, "cpl-refused", 5000, &err);
    assert_int_equal(rc, h_kubeconfig[0] ? KL_ERR_PERMISSION_DENIED : KL_OK);
    assert_int_equal(kl_set_pod_label(c, h_ns, "cpl-refused", NULL, NULL, NULL, &err), KL_OK);
    assert_int_equal(kl_wait_pod_label(c, h_ns, "cpl-refused", 5000, &err), KL_OK);
    still_leading(c, "cpl-refused", epoch);
    kl_cancel_election(c, h_ns, "cpl-refused", NULL);
    kl_client_free(c);
}

/* A standby's label is accepted for its coming term (in --dev); refused on
 * the control plane, naming the cause; either way the standby is elected
 * when the leader resigns. A Pod of another namespace ("NS/NAME"). */
static void test_standby_label_is_accepted_for_its_term(void **state)
{
    (void)state;
    kl_client *a = h_client(&srv), *b = h_client(&srv);
    kl_error err;
    campaign_labelled(a, "cpl-standby", "a", NULL, NULL);
    elected(a, "cpl-standby");
    campaign_labelled(b, "cpl-standby", "b", NULL, NULL);
    assert_int_equal(kl_set_pod_label(b, h_ns, "cpl-standby", "team-b/kv-1", KEY, "leader", &err),
                     KL_OK);
    int rc = kl_wait_pod_label(b, h_ns, "cpl-standby", 5000, &err);
    if (h_kubeconfig[0]) {
        assert_int_equal(rc, KL_ERR_PERMISSION_DENIED);
        assert_non_null(strstr(err.message, "not bound to a pod"));
    } else if (rc != KL_OK) {
        fail_msg("kl_wait_pod_label (standby): %d %s", rc, err.message);
    }
    assert_int_equal(kl_is_leader(b, h_ns, "cpl-standby", NULL, NULL), 0);
    kl_cancel_election(a, h_ns, "cpl-standby", NULL);
    elected(b, "cpl-standby");
    kl_cancel_election(b, h_ns, "cpl-standby", NULL);
    kl_client_free(a);
    kl_client_free(b);
}

static void test_wait_pod_label_arguments(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    kl_error err;
    assert_int_equal(kl_wait_pod_label(c, h_ns, "cpl-none", 0, &err), KL_ERR_NO_ELECTION);
    assert_int_equal(kl_wait_pod_label(c, h_ns, "cpl-none", -1, &err), KL_ERR_INVALID_ARGUMENT);
    assert_int_equal(kl_set_pod_label(c, h_ns, "cpl-none", "kv-0", KEY, "x", &err),
                     KL_ERR_NO_ELECTION);
    campaign_labelled(c, "cpl-args", "a", NULL, NULL);
    assert_int_equal(kl_set_pod_label(c, h_ns, "cpl-args", "/kv-0", KEY, "x", &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_int_equal(kl_set_pod_label(c, h_ns, "cpl-args", "a/b/c", KEY, "x", &err),
                     KL_ERR_INVALID_ARGUMENT);
    assert_int_equal(kl_set_pod_label(c, h_ns, "cpl-args", "kv-0", NULL, "x", &err),
                     KL_ERR_INVALID_ARGUMENT);
    kl_cancel_election(c, h_ns, "cpl-args", NULL);
    kl_client_free(c);
}

int main(void)
{
    h_choose_store();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_campaign_label_outcome_never_costs_the_term),
        cmocka_unit_test(test_refused_set_pod_label_reports_and_keeps_the_term),
        cmocka_unit_test(test_standby_label_is_accepted_for_its_term),
        cmocka_unit_test(test_wait_pod_label_arguments),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
