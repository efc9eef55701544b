/* The Lease codec on recorded apiserver responses, MicroTime, Status (and
 * how the Kubernetes store maps a Status: store/kube_map.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <cjson/cJSON.h>

#include "kube/lease_json.h"
#include "kube_fixtures.h"
#include "store/kube_map.h"

static int64_t mt(const char *s)
{
    int64_t us;
    if (kube_microtime_parse(s, &us) != 0)
        fail_msg("cannot parse %s", s);
    return us;
}

static void test_lease_decode_held(void **state)
{
    (void)state;
    kube_lease l;
    char err[256];
    assert_int_equal(kube_lease_decode(FIX_LEASE_HELD, strlen(FIX_LEASE_HELD), &l, err, sizeof err),
                     0);
    assert_string_equal(l.name, "demo");
    assert_string_equal(l.ns, "default");
    assert_string_equal(l.resource_version, "1234");
    assert_string_equal(l.holder_identity, "replica-a");
    assert_int_equal(l.lease_duration_seconds, 15);
    assert_int_equal(l.lease_transitions, 3);
    /* 2026-11-29T14:00:00Z = 1795960800 */
    assert_int_equal(l.acquire_time_us, 1795960800LL * 1000000 + 123456);
    assert_int_equal(l.renew_time_us, 1795960810LL * 1000000 + 654321);
}

static void test_lease_decode_sparse_ignores_unknown_fields(void **state)
{
    (void)state;
    kube_lease l;
    char err[256];
    assert_int_equal(
        kube_lease_decode(FIX_LEASE_SPARSE, strlen(FIX_LEASE_SPARSE), &l, err, sizeof err), 0);
    assert_string_equal(l.name, "kube-scheduler");
    assert_string_equal(l.holder_identity, "node-1_2f0c");
    assert_int_equal(l.lease_duration_seconds, 0);
    assert_int_equal(l.lease_transitions, 0);
    assert_int_equal(l.acquire_time_us, 0);
    assert_int_equal(l.renew_time_us, 0);
}

static void decode_error(const char *json, const char *needle)
{
    kube_lease l;
    char err[256] = "";
    memset(&l, 0x55, sizeof l);
    assert_int_equal(kube_lease_decode(json, strlen(json), &l, err, sizeof err), -1);
    if (!strstr(err, needle))
        fail_msg("\"%s\" does not contain \"%s\"", err, needle);
    assert_string_equal(l.name, ""); /* zeroed, never half-filled */
}

static void test_lease_decode_rejects_bad_input(void **state)
{
    (void)state;
    char big[600], json[1000];
    memset(big, 'h', 256);
    big[256] = 0;
    snprintf(
        json, sizeof json,
        "{\"metadata\":{\"name\":\"x\",\"namespace\":\"y\"},\"spec\":{\"holderIdentity\":\"%s\"}}",
        big);
    decode_error(json, "spec.holderIdentity is longer than 255 bytes");
    big[255] = 0; /* 255 bytes fit */
    snprintf(
        json, sizeof json,
        "{\"metadata\":{\"name\":\"x\",\"namespace\":\"y\"},\"spec\":{\"holderIdentity\":\"%s\"}}",
        big);
    kube_lease l;
    char err[256];
    assert_int_equal(kube_lease_decode(json, strlen(json), &l, err, sizeof err), 0);
    assert_int_equal(strlen(l.holder_identity), 255);

    memset(big, 'n', 254);
    big[254] = 0;
    snprintf(json, sizeof json, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"y\"}}", big);
    decode_error(json, "metadata.name is longer than 253 bytes");
    decode_error("{\"metadata\":{\"name\":\"x\",\"namespace\":\"y\",\"resourceVersion\":"
                 "\"12345678901234567890123456789012345678901234567890123456789012345\"}}",
                 "metadata.resourceVersion is longer");
    decode_error("", "not valid JSON");
    decode_error("{\"metadata\":", "not valid JSON");
    decode_error("[]", "not a JSON object");
    decode_error("{}", "no metadata");
    decode_error("{\"metadata\":{\"name\":\"x\"}}", "no metadata.namespace");
    decode_error("{\"metadata\":{\"namespace\":\"x\"}}", "no metadata.name");
    decode_error("{\"metadata\":{\"name\":5,\"namespace\":\"y\"}}",
                 "metadata.name is not a string");
    decode_error("{\"kind\":\"Pod\",\"metadata\":{\"name\":\"x\",\"namespace\":\"y\"}}",
                 "not a Lease");
    decode_error("{\"metadata\":{\"name\":\"x\",\"namespace\":\"y\"},\"spec\":[]}",
                 "spec is not an object");
    decode_error("{\"metadata\":{\"name\":\"x\",\"namespace\":\"y\"},\"spec\":{"
                 "\"leaseDurationSeconds\":1.5}}",
                 "spec.leaseDurationSeconds is not an integer");
    decode_error("{\"metadata\":{\"name\":\"x\",\"namespace\":\"y\"},\"spec\":{"
                 "\"leaseTransitions\":1e300}}",
                 "spec.leaseTransitions is not an integer");
    decode_error("{\"metadata\":{\"name\":\"x\",\"namespace\":\"y\"},\"spec\":{"
                 "\"renewTime\":\"yesterday\"}}",
                 "spec.renewTime is not an RFC 3339 time");
    decode_error("{\"metadata\":{\"name\":\"x\",\"namespace\":\"y\"},\"spec\":{"
                 "\"acquireTime\":5}}",
                 "spec.acquireTime is not an RFC 3339 time");
}

