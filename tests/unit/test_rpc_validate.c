/* Request validation: a table of requests, each with the field its error
 * must name; routing and content types. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kubelease/v1/kubelease.pb-c.h"
#include "rpc/json.h"
#include "rpc/lease_service.h"
#include "rpc/route.h"

static char long_name[300];

/* method, JSON request, "" when valid else a substring of the error. */
static const struct {
    rpc_method_id method;
    const char *json;
    const char *error;
} cases[] = {
    {RPC_METHOD_CAMPAIGN,
     "{\"namespace\":\"default\",\"name\":\"db.primary\",\"identity\":\"pod-1 (node a)\","
     "\"leaseDurationSeconds\":15,\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":2}",
     ""},
    {RPC_METHOD_CAMPAIGN,
     "{\"namespace\":\"default\",\"name\":\"db\",\"identity\":\"a\",\"leaseDurationSeconds\":3,"
     "\"renewDeadlineSeconds\":2,\"retryPeriodSeconds\":1,\"resumeEpoch\":\"4\"}",
     ""},
    {RPC_METHOD_CAMPAIGN, "{\"name\":\"db\",\"identity\":\"a\"}", "namespace: must not be empty"},
    {RPC_METHOD_CAMPAIGN, "{\"namespace\":\"Default\",\"name\":\"db\"}",
     "namespace: \"Default\" is not a DNS-1123 label"},
    {RPC_METHOD_CAMPAIGN, "{\"namespace\":\"-x\",\"name\":\"db\"}", "DNS-1123 label"},
    {RPC_METHOD_CAMPAIGN,
     "{\"namespace\":\"a234567890123456789012345678901234567890123456789012345678901234\","
     "\"name\":\"db\"}",
     "namespace"},
    {RPC_METHOD_CAMPAIGN, "{\"namespace\":\"ns\"}", "name: must not be empty"},
    {RPC_METHOD_CAMPAIGN, "{\"namespace\":\"ns\",\"name\":\"db..x\"}", "name: \"db..x\" is not"},
    {RPC_METHOD_CAMPAIGN, "{\"namespace\":\"ns\",\"name\":\"db.\"}", "DNS-1123 subdomain"},
    {RPC_METHOD_CAMPAIGN, "{\"namespace\":\"ns\",\"name\":\"db_x\"}", "name: \"db_x\""},
    {RPC_METHOD_CAMPAIGN, "{\"namespace\":\"ns\",\"name\":\"db\"}", "identity: must not be empty"},
    {RPC_METHOD_CAMPAIGN, "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\\tb\"}",
     "identity: contains a non-printable byte"},
    {RPC_METHOD_CAMPAIGN, "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"\xc3\xa9\"}",
     "identity: contains a non-printable byte"},
    {RPC_METHOD_CAMPAIGN,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"leaseDurationSeconds\":15,"
     "\"renewDeadlineSeconds\":10}",
     "retry_period_seconds: must be at least 1"},
    {RPC_METHOD_CAMPAIGN,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"leaseDurationSeconds\":15,"
     "\"renewDeadlineSeconds\":12,\"retryPeriodSeconds\":10}",
     "renew_deadline_seconds: must be greater than 1.2"},
    {RPC_METHOD_CAMPAIGN,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"leaseDurationSeconds\":10,"
     "\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":2}",
     "lease_duration_seconds: must be greater than renew"},
    {RPC_METHOD_CAMPAIGN,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"leaseDurationSeconds\":-5,"
     "\"renewDeadlineSeconds\":-10,\"retryPeriodSeconds\":-20}",
     "retry_period_seconds: must be at least 1"},
    {RPC_METHOD_CAMPAIGN,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"leaseDurationSeconds\":"
     "2000000000,\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":2}",
     "lease_duration_seconds: must be at most 86400"},
    {RPC_METHOD_CAMPAIGN,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"leaseDurationSeconds\":15,"
     "\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":2,\"resumeEpoch\":\"-1\"}",
     "resume_epoch: must not be negative"},
