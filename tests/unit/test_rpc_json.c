/* The generic proto3 JSON converter: round trips for every message of the
 * API, and the input edge cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "kubelease/v1/kubelease.pb-c.h"
#include "rpc/json.h"
#include "rpc/route.h"

static const ProtobufCMessageDescriptor *all_messages[] = {
    &kubelease__v1__campaign_request__descriptor,
    &kubelease__v1__campaign_event__descriptor,
    &kubelease__v1__candidate__descriptor,
    &kubelease__v1__elected__descriptor,
    &kubelease__v1__heartbeat__descriptor,
    &kubelease__v1__lost__descriptor,
    &kubelease__v1__confirm_request__descriptor,
    &kubelease__v1__confirm_response__descriptor,
    &kubelease__v1__resign_request__descriptor,
    &kubelease__v1__resign_response__descriptor,
    &kubelease__v1__get_holder_request__descriptor,
    &kubelease__v1__get_holder_response__descriptor,
    &kubelease__v1__watch_holder_request__descriptor,
    &kubelease__v1__holder_event__descriptor,
    &kubelease__v1__list_leases_request__descriptor,
    &kubelease__v1__list_leases_response__descriptor,
    &kubelease__v1__lease_status__descriptor,
    &kubelease__v1__check_epoch_request__descriptor,
    &kubelease__v1__check_epoch_response__descriptor,
    &kubelease__v1__list_candidates_request__descriptor,
    &kubelease__v1__list_candidates_response__descriptor,
    &kubelease__v1__handoff_request__descriptor,
    &kubelease__v1__handoff_response__descriptor,
    &kubelease__v1__pod_label__descriptor,
    &kubelease__v1__set_pod_label_request__descriptor,
    &kubelease__v1__set_pod_label_response__descriptor,
    &kubelease__v1__proclaim_request__descriptor,
    &kubelease__v1__proclaim_response__descriptor,
    &kubelease__v1__list_terms_request__descriptor,
    &kubelease__v1__list_terms_response__descriptor,
    &kubelease__v1__term__descriptor,
};
#define N_MESSAGES (sizeof all_messages / sizeof all_messages[0])

/* Fills every field of a fresh message with a non-default value derived from
 * the field number (64-bit values beyond 2^53, so that a double would lose
 * them); for a oneof, only its variant-th member. */
static ProtobufCMessage *fill(const ProtobufCMessageDescriptor *d, unsigned variant, int depth);

static void fill_value(const ProtobufCFieldDescriptor *f, void *p, unsigned variant, int depth)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
        *(int32_t *)p = -(int32_t)f->id * 1000 - 7;
        break;
    case PROTOBUF_C_TYPE_INT64:
        *(int64_t *)p = (int64_t)9007199254740993LL * (int64_t)f->id;
        break;
    case PROTOBUF_C_TYPE_BOOL:
        *(protobuf_c_boolean *)p = 1;
        break;
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumDescriptor *ed = f->descriptor;
        *(int *)p = ed->values[ed->n_values - 1 - variant % (ed->n_values - 1)].value;
        break;
    }
    case PROTOBUF_C_TYPE_STRING: {
        char buf[64];
        snprintf(buf, sizeof buf, "%s-\"quoted\"\\ \xc3\xa9 %u", f->name, variant);
        *(char **)p = strdup(buf);
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        *(ProtobufCMessage **)p = fill(f->descriptor, variant, depth + 1);
        break;
    case PROTOBUF_C_TYPE_BYTES: { /* every kind of byte: NUL, high, and both base64 tails */
        ProtobufCBinaryData *b = p;
        b->len = 4 + variant % 3;
        b->data = malloc(b->len);
        assert_non_null(b->data);
        for (size_t i = 0; i < b->len; i++)
            b->data[i] = (uint8_t)(i * 127 + f->id);
        b->data[0] = 0;
        break;
    }
    default:
        fail_msg("field %s: type %d not covered by the test", f->name, f->type);
    }
}