static void test_lease_encode_round_trip(void **state)
{
    (void)state;
    kube_lease in = {0}, out;
    strcpy(in.ns, "default");
    strcpy(in.name, "demo");
    strcpy(in.holder_identity, "replica \"b\"\n");
    strcpy(in.resource_version, "99");
    in.lease_duration_seconds = 15;
    in.lease_transitions = 7;
    in.acquire_time_us = mt("2026-11-29T14:00:00.5Z");
    in.renew_time_us = mt("2026-11-29T14:00:01Z");
    size_t len;
    char *json = kube_lease_encode(&in, true, &len);
    assert_non_null(json);
    assert_int_equal(len, strlen(json));
    assert_non_null(strstr(json, "\"apiVersion\":\"coordination.k8s.io/v1\""));
    assert_non_null(strstr(json, "\"kind\":\"Lease\""));
    assert_non_null(strstr(json, "\"resourceVersion\":\"99\""));
    assert_non_null(strstr(json, "\"acquireTime\":\"2026-11-29T14:00:00.500000Z\""));
    assert_non_null(strstr(json, "\"renewTime\":\"2026-11-29T14:00:01.000000Z\""));
    char err[256];
    assert_int_equal(kube_lease_decode(json, len, &out, err, sizeof err), 0);
    assert_memory_equal(&in, &out, sizeof in);
    free(json);

    /* Create: no resourceVersion; unset duration and times are omitted;
     * holderIdentity and leaseTransitions are always written. */
    in.lease_duration_seconds = 0;
    in.acquire_time_us = in.renew_time_us = 0;
    in.holder_identity[0] = 0;
    json = kube_lease_encode(&in, false, NULL);
    assert_non_null(json);
    assert_null(strstr(json, "resourceVersion"));
    assert_null(strstr(json, "leaseDurationSeconds"));
    assert_null(strstr(json, "Time"));
    assert_non_null(strstr(json, "\"holderIdentity\":\"\""));
    assert_non_null(strstr(json, "\"leaseTransitions\":7"));
    free(json);

    /* Values that cannot be encoded are refused. */
    in.lease_transitions = -1;
    assert_null(kube_lease_encode(&in, false, NULL));
    in.lease_transitions = 1;
    in.renew_time_us = INT64_MAX;
    assert_null(kube_lease_encode(&in, false, NULL));
}

/* The update is a merge patch: only resourceVersion, the pod-label
 * annotation and spec, with unset fields as null (removed), so labels and
 * other annotations are never touched. */
static void test_lease_merge_patch(void **state)
{
    (void)state;
    kube_lease in = {0};
    strcpy(in.ns, "default");
    strcpy(in.name, "demo");
    strcpy(in.holder_identity, "replica-a");
    strcpy(in.resource_version, "42");
    in.lease_duration_seconds = 15;
    in.lease_transitions = 3;
    in.acquire_time_us = mt("2026-11-29T14:00:00.5Z");
    in.renew_time_us = mt("2026-11-29T14:00:01Z");
    size_t len;
    char *json = kube_lease_merge_patch(&in, &len);
    assert_non_null(json);
    assert_int_equal(len, strlen(json));
    assert_string_equal(json, "{\"metadata\":{\"resourceVersion\":\"42\",\"annotations\":{"
                              "\"kubelease.io/pod-label\":null,\"kubelease.io/handoff-to\":null,"
                              "\"kubelease.io/handed-to\":null,\"kubelease.io/"
                              "value\":null,\"kubelease.io/write-id\":null}},\"spec\":{"
                              "\"holderIdentity\":\"replica-a\",\"leaseDurationSeconds\":15,"
                              "\"leaseTransitions\":3,"
                              "\"acquireTime\":\"2026-11-29T14:00:00.500000Z\","
                              "\"renewTime\":\"2026-11-29T14:00:01.000000Z\"}}");
    free(json);

    /* A release: no holder, unset duration and times are removed (null). */
    in.holder_identity[0] = 0;
    in.lease_duration_seconds = 0;
    in.acquire_time_us = in.renew_time_us = 0;
    json = kube_lease_merge_patch(&in, NULL);
    assert_non_null(json);
    assert_string_equal(json, "{\"metadata\":{\"resourceVersion\":\"42\",\"annotations\":{"
                              "\"kubelease.io/pod-label\":null,\"kubelease.io/handoff-to\":null,"
                              "\"kubelease.io/handed-to\":null,\"kubelease.io/"
                              "value\":null,\"kubelease.io/write-id\":null}},\"spec\":{"
                              "\"holderIdentity\":\"\",\"leaseDurationSeconds\":null,"
                              "\"leaseTransitions\":3,\"acquireTime\":null,\"renewTime\":null}}");
    free(json);

    /* Without a resourceVersion the patch would be unconditional: refused. */
    in.resource_version[0] = 0;
    assert_null(kube_lease_merge_patch(&in, NULL));
    strcpy(in.resource_version, "42");
    in.lease_transitions = -1;
    assert_null(kube_lease_merge_patch(&in, NULL));
}

