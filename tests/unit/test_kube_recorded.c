/* The codec, the watch framing and the store's status mapping on responses
 * recorded from kube-apiserver v1.34 (tests/unit/fixtures/kube/, captured
 * with the test control plane). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kube/config.h"
#include "kube/lease_json.h"
#include "kube/watch_stream.h"
#include "store/kube_map.h"

/* The fixtures live next to this file. */
static kube_blob fixture(const char *name)
{
    char dir[1024], path[1200], err[300];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    snprintf(path, sizeof path, "%s/fixtures/kube/%s", dir, name);
    kube_blob b;
    if (kube_read_file(path, 1 << 20, &b, err, sizeof err) != 0)
        fail_msg("%s", err);
    return b;
}

static kube_lease lease_of(const char *name)
{
    kube_blob b = fixture(name);
    kube_lease l;
    char err[256];
    if (kube_lease_decode((char *)b.data, b.len, &l, err, sizeof err) != 0)
        fail_msg("%s: %s", name, err);
    kube_blob_free(&b);
    return l;
}

static int64_t mt(const char *s)
{
    int64_t us;
    assert_int_equal(kube_microtime_parse(s, &us), 0);
    return us;
}

static void test_recorded_leases(void **state)
{
    (void)state;
    kube_lease g = lease_of("get_200.json");
    assert_string_equal(g.ns, "kubelease-test");
    assert_string_equal(g.name, "demo");
    assert_string_equal(g.holder_identity, "replica-a");
    assert_int_equal(g.lease_duration_seconds, 15);
    assert_int_equal(g.lease_transitions, 1);
    assert_int_equal(g.acquire_time_us, mt("2026-11-29T14:00:00.123456Z"));
    assert_int_equal(g.renew_time_us, g.acquire_time_us);
    assert_true(g.resource_version[0]);

    kube_lease c = lease_of("create_201.json");
    assert_memory_equal(&c, &g, sizeof c); /* what create returned is what get returns */

    kube_lease u = lease_of("update_200.json");
    assert_string_equal(u.holder_identity, "");
    assert_int_equal(u.lease_duration_seconds, 1);
    assert_int_equal(u.renew_time_us, mt("2026-11-29T14:00:20.000001Z"));
    assert_string_not_equal(u.resource_version, g.resource_version);

    /* Re-encoding a recorded Lease writes the same times, six digits. */
    char *json = kube_lease_encode(&u, true, NULL);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"renewTime\":\"2026-11-29T14:00:20.000001Z\""));
    assert_non_null(strstr(json, "\"acquireTime\":\"2026-11-29T14:00:00.123456Z\""));
    free(json);

    kube_blob b = fixture("list_200.json");
    kube_lease_list list;
    char err[256];
    assert_int_equal(kube_lease_list_decode((char *)b.data, b.len, &list, err, sizeof err), 0);
    assert_int_equal(list.n, 1);
    assert_string_equal(list.items[0].holder_identity, "replica-a");
    assert_true(list.resource_version[0]);
    kube_lease_list_clear(&list);
    kube_blob_free(&b);
}

static void status_of(const char *name, int code, const char *reason, kube_verb verb,
                      store_status want, const char *msg_prefix)
{
    kube_blob b = fixture(name);
    kube_status st;
    char msg[300];
    assert_int_equal(kube_status_decode((char *)b.data, b.len, &st), 0);
    assert_int_equal(st.code, code);
    assert_string_equal(st.reason, reason);
    assert_int_equal(store_kube_map_status(code, &st, verb), want);
    kube_status_message(code, &st, msg, sizeof msg);
    if (strncmp(msg, msg_prefix, strlen(msg_prefix)) != 0)
        fail_msg("%s: \"%s\" does not start with \"%s\"", name, msg, msg_prefix);
    kube_blob_free(&b);
}

