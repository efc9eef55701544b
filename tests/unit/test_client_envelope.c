/* The Connect envelope decoder over byte streams split at every point, its
 * error cases, and the Connect error JSON parser. Pure: no sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "envelope.h"
#include "kubelease.h"

#define MAX_SEEN 16

struct seen {
    int n;
    unsigned flags[MAX_SEEN];
    size_t len[MAX_SEEN];
    char data[MAX_SEEN][64];
    int stop_after; /* return an error from the callback after this many */
};

static int record(void *ctx, unsigned flags, const uint8_t *msg, size_t len)
{
    struct seen *s = ctx;
    if (s->n >= MAX_SEEN)
        return -100;
    s->flags[s->n] = flags;
    s->len[s->n] = len;
    memcpy(s->data[s->n], msg, len < 63 ? len : 63);
    s->data[s->n][len < 63 ? len : 63] = 0;
    s->n++;
    if (s->stop_after && s->n == s->stop_after)
        return -99;
    return 0;
}

static size_t put(uint8_t *out, unsigned flags, const char *msg)
{
    size_t len = strlen(msg);
    kl__envelope_header(out, flags, (uint32_t)len);
    memcpy(out + KL__ENV_HEADER, msg, len);
    return KL__ENV_HEADER + len;
}

/* A stream of three messages (one empty) and an end frame. */
static size_t sample_stream(uint8_t *buf)
{
    size_t n = 0;
    n += put(buf + n, 0, "hello");
    n += put(buf + n, 0, "");
    n += put(buf + n, 0, "a somewhat longer message");
    n += put(buf + n, KL__ENV_END_STREAM, "{}");
    return n;
}

static void check_sample(const struct seen *s)
{
    assert_int_equal(s->n, 4);
    assert_string_equal(s->data[0], "hello");
    assert_int_equal(s->len[1], 0);
    assert_string_equal(s->data[2], "a somewhat longer message");
    assert_int_equal(s->flags[3], KL__ENV_END_STREAM);
    assert_string_equal(s->data[3], "{}");
}

static void test_envelope_decodes_whole_stream(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = sample_stream(buf);
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_feed(&d, buf, n, record, &s), 0);
    check_sample(&s);
    assert_true(d.ended);
    assert_true(kl__envelope_idle(&d));
    kl__envelope_decoder_free(&d);
}

static void test_envelope_every_single_split_point(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = sample_stream(buf);
    for (size_t cut = 0; cut <= n; cut++) {
        struct kl__envelope_decoder d;
        struct seen s = {0};
        kl__envelope_decoder_init(&d, 1024);
        assert_int_equal(kl__envelope_feed(&d, buf, cut, record, &s), 0);
        assert_int_equal(kl__envelope_feed(&d, buf + cut, n - cut, record, &s), 0);
        check_sample(&s);
        kl__envelope_decoder_free(&d);
    }
}

static void test_envelope_every_pair_of_split_points(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = sample_stream(buf);
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b++) {
            struct kl__envelope_decoder d;
            struct seen s = {0};
            kl__envelope_decoder_init(&d, 1024);
            assert_int_equal(kl__envelope_feed(&d, buf, a, record, &s), 0);
            assert_int_equal(kl__envelope_feed(&d, buf + a, b - a, record, &s), 0);
            assert_int_equal(kl__envelope_feed(&d, buf + b, n - b, record, &s), 0);
            check_sample(&s);
            kl__envelope_decoder_free(&d);
        }
    }
}