/* The Lease encodes (with its resourceVersion) and decodes back the same. */
static void assert_round_trips(const kube_lease *l)
{
    size_t len;
    char err[256];
    char *obj = kube_lease_encode(l, true, &len);
    assert_non_null(obj);
    kube_lease again;
    assert_int_equal(kube_lease_decode(obj, len, &again, err, sizeof err), 0);
    assert_memory_equal(l, &again, sizeof *l);
    free(obj);
}

/* spec.preferredHolder and spec.strategy (coordinated leader election) are
 * read, written in the whole object (a create) and never in a patch, so
 * that an update keeps them as others wrote them; a value kubelease could
 * not act on is read as absent, never an error. */
static void test_lease_preferred_holder_and_strategy(void **state)
{
    (void)state;
    const char *held = "{\"kind\":\"Lease\",\"metadata\":{\"name\":\"demo\",\"namespace\":"
                       "\"default\",\"resourceVersion\":\"7\"},\"spec\":{\"holderIdentity\":"
                       "\"a\",\"preferredHolder\":\"b c\",\"strategy\":"
                       "\"OldestEmulationVersion\"}}";
    kube_lease l;
    char err[256];
    assert_int_equal(kube_lease_decode(held, strlen(held), &l, err, sizeof err), 0);
    assert_string_equal(l.preferred_holder, "b c");
    assert_string_equal(l.strategy, "OldestEmulationVersion");
    char *patch = kube_lease_merge_patch(&l, NULL);
    assert_non_null(patch);
    assert_null(strstr(patch, "preferredHolder"));
    assert_null(strstr(patch, "strategy"));
    free(patch);
    assert_round_trips(&l);
    store_lease rec;
    store_lease_from_kube(&l, &rec);
    assert_string_equal(rec.preferred_holder, "b c");
    assert_string_equal(rec.strategy, "OldestEmulationVersion");

    /* Not values kubelease could act on: absent, and the Lease still reads. */
    char too_long[400];
    memset(too_long, 'x', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = 0;
    const char *bad[][2] = {
        {"\"\"", "\"\""},
        {"7", "{}"},
        {"\"tab\\there\"", "\"two words\""},
        {"\"del\\u007fhere\"", "\"\\u00e9t\u00e9\""},
        {NULL, NULL}, /* too long, both */
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char doc[1024], p[512], st[512];
        snprintf(p, sizeof p, "%s", bad[k][0] ? bad[k][0] : "");
        snprintf(st, sizeof st, "%s", bad[k][1] ? bad[k][1] : "");
        if (!bad[k][0]) {
            snprintf(p, sizeof p, "\"%.300s\"", too_long);
            snprintf(st, sizeof st, "\"%.399s\"", too_long);
        }
        snprintf(doc, sizeof doc,
                 "{\"metadata\":{\"name\":\"demo\",\"namespace\":\"default\"},\"spec\":{"
                 "\"holderIdentity\":\"a\",\"preferredHolder\":%s,\"strategy\":%s}}",
                 p, st);
        assert_int_equal(kube_lease_decode(doc, strlen(doc), &l, err, sizeof err), 0);
        assert_string_equal(l.holder_identity, "a");
        assert_string_equal(l.preferred_holder, "");
        assert_string_equal(l.strategy, "");
    }
    /* Nor does the encoder write one. */
    memset(&l, 0, sizeof l);
    strcpy(l.ns, "default");
    strcpy(l.name, "demo");
    strcpy(l.preferred_holder, "tab\there");
    assert_null(kube_lease_encode(&l, false, NULL));
    strcpy(l.preferred_holder, "b");
    strcpy(l.strategy, "two words");
    assert_null(kube_lease_encode(&l, false, NULL));
}

/* A term's Pod label travels in one annotation: written by create and
 * patch, read back, other annotations left alone. */
static void test_lease_pod_label_annotation(void **state)
{
    (void)state;
    kube_lease in = {0}, out;
    strcpy(in.ns, "default");
    strcpy(in.name, "demo");
    strcpy(in.holder_identity, "a");
    strcpy(in.resource_version, "7");
    strcpy(in.pod_label, "kv-0 example.com/role=leader");
    char *json = kube_lease_merge_patch(&in, NULL);
    assert_non_null(json);
    assert_string_equal(
        json, "{\"metadata\":{\"resourceVersion\":\"7\",\"annotations\":{"
              "\"kubelease.io/pod-label\":\"kv-0 example.com/role=leader\","
              "\"kubelease.io/handoff-to\":null,\"kubelease.io/handed-to\":null,\"kubelease.io/"
              "value\":null,\"kubelease.io/write-id\":null}},"
              "\"spec\":{\"holderIdentity\":\"a\",\"leaseDurationSeconds\":null,"
              "\"leaseTransitions\":0,\"acquireTime\":null,\"renewTime\":null}}");
    free(json);
    json = kube_lease_encode(&in, false, NULL);
    assert_non_null(json);
    char err[200];
    assert_int_equal(kube_lease_decode(json, strlen(json), &out, err, sizeof err), 0);
    assert_string_equal(out.pod_label, "kv-0 example.com/role=leader");
    free(json);
    const char *other = "{\"metadata\":{\"name\":\"n\",\"namespace\":\"d\",\"annotations\":{"
                        "\"x\":\"y\"}}}";
    assert_int_equal(kube_lease_decode(other, strlen(other), &out, err, sizeof err), 0);
    assert_string_equal(out.pod_label, "");
    const char *bad = "{\"metadata\":{\"name\":\"n\",\"namespace\":\"d\",\"annotations\":{"
                      "\"kubelease.io/pod-label\":5}}}";
    assert_int_equal(kube_lease_decode(bad, strlen(bad), &out, err, sizeof err), -1);
    assert_non_null(strstr(err, "kubelease.io/pod-label"));
}

/* A Pod label patch names one label; a removal sets it to null. */
static void test_pod_label_patch_and_decode(void **state)
{
    (void)state;
    char *json = kube_pod_label_patch("example.com/role", "leader", NULL);
    assert_string_equal(json, "{\"metadata\":{\"labels\":{\"example.com/role\":\"leader\"}}}");
    free(json);
    json = kube_pod_label_patch("example.com/role", NULL, NULL);
    assert_string_equal(json, "{\"metadata\":{\"labels\":{\"example.com/role\":null}}}");
    free(json);
    char ip[KUBE_POD_IPS_MAX], err[200];
    const char *pod = "{\"kind\":\"Pod\",\"status\":{\"podIP\":\"10.1.2.3\"}}";
    assert_int_equal(kube_pod_decode(pod, strlen(pod), ip, err, sizeof err), 0);
    assert_string_equal(ip, "10.1.2.3");
    const char *pending = "{\"kind\":\"Pod\",\"status\":{\"phase\":\"Pending\"}}";
    assert_int_equal(kube_pod_decode(pending, strlen(pending), ip, err, sizeof err), 0);
    assert_string_equal(ip, "");
    const char *dual = "{\"status\":{\"podIP\":\"10.1.2.3\",\"podIPs\":[{\"ip\":\"10.1.2.3\"},"
                       "{\"ip\":\"fd00::3\"},{\"ip\":7}]}}";
    assert_int_equal(kube_pod_decode(dual, strlen(dual), ip, err, sizeof err), 0);
    assert_string_equal(ip, "10.1.2.3 fd00::3");
    const char *lease = "{\"kind\":\"Lease\"}";
    assert_int_equal(kube_pod_decode(lease, strlen(lease), ip, err, sizeof err), -1);
    assert_int_equal(kube_pod_decode("[", 1, ip, err, sizeof err), -1);
}

/* The term nonce (docs/design.md, rule 8) is one annotation: written by
 * create and by the merge patch when set, and only that key, so that other
 * annotations stay as their writers left them; read back from
 * metadata.annotations, where a value kubelease cannot have written is read
 * as absent instead of making the Lease unreadable. */
static void test_lease_term_nonce_annotation(void **state)
{
    (void)state;
    kube_lease in = {0}, out;
    char err[256];
    strcpy(in.ns, "default");
    strcpy(in.name, "demo");
    strcpy(in.holder_identity, "replica-a");
    strcpy(in.resource_version, "42");
    in.lease_transitions = 3;
    strcpy(in.term_nonce, "Zm9v-YmFy_09");
    char *json = kube_lease_merge_patch(&in, NULL);
    assert_non_null(json);
    assert_string_equal(json, "{\"metadata\":{\"resourceVersion\":\"42\",\"annotations\":{"
                              "\"kubelease.io/term-nonce\":\"Zm9v-YmFy_09\","
                              "\"kubelease.io/pod-label\":null,\"kubelease.io/handoff-to\":null,"
                              "\"kubelease.io/handed-to\":null,\"kubelease.io/"
                              "value\":null,\"kubelease.io/write-id\":null}},\"spec\":{"
                              "\"holderIdentity\":\"replica-a\",\"leaseDurationSeconds\":null,"
                              "\"leaseTransitions\":3,\"acquireTime\":null,\"renewTime\":null}}");
    free(json);
    json = kube_lease_encode(&in, false, NULL);
    assert_non_null(json);
    assert_int_equal(kube_lease_decode(json, strlen(json), &out, err, sizeof err), 0);
    assert_string_equal(out.term_nonce, "Zm9v-YmFy_09");
    free(json);
    /* Only base64url text is written. */
    strcpy(in.term_nonce, "a b");
    assert_null(kube_lease_merge_patch(&in, NULL));
    assert_null(kube_lease_encode(&in, false, NULL));

    static const char *const ignored[] = {
        "\"annotations\":{\"kubelease.io/term-nonce\":7}",
        "\"annotations\":{\"kubelease.io/term-nonce\":\"not base64url!\"}",
        "\"annotations\":{\"kubelease.io/term-nonce\":"
        "\"0123456789012345678901234567890123456789012345678901234567890123\"}",
        "\"annotations\":[]",
        "\"annotations\":{\"example.com/other\":\"x\"}",
    };
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++) {
        char buf[512];
        snprintf(buf, sizeof buf,
                 "{\"kind\":\"Lease\",\"metadata\":{\"name\":\"n\",\"namespace\":\"d\",%s},"
                 "\"spec\":{\"holderIdentity\":\"h\"}}",
                 ignored[i]);
        assert_int_equal(kube_lease_decode(buf, strlen(buf), &out, err, sizeof err), 0);
        assert_string_equal(out.holder_identity, "h");
        assert_string_equal(out.term_nonce, "");
    }
}