static void test_recorded_statuses(void **state)
{
    (void)state;
    status_of("create_409_already_exists.json", 409, "AlreadyExists", KUBE_VERB_CREATE,
              STORE_EXISTS,
              "apiserver: 409 AlreadyExists: leases.coordination.k8s.io \"demo\" "
              "already exists");
    status_of("update_409_conflict.json", 409, "Conflict", KUBE_VERB_PATCH, STORE_CONFLICT,
              "apiserver: 409 Conflict: Operation cannot be fulfilled on "
              "leases.coordination.k8s.io \"demo\": the object has been modified");
    status_of("delete_409_conflict.json", 409, "Conflict", KUBE_VERB_DELETE, STORE_CONFLICT,
              "apiserver: 409 Conflict: Operation cannot be fulfilled");
    status_of("update_422_invalid.json", 422, "Invalid", KUBE_VERB_PATCH, STORE_INVALID,
              "apiserver: 422 Invalid: leases.coordination.k8s.io \"demo\" is invalid");
    status_of("get_404.json", 404, "NotFound", KUBE_VERB_GET, STORE_NOT_FOUND,
              "apiserver: 404 NotFound: leases.coordination.k8s.io \"nope\" not found");
    status_of("get_403.json", 403, "Forbidden", KUBE_VERB_GET, STORE_FORBIDDEN,
              "apiserver: 403 Forbidden: leases.coordination.k8s.io \"x\" is forbidden");
    status_of("get_401.json", 401, "Unauthorized", KUBE_VERB_GET, STORE_FORBIDDEN,
              "apiserver: 401 Unauthorized: Unauthorized");

    /* A plain DELETE answers a Status of success, not a Lease. */
    kube_blob b = fixture("delete_200.json");
    kube_lease l;
    char err[256];
    assert_int_equal(kube_lease_decode((char *)b.data, b.len, &l, err, sizeof err), -1);
    assert_non_null(strstr(err, "Status"));
    kube_blob_free(&b);
}

typedef struct rec {
    kube_watch_event ev[8];
    int n;
} rec;

static int on_event(void *ctx, const kube_watch_event *ev)
{
    rec *r = ctx;
    assert_true(r->n < 8);
    r->ev[r->n++] = *ev;
    return 0;
}

static void test_recorded_watch_stream_any_split(void **state)
{
    (void)state;
    kube_blob b = fixture("watch_stream.ndjson");
    const char *s = (const char *)b.data;
    rec whole = {0};
    kube_watch_parser p;
    char err[256];
    kube_watch_parser_init(&p, 0);
    assert_int_equal(kube_watch_parser_feed(&p, s, b.len, on_event, &whole, err, sizeof err), 0);
    kube_watch_parser_free(&p);
    assert_int_equal(whole.n, 4);
    assert_int_equal(whole.ev[0].type, KUBE_WATCH_MODIFIED);
    assert_string_equal(whole.ev[0].lease.holder_identity, "");
    assert_int_equal(whole.ev[1].type, KUBE_WATCH_DELETED);
    assert_string_equal(whole.ev[1].lease.name, "demo");
    assert_int_equal(whole.ev[2].type, KUBE_WATCH_BOOKMARK);
    assert_string_equal(whole.ev[2].lease.resource_version, whole.ev[1].lease.resource_version);
    assert_int_equal(whole.ev[3].type, KUBE_WATCH_BOOKMARK);
    for (size_t cut = 0; cut <= b.len; cut++) {
        rec r = {0};
        kube_watch_parser_init(&p, 0);
        assert_int_equal(kube_watch_parser_feed(&p, s, cut, on_event, &r, err, sizeof err), 0);
        assert_int_equal(
            kube_watch_parser_feed(&p, s + cut, b.len - cut, on_event, &r, err, sizeof err), 0);
        kube_watch_parser_free(&p);
        assert_int_equal(r.n, whole.n);
        assert_memory_equal(r.ev, whole.ev, sizeof r.ev[0] * (size_t)r.n);
    }
    kube_blob_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorded_leases),
        cmocka_unit_test(test_recorded_statuses),
        cmocka_unit_test(test_recorded_watch_stream_any_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