#define POD_CAMPAIGN(fields)                                                                       \
    "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"leaseDurationSeconds\":15,"        \
    "\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":2," fields "}"
    {RPC_METHOD_CAMPAIGN,
     POD_CAMPAIGN("\"podName\":\"kv-0\",\"podLabelKey\":\"example.com/role\","
                  "\"podLabelValue\":\"leader\""),
     ""},
    {RPC_METHOD_CAMPAIGN, POD_CAMPAIGN("\"podName\":\"kv-0\",\"podLabelKey\":\"role\""), ""},
    {RPC_METHOD_CAMPAIGN, POD_CAMPAIGN("\"podName\":\"kv-0\""), "pod_label_key: must not be empty"},
    {RPC_METHOD_CAMPAIGN, POD_CAMPAIGN("\"podLabelKey\":\"role\""), "pod_name: must not be empty"},
    {RPC_METHOD_CAMPAIGN, POD_CAMPAIGN("\"podName\":\"Kv_0\",\"podLabelKey\":\"role\""),
     "pod_name: \"Kv_0\" is not a DNS-1123 subdomain"},
    {RPC_METHOD_CAMPAIGN, POD_CAMPAIGN("\"podName\":\"kv-0\",\"podLabelKey\":\"a/b/c\""),
     "pod_label_key"},
    {RPC_METHOD_CAMPAIGN,
     POD_CAMPAIGN("\"podName\":\"kv-0\",\"podLabelKey\":\"role\",\"podLabelValue\":\"a=b\""),
     "pod_label_value: \"a=b\" is not a label value"},
    {RPC_METHOD_CAMPAIGN,
     POD_CAMPAIGN("\"podNamespace\":\"team-a\",\"podName\":\"kv-0\",\"podLabelKey\":\"role\""), ""},
    {RPC_METHOD_CAMPAIGN,
     POD_CAMPAIGN("\"podNamespace\":\"Team\",\"podName\":\"kv-0\",\"podLabelKey\":\"role\""),
     "pod_namespace: \"Team\" is not a DNS-1123 label"},
    {RPC_METHOD_CAMPAIGN, POD_CAMPAIGN("\"podNamespace\":\"team-a\""),
     "pod_name: must not be empty"},
    {RPC_METHOD_SET_POD_LABEL,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"podName\":\"kv-0\","
     "\"podLabelKey\":\"role\",\"podLabelValue\":\"leader\"}",
     ""},
    {RPC_METHOD_SET_POD_LABEL, "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\"}", ""},
    {RPC_METHOD_SET_POD_LABEL,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"podLabelKey\":\"role\"}",
     "pod_name: must not be empty"},
    {RPC_METHOD_SET_POD_LABEL, "{\"namespace\":\"ns\",\"name\":\"db\",\"podName\":\"kv-0\"}",
     "identity: must not be empty"},
    {RPC_METHOD_CAMPAIGN, POD_CAMPAIGN("\"value\":\"MTAuMC4wLjE6NjM3OQ==\",\"grantMs\":500"), ""},
    {RPC_METHOD_CAMPAIGN, POD_CAMPAIGN("\"grantMs\":150"), "grant_ms: 150"},
    {RPC_METHOD_CAMPAIGN, POD_CAMPAIGN("\"grantMs\":2500"), "grant_ms: 2500"},
    {RPC_METHOD_PROCLAIM,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"termToken\":\"t\","
     "\"value\":\"AAEC\"}",
     ""},
    {RPC_METHOD_PROCLAIM, "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\"}",
     "term_token: required"},
    {RPC_METHOD_PROCLAIM, "{\"namespace\":\"ns\",\"name\":\"db\",\"termToken\":\"t\"}",
     "identity: must not be empty"},
    {RPC_METHOD_CONFIRM,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\",\"epoch\":\"3\"}", ""},
    {RPC_METHOD_CONFIRM, "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\"}", "epoch: 0"},
    {RPC_METHOD_CONFIRM, "{\"namespace\":\"ns\",\"name\":\"db\",\"epoch\":1}",
     "identity: must not be empty"},
    {RPC_METHOD_RESIGN, "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\"}", ""},
    {RPC_METHOD_RESIGN, "{\"namespace\":\"ns\",\"name\":\"DB\",\"identity\":\"a\"}",
     "name: \"DB\""},
    {RPC_METHOD_GET_HOLDER, "{\"namespace\":\"ns\",\"name\":\"db\",\"consistent\":true}", ""},
    {RPC_METHOD_GET_HOLDER, "{\"name\":\"db\"}", "namespace: must not be empty"},
    {RPC_METHOD_WATCH_HOLDER, "{\"namespace\":\"ns\",\"name\":\"db\"}", ""},
    {RPC_METHOD_WATCH_HOLDER, "{\"namespace\":\"ns\",\"name\":\"\"}", "name: must not be empty"},
    {RPC_METHOD_LIST_LEASES, "{}", ""},
    {RPC_METHOD_CHECK_EPOCH, "{\"namespace\":\"ns\",\"name\":\"db\",\"epoch\":\"7\"}", ""},
    {RPC_METHOD_CHECK_EPOCH, "{\"namespace\":\"ns\",\"name\":\"db\"}", "epoch: 0"},
    {RPC_METHOD_CHECK_EPOCH, "{\"namespace\":\"ns\",\"name\":\"db\",\"epoch\":-3}", "epoch: -3"},
    {RPC_METHOD_CHECK_EPOCH, "{\"namespace\":\"ns\",\"epoch\":1}", "name: must not be empty"},
    {RPC_METHOD_LIST_CANDIDATES, "{\"namespace\":\"ns\",\"name\":\"db\"}", ""},
    {RPC_METHOD_LIST_CANDIDATES, "{\"name\":\"db\"}", "namespace: must not be empty"},
    {RPC_METHOD_LIST_CANDIDATES, "{\"namespace\":\"ns\",\"name\":\"-db\"}", "name: \"-db\""},
    {RPC_METHOD_LIST_TERMS, "{\"namespace\":\"ns\",\"name\":\"db\"}", ""},
    {RPC_METHOD_LIST_TERMS, "{\"name\":\"db\"}", "namespace: must not be empty"},
    {RPC_METHOD_LIST_TERMS, "{\"namespace\":\"ns\",\"name\":\"-db\"}", "name: \"-db\""},
    {RPC_METHOD_HANDOFF, "{\"namespace\":\"ns\",\"name\":\"db\"}", ""},
    {RPC_METHOD_HANDOFF,
     "{\"namespace\":\"ns\",\"name\":\"db\",\"toIdentity\":\"b\",\"identity\":\"a\",\"termToken\":"
     "\"t\"}",
     ""},
    {RPC_METHOD_HANDOFF, "{\"namespace\":\"ns\",\"name\":\"db\",\"identity\":\"a\"}",
     "term_token: required"},
    {RPC_METHOD_HANDOFF, "{\"namespace\":\"ns\",\"name\":\"db\",\"termToken\":\"t\"}",
     "identity: required"},
    {RPC_METHOD_HANDOFF, "{\"namespace\":\"ns\",\"name\":\"db\",\"toIdentity\":\"a\\tb\"}",
     "to_identity:"},
};