static ProtobufCMessage *fill(const ProtobufCMessageDescriptor *d, unsigned variant, int depth)
{
    ProtobufCMessage *m = calloc(1, d->sizeof_message);
    assert_non_null(m);
    d->message_init(m);
    unsigned oneof_index = 0, n_oneof = 0;
    for (unsigned i = 0; i < d->n_fields; i++)
        n_oneof += (d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        void *p = (char *)m + f->offset;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (oneof_index++ != variant % n_oneof)
                continue;
            *(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = depth < 2 ? 2 : 0;
            void **arr = calloc(n ? n : 1, sizeof(void *) > 8 ? sizeof(void *) : 8);
            assert_non_null(arr);
            for (size_t k = 0; k < n; k++) {
                assert_int_equal(f->type, PROTOBUF_C_TYPE_MESSAGE);
                arr[k] = fill(f->descriptor, variant + (unsigned)k, depth + 1);
            }
            *(void ***)p = arr;
            *(size_t *)((char *)m + f->quantifier_offset) = n;
            continue;
        }
        fill_value(f, p, variant, depth);
    }
    return m;
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(*len + 1);
    assert_non_null(buf);
    assert_int_equal(protobuf_c_message_pack(m, buf), *len);
    return buf;
}

static void round_trip(const ProtobufCMessage *m)
{
    size_t alen, blen, jlen;
    uint8_t *a = pack(m, &alen);
    char *json = rpc_json_encode(m, &jlen);
    assert_non_null(json);
    char err[256] = "";
    ProtobufCMessage *back = rpc_json_decode(m->descriptor, json, jlen, err, sizeof err);
    if (!back)
        fail_msg("%s: %s: %s", m->descriptor->name, json, err);
    uint8_t *b = pack(back, &blen);
    if (alen != blen || memcmp(a, b, alen) != 0)
        fail_msg("%s: round trip through %s changed the message", m->descriptor->name, json);
    free(a);
    free(b);
    free(json);
    protobuf_c_message_free_unpacked(back, NULL);
}

static void test_rpc_json_round_trips_every_message(void **state)
{
    (void)state;
    for (size_t i = 0; i < N_MESSAGES; i++) {
        for (unsigned variant = 0; variant < 4; variant++) {
            ProtobufCMessage *m = fill(all_messages[i], variant, 0);
            round_trip(m);
            protobuf_c_message_free_unpacked(m, NULL);
        }
        /* The empty message: {} and back. */
        ProtobufCMessage *m = calloc(1, all_messages[i]->sizeof_message);
        all_messages[i]->message_init(m);
        char *json = rpc_json_encode(m, NULL);
        assert_string_equal(json, "{}");
        free(json);
        round_trip(m);
        free(m);
    }
}

static void test_rpc_json_output_uses_camel_case_and_int64_strings(void **state)
{
    (void)state;
    Kubelease__V1__CampaignRequest r = KUBELEASE__V1__CAMPAIGN_REQUEST__INIT;
    r.namespace_ = "default";
    r.name = "db";
    r.lease_duration_seconds = 15;
    r.resume_epoch = 9007199254740993LL;
    char *json = rpc_json_encode(&r.base, NULL);
    assert_string_equal(json, "{\"namespace\":\"default\",\"name\":\"db\","
                              "\"leaseDurationSeconds\":15,\"resumeEpoch\":\"9007199254740993\"}");
    free(json);

    Kubelease__V1__Lost lost = KUBELEASE__V1__LOST__INIT;
    lost.reason = KUBELEASE__V1__LOST_REASON__LOST_REASON_SHUTDOWN;
    Kubelease__V1__CampaignEvent ev = KUBELEASE__V1__CAMPAIGN_EVENT__INIT;
    ev.event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_LOST;
    ev.lost = &lost;
    json = rpc_json_encode(&ev.base, NULL);
    assert_string_equal(json, "{\"lost\":{\"reason\":\"LOST_REASON_SHUTDOWN\"}}");
    free(json);

    /* A set oneof member is written even when it is all defaults. */
    Kubelease__V1__Candidate cand = KUBELEASE__V1__CANDIDATE__INIT;
    ev.event_case = KUBELEASE__V1__CAMPAIGN_EVENT__EVENT_CANDIDATE;
    ev.candidate = &cand;
    json = rpc_json_encode(&ev.base, NULL);
    assert_string_equal(json, "{\"candidate\":{}}");
    free(json);
}