static void round_trip(const char *in, const char *want)
{
    int64_t us;
    char out[KUBE_MICROTIME_LEN];
    if (kube_microtime_parse(in, &us) != 0)
        fail_msg("cannot parse %s", in);
    assert_int_equal(kube_microtime_format(us, out), 0);
    assert_string_equal(out, want);
    /* The formatted form parses back to the same instant. */
    int64_t again;
    assert_int_equal(kube_microtime_parse(out, &again), 0);
    assert_int_equal(again, us);
}

/* Decodes a Lease held by "a" whose metadata.annotations hold members (a
 * JSON object's members), into l: whatever the annotations say, the Lease
 * reads. */
static void decode_annotated(const char *members, kube_lease *l)
{
    char doc[2048], err[256];
    int n = snprintf(doc, sizeof doc,
                     "{\"metadata\":{\"name\":\"demo\",\"namespace\":\"default\",\"annotations\":{"
                     "%s}},\"spec\":{\"holderIdentity\":\"a\"}}",
                     members);
    assert_true(n > 0 && (size_t)n < sizeof doc);
    assert_int_equal(kube_lease_decode(doc, strlen(doc), l, err, sizeof err), 0);
    assert_string_equal(l->holder_identity, "a");
}

/* default/demo at resourceVersion 7 with nothing else set. */
static void bare_lease(kube_lease *l)
{
    memset(l, 0, sizeof *l);
    strcpy(l->ns, "default");
    strcpy(l->name, "demo");
    strcpy(l->resource_version, "7");
}

