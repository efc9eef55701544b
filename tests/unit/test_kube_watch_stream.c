/* Watch-stream framing: events split at every byte boundary decode the same,
 * bookmarks, ERROR 410, line caps, malformed lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kube/watch_stream.h"
#include "kube_fixtures.h"

typedef struct rec {
    kube_watch_event ev[16];
    int n;
    int stop_after; /* 0: never */
} rec;

static int on_event(void *ctx, const kube_watch_event *ev)
{
    rec *r = ctx;
    assert_true(r->n < 16);
    r->ev[r->n++] = *ev;
    return r->stop_after && r->n >= r->stop_after;
}

static void feed_all(const char *s, size_t len, size_t chunk, rec *r)
{
    kube_watch_parser p;
    char err[256];
    kube_watch_parser_init(&p, 0);
    memset(r, 0, sizeof *r);
    for (size_t off = 0; off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        if (kube_watch_parser_feed(&p, s + off, n, on_event, r, err, sizeof err) != 0)
            fail_msg("feed failed at %zu: %s", off, err);
    }
    assert_int_equal(kube_watch_parser_pending(&p), 0);
    kube_watch_parser_free(&p);
}

static void check_stream(const rec *r)
{
    assert_int_equal(r->n, 5);
    assert_int_equal(r->ev[0].type, KUBE_WATCH_ADDED);
    assert_string_equal(r->ev[0].lease.name, "kube-scheduler");
    assert_string_equal(r->ev[0].lease.resource_version, "77");
    assert_int_equal(r->ev[1].type, KUBE_WATCH_MODIFIED);
    assert_string_equal(r->ev[1].lease.name, "demo");
    assert_int_equal(r->ev[1].lease.lease_duration_seconds, 1);
    assert_int_equal(r->ev[2].type, KUBE_WATCH_BOOKMARK);
    assert_string_equal(r->ev[2].lease.resource_version, "1500");
    assert_int_equal(r->ev[3].type, KUBE_WATCH_DELETED);
    assert_string_equal(r->ev[3].lease.ns, "default");
    assert_int_equal(r->ev[4].type, KUBE_WATCH_ERROR);
    assert_int_equal(r->ev[4].status.code, 410);
    assert_string_equal(r->ev[4].status.reason, "Expired");
}

static void test_watch_stream_whole(void **state)
{
    (void)state;
    rec r;
    feed_all(FIX_WATCH_STREAM, strlen(FIX_WATCH_STREAM), strlen(FIX_WATCH_STREAM), &r);
    check_stream(&r);
}

static void test_watch_stream_split_at_every_byte_boundary(void **state)
{
    (void)state;
    const char *s = FIX_WATCH_STREAM;
    size_t len = strlen(s);
    rec whole;
    feed_all(s, len, len, &whole);
    /* Two chunks, split at every position. */
    for (size_t cut = 0; cut <= len; cut++) {
        kube_watch_parser p;
        rec r = {0};
        char err[256];
        kube_watch_parser_init(&p, 0);
        assert_int_equal(kube_watch_parser_feed(&p, s, cut, on_event, &r, err, sizeof err), 0);
        assert_int_equal(
            kube_watch_parser_feed(&p, s + cut, len - cut, on_event, &r, err, sizeof err), 0);
        assert_int_equal(r.n, whole.n);
        assert_memory_equal(r.ev, whole.ev, sizeof whole.ev[0] * (size_t)whole.n);
        kube_watch_parser_free(&p);
    }
    /* One byte at a time, and other chunk sizes. */
    for (size_t chunk = 1; chunk < 64; chunk++) {
        rec r;
        feed_all(s, len, chunk, &r);
        assert_memory_equal(r.ev, whole.ev, sizeof whole.ev[0] * (size_t)whole.n);
    }
}

static void test_watch_stream_blank_lines_and_crlf(void **state)
{
    (void)state;
    const char *s = "\n\r\n{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":"
                    "\"9\"}}}\r\n  \n";
    rec r;
    feed_all(s, strlen(s), 3, &r);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.ev[0].lease.resource_version, "9");
}