static void test_rpc_json_name_is_lower_camel_case(void **state)
{
    (void)state;
    char out[64];
    rpc_json_name("lease_duration_seconds", out, sizeof out);
    assert_string_equal(out, "leaseDurationSeconds");
    rpc_json_name("namespace", out, sizeof out);
    assert_string_equal(out, "namespace");
    rpc_json_name("valid_for_ms", out, sizeof out);
    assert_string_equal(out, "validForMs");
    rpc_json_name("a_b_c", out, 3);
    assert_string_equal(out, "aB");
}

static Kubelease__V1__CampaignRequest *campaign(const char *json, char *err, size_t err_len)
{
    return (Kubelease__V1__CampaignRequest *)rpc_json_decode(
        &kubelease__v1__campaign_request__descriptor, json, strlen(json), err, err_len);
}

static void test_rpc_json_accepts_both_name_forms_and_int_forms(void **state)
{
    (void)state;
    char err[256];
    Kubelease__V1__CampaignRequest *r =
        campaign("{\"namespace\":\"ns\",\"lease_duration_seconds\":15,\"renewDeadlineSeconds\":"
                 "\"10\",\"retry_period_seconds\":2.0,\"resumeEpoch\":\"9007199254740993\","
                 "\"unknownField\":{\"deep\":[1,2,3]},\"name\":null}",
                 err, sizeof err);
    assert_non_null(r);
    assert_string_equal(r->namespace_, "ns");
    assert_string_equal(r->name, "");
    assert_int_equal(r->lease_duration_seconds, 15);
    assert_int_equal(r->renew_deadline_seconds, 10);
    assert_int_equal(r->retry_period_seconds, 2);
    assert_true(r->resume_epoch == 9007199254740993LL);
    protobuf_c_message_free_unpacked(&r->base, NULL);

    r = campaign("{\"resume_epoch\":12345}", err, sizeof err);
    assert_non_null(r);
    assert_true(r->resume_epoch == 12345);
    protobuf_c_message_free_unpacked(&r->base, NULL);

    r = campaign("{\"resumeEpoch\":\"-9223372036854775808\"}", err, sizeof err);
    assert_non_null(r);
    assert_true(r->resume_epoch == INT64_MIN);
    protobuf_c_message_free_unpacked(&r->base, NULL);

    /* Enums by name and by number. */
    const char *lj = "{\"reason\":\"LOST_REASON_RESIGNED\",\"epoch\":3}";
    Kubelease__V1__Lost *l = (Kubelease__V1__Lost *)rpc_json_decode(
        &kubelease__v1__lost__descriptor, lj, strlen(lj), err, sizeof err);
    assert_non_null(l);
    assert_int_equal(l->reason, KUBELEASE__V1__LOST_REASON__LOST_REASON_RESIGNED);
    protobuf_c_message_free_unpacked(&l->base, NULL);
    l = (Kubelease__V1__Lost *)rpc_json_decode(&kubelease__v1__lost__descriptor, "{\"reason\":4}",
                                               12, err, sizeof err);
    assert_non_null(l);
    assert_int_equal(l->reason, KUBELEASE__V1__LOST_REASON__LOST_REASON_DELETED);
    protobuf_c_message_free_unpacked(&l->base, NULL);
}

static void expect_error(const ProtobufCMessageDescriptor *d, const char *json, const char *want)
{
    char err[256] = "";
    ProtobufCMessage *m = rpc_json_decode(d, json, strlen(json), err, sizeof err);
    if (m)
        fail_msg("%s: accepted", json);
    if (!strstr(err, want))
        fail_msg("%s: error \"%s\" lacks \"%s\"", json, err, want);
}