static void test_envelope_byte_by_byte(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = sample_stream(buf);
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_decoder_init(&d, 1024);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(kl__envelope_feed(&d, buf + i, 1, record, &s), 0);
        /* Between envelopes exactly after each complete one. */
    }
    check_sample(&s);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_partial_is_not_idle(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t n = put(buf, 0, "abc");
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_feed(&d, buf, n - 1, record, &s), 0);
    assert_false(kl__envelope_idle(&d));
    assert_int_equal(s.n, 0);
    assert_int_equal(kl__envelope_feed(&d, buf + n - 1, 1, record, &s), 0);
    assert_true(kl__envelope_idle(&d));
    assert_int_equal(s.n, 1);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_rejects_oversized_message(void **state)
{
    (void)state;
    uint8_t hdr[KL__ENV_HEADER];
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_header(hdr, 0, 1025);
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_feed(&d, hdr, sizeof(hdr), record, &s), KL_ERR_PROTOCOL);
    /* Sticky: later data is refused too. */
    assert_int_equal(kl__envelope_feed(&d, hdr, 1, record, &s), KL_ERR_PROTOCOL);
    assert_int_equal(s.n, 0);
    kl__envelope_decoder_free(&d);

    /* The largest length a header can carry does not allocate. */
    kl__envelope_header(hdr, 0, 0xffffffffu);
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_feed(&d, hdr, sizeof(hdr), record, &s), KL_ERR_PROTOCOL);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_rejects_compressed_message(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t n = put(buf, KL__ENV_COMPRESSED, "zz");
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_feed(&d, buf, n, record, &s), KL_ERR_PROTOCOL);
    assert_int_equal(s.n, 0);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_rejects_data_after_end(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t n = put(buf, KL__ENV_END_STREAM, "{}");
    n += put(buf + n, 0, "late");
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_feed(&d, buf, n, record, &s), KL_ERR_PROTOCOL);
    assert_int_equal(s.n, 1);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_callback_error_stops_decoding(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = sample_stream(buf);
    struct kl__envelope_decoder d;
    struct seen s = {0};
    s.stop_after = 2;
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_feed(&d, buf, n, record, &s), -99);
    assert_int_equal(s.n, 2);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_header_is_big_endian(void **state)
{
    (void)state;
    uint8_t hdr[KL__ENV_HEADER];
    kl__envelope_header(hdr, 2, 0x01020304u);
    assert_int_equal(hdr[0], 2);
    assert_int_equal(hdr[1], 1);
    assert_int_equal(hdr[2], 2);
    assert_int_equal(hdr[3], 3);
    assert_int_equal(hdr[4], 4);
}

static void test_connect_error_nested_and_flat(void **state)
{
    (void)state;
    char code[32], msg[64];
    const char *nested =
        "{\"error\":{\"code\":\"failed_precondition\",\"message\":\"term \\\"3\\\" is over\"}}";
    assert_int_equal(
        kl__connect_error_parse(nested, strlen(nested), code, sizeof(code), msg, sizeof(msg)), 1);
    assert_string_equal(code, "failed_precondition");
    assert_string_equal(msg, "term \"3\" is over");

    const char *flat = "{ \"message\" : \"no \\u0041 here\\n\", \"code\" : \"not_found\" }";
    assert_int_equal(
        kl__connect_error_parse(flat, strlen(flat), code, sizeof(code), msg, sizeof(msg)), 1);
    assert_string_equal(code, "not_found");
    assert_string_equal(msg, "no A here\n");
}

static void test_connect_error_missing_truncated_and_malformed(void **state)
{
    (void)state;
    char code[8], msg[8];
    assert_int_equal(kl__connect_error_parse("{}", 2, code, sizeof(code), msg, sizeof(msg)), 0);
    assert_string_equal(code, "");
    assert_string_equal(msg, "");

    const char *longer = "{\"code\":\"unavailable\",\"message\":\"a long message\"}";
    assert_int_equal(
        kl__connect_error_parse(longer, strlen(longer), code, sizeof(code), msg, sizeof(msg)), 1);
    assert_string_equal(code, "unavail");
    assert_string_equal(msg, "a long ");

    /* Cut inside a string, a bad escape, a key without value: no crash,
     * no read past the length (the buffer is not NUL-terminated). */
    const char bad[] = {'{', '"', 'c', 'o', 'd', 'e', '"', ':', '"', 'x'};
    assert_int_equal(
        kl__connect_error_parse(bad, sizeof(bad), code, sizeof(code), msg, sizeof(msg)), 0);
    const char *esc = "{\"code\":\"\\u12\"}";
    assert_int_equal(
        kl__connect_error_parse(esc, strlen(esc), code, sizeof(code), msg, sizeof(msg)), 0);
    const char *nokey = "{\"code\":42,\"message\":\"m\"}";
    assert_int_equal(
        kl__connect_error_parse(nokey, strlen(nokey), code, sizeof(code), msg, sizeof(msg)), 0);
    assert_string_equal(msg, "m");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope_decodes_whole_stream),
        cmocka_unit_test(test_envelope_every_single_split_point),
        cmocka_unit_test(test_envelope_every_pair_of_split_points),
        cmocka_unit_test(test_envelope_byte_by_byte),
        cmocka_unit_test(test_envelope_partial_is_not_idle),
        cmocka_unit_test(test_envelope_rejects_oversized_message),
        cmocka_unit_test(test_envelope_rejects_compressed_message),
        cmocka_unit_test(test_envelope_rejects_data_after_end),
        cmocka_unit_test(test_envelope_callback_error_stops_decoding),
        cmocka_unit_test(test_envelope_header_is_big_endian),
        cmocka_unit_test(test_connect_error_nested_and_flat),
        cmocka_unit_test(test_connect_error_missing_truncated_and_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
