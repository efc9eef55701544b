/* The review codec (kube/review.c): TokenReview and SubjectAccessReview
 * bodies as the apiserver expects them, their answers as it writes them
 * (recorded from kube-apiserver v1.34), and JWT claims read without
 * trusting them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "kube/review.h"

static const char *str_at(const cJSON *root, const char *a, const char *b, const char *c)
{
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(root, a);
    if (b)
        j = cJSON_GetObjectItemCaseSensitive(j, b);
    if (c)
        j = cJSON_GetObjectItemCaseSensitive(j, c);
    return cJSON_IsString(j) ? j->valuestring : NULL;
}

static void test_kube_token_review_body_asks_for_the_audience(void **state)
{
    (void)state;
    char *body = kube_token_review_body("abc.def.ghi", "kubelease");
    assert_non_null(body);
    cJSON *j = cJSON_Parse(body);
    assert_string_equal(str_at(j, "apiVersion", NULL, NULL), "authentication.k8s.io/v1");
    assert_string_equal(str_at(j, "kind", NULL, NULL), "TokenReview");
    assert_string_equal(str_at(j, "spec", "token", NULL), "abc.def.ghi");
    const cJSON *aud =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItem(j, "spec"), "audiences");
    assert_int_equal(cJSON_GetArraySize(aud), 1);
    assert_string_equal(cJSON_GetArrayItem(aud, 0)->valuestring, "kubelease");
    cJSON_Delete(j);
    kube_review_body_free(body);
    kube_review_body_free(NULL);
}

/* As kube-apiserver answers for a pod-bound projected token. */
static const char authenticated[] =
    "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\",\"metadata\":{},"
    "\"spec\":{\"token\":\"x\",\"audiences\":[\"kubelease\"]},\"status\":{\"authenticated\":true,"
    "\"user\":{\"username\":\"system:serviceaccount:payments:kv\",\"uid\":\"7d0e\","
    "\"groups\":[\"system:serviceaccounts\",\"system:serviceaccounts:payments\","
    "\"system:authenticated\"],\"extra\":{\"authentication.kubernetes.io/credential-id\":"
    "[\"JTI=1f2e\"],\"authentication.kubernetes.io/node-name\":[\"n1\"],"
    "\"authentication.kubernetes.io/pod-name\":[\"kv-0\"],"
    "\"authentication.kubernetes.io/pod-uid\":[\"99aa\"]}},\"audiences\":[\"kubelease\"]}}";

