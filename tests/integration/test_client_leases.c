/* kl_get_lease and kl_list_leases against a real kubeleased (--dev, or on
 * the test control plane): a missing Lease, a held one (holder, epoch, the
 * validity granted, candidates, watchers, lease duration), the listing with
 * and without a namespace, and the Lease after its holder resigned.
 * Durations 5/4/1 s: the validity granted is at most the 1 s retry period. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cmocka.h>

#include "client_harness.h"
#include "kubelease.h"
#include "client_calls.h"

static struct server srv;

#define LD 5
#define RD 4
#define RP 1

static int group_setup(void **state)
{
    (void)state;
    h_require_server();
    h_server_start(&srv, 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    h_server_cleanup(&srv);
    return 0;
}

static void get_lease(kl_client *c, const char *lease, kl_lease_info *info)
{
    kl_error err;
    int rc = kl_get_lease(c, h_ns, lease, info, &err);
    if (rc != KL_OK)
        fail_msg("kl_get_lease(%s): %d %s", lease, rc, err.message);
}

/* Waits (5 s at most) until ns/lease has `candidates` campaigns. */
static void wait_candidates(kl_client *c, const char *lease, int candidates, kl_lease_info *info)
{
    int64_t until = h_now_ms() + 5000;
    for (get_lease(c, lease, info); info->candidates != candidates; get_lease(c, lease, info)) {
        if (h_now_ms() > until)
            fail_msg("%s has %d candidates, want %d", lease, info->candidates, candidates);
        h_sleep_ms(20);
    }
}

static const kl_lease_info *find(const kl_lease_info *rows, size_t n, const char *lease)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].ns, h_ns) == 0 && strcmp(rows[i].name, lease) == 0)
            return &rows[i];
    return NULL;
}

static void test_get_lease_of_missing_lease(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    kl_lease_info info;
    kl_error err;
    assert_int_equal(kl_get_lease(c, h_ns, "leases-never-created", &info, &err), KL_NOT_FOUND);
    assert_string_equal(info.ns, h_ns);
    assert_string_equal(info.name, "leases-never-created");
    assert_string_equal(info.holder, "");
    assert_int_equal(info.lease_transitions, 0);
    kl_client_free(c);
}

static atomic_int watch_calls;

static void on_holder(void *ctx, const char *holder, size_t len, int64_t epoch)
{
    (void)ctx;
    (void)holder;
    (void)len;
    (void)epoch;
    atomic_fetch_add(&watch_calls, 1);
}

static void test_get_lease_of_held_lease(void **state)
{
    (void)state;
    kl_client *leader = h_client(&srv), *standby = h_client(&srv), *reader = h_client(&srv);
    kl_lease_info info;
    kl_error err;
    int64_t epoch = 0;
    h_campaign(leader, "leases-held", "leases-leader:8080", LD, RD, RP);
    assert_int_equal(kl_wait_elected(leader, h_ns, "leases-held", 15, &epoch, &err), KL_OK);
    h_campaign(standby, "leases-held", "leases-standby:8080", LD, RD, RP);
    atomic_store(&watch_calls, 0);
    assert_int_equal(kl_watch_holder(reader, h_ns, "leases-held", on_holder, NULL, &err), KL_OK);
    int64_t until = h_now_ms() + 5000;
    while (atomic_load(&watch_calls) == 0 && h_now_ms() < until)
        h_sleep_ms(10);
    assert_true(atomic_load(&watch_calls) > 0);

    wait_candidates(reader, "leases-held", 2, &info);
    assert_string_equal(info.ns, h_ns);
    assert_string_equal(info.name, "leases-held");
    assert_string_equal(info.holder, "leases-leader:8080");
    assert_int_equal(info.lease_transitions, epoch);
    assert_true(info.valid_for_ms > 0 && info.valid_for_ms <= RP * 1000);
    assert_int_equal(info.watchers, 1);
    assert_int_equal(info.lease_duration_s, LD);
    assert_true(info.since_transition_ms >= 0);
    printf("leases-held: epoch %lld, since %lld ms, valid for %lld ms\n",
           (long long)info.lease_transitions, (long long)info.since_transition_ms,
           (long long)info.valid_for_ms);
    kl_client_free(standby);
    kl_client_free(leader);
    kl_client_free(reader);
}

static void test_list_leases_with_and_without_namespace(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    kl_lease_info *rows = NULL;
    size_t n = 0;
    kl_error err;
    h_campaign(c, "leases-listed", "leases-lister:8080", LD, RD, RP);
    assert_int_equal(kl_wait_elected(c, h_ns, "leases-listed", 15, NULL, &err), KL_OK);

    assert_int_equal(kl_list_leases(c, NULL, &rows, &n, &err), KL_OK);
    const kl_lease_info *row = find(rows, n, "leases-listed");
    assert_non_null(row);
    assert_string_equal(row->holder, "leases-lister:8080");
    assert_true(row->candidates >= 1);
    for (size_t i = 1; i < n; i++) {
        int order = strcmp(rows[i - 1].ns, rows[i].ns);
        assert_true(order < 0 || (order == 0 && strcmp(rows[i - 1].name, rows[i].name) < 0));
    }
    kl_free(rows);

    assert_int_equal(kl_list_leases(c, h_ns, &rows, &n, &err), KL_OK);
    assert_non_null(find(rows, n, "leases-listed"));
    for (size_t i = 0; i < n; i++)
        assert_string_equal(rows[i].ns, h_ns);
    kl_free(rows);

    assert_int_equal(kl_list_leases(c, "leases-no-such-namespace", &rows, &n, &err), KL_OK);
    assert_int_equal(n, 0);
    assert_null(rows);
    kl_client_free(c);
}

static void test_get_lease_after_resignation(void **state)
{
    (void)state;
    kl_client *c = h_client(&srv);
    kl_lease_info info;
    kl_error err;
    int64_t epoch = 0;
    h_campaign(c, "leases-resigned", "leases-resigner:8080", LD, RD, RP);
    assert_int_equal(kl_wait_elected(c, h_ns, "leases-resigned", 15, &epoch, &err), KL_OK);
    assert_int_equal(kl_cancel_election(c, h_ns, "leases-resigned", &err), KL_OK);
    assert_int_equal(kl_wait_ended(c, h_ns, "leases-resigned", 5000, &err), KL_OK);
    get_lease(c, "leases-resigned", &info);
    assert_string_equal(info.holder, "");
    assert_int_equal(info.valid_for_ms, 0);
    assert_int_equal(info.candidates, 0);
    assert_int_equal(info.lease_transitions, epoch); /* a release keeps the epoch */
    kl_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_lease_of_missing_lease),
        cmocka_unit_test(test_get_lease_of_held_lease),
        cmocka_unit_test(test_list_leases_with_and_without_namespace),
        cmocka_unit_test(test_get_lease_after_resignation),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