static void test_rpc_validate_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const rpc_method *m = rpc_method_get(cases[i].method);
        char err[256] = "";
        ProtobufCMessage *req =
            rpc_json_decode(m->request, cases[i].json, strlen(cases[i].json), err, sizeof err);
        if (!req)
            fail_msg("case %zu: %s", i, err);
        char msg[512] = "";
        int rc = rpc_validate_request(cases[i].method, req, msg, sizeof msg);
        if (!*cases[i].error && rc != 0)
            fail_msg("case %zu (%s): refused: %s", i, cases[i].json, msg);
        if (*cases[i].error && (rc == 0 || !strstr(msg, cases[i].error)))
            fail_msg("case %zu (%s): want error with \"%s\", got rc %d \"%s\"", i, cases[i].json,
                     cases[i].error, rc, msg);
        protobuf_c_message_free_unpacked(req, NULL);
    }
}

static void test_rpc_validate_long_values(void **state)
{
    (void)state;
    char msg[512];
    memset(long_name, 'a', 253);
    long_name[253] = '\0';
    Kubelease__V1__ResignRequest r = KUBELEASE__V1__RESIGN_REQUEST__INIT;
    r.namespace_ = "ns";
    r.name = "db";
    r.identity = long_name;
    assert_int_equal(rpc_validate_request(RPC_METHOD_RESIGN, &r.base, msg, sizeof msg), 0);
    /* 253 bytes made of 63-byte labels is a valid subdomain. */
    for (int i = 63; i < 253; i += 64)
        long_name[i] = '.';
    r.name = long_name;
    assert_int_equal(rpc_validate_request(RPC_METHOD_RESIGN, &r.base, msg, sizeof msg), 0);
    long_name[253] = 'a';
    long_name[254] = '\0';
    assert_int_equal(rpc_validate_request(RPC_METHOD_RESIGN, &r.base, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "name: longer than 253"));
    r.name = "db";
    assert_int_equal(rpc_validate_request(RPC_METHOD_RESIGN, &r.base, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "identity: longer than 253"));
    /* Too long for the engine's fixed buffers: refused, not truncated. */
    char ns64[70];
    memset(ns64, 'b', 64);
    ns64[64] = '\0';
    Kubelease__V1__CampaignRequest c = KUBELEASE__V1__CAMPAIGN_REQUEST__INIT;
    c.namespace_ = ns64;
    c.name = "db";
    c.identity = "a";
    c.lease_duration_seconds = 15;
    c.renew_deadline_seconds = 10;
    c.retry_period_seconds = 2;
    assert_int_equal(rpc_validate_request(RPC_METHOD_CAMPAIGN, &c.base, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "namespace"));
    ns64[63] = '\0';
    assert_int_equal(rpc_validate_request(RPC_METHOD_CAMPAIGN, &c.base, msg, sizeof msg), 0);
    /* The Pod label fields, too. */
    static char long_key[400];
    memset(long_key, 'k', 330);
    c.pod_name = "kv-0";
    c.pod_label_key = long_key;
    assert_int_equal(rpc_validate_request(RPC_METHOD_CAMPAIGN, &c.base, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "pod_label_key: longer than 319 bytes"));
    c.pod_label_key = "role";
    c.pod_label_value = long_key;
    assert_int_equal(rpc_validate_request(RPC_METHOD_CAMPAIGN, &c.base, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "pod_label_value: longer than 63 bytes"));
    /* A leader value over 1024 bytes, in Campaign and in Proclaim. */
    static uint8_t value[1025];
    c.pod_name = c.pod_label_key = c.pod_label_value = NULL;
    c.value.len = sizeof value;
    c.value.data = value;
    assert_int_equal(rpc_validate_request(RPC_METHOD_CAMPAIGN, &c.base, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "value: 1025 bytes, more than the 1024"));
    c.value.len = 1024;
    assert_int_equal(rpc_validate_request(RPC_METHOD_CAMPAIGN, &c.base, msg, sizeof msg), 0);
    Kubelease__V1__ProclaimRequest p = KUBELEASE__V1__PROCLAIM_REQUEST__INIT;
    p.namespace_ = "ns";
    p.name = "db";
    p.identity = "a";
    p.term_token = "t";
    p.value.len = sizeof value;
    p.value.data = value;
    assert_int_equal(rpc_validate_request(RPC_METHOD_PROCLAIM, &p.base, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "value: 1025 bytes"));
}