static void test_kube_token_review_parse_authenticated_user(void **state)
{
    (void)state;
    kube_token_review r;
    char err[128];
    assert_int_equal(
        kube_token_review_parse(authenticated, strlen(authenticated), &r, err, sizeof err), 0);
    assert_true(r.authenticated);
    assert_string_equal(r.user.username, "system:serviceaccount:payments:kv");
    assert_string_equal(r.user.uid, "7d0e");
    assert_int_equal(r.user.n_groups, 3);
    assert_string_equal(r.user.groups[1], "system:serviceaccounts:payments");
    assert_int_equal(r.user.n_extra, 4);
    assert_string_equal(kube_user_extra_value(&r.user, KUBE_EXTRA_POD_NAME), "kv-0");
    assert_null(kube_user_extra_value(&r.user, "nope"));
    char sa[64];
    assert_int_equal(kube_user_serviceaccount(&r.user, sa, sizeof sa), 0);
    assert_string_equal(sa, "payments:kv");

    /* An access review asks about exactly that user. */
    kube_resource_attributes a = {"campaign", "kubelease.io", "elections",
                                  "payments", "kv-master",    NULL};
    char *body = kube_access_review_body(&r.user, &a);
    cJSON *j = cJSON_Parse(body);
    assert_string_equal(str_at(j, "kind", NULL, NULL), "SubjectAccessReview");
    assert_string_equal(str_at(j, "spec", "user", NULL), "system:serviceaccount:payments:kv");
    assert_string_equal(str_at(j, "spec", "uid", NULL), "7d0e");
    assert_string_equal(str_at(j, "spec", "resourceAttributes", "verb"), "campaign");
    assert_string_equal(str_at(j, "spec", "resourceAttributes", "group"), "kubelease.io");
    assert_string_equal(str_at(j, "spec", "resourceAttributes", "resource"), "elections");
    assert_string_equal(str_at(j, "spec", "resourceAttributes", "namespace"), "payments");
    assert_string_equal(str_at(j, "spec", "resourceAttributes", "name"), "kv-master");
    const cJSON *spec = cJSON_GetObjectItem(j, "spec");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(spec, "groups")), 3);
    const cJSON *pod = cJSON_GetObjectItem(cJSON_GetObjectItem(spec, "extra"), KUBE_EXTRA_POD_NAME);
    assert_string_equal(cJSON_GetArrayItem(pod, 0)->valuestring, "kv-0");
    cJSON_Delete(j);
    free(body);

    /* The cluster scope and every name: no namespace, no name. */
    kube_resource_attributes all = {"list", "kubelease.io", "elections", "", "", NULL};
    body = kube_access_review_body(&r.user, &all);
    j = cJSON_Parse(body);
    assert_null(str_at(j, "spec", "resourceAttributes", "namespace"));
    assert_null(str_at(j, "spec", "resourceAttributes", "name"));
    cJSON_Delete(j);
    free(body);

    /* A non-resource URL (/metrics, as kube-rbac-proxy asks): path and verb
     * only, no resource attributes. */
    kube_resource_attributes url = {"get", "kubelease.io", "elections", "ns", "n", "/metrics"};
    body = kube_access_review_body(&r.user, &url);
    j = cJSON_Parse(body);
    assert_string_equal(str_at(j, "spec", "nonResourceAttributes", "path"), "/metrics");
    assert_string_equal(str_at(j, "spec", "nonResourceAttributes", "verb"), "get");
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "spec"), "resourceAttributes"));
    assert_string_equal(str_at(j, "spec", "user", NULL), "system:serviceaccount:payments:kv");
    cJSON_Delete(j);
    free(body);
    kube_token_review_clear(&r);
}

