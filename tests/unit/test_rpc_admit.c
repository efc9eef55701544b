/* Admission (rpc/admit.c): its steps in their order, what the authorizer
 * is asked for each method, and the answers the transport acts on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kubelease/v1/kubelease.pb-c.h"
#include "rpc/admit.h"

/* A recording authorizer: answers verdict, keeps a copy of what it was
 * asked. */
typedef struct asked {
    int calls;
    rpc_auth_verdict verdict;
    char verb[32], ns[64], name[64], identity[64], pod_ns[64], pod[64];
    bool has_identity, has_pod, narrow_on_deny, pod_denies;
} asked;

static rpc_auth_verdict record(void *ctx, const auth_action *a, rpc_code *code, char *msg,
                               size_t msg_len)
{
    asked *k = ctx;
    k->calls++;
    snprintf(k->verb, sizeof k->verb, "%s", a->verb);
    snprintf(k->ns, sizeof k->ns, "%s", a->ns);
    snprintf(k->name, sizeof k->name, "%s", a->name);
    k->has_identity = a->identity != NULL;
    snprintf(k->identity, sizeof k->identity, "%s", a->identity ? a->identity : "");
    snprintf(k->pod_ns, sizeof k->pod_ns, "%s", a->pod_ns ? a->pod_ns : "");
    k->has_pod = a->pod != NULL;
    snprintf(k->pod, sizeof k->pod, "%s", a->pod ? a->pod : "");
    k->narrow_on_deny = a->narrow_on_deny;
    k->pod_denies = a->pod_denies;
    if (k->verdict == RPC_AUTH_DENIED) {
        *code = RPC_UNAUTHENTICATED;
        snprintf(msg, msg_len, "no token");
    }
    return k->verdict;
}

static rpc_admit_result admit(rpc_method_id id, const ProtobufCMessage *m, const rpc_admit_in *in,
                              rpc_admission *out)
{
    return rpc_admit(rpc_method_get(id), m, in, out);
}

/* An invalid request is refused before the authorizer is asked: a caller
 * learns nothing about authorization from a malformed request. */
static void test_admit_validates_first(void **state)
{
    (void)state;
    asked k = {.verdict = RPC_AUTH_DENIED};
    rpc_admit_in in = {.authorize = record, .auth_ctx = &k};
    Kubelease__V1__ConfirmRequest c = KUBELEASE__V1__CONFIRM_REQUEST__INIT;
    c.namespace_ = "team-a";
    c.name = "db";
    c.identity = "pod-1";
    rpc_admission out;
    assert_int_equal(admit(RPC_METHOD_CONFIRM, &c.base, &in, &out), RPC_ADMIT_ERROR);
    assert_int_equal(out.code, RPC_INVALID_ARGUMENT);
    assert_string_equal(out.message, "epoch: 0, must be the positive epoch of a term");
    assert_int_equal(k.calls, 0);
    c.epoch = 3;
    assert_int_equal(admit(RPC_METHOD_CONFIRM, &c.base, &in, &out), RPC_ADMIT_ERROR);
    assert_int_equal(out.code, RPC_UNAUTHENTICATED);
    assert_string_equal(out.message, "no token");
    assert_int_equal(k.calls, 1);
    assert_string_equal(k.verb, "campaign");
    assert_string_equal(k.identity, "pod-1");
    k.verdict = RPC_AUTH_PENDING;
    assert_int_equal(admit(RPC_METHOD_CONFIRM, &c.base, &in, &out), RPC_ADMIT_WAIT);
    k.verdict = RPC_AUTH_ALLOWED;
    assert_int_equal(admit(RPC_METHOD_CONFIRM, &c.base, &in, &out), RPC_ADMIT_OK);
    assert_string_equal(out.peer, "");
}

/* The served namespaces are checked after authorization (a caller who may
 * not ask is told so, not which namespaces are served). */
static void test_admit_served_namespace_after_auth(void **state)
{
    (void)state;
    char *served[] = {"team-a", NULL};
    asked k = {.verdict = RPC_AUTH_DENIED};
    rpc_admit_in in = {.authorize = record, .auth_ctx = &k, .namespaces = served};
    Kubelease__V1__GetHolderRequest g = KUBELEASE__V1__GET_HOLDER_REQUEST__INIT;
    g.namespace_ = "team-b";
    g.name = "db";
    rpc_admission out;
    assert_int_equal(admit(RPC_METHOD_GET_HOLDER, &g.base, &in, &out), RPC_ADMIT_ERROR);
    assert_int_equal(out.code, RPC_UNAUTHENTICATED);
    k.verdict = RPC_AUTH_ALLOWED;
    assert_int_equal(admit(RPC_METHOD_GET_HOLDER, &g.base, &in, &out), RPC_ADMIT_ERROR);
    assert_int_equal(out.code, RPC_PERMISSION_DENIED);
    assert_string_equal(out.message, "namespace \"team-b\" is not served by this kubeleased");
    assert_string_equal(k.verb, "get");
    assert_false(k.has_identity);
    g.namespace_ = "team-a";
    assert_int_equal(admit(RPC_METHOD_GET_HOLDER, &g.base, &in, &out), RPC_ADMIT_OK);
    /* A ListLeases of every namespace is asked at the cluster scope and
     * narrowed on denial; it passes any --namespaces. */
    Kubelease__V1__ListLeasesRequest l = KUBELEASE__V1__LIST_LEASES_REQUEST__INIT;
    assert_int_equal(admit(RPC_METHOD_LIST_LEASES, &l.base, &in, &out), RPC_ADMIT_OK);
    assert_string_equal(k.verb, "list");
    assert_string_equal(k.ns, "");
    assert_string_equal(k.name, "");
    assert_true(k.narrow_on_deny);
    l.namespace_ = "team-b";
    assert_int_equal(admit(RPC_METHOD_LIST_LEASES, &l.base, &in, &out), RPC_ADMIT_ERROR);
    assert_int_equal(out.code, RPC_PERMISSION_DENIED);
}

