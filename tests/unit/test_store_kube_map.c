/* The Kubernetes store's translation of the Kubernetes API's vocabulary:
 * Leases cross unchanged both ways (or are refused when a value does not
 * fit the API's types), and answers map to store statuses through the one
 * table. (The recorded Status bodies are mapped in test_kube_recorded.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "store/kube_map.h"

static void test_store_kube_map_lease_round_trip(void **state)
{
    (void)state;
    store_lease in, back;
    memset(&in, 0, sizeof in);
    strcpy(in.ns, "default");
    strcpy(in.name, "demo");
    strcpy(in.holder, "replica-a");
    strcpy(in.resource_version, "42");
    in.lease_duration_s = 15;
    in.transitions = INT32_MAX;
    in.acquire_time_us = 1795960800LL * 1000000 + 1;
    in.renew_time_us = 1795960810LL * 1000000 + 2;
    strcpy(in.term_nonce, "q3Vx-nonce_A");
    kube_lease kl;
    assert_true(store_lease_to_kube(&in, &kl));
    assert_string_equal(kl.ns, "default");
    assert_string_equal(kl.name, "demo");
    assert_string_equal(kl.holder_identity, "replica-a");
    assert_string_equal(kl.resource_version, "42");
    assert_int_equal(kl.lease_duration_seconds, 15);
    assert_int_equal(kl.lease_transitions, INT32_MAX);
    assert_int_equal(kl.acquire_time_us, in.acquire_time_us);
    assert_int_equal(kl.renew_time_us, in.renew_time_us);
    assert_string_equal(kl.term_nonce, "q3Vx-nonce_A");
    store_lease_from_kube(&kl, &back);
    assert_memory_equal(&in, &back, sizeof in);

    /* leaseTransitions is an int32 in the API. */
    in.transitions = (int64_t)INT32_MAX + 1;
    assert_false(store_lease_to_kube(&in, &kl));
    in.transitions = (int64_t)INT32_MIN - 1;
    assert_false(store_lease_to_kube(&in, &kl));
}

static void test_store_kube_map_status_table(void **state)
{
    (void)state;
    kube_status other = {.code = 409, .reason = "SomethingElse"};
    kube_status exists = {.code = 409, .reason = "AlreadyExists"};
    kube_status conflict = {.code = 409, .reason = "Conflict"};
    /* The Status reason decides a 409 whatever the verb... */
    assert_int_equal(store_kube_map_status(409, &exists, KUBE_VERB_PATCH), STORE_EXISTS);
    assert_int_equal(store_kube_map_status(409, &conflict, KUBE_VERB_CREATE), STORE_CONFLICT);
    /* ...and without a telling one, the verb. */
    assert_int_equal(store_kube_map_status(409, &other, KUBE_VERB_CREATE), STORE_EXISTS);
    assert_int_equal(store_kube_map_status(409, &other, KUBE_VERB_DELETE), STORE_CONFLICT);
    assert_int_equal(store_kube_map_status(299, NULL, KUBE_VERB_GET), STORE_OK);
    assert_int_equal(store_kube_map_status(500, NULL, KUBE_VERB_GET), STORE_UNAVAILABLE);
    assert_int_equal(store_kube_map_status(599, NULL, KUBE_VERB_GET), STORE_UNAVAILABLE);
    assert_int_equal(store_kube_map_status(600, NULL, KUBE_VERB_GET), STORE_INTERNAL);
    assert_int_equal(store_kube_map_status(410, NULL, KUBE_VERB_LIST), STORE_INTERNAL);
    assert_int_equal(store_kube_map_status(-1, NULL, KUBE_VERB_GET), STORE_INTERNAL);

    assert_false(store_kube_reachable_after(0));
    assert_false(store_kube_reachable_after(429));
    assert_false(store_kube_reachable_after(503));
    assert_true(store_kube_reachable_after(200));
    assert_true(store_kube_reachable_after(409));
}

static void test_store_kube_map_describe(void **state)
{
    (void)state;
    const char *body = "{\"kind\":\"Status\",\"reason\":\"NotFound\",\"message\":\"gone\","
                       "\"code\":404}";
    kube_response r = {.http_code = 404, .error = "", .body = body, .body_len = strlen(body)};
    kube_status st;
    char msg[300];
    assert_true(store_kube_describe(&r, &st, msg, sizeof msg));
    assert_string_equal(st.reason, "NotFound");
    assert_string_equal(msg, "apiserver: 404 NotFound: gone");
    r = (kube_response){.http_code = 503, .error = "", .body = "<html>", .body_len = 6};
    assert_false(store_kube_describe(&r, &st, msg, sizeof msg));
    assert_string_equal(msg, "apiserver: 503 Service Unavailable");
    r = (kube_response){.http_code = 0, .error = "Connection refused", .body = "", .body_len = 0};
    assert_false(store_kube_describe(&r, &st, msg, sizeof msg));
    assert_string_equal(msg, "apiserver: Connection refused");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_kube_map_lease_round_trip),
        cmocka_unit_test(test_store_kube_map_status_table),
        cmocka_unit_test(test_store_kube_map_describe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