/* The leader value (docs/design.md, rule 10): base64 in its annotation,
 * bytes in the Lease types; a value that is not base64 of at most 1024
 * bytes is read as none, not an error. */
static void test_lease_value_annotation(void **state)
{
    (void)state;
    const char *held = "{\"metadata\":{\"name\":\"demo\",\"namespace\":\"default\","
                       "\"resourceVersion\":\"7\",\"annotations\":{"
                       "\"kubelease.io/value\":\"AAEC/w==\"}},"
                       "\"spec\":{\"holderIdentity\":\"a\",\"leaseTransitions\":11}}";
    kube_lease l;
    char err[256];
    assert_int_equal(kube_lease_decode(held, strlen(held), &l, err, sizeof err), 0);
    assert_int_equal(l.value_len, 4);
    assert_memory_equal(l.value, "\x00\x01\x02\xff", 4);
    char *patch = kube_lease_merge_patch(&l, NULL);
    assert_non_null(patch);
    assert_non_null(strstr(patch, "\"kubelease.io/value\":\"AAEC/w==\""));
    free(patch);
    assert_round_trips(&l);
    store_lease rec;
    store_lease_from_kube(&l, &rec);
    assert_int_equal(rec.value_len, 4);
    assert_memory_equal(rec.value, "\x00\x01\x02\xff", 4);
    kube_lease back;
    assert_true(store_lease_to_kube(&rec, &back));
    assert_int_equal(back.value_len, 4);

    char big[1500 + 1];
    memset(big, 'A', 1500); /* 1125 bytes: over the limit */
    big[1500] = 0;
    const char *bad[] = {"\"not base64!\"", "\"AAF\"", "7", "\"AA==AA==\"", NULL};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char members[1600];
        snprintf(members, sizeof members, "\"kubelease.io/value\":%s%s%s", bad[k] ? "" : "\"",
                 bad[k] ? bad[k] : big, bad[k] ? "" : "\"");
        decode_annotated(members, &l);
        assert_int_equal(l.value_len, 0);
    }
    /* An unset value is removed by a patch. */
    bare_lease(&l);
    patch = kube_lease_merge_patch(&l, NULL);
    assert_non_null(strstr(patch, "\"kubelease.io/value\":null"));
    free(patch);
}

/* The write id (docs/design.md, rule 3): 16 lowercase hex digits in its
 * annotation, a number in the Lease types, written when set and removed
 * (null) by a patch when not; anything else is read as unset, not an
 * error. */