/* The holder's own Handoff is asked as campaign, anyone else's as
 * handoff. */
static void test_admit_handoff_verb(void **state)
{
    (void)state;
    asked k = {.verdict = RPC_AUTH_ALLOWED};
    rpc_admit_in in = {.authorize = record, .auth_ctx = &k};
    Kubelease__V1__HandoffRequest h = KUBELEASE__V1__HANDOFF_REQUEST__INIT;
    h.namespace_ = "team-a";
    h.name = "db";
    rpc_admission out;
    assert_int_equal(admit(RPC_METHOD_HANDOFF, &h.base, &in, &out), RPC_ADMIT_OK);
    assert_string_equal(k.verb, "handoff");
    assert_false(k.has_identity);
    h.identity = "pod-1";
    h.term_token = "1.abc";
    assert_int_equal(admit(RPC_METHOD_HANDOFF, &h.base, &in, &out), RPC_ADMIT_OK);
    assert_string_equal(k.verb, "campaign");
    assert_string_equal(k.identity, "pod-1");
}

/* A leader label's Pod: asked of the authorizer with the Lease's
 * namespace filled in; without authentication, the caller's address goes
 * to the engine ("?" when unknown, which matches no Pod), and only with
 * --pod-ip-check. */
static void test_admit_label_pod(void **state)
{
    (void)state;
    asked k = {.verdict = RPC_AUTH_ALLOWED};
    rpc_admit_in in = {.authorize = record, .auth_ctx = &k};
    Kubelease__V1__SetPodLabelRequest p = KUBELEASE__V1__SET_POD_LABEL_REQUEST__INIT;
    p.namespace_ = "team-a";
    p.name = "db";
    p.identity = "pod-1";
    p.term_token = "1.abc";
    p.pod_name = "web-0";
    p.pod_label_key = "leader";
    rpc_admission out;
    assert_int_equal(admit(RPC_METHOD_SET_POD_LABEL, &p.base, &in, &out), RPC_ADMIT_OK);
    assert_string_equal(k.pod_ns, "team-a");
    assert_string_equal(k.pod, "web-0");
    assert_true(k.pod_denies);
    assert_string_equal(out.peer, ""); /* authenticated: the token's pod claim decides */

    rpc_admit_in none = {.pod_ip_check = true, .peer_ip = "10.0.0.7"};
    assert_int_equal(admit(RPC_METHOD_SET_POD_LABEL, &p.base, &none, &out), RPC_ADMIT_OK);
    assert_string_equal(out.peer, "10.0.0.7");
    none.peer_ip = "";
    assert_int_equal(admit(RPC_METHOD_SET_POD_LABEL, &p.base, &none, &out), RPC_ADMIT_OK);
    assert_string_equal(out.peer, "?");
    none.pod_ip_check = false;
    assert_int_equal(admit(RPC_METHOD_SET_POD_LABEL, &p.base, &none, &out), RPC_ADMIT_OK);
    assert_string_equal(out.peer, "");
    /* No label, no address. */
    none.pod_ip_check = true;
    p.pod_name = "";
    p.pod_label_key = "";
    assert_int_equal(admit(RPC_METHOD_SET_POD_LABEL, &p.base, &none, &out), RPC_ADMIT_OK);
    assert_string_equal(out.peer, "");
    /* A Campaign's label whose Pod is not the caller's goes on without it. */
    Kubelease__V1__CampaignRequest c = KUBELEASE__V1__CAMPAIGN_REQUEST__INIT;
    c.namespace_ = "team-a";
    c.name = "db";
    c.identity = "pod-1";
    c.lease_duration_seconds = 15;
    c.renew_deadline_seconds = 10;
    c.retry_period_seconds = 2;
    c.pod_name = "web-0";
    c.pod_namespace = "web";
    c.pod_label_key = "leader";
    assert_int_equal(admit(RPC_METHOD_CAMPAIGN, &c.base, &in, &out), RPC_ADMIT_OK);
    assert_string_equal(k.pod_ns, "web");
    assert_false(k.pod_denies);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admit_validates_first),
        cmocka_unit_test(test_admit_served_namespace_after_auth),
        cmocka_unit_test(test_admit_handoff_verb),
        cmocka_unit_test(test_admit_label_pod),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