static void test_kube_token_review_parse_refusals_and_garbage(void **state)
{
    (void)state;
    kube_token_review r;
    char err[128];
    const char *refused = "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\","
                          "\"status\":{\"user\":{},\"error\":\"[invalid bearer token, service "
                          "account token has expired]\"}}";
    assert_int_equal(kube_token_review_parse(refused, strlen(refused), &r, err, sizeof err), 0);
    assert_false(r.authenticated);
    assert_string_equal(r.error, "[invalid bearer token, service account token has expired]");
    kube_token_review_clear(&r);
    const char *no_name = "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":true,"
                          "\"user\":{\"groups\":[]}}}";
    assert_int_equal(kube_token_review_parse(no_name, strlen(no_name), &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "without a username"));
    const char *status = "{\"kind\":\"Status\",\"status\":\"Failure\",\"code\":403}";
    assert_int_equal(kube_token_review_parse(status, strlen(status), &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a TokenReview"));
    assert_int_equal(kube_token_review_parse("{", 1, &r, err, sizeof err), -1);
    const char *bad_groups = "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":true,"
                             "\"user\":{\"username\":\"u\",\"groups\":[1]}}}";
    assert_int_equal(kube_token_review_parse(bad_groups, strlen(bad_groups), &r, err, sizeof err),
                     -1);
}

static void test_kube_access_review_parse(void **state)
{
    (void)state;
    kube_access_review r;
    char err[128];
    const char *allowed = "{\"kind\":\"SubjectAccessReview\",\"apiVersion\":"
                          "\"authorization.k8s.io/v1\",\"status\":{\"allowed\":true,\"reason\":"
                          "\"RBAC: allowed by RoleBinding \\\"kv/payments\\\"\"}}";
    assert_int_equal(kube_access_review_parse(allowed, strlen(allowed), &r, err, sizeof err), 0);
    assert_true(r.allowed);
    assert_string_equal(r.reason, "RBAC: allowed by RoleBinding \"kv/payments\"");
    const char *denied = "{\"kind\":\"SubjectAccessReview\",\"status\":{\"allowed\":false,"
                         "\"denied\":true,\"evaluationError\":\"webhook down\"}}";
    assert_int_equal(kube_access_review_parse(denied, strlen(denied), &r, err, sizeof err), 0);
    assert_false(r.allowed);
    assert_string_equal(r.evaluation_error, "webhook down");
    const char *none = "{\"kind\":\"SubjectAccessReview\",\"status\":{}}";
    assert_int_equal(kube_access_review_parse(none, strlen(none), &r, err, sizeof err), 0);
    assert_false(r.allowed);
    assert_int_equal(kube_access_review_parse("[]", 2, &r, err, sizeof err), -1);
}

static void test_kube_user_serviceaccount_only_for_serviceaccounts(void **state)
{
    (void)state;
    char sa[32];
    kube_user u = {.username = (char *)"system:serviceaccount:ns:name"};
    assert_int_equal(kube_user_serviceaccount(&u, sa, sizeof sa), 0);
    assert_string_equal(sa, "ns:name");
    const char *others[] = {"alice",
                            "system:serviceaccount:ns",
                            "system:serviceaccount::x",
                            "system:serviceaccount:ns:",
                            "system:serviceaccount:a:b:c",
                            "system:node:n1"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        u.username = (char *)others[i];
        assert_int_equal(kube_user_serviceaccount(&u, sa, sizeof sa), -1);
    }
}

static void test_kube_jwt_peek_reads_exp_and_audiences(void **state)
{
    (void)state;
    kube_jwt_claims c;
    /* {"aud":["kubelease","other"],"exp":1767225600,"sub":"system:serviceaccount:a:b"} */
    const char *t = "eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOlsia3ViZWxlYXNlIiwib3RoZXIiXSwiZXhwIjoxNzY3"
                    "MjI1NjAwLCJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6YTpiIn0.c2ln";
    assert_int_equal(kube_jwt_peek(t, &c), 0);
    assert_int_equal(c.exp, 1767225600);
    assert_string_equal(c.aud, "kubelease,other");
    assert_true(kube_jwt_has_audience(&c, "kubelease"));
    assert_true(kube_jwt_has_audience(&c, "other"));
    assert_false(kube_jwt_has_audience(&c, "kube"));
    /* {"aud":"x"}: one audience as a string, no exp. */
    assert_int_equal(kube_jwt_peek("e30.eyJhdWQiOiJ4In0.", &c), 0);
    assert_int_equal(c.exp, 0);
    assert_string_equal(c.aud, "x");
    /* Not JWTs. */
    assert_int_equal(kube_jwt_peek("plain-static-token", &c), -1);
    assert_int_equal(kube_jwt_peek("a.b", &c), -1);
    assert_int_equal(kube_jwt_peek("a.b.c.d", &c), -1);
    assert_int_equal(kube_jwt_peek("a.!!!.c", &c), -1);
    assert_int_equal(kube_jwt_peek("a.WzFd.c", &c), -1); /* [1]: not an object */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kube_token_review_body_asks_for_the_audience),
        cmocka_unit_test(test_kube_token_review_parse_authenticated_user),
        cmocka_unit_test(test_kube_token_review_parse_refusals_and_garbage),
        cmocka_unit_test(test_kube_access_review_parse),
        cmocka_unit_test(test_kube_user_serviceaccount_only_for_serviceaccounts),
        cmocka_unit_test(test_kube_jwt_peek_reads_exp_and_audiences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