static void test_lease_write_id_annotation(void **state)
{
    (void)state;
    const char *held = "{\"metadata\":{\"name\":\"demo\",\"namespace\":\"default\","
                       "\"resourceVersion\":\"7\",\"annotations\":{"
                       "\"kubelease.io/write-id\":\"00c0ffee12345678\"}},"
                       "\"spec\":{\"holderIdentity\":\"a\",\"leaseTransitions\":11}}";
    kube_lease l;
    char err[256];
    assert_int_equal(kube_lease_decode(held, strlen(held), &l, err, sizeof err), 0);
    assert_true(l.write_id == 0x00c0ffee12345678ull);
    char *patch = kube_lease_merge_patch(&l, NULL);
    assert_non_null(patch);
    assert_non_null(strstr(patch, "\"kubelease.io/write-id\":\"00c0ffee12345678\""));
    free(patch);
    assert_round_trips(&l);
    store_lease rec;
    store_lease_from_kube(&l, &rec);
    assert_true(rec.write_id == 0x00c0ffee12345678ull);
    kube_lease back;
    assert_true(store_lease_to_kube(&rec, &back));
    assert_true(back.write_id == 0x00c0ffee12345678ull);

    const char *bad[] = {"\"00C0FFEE12345678\"",
                         "\"c0ffee\"",
                         "\"00c0ffee123456789\"",
                         "\"00c0ffee1234567g\"",
                         "\"0000000000000000\"",
                         "12",
                         "null"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char members[128];
        snprintf(members, sizeof members, "\"kubelease.io/write-id\":%s", bad[k]);
        decode_annotated(members, &l);
        assert_true(l.write_id == 0);
    }
    /* An unset write id is removed by a patch, left out of a whole object. */
    bare_lease(&l);
    patch = kube_lease_merge_patch(&l, NULL);
    assert_non_null(strstr(patch, "\"kubelease.io/write-id\":null"));
    free(patch);
    char *whole = kube_lease_encode(&l, false, NULL);
    assert_null(strstr(whole, "write-id"));
    free(whole);
}

/* The handoff annotations (docs/design.md, rule 3): decoded when they are
 * an identity and an epoch, written by the merge patch when set and removed
 * (null) when not; anything else reads as unset and the Lease still reads. */
static void test_lease_handoff_annotations(void **state)
{
    (void)state;
    const char *held = "{\"metadata\":{\"name\":\"demo\",\"namespace\":\"default\","
                       "\"resourceVersion\":\"7\",\"annotations\":{"
                       "\"kubelease.io/handoff-to\":\"b c\",\"kubelease.io/handed-to\":\"12\"}},"
                       "\"spec\":{\"holderIdentity\":\"a\",\"leaseTransitions\":11}}";
    kube_lease l;
    char err[256];
    assert_int_equal(kube_lease_decode(held, strlen(held), &l, err, sizeof err), 0);
    assert_string_equal(l.handoff_to, "b c");
    assert_int_equal(l.handed_to, 12);
    char *patch = kube_lease_merge_patch(&l, NULL);
    assert_non_null(patch);
    assert_non_null(strstr(patch, "\"kubelease.io/handoff-to\":\"b c\""));
    assert_non_null(strstr(patch, "\"kubelease.io/handed-to\":\"12\""));
    free(patch);
    assert_round_trips(&l);
    store_lease rec;
    store_lease_from_kube(&l, &rec);
    assert_string_equal(rec.handoff_to, "b c");
    assert_int_equal(rec.handed_to, 12);

    const char *bad[][2] = {
        {"\"\"", "\"\""},    {"7", "12"},          {"\"tab\\there\"", "\"012\""},
        {"\"x\"", "\"-3\""}, {"\"x\"", "\"1e3\""}, {"\"x\"", "\"2147483648\""},
        {"\"x\"", "\"0\""},  {"{}", "\" 5\""},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char members[128];
        snprintf(members, sizeof members,
                 "\"kubelease.io/handoff-to\":%s,\"kubelease.io/handed-to\":%s", bad[k][0],
                 bad[k][1]);
        decode_annotated(members, &l);
        assert_int_equal(l.handed_to, 0);
        if (k != 4 && k != 5 && k != 6 && k != 3)
            assert_string_equal(l.handoff_to, "");
    }
    /* Nor does the encoder write one. */
    bare_lease(&l);
    strcpy(l.handoff_to, "tab\there");
    assert_null(kube_lease_merge_patch(&l, NULL));
    l.handoff_to[0] = 0;
    l.handed_to = -1;
    assert_null(kube_lease_merge_patch(&l, NULL));
}