static void test_rpc_request_namespace_and_wrong_type(void **state)
{
    (void)state;
    Kubelease__V1__ResignRequest r = KUBELEASE__V1__RESIGN_REQUEST__INIT;
    r.namespace_ = "team-a";
    assert_string_equal(rpc_request_namespace(RPC_METHOD_RESIGN, &r.base), "team-a");
    Kubelease__V1__ListLeasesRequest l = KUBELEASE__V1__LIST_LEASES_REQUEST__INIT;
    assert_null(rpc_request_namespace(RPC_METHOD_LIST_LEASES, &l.base));
    char msg[128];
    assert_int_equal(rpc_validate_request(RPC_METHOD_CAMPAIGN, &r.base, msg, sizeof msg), -1);
}

static void test_rpc_routes_and_content_types(void **state)
{
    (void)state;
    const rpc_method *m = rpc_method_find("/kubelease.v1.LeaseService/Campaign");
    assert_non_null(m);
    assert_true(m->server_stream);
    assert_ptr_equal(m->request, &kubelease__v1__campaign_request__descriptor);
    m = rpc_method_find("/kubelease.v1.LeaseService/GetHolder");
    assert_non_null(m);
    assert_false(m->server_stream);
    assert_ptr_equal(m->response, &kubelease__v1__get_holder_response__descriptor);
    assert_true(rpc_method_find("/kubelease.v1.LeaseService/WatchHolder")->server_stream);
    assert_null(rpc_method_find("/kubelease.v1.LeaseService/Nope"));
    assert_null(rpc_method_find("/kubelease.v1.LeaseService/getholder"));
    assert_null(rpc_method_find("/kubelease.v1.LeaseService/"));
    for (int i = 0; i < RPC_METHOD_COUNT; i++)
        assert_ptr_equal(rpc_method_find(rpc_method_get((rpc_method_id)i)->path),
                         rpc_method_get((rpc_method_id)i));

    rpc_codec c;
    assert_int_equal(rpc_content_type_parse("application/proto", false, &c), 0);
    assert_int_equal(c, RPC_CODEC_PROTO);
    assert_int_equal(rpc_content_type_parse("Application/JSON; charset=utf-8", false, &c), 0);
    assert_int_equal(c, RPC_CODEC_JSON);
    assert_int_equal(rpc_content_type_parse("application/connect+json", true, &c), 0);
    assert_int_equal(c, RPC_CODEC_JSON);
    assert_int_equal(rpc_content_type_parse("application/connect+proto", true, &c), 0);
    assert_int_equal(c, RPC_CODEC_PROTO);
    assert_int_equal(rpc_content_type_parse("application/connect+proto", false, &c), -1);
    assert_int_equal(rpc_content_type_parse("application/proto", true, &c), -1);
    assert_int_equal(rpc_content_type_parse("application/protobuf", false, &c), -1);
    assert_int_equal(rpc_content_type_parse("text/plain", false, &c), -1);
    assert_int_equal(rpc_content_type_parse(NULL, false, &c), -1);
    assert_string_equal(rpc_content_type(RPC_CODEC_JSON, true), "application/connect+json");
    assert_string_equal(rpc_content_type(RPC_CODEC_PROTO, false), "application/proto");

    /* Garbage and truncated protobuf are refused with the type's name. */
    char err[128];
    const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff};
    assert_null(rpc_message_decode(RPC_CODEC_PROTO, &kubelease__v1__campaign_request__descriptor,
                                   garbage, sizeof garbage, err, sizeof err));
    assert_non_null(strstr(err, "kubelease.v1.CampaignRequest"));
    const uint8_t truncated[] = {0x0a, 0x10, 'a', 'b'};
    assert_null(rpc_message_decode(RPC_CODEC_PROTO, &kubelease__v1__campaign_request__descriptor,
                                   truncated, sizeof truncated, err, sizeof err));
    assert_null(rpc_message_decode(RPC_CODEC_JSON, &kubelease__v1__campaign_request__descriptor,
                                   (const uint8_t *)"", 0, err, sizeof err));
    assert_non_null(strstr(err, "empty JSON body"));
}