static void test_rpc_json_errors_name_the_field(void **state)
{
    (void)state;
    const ProtobufCMessageDescriptor *c = &kubelease__v1__campaign_request__descriptor;
    expect_error(c, "{\"namespace\":5}", "field \"namespace\": expected a string, got a number");
    expect_error(c, "{\"leaseDurationSeconds\":\"abc\"}",
                 "field \"leaseDurationSeconds\": expected an integer");
    expect_error(c, "{\"lease_duration_seconds\":1.5}", "field \"leaseDurationSeconds\"");
    expect_error(c, "{\"leaseDurationSeconds\":3000000000}", "out of range");
    expect_error(c, "{\"resumeEpoch\":\"99999999999999999999\"}",
                 "field \"resumeEpoch\": 99999999999999999999 is out of range");
    expect_error(c, "{\"resumeEpoch\":true}",
                 "field \"resumeEpoch\": expected an integer, got a boolean");
    expect_error(c, "{\"namespace\":\"a\",\"namespace\":\"b\"}", "given more than once");
    expect_error(
        c, "{\"namespace\":\"a\",\"name\":\"b\",\"resume_epoch\":\"1\",\"resumeEpoch\":\"2\"}",
        "field \"resumeEpoch\": given more than once");
    expect_error(c, "[1,2]", "must be a JSON object");
    expect_error(c, "{\"namespace\":", "malformed JSON");
    expect_error(c, "{} {}", "trailing data");
    expect_error(&kubelease__v1__lost__descriptor, "{\"reason\":\"LOST_REASON_BORED\"}",
                 "field \"reason\": unknown kubelease.v1.LostReason value \"LOST_REASON_BORED\"");
    expect_error(&kubelease__v1__get_holder_request__descriptor, "{\"consistent\":\"yes\"}",
                 "field \"consistent\": expected true or false");
    expect_error(&kubelease__v1__campaign_event__descriptor, "{\"elected\":{\"epoch\":\"x\"}}",
                 "field \"elected.epoch\"");
    expect_error(&kubelease__v1__campaign_event__descriptor, "{\"elected\":{},\"lost\":{}}",
                 "field \"lost\": another field of the same oneof");
    expect_error(&kubelease__v1__list_leases_response__descriptor,
                 "{\"leases\":[{},{\"epoch\":[]}]}", "field \"leases[1].epoch\"");
    expect_error(&kubelease__v1__list_leases_response__descriptor, "{\"leases\":{}}",
                 "field \"leases\": expected an array");
}

/* Decodes len bytes of text (which may hold NULs) as a CampaignRequest and
 * expects an error containing want. */
static void expect_error_n(const char *text, size_t len, const char *want)
{
    char err[256] = "";
    ProtobufCMessage *m =
        rpc_json_decode(&kubelease__v1__campaign_request__descriptor, text, len, err, sizeof err);
    if (m)
        fail_msg("%.*s: accepted", (int)len, text);
    if (!strstr(err, want))
        fail_msg("%.*s: error \"%s\" lacks \"%s\"", (int)len, text, err, want);
}