static void test_microtime_round_trips_six_digits(void **state)
{
    (void)state;
    round_trip("2006-01-02T15:04:05.000000Z", "2006-01-02T15:04:05.000000Z");
    round_trip("2006-01-02T15:04:05Z", "2006-01-02T15:04:05.000000Z");
    round_trip("2006-01-02T15:04:05.Z", "2006-01-02T15:04:05.000000Z");
    round_trip("2006-01-02T15:04:05.1Z", "2006-01-02T15:04:05.100000Z");
    round_trip("2006-01-02T15:04:05.123456789Z", "2006-01-02T15:04:05.123456Z");
    round_trip("2006-01-02T15:04:05.999999999Z", "2006-01-02T15:04:05.999999Z");
    round_trip("2006-01-02T15:04:05.5+07:00", "2006-01-02T08:04:05.500000Z");
    round_trip("2006-01-02T00:30:00-01:30", "2006-01-02T02:00:00.000000Z");
    round_trip("2006-01-01T00:00:00+00:30", "2005-12-31T23:30:00.000000Z");
    round_trip("1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000000Z");
    round_trip("1969-12-31T23:59:59.999999Z", "1969-12-31T23:59:59.999999Z");
    round_trip("2024-02-29T12:00:00Z", "2024-02-29T12:00:00.000000Z");
    round_trip("2000-02-29T12:00:00Z", "2000-02-29T12:00:00.000000Z");
    round_trip("9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59.999999Z");
    round_trip("0000-01-01T00:00:00Z", "0000-01-01T00:00:00.000000Z");
    assert_int_equal(mt("1970-01-01T00:00:01.000001Z"), 1000001);

    /* Every microsecond value formats with exactly six digits and parses back. */
    int64_t base = mt("2026-11-29T14:00:00Z");
    for (int64_t d = -3000000; d <= 3000000; d += 7919) {
        char out[KUBE_MICROTIME_LEN];
        int64_t back;
        assert_int_equal(kube_microtime_format(base + d, out), 0);
        assert_int_equal(strlen(out), 27);
        assert_int_equal(kube_microtime_parse(out, &back), 0);
        assert_int_equal(back, base + d);
    }
    char out[KUBE_MICROTIME_LEN];
    assert_int_equal(kube_microtime_format(INT64_MIN, out), -1);
    assert_string_equal(out, "");
}

static void test_microtime_rejects_malformed(void **state)
{
    (void)state;
    const char *bad[] = {"",
                         "2006-01-02",
                         "2006-01-02 15:04:05Z",
                         "2006-01-02T15:04:05",
                         "2006-01-02T15:04:05.1234567890Z",
                         "2006-13-02T15:04:05Z",
                         "2006-02-29T15:04:05Z",
                         "1900-02-29T15:04:05Z",
                         "2006-01-32T15:04:05Z",
                         "2006-01-02T24:00:00Z",
                         "2006-01-02T15:60:05Z",
                         "2006-01-02T15:04:60Z",
                         "2006-01-02T15:04:05+0700",
                         "2006-01-02T15:04:05+24:00",
                         "2006-01-02T15:04:05Zjunk",
                         "+006-01-02T15:04:05Z",
                         "2006-01-02T15:04:5Z"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t us;
        if (kube_microtime_parse(bad[i], &us) == 0)
            fail_msg("accepted %s", bad[i]);
    }
}

static void test_status_decode_and_mapping(void **state)
{
    (void)state;
    kube_status st;
    char msg[300];
    assert_int_equal(kube_status_decode(FIX_STATUS_CONFLICT, strlen(FIX_STATUS_CONFLICT), &st), 0);
    assert_int_equal(st.code, 409);
    assert_string_equal(st.reason, "Conflict");
    assert_int_equal(store_kube_map_status(409, &st, KUBE_VERB_PATCH), STORE_CONFLICT);
    kube_status_message(409, &st, msg, sizeof msg);
    assert_true(strncmp(msg,
                        "apiserver: 409 Conflict: Operation cannot be fulfilled on "
                        "leases.coordination.k8s.io \"demo\": the object has been modified",
                        108) == 0);

    assert_int_equal(kube_status_decode(FIX_STATUS_EXISTS, strlen(FIX_STATUS_EXISTS), &st), 0);
    assert_string_equal(st.reason, "AlreadyExists");
    assert_string_equal(st.message, "leases.coordination.k8s.io \"demo\" already exists");
    assert_int_equal(store_kube_map_status(409, &st, KUBE_VERB_CREATE), STORE_EXISTS);

    assert_int_equal(kube_status_decode(FIX_STATUS_NOT_FOUND, strlen(FIX_STATUS_NOT_FOUND), &st),
                     0);
    assert_int_equal(store_kube_map_status(404, &st, KUBE_VERB_GET), STORE_NOT_FOUND);
    assert_int_equal(kube_status_decode(FIX_STATUS_FORBIDDEN, strlen(FIX_STATUS_FORBIDDEN), &st),
                     0);
    assert_int_equal(store_kube_map_status(403, &st, KUBE_VERB_GET), STORE_FORBIDDEN);
    assert_non_null(strstr(st.message, "cannot get resource"));
    /* A message longer than the buffer is cut, never overflowing it. */
    char longst[1200];
    char filler[1000];
    memset(filler, 'm', sizeof filler - 1);
    filler[sizeof filler - 1] = 0;
    snprintf(longst, sizeof longst, "{\"code\":500,\"message\":\"%s\"}", filler);
    assert_int_equal(kube_status_decode(longst, strlen(longst), &st), 0);
    assert_int_equal(strlen(st.message), sizeof st.message - 1);
    assert_int_equal(kube_status_decode(FIX_STATUS_INVALID, strlen(FIX_STATUS_INVALID), &st), 0);
    assert_int_equal(store_kube_map_status(422, &st, KUBE_VERB_PATCH), STORE_INVALID);

    /* Without a Status body: by HTTP code and verb. */
    assert_int_equal(store_kube_map_status(409, NULL, KUBE_VERB_CREATE), STORE_EXISTS);
    assert_int_equal(store_kube_map_status(409, NULL, KUBE_VERB_PATCH), STORE_CONFLICT);
    assert_int_equal(store_kube_map_status(401, NULL, KUBE_VERB_GET), STORE_FORBIDDEN);
    assert_int_equal(store_kube_map_status(400, NULL, KUBE_VERB_GET), STORE_INVALID);
    assert_int_equal(store_kube_map_status(429, NULL, KUBE_VERB_GET), STORE_UNAVAILABLE);
    assert_int_equal(store_kube_map_status(503, NULL, KUBE_VERB_GET), STORE_UNAVAILABLE);
    assert_int_equal(store_kube_map_status(0, NULL, KUBE_VERB_GET), STORE_UNAVAILABLE);
    assert_int_equal(store_kube_map_status(200, NULL, KUBE_VERB_GET), STORE_OK);
    assert_int_equal(store_kube_map_status(201, NULL, KUBE_VERB_CREATE), STORE_OK);
    assert_int_equal(store_kube_map_status(302, NULL, KUBE_VERB_GET), STORE_INTERNAL);
    kube_status_message(503, NULL, msg, sizeof msg);
    assert_string_equal(msg, "apiserver: 503 Service Unavailable");

    assert_int_equal(kube_status_decode("<html>", 6, &st), -1);
    assert_int_equal(kube_status_decode("{}", 2, &st), -1);
    assert_int_equal(st.code, 0);
}

