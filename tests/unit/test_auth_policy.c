/* The authorizer's policy alone (server/auth/policy.c): the identity
 * policy, the Pod of a leader label and the permission_denied messages, as
 * pure functions of a subject, with no review, cache or server. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "auth/internal.h"

static char username[] = "system:serviceaccount:team:alice";

/* alice, a ServiceAccount of team; pod: the pod claim of her token ("": none). */
static auth_subject alice(const char *pod)
{
    auth_subject s;
    memset(&s, 0, sizeof s);
    s.user.username = username;
    snprintf(s.sa, sizeof s.sa, "team:alice");
    if (pod[0]) {
        snprintf(s.pod, sizeof s.pod, "%s", pod);
        snprintf(s.pod_ns, sizeof s.pod_ns, "team");
    }
    return s;
}

static int check(auth_identity_policy p, const auth_subject *s, const char *identity,
                 const char *ns, char *msg)
{
    msg[0] = 0;
    return auth_policy_check(p, s, identity, ns, msg, 512);
}

static void test_auth_policy_any_and_no_identity_are_allowed(void **state)
{
    (void)state;
    char msg[512];
    auth_subject s = alice("");
    assert_int_equal(check(AUTH_IDENTITY_ANY, &s, "anything", "team", msg), 0);
    assert_int_equal(check(AUTH_IDENTITY_POD, &s, NULL, "team", msg), 0);
    assert_int_equal(check(AUTH_IDENTITY_SERVICEACCOUNT, &s, NULL, "team", msg), 0);
}

static void test_auth_policy_serviceaccount_prefix_ends_at_a_non_name_character(void **state)
{
    (void)state;
    char msg[512];
    auth_subject s = alice("");
    assert_int_equal(check(AUTH_IDENTITY_SERVICEACCOUNT, &s, "team:alice", "team", msg), 0);
    assert_int_equal(check(AUTH_IDENTITY_SERVICEACCOUNT, &s, "team:alice:0", "team", msg), 0);
    assert_int_equal(check(AUTH_IDENTITY_SERVICEACCOUNT, &s, "team:alice/x", "team", msg), 0);
    assert_int_equal(check(AUTH_IDENTITY_SERVICEACCOUNT, &s, "team:alice2", "team", msg), -1);
    assert_non_null(strstr(msg, "does not start with the caller's \"team:alice\""));
    assert_int_equal(check(AUTH_IDENTITY_SERVICEACCOUNT, &s, "team:bob", "team", msg), -1);
    /* Not a ServiceAccount at all. */
    s.sa[0] = 0;
    assert_int_equal(check(AUTH_IDENTITY_SERVICEACCOUNT, &s, "team:alice", "team", msg), -1);
    assert_non_null(strstr(msg, "is not a ServiceAccount"));
}

static void test_auth_policy_pod_is_the_callers_pod_in_its_namespace(void **state)
{
    (void)state;
    char msg[512];
    auth_subject s = alice("kv-0");
    assert_int_equal(check(AUTH_IDENTITY_POD, &s, "kv-0", "team", msg), 0);
    assert_int_equal(check(AUTH_IDENTITY_POD, &s, "team/kv-0", "other", msg), 0);
    assert_int_equal(check(AUTH_IDENTITY_POD, &s, "kv-0", "other", msg), -1);
    assert_non_null(strstr(msg, "is not the caller's pod team/kv-0"));
    assert_int_equal(check(AUTH_IDENTITY_POD, &s, "other/kv-0", "other", msg), -1);
    assert_int_equal(check(AUTH_IDENTITY_POD, &s, "kv-1", "team", msg), -1);
    auth_subject unbound = alice("");
    assert_int_equal(check(AUTH_IDENTITY_POD, &unbound, "kv-0", "team", msg), -1);
    assert_non_null(strstr(msg, "not bound to a pod"));
}

static void test_auth_pod_check_only_the_callers_own_pod(void **state)
{
    (void)state;
    char msg[512] = "";
    auth_subject s = alice("kv-0");
    assert_int_equal(auth_pod_check(&s, "team", NULL, msg, sizeof msg), 0);
    assert_int_equal(auth_pod_check(&s, "team", "kv-0", msg, sizeof msg), 0);
    assert_int_equal(auth_pod_check(&s, "other", "kv-0", msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "pod other/kv-0 is not the caller's pod team/kv-0"));
    assert_int_equal(auth_pod_check(&s, "team", "kv-1", msg, sizeof msg), -1);
    auth_subject unbound = alice("");
    assert_int_equal(auth_pod_check(&unbound, "team", "kv-0", msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "not bound to a pod"));
}

static void test_auth_forbidden_message_reads_like_kubectls(void **state)
{
    (void)state;
    char msg[512];
    auth_subject s = alice("");
    auth_access_question named = {"campaign", "team", "x", NULL};
    auth_forbidden_message(&s, &named, "no RBAC policy matched", msg, sizeof msg);
    assert_string_equal(msg, "elections.kubelease.io \"x\" is forbidden: User "
                             "\"system:serviceaccount:team:alice\" cannot campaign resource "
                             "\"elections\" in API group \"kubelease.io\" in the namespace "
                             "\"team\": no RBAC policy matched");
    auth_access_question all = {"list", "", "", NULL};
    auth_forbidden_message(&s, &all, "", msg, sizeof msg);
    assert_string_equal(msg, "elections.kubelease.io is forbidden: User "
                             "\"system:serviceaccount:team:alice\" cannot list resource "
                             "\"elections\" in API group \"kubelease.io\" at the cluster scope");
    auth_access_question path = {"get", "", "", "/metrics"};
    auth_forbidden_message(&s, &path, NULL, msg, sizeof msg);
    assert_non_null(strstr(msg, "cannot get path \"/metrics\" (grant it in a ClusterRole: "
                                "nonResourceURLs [\"/metrics\"], verbs [\"get\"])"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth_policy_any_and_no_identity_are_allowed),
        cmocka_unit_test(test_auth_policy_serviceaccount_prefix_ends_at_a_non_name_character),
        cmocka_unit_test(test_auth_policy_pod_is_the_callers_pod_in_its_namespace),
        cmocka_unit_test(test_auth_pod_check_only_the_callers_own_pod),
        cmocka_unit_test(test_auth_forbidden_message_reads_like_kubectls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