/* protobuf-c would hand "pod-a\0zzz" over as "pod-a": a NUL inside any
 * string field is refused, naming the field, at any depth. */
static void test_rpc_proto_refuses_nul_in_string_fields(void **state)
{
    (void)state;
    char err[128] = "";
    /* namespace "ns", identity "pod-a\0zzz" */
    const uint8_t campaign[] = {0x0a, 2,   'n', 's', 0x1a, 9,   'p', 'o',
                                'd',  '-', 'a', 0,   'z',  'z', 'z'};
    assert_null(rpc_message_decode(RPC_CODEC_PROTO, &kubelease__v1__campaign_request__descriptor,
                                   campaign, sizeof campaign, err, sizeof err));
    if (!strstr(err, "field \"identity\": contains a NUL"))
        fail_msg("error: %s", err);
    /* A trailing NUL is a NUL too: "ns\0" for the namespace. */
    const uint8_t get[] = {0x0a, 3, 'n', 's', 0, 0x12, 2, 'd', 'b'};
    assert_null(rpc_message_decode(RPC_CODEC_PROTO, &kubelease__v1__get_holder_request__descriptor,
                                   get, sizeof get, err, sizeof err));
    if (!strstr(err, "field \"namespace\": contains a NUL"))
        fail_msg("error: %s", err);
    /* leases[] { holder "a\0" } */
    const uint8_t list[] = {0x0a, 4, 0x1a, 2, 'a', 0};
    assert_null(rpc_message_decode(RPC_CODEC_PROTO,
                                   &kubelease__v1__list_leases_response__descriptor, list,
                                   sizeof list, err, sizeof err));
    if (!strstr(err, "field \"leases.holder\": contains a NUL"))
        fail_msg("error: %s", err);
    /* NULs in varints and in unknown fields are not strings. */
    const uint8_t fine[] = {0x0a, 2, 'n', 's', 0x20, 0, 0xfa, 0x06, 2, 0, 0};
    ProtobufCMessage *m =
        rpc_message_decode(RPC_CODEC_PROTO, &kubelease__v1__campaign_request__descriptor, fine,
                           sizeof fine, err, sizeof err);
    if (!m)
        fail_msg("refused: %s", err);
    protobuf_c_message_free_unpacked(m, NULL);
}