static void test_lease_list_decode(void **state)
{
    (void)state;
    kube_lease_list l;
    char err[256];
    assert_int_equal(
        kube_lease_list_decode(FIX_LEASE_LIST, strlen(FIX_LEASE_LIST), &l, err, sizeof err), 0);
    assert_string_equal(l.resource_version, "1300");
    assert_int_equal(l.n, 2);
    assert_int_equal(l.n_bad, 0);
    assert_string_equal(l.items[0].resource_version, "1240");
    assert_string_equal(l.items[0].holder_identity, "");
    assert_int_equal(l.items[0].lease_duration_seconds, 1);
    assert_string_equal(l.items[1].name, "kube-scheduler");
    kube_lease_list_clear(&l);

    assert_int_equal(kube_lease_list_decode(FIX_LEASE_LIST_EMPTY, strlen(FIX_LEASE_LIST_EMPTY), &l,
                                            err, sizeof err),
                     0);
    assert_int_equal(l.n, 0);
    assert_string_equal(l.resource_version, "1301");
    kube_lease_list_clear(&l);

    /* A bad item is counted and skipped, the others are kept. */
    const char *mixed =
        "{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[{\"metadata\":{}}," FIX_LEASE_SPARSE
        "]}";
    assert_int_equal(kube_lease_list_decode(mixed, strlen(mixed), &l, err, sizeof err), 0);
    assert_int_equal(l.n, 1);
    assert_int_equal(l.n_bad, 1);
    assert_non_null(strstr(l.bad_reason, "metadata.name"));
    assert_int_equal(l.n_bad_names, 0);
    kube_lease_list_clear(&l);

    /* The name of a bad item is kept when it can be read: a Lease that
     * exists, though it cannot be decoded. */
    const char *named_bad = "{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":[{\"metadata\":{"
                            "\"name\":\"bad\",\"namespace\":\"ns1\"},\"spec\":{"
                            "\"leaseDurationSeconds\":\"x\"}},{\"metadata\":{\"name\":7}}]}";
    assert_int_equal(kube_lease_list_decode(named_bad, strlen(named_bad), &l, err, sizeof err), 0);
    assert_int_equal(l.n, 0);
    assert_int_equal(l.n_bad, 2);
    assert_int_equal(l.n_bad_names, 1);
    assert_string_equal(l.bad_names[0], "bad");
    kube_lease_list_clear(&l);

    assert_int_equal(kube_lease_list_decode("{\"items\":[]}", 12, &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "no metadata"));
    assert_int_equal(
        kube_lease_list_decode("{\"metadata\":{},\"items\":[]}", 26, &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "resourceVersion"));
    assert_int_equal(
        kube_lease_list_decode("{\"metadata\":{\"resourceVersion\":\"1\"},\"items\":{}}", 47, &l,
                               err, sizeof err),
        -1);
    assert_non_null(strstr(err, "items is not a list"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lease_decode_held),
        cmocka_unit_test(test_lease_decode_sparse_ignores_unknown_fields),
        cmocka_unit_test(test_lease_decode_rejects_bad_input),
        cmocka_unit_test(test_lease_encode_round_trip),
        cmocka_unit_test(test_lease_merge_patch),
        cmocka_unit_test(test_lease_pod_label_annotation),
        cmocka_unit_test(test_pod_label_patch_and_decode),
        cmocka_unit_test(test_lease_term_nonce_annotation),
        cmocka_unit_test(test_lease_preferred_holder_and_strategy),
        cmocka_unit_test(test_lease_handoff_annotations),
        cmocka_unit_test(test_lease_value_annotation),
        cmocka_unit_test(test_lease_write_id_annotation),
        cmocka_unit_test(test_microtime_round_trips_six_digits),
        cmocka_unit_test(test_microtime_rejects_malformed),
        cmocka_unit_test(test_status_decode_and_mapping),
        cmocka_unit_test(test_lease_list_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