static void test_watch_stream_partial_event_is_pending(void **state)
{
    (void)state;
    kube_watch_parser p;
    rec r = {0};
    char err[256];
    kube_watch_parser_init(&p, 0);
    const char *s = FIX_WATCH_STREAM;
    assert_int_equal(kube_watch_parser_feed(&p, s, 40, on_event, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(kube_watch_parser_pending(&p), 40);
    /* A new stream starts clean. */
    kube_watch_parser_reset(&p);
    assert_int_equal(kube_watch_parser_pending(&p), 0);
    assert_int_equal(kube_watch_parser_feed(&p, s, strlen(s), on_event, &r, err, sizeof err), 0);
    check_stream(&r);
    kube_watch_parser_free(&p);
}

static void test_watch_stream_callback_can_stop(void **state)
{
    (void)state;
    kube_watch_parser p;
    rec r = {0};
    r.stop_after = 2;
    char err[256];
    kube_watch_parser_init(&p, 0);
    assert_int_equal(kube_watch_parser_feed(&p, FIX_WATCH_STREAM, strlen(FIX_WATCH_STREAM),
                                            on_event, &r, err, sizeof err),
                     1);
    assert_int_equal(r.n, 2);
    kube_watch_parser_free(&p);
}

static void test_watch_stream_line_cap(void **state)
{
    (void)state;
    kube_watch_parser p;
    rec r = {0};
    char err[256];
    kube_watch_parser_init(&p, 100);
    char line[300];
    memset(line, 'x', sizeof line);
    /* Exactly at the cap in pieces is fine until the newline decides. */
    assert_int_equal(kube_watch_parser_feed(&p, line, 60, on_event, &r, err, sizeof err), 0);
    assert_int_equal(kube_watch_parser_feed(&p, line, 60, on_event, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "longer than 100 bytes"));
    kube_watch_parser_free(&p);
    /* The cap also holds for a line arriving in one chunk. */
    kube_watch_parser_init(&p, 100);
    assert_int_equal(kube_watch_parser_feed(&p, line, 300, on_event, &r, err, sizeof err), -1);
    kube_watch_parser_free(&p);
}

static void bad_line(const char *s, const char *needle)
{
    kube_watch_parser p;
    rec r = {0};
    char err[256] = "";
    kube_watch_parser_init(&p, 0);
    assert_int_equal(kube_watch_parser_feed(&p, s, strlen(s), on_event, &r, err, sizeof err), -1);
    if (!strstr(err, needle))
        fail_msg("\"%s\" does not contain \"%s\"", err, needle);
    assert_int_equal(r.n, 0);
    kube_watch_parser_free(&p);
}

static void test_watch_stream_malformed_lines(void **state)
{
    (void)state;
    bad_line("not json\n", "not valid JSON");
    bad_line("{\"type\":\"ADDED\"}\n", "no type or object");
    bad_line("{\"type\":\"SOMETHING\",\"object\":{}}\n", "unknown type");
    bad_line("{\"type\":\"ERROR\",\"object\":{}}\n", "carries no Status");
    bad_line("{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{}}}\n", "BOOKMARK");
}

static void test_watch_stream_undecodable_lease_is_reported_invalid(void **state)
{
    (void)state;
    char big[400], s[700];
    memset(big, 'h', 300);
    big[300] = 0;
    snprintf(s, sizeof s,
             "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"x\",\"namespace\":\"y\","
             "\"resourceVersion\":\"42\"},\"spec\":{\"holderIdentity\":\"%s\"}}}\n",
             big);
    rec r;
    feed_all(s, strlen(s), 7, &r);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ev[0].type, KUBE_WATCH_INVALID);
    assert_string_equal(r.ev[0].lease.resource_version, "42");
    assert_non_null(strstr(r.ev[0].status.message, "spec.holderIdentity"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_watch_stream_whole),
        cmocka_unit_test(test_watch_stream_split_at_every_byte_boundary),
        cmocka_unit_test(test_watch_stream_blank_lines_and_crlf),
        cmocka_unit_test(test_watch_stream_partial_event_is_pending),
        cmocka_unit_test(test_watch_stream_callback_can_stop),
        cmocka_unit_test(test_watch_stream_line_cap),
        cmocka_unit_test(test_watch_stream_malformed_lines),
        cmocka_unit_test(test_watch_stream_undecodable_lease_is_reported_invalid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