/* The field of m's request at offset off, checked to be of type t and
 * named as one of the names given (a row's offset that points at another
 * field, or at one of another type, would read garbage). */
static void field_is(const rpc_method *m, size_t off, ProtobufCType t, const char *names)
{
    if (!off)
        return;
    for (unsigned i = 0; i < m->request->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &m->request->fields[i];
        if (f->offset != off)
            continue;
        if (f->type != t || f->label == PROTOBUF_C_LABEL_REPEATED)
            fail_msg("%s: field %s has the wrong type", m->name, f->name);
        char want[64];
        snprintf(want, sizeof want, " %s ", f->name);
        if (!strstr(names, want))
            fail_msg("%s: offset %zu is field %s, not one of%s", m->name, off, f->name, names);
        return;
    }
    fail_msg("%s: offset %zu is no field of %s", m->name, off, m->request->name);
}

/* Every row of the method table is whole and points at its own request's
 * fields: a unary method has a call and an encoding, a stream a call and
 * a detach, each an authorization verb and checks that begin with the
 * Lease (or, for a list, its namespace). */
static void test_rpc_method_rows(void **state)
{
    (void)state;
    for (int i = 0; i < RPC_METHOD_COUNT; i++) {
        const rpc_method *m = rpc_method_get((rpc_method_id)i);
        assert_int_equal(m->id, i);
        assert_non_null(m->verb);
        if (m->server_stream) {
            assert_true(m->stream && m->detach && !m->unary && !m->encode);
        } else {
            assert_true(m->unary && m->encode && !m->stream && !m->detach);
        }
        assert_true(m->checks[0] ==
                    (m->lists_namespaces ? ENGINE_CHECK_NAMESPACE : ENGINE_CHECK_LEASE));
        assert_int_not_equal(m->at.ns, 0);
        assert_true(m->lists_namespaces == (m->at.name == 0));
        const rpc_fields *at = &m->at;
        field_is(m, at->ns, PROTOBUF_C_TYPE_STRING, " namespace ");
        field_is(m, at->name, PROTOBUF_C_TYPE_STRING, " name ");
        field_is(m, at->identity, PROTOBUF_C_TYPE_STRING, " identity ");
        field_is(m, at->term_token, PROTOBUF_C_TYPE_STRING, " term_token ");
        field_is(m, at->to_identity, PROTOBUF_C_TYPE_STRING, " to_identity ");
        field_is(m, at->epoch, PROTOBUF_C_TYPE_INT64, " epoch ");
        field_is(m, at->value, PROTOBUF_C_TYPE_BYTES, " value ");
        field_is(m, at->pod_ns, PROTOBUF_C_TYPE_STRING, " pod_namespace ");
        field_is(m, at->pod, PROTOBUF_C_TYPE_STRING, " pod_name ");
        field_is(m, at->label_key, PROTOBUF_C_TYPE_STRING, " pod_label_key ");
        field_is(m, at->label_value, PROTOBUF_C_TYPE_STRING, " pod_label_value ");
        /* A label is all four fields or none. */
        assert_true(!!at->pod == !!at->pod_ns && !!at->pod == !!at->label_key &&
                    !!at->pod == !!at->label_value);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_validate_table),
        cmocka_unit_test(test_rpc_validate_long_values),
        cmocka_unit_test(test_rpc_request_namespace_and_wrong_type),
        cmocka_unit_test(test_rpc_routes_and_content_types),
        cmocka_unit_test(test_rpc_method_rows),
        cmocka_unit_test(test_rpc_proto_refuses_nul_in_string_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