static void test_rpc_json_refuses_nul_in_any_string(void **state)
{
    (void)state;
    const ProtobufCMessageDescriptor *c = &kubelease__v1__campaign_request__descriptor;
    /* Escaped: cJSON would cut the identity to "pod-a". */
    expect_error(c, "{\"namespace\":\"ns\",\"identity\":\"pod-a\\u0000evil\"}",
                 "field \"identity\": contains a NUL");
    expect_error(c, "{\"lease_name\":[],\"name\":\"\\u0000\"}", "field \"name\": contains a NUL");
    /* In a nested message and in a list. */
    expect_error(&kubelease__v1__campaign_event__descriptor,
                 "{\"lost\":{\"epoch\":\"1\",\"message\":\"x\\u0000\"}}",
                 "field \"lost.message\": contains a NUL");
    expect_error(&kubelease__v1__list_leases_response__descriptor,
                 "{\"leases\":[{},{\"holder\":\"a\\u0000\"}]}",
                 "field \"leases[1].holder\": contains a NUL");
    /* In a key: "identity\u0000x" would otherwise be read as "identity". */
    expect_error(c, "{\"identity\\u0000x\":\"pod-a\"}", "field \"identity\": its name contains");
    /* In an unknown field too: no string is cut silently. */
    expect_error(c, "{\"namespace\":\"ns\",\"note\":\"a\\u0000\"}", "field \"note\"");
    /* Raw NUL bytes: inside a string, between tokens, after the object. */
    static const char raw_in[] = "{\"identity\":\"pod-a\0zzz\"}";
    expect_error_n(raw_in, sizeof raw_in - 1, "field \"identity\": contains a NUL");
    static const char raw_between[] = "{\"identity\":\0\"pod-a\"}";
    expect_error_n(raw_between, sizeof raw_between - 1, "malformed JSON: byte 0x00 at byte 12");
    static const char raw_after[] = "{\"identity\":\"pod-a\"}\0\0";
    expect_error_n(raw_after, sizeof raw_after - 1, "trailing data at byte 20");
    static const char vtab[] = "{\"identity\":\v\"pod-a\"}";
    expect_error_n(vtab, sizeof vtab - 1, "byte 0x0b at byte 12");
    /* cJSON reads a \u escape that is not four hex digits as U+0000. */
    expect_error(c, "{\"identity\":\"pod-a\\uzzzz\"}", "invalid \\u escape at byte 18");
    static const char bad_u[] = "{\"pac\\ud\\\0e\":\"ue\"}"; /* found by fuzz_rpc_json */
    expect_error_n(bad_u, sizeof bad_u - 1, "invalid \\u escape");
    /* An escaped backslash before "u0000" is text, not a NUL. */
    char err[256];
    const char *ok = "{\"identity\":\"a\\\\u0000\"}";
    Kubelease__V1__CampaignRequest *r = campaign(ok, err, sizeof err);
    if (!r)
        fail_msg("%s: %s", ok, err);
    assert_string_equal(r->identity, "a\\u0000");
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

static void test_rpc_json_integers_in_strings_are_digits_only(void **state)
{
    (void)state;
    const ProtobufCMessageDescriptor *c = &kubelease__v1__campaign_request__descriptor;
    const ProtobufCMessageDescriptor *confirm = &kubelease__v1__confirm_request__descriptor;
    expect_error(confirm, "{\"epoch\":\"\\t5\"}", "field \"epoch\": expected an integer");
    expect_error(confirm, "{\"epoch\":\" 5\"}", "field \"epoch\": expected an integer");
    expect_error(confirm, "{\"epoch\":\"\\n5\"}", "field \"epoch\": expected an integer");
    expect_error(confirm, "{\"epoch\":\"+5\"}", "field \"epoch\": expected an integer");
    expect_error(confirm, "{\"epoch\":\"- 5\"}", "field \"epoch\": expected an integer");
    expect_error(confirm, "{\"epoch\":\"5 \"}", "field \"epoch\": expected an integer");
    expect_error(confirm, "{\"epoch\":\"0x5\"}", "field \"epoch\": expected an integer");
    expect_error(c, "{\"leaseDurationSeconds\":\"\\t15\"}",
                 "field \"leaseDurationSeconds\": expected an integer");
    expect_error(c, "{\"leaseDurationSeconds\":\"-\"}", "expected an integer");
    char err[256];
    Kubelease__V1__ConfirmRequest *r = (Kubelease__V1__ConfirmRequest *)rpc_json_decode(
        confirm, "{\"epoch\":\"-5\"}", 14, err, sizeof err);
    if (!r)
        fail_msg("\"-5\": %s", err);
    assert_true(r->epoch == -5);
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_json_round_trips_every_message),
        cmocka_unit_test(test_rpc_json_output_uses_camel_case_and_int64_strings),
        cmocka_unit_test(test_rpc_json_name_is_lower_camel_case),
        cmocka_unit_test(test_rpc_json_accepts_both_name_forms_and_int_forms),
        cmocka_unit_test(test_rpc_json_errors_name_the_field),
        cmocka_unit_test(test_rpc_json_refuses_nul_in_any_string),
        cmocka_unit_test(test_rpc_json_integers_in_strings_are_digits_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
