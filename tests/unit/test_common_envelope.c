/* common/envelope.h: the Connect envelope codec the client and the server
 * share. The frame decoder (feed/take) over input split at every pair of
 * points, its limits and stickiness; the stream reader (stream_feed) over
 * every split, with the stream's rules (no compression, nothing after the
 * end); the header and the encoder. Pure: no sockets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/envelope.h"

/* ---- the frame decoder (feed / take) ------------------------------------ */

/* Three frames (one empty, one end-of-stream) concatenated, fed split at
 * every pair of points: every frame comes out whole and in order. */
static void test_envelope_decoder_every_split_point(void **state)
{
    (void)state;
    const char *msgs[] = {"hello", "", "{\"error\":{}}"};
    const unsigned flags[] = {0, 0, KL__ENVELOPE_FLAG_END_STREAM};
    uint8_t wire[64];
    size_t wlen = 0;
    for (int i = 0; i < 3; i++) {
        size_t n;
        uint8_t *e = kl__envelope_encode(flags[i], (const uint8_t *)msgs[i], strlen(msgs[i]), &n);
        assert_non_null(e);
        assert_int_equal(n, 5 + strlen(msgs[i]));
        memcpy(wire + wlen, e, n);
        wlen += n;
        free(e);
    }
    for (size_t a = 0; a <= wlen; a++) {
        for (size_t b = a; b <= wlen; b++) {
            struct kl__envelope_decoder d;
            kl__envelope_decoder_init(&d, 1024);
            size_t cuts[] = {0, a, b, wlen};
            int got = 0;
            for (int s = 0; s < 3; s++) {
                size_t off = cuts[s], end = cuts[s + 1];
                while (off < end) {
                    size_t used;
                    kl__envelope_status st =
                        kl__envelope_decoder_feed(&d, wire + off, end - off, &used);
                    off += used;
                    if (st == KL__ENVELOPE_NEED_MORE) {
                        assert_int_equal(off, end);
                        break;
                    }
                    assert_int_equal(st, KL__ENVELOPE_FRAME);
                    unsigned f;
                    uint8_t *m;
                    size_t len;
                    kl__envelope_decoder_take(&d, &f, &m, &len);
                    assert_true(got < 3);
                    assert_int_equal(f, flags[got]);
                    assert_int_equal(len, strlen(msgs[got]));
                    if (len)
                        assert_memory_equal(m, msgs[got], len);
                    else
                        assert_null(m);
                    free(m);
                    got++;
                }
            }
            /* The empty frame completes as soon as its header does. */
            size_t used;
            if (got < 3)
                assert_int_equal(kl__envelope_decoder_feed(&d, NULL, 0, &used), KL__ENVELOPE_FRAME);
            assert_int_equal(got, 3);
            assert_false(kl__envelope_decoder_partial(&d));
            kl__envelope_decoder_free(&d);
        }
    }
}

static void test_envelope_decoder_partial_and_too_large(void **state)
{
    (void)state;
    struct kl__envelope_decoder d;
    kl__envelope_decoder_init(&d, 16);
    uint8_t hdr[5];
    kl__envelope_header(hdr, 0, 17);
    size_t used;
    assert_int_equal(kl__envelope_decoder_feed(&d, hdr, 3, &used), KL__ENVELOPE_NEED_MORE);
    assert_true(kl__envelope_decoder_partial(&d));
    assert_int_equal(kl__envelope_decoder_feed(&d, hdr + 3, 2, &used), KL__ENVELOPE_TOO_LARGE);
    /* Sticky. */
    assert_int_equal(kl__envelope_decoder_feed(&d, hdr, 5, &used), KL__ENVELOPE_TOO_LARGE);
    assert_int_equal(used, 0);
    kl__envelope_decoder_free(&d);

    /* The frame decoder hands out any flags: the compressed one is the
     * caller's to refuse. */
    kl__envelope_decoder_init(&d, 16);
    kl__envelope_header(hdr, KL__ENVELOPE_FLAG_COMPRESSED, 16);
    assert_int_equal(hdr[0], 1);
    assert_int_equal(hdr[4], 16);
    uint8_t body[21] = {0};
    memcpy(body, hdr, 5);
    assert_int_equal(kl__envelope_decoder_feed(&d, body, 20, &used), KL__ENVELOPE_NEED_MORE);
    assert_int_equal(used, 20);
    assert_true(kl__envelope_decoder_partial(&d));
    kl__envelope_decoder_free(&d); /* frees the half-built message */
}

static void test_envelope_decoder_holds_a_frame_until_taken(void **state)
{
    (void)state;
    uint8_t wire[32];
    size_t n = 0, len;
    uint8_t *e = kl__envelope_encode(KL__ENVELOPE_FLAG_COMPRESSED, (const uint8_t *)"ab", 2, &len);
    memcpy(wire, e, len);
    n += len;
    free(e);
    e = kl__envelope_encode(0, (const uint8_t *)"cde", 3, &len);
    memcpy(wire + n, e, len);
    n += len;
    free(e);

    struct kl__envelope_decoder d;
    kl__envelope_decoder_init(&d, 16);
    size_t used;
    assert_int_equal(kl__envelope_decoder_feed(&d, wire, n, &used), KL__ENVELOPE_FRAME);
    assert_int_equal(used, 7); /* the first frame only */
    assert_int_equal(kl__envelope_decoder_feed(&d, wire + used, n - used, &used),
                     KL__ENVELOPE_FRAME);
    assert_int_equal(used, 0); /* not taken yet: nothing more is read */
    unsigned flags;
    uint8_t *m;
    kl__envelope_decoder_take(&d, &flags, &m, &len);
    assert_int_equal(flags, KL__ENVELOPE_FLAG_COMPRESSED);
    assert_int_equal(len, 2);
    assert_memory_equal(m, "ab", 2);
    free(m);
    assert_int_equal(kl__envelope_decoder_feed(&d, wire + 7, n - 7, &used), KL__ENVELOPE_FRAME);
    kl__envelope_decoder_take(&d, &flags, &m, &len);
    assert_int_equal(flags, 0);
    assert_int_equal(len, 3);
    assert_memory_equal(m, "cde", 3);
    free(m);
    assert_false(kl__envelope_decoder_partial(&d));
    kl__envelope_decoder_free(&d);
}

static void test_envelope_header_is_big_endian(void **state)
{
    (void)state;
    uint8_t h[5];
    kl__envelope_header(h, KL__ENVELOPE_FLAG_END_STREAM, 0x01020304u);
    const uint8_t want[5] = {2, 1, 2, 3, 4};
    assert_memory_equal(h, want, 5);
}

/* ---- the stream reader (stream_feed) ------------------------------------ */

#define MAX_SEEN 16

struct seen {
    int n;
    unsigned flags[MAX_SEEN];
    size_t len[MAX_SEEN];
    char data[MAX_SEEN][64];
    int stop_after; /* return an error from the callback after this many */
    int stopped_with;
};

static int record(void *ctx, unsigned flags, const uint8_t *msg, size_t len)
{
    struct seen *s = ctx;
    if (s->n >= MAX_SEEN)
        return -100;
    assert_non_null(msg);
    assert_int_equal(msg[len], '\0');
    s->flags[s->n] = flags;
    s->len[s->n] = len;
    memcpy(s->data[s->n], msg, len < 63 ? len : 63);
    s->data[s->n][len < 63 ? len : 63] = 0;
    s->n++;
    if (s->stop_after && s->n == s->stop_after)
        return s->stopped_with = -99;
    return 0;
}

static size_t put(uint8_t *out, unsigned flags, const char *msg)
{
    size_t len = strlen(msg);
    kl__envelope_header(out, flags, (uint32_t)len);
    memcpy(out + KL__ENVELOPE_HEADER, msg, len);
    return KL__ENVELOPE_HEADER + len;
}

/* A stream of three messages (one empty) and an end frame. */
static size_t sample_stream(uint8_t *buf)
{
    size_t n = 0;
    n += put(buf + n, 0, "hello");
    n += put(buf + n, 0, "");
    n += put(buf + n, 0, "a somewhat longer message");
    n += put(buf + n, KL__ENVELOPE_FLAG_END_STREAM, "{}");
    return n;
}

static void check_sample(const struct seen *s)
{
    assert_int_equal(s->n, 4);
    assert_string_equal(s->data[0], "hello");
    assert_int_equal(s->len[1], 0);
    assert_string_equal(s->data[2], "a somewhat longer message");
    assert_int_equal(s->flags[3], KL__ENVELOPE_FLAG_END_STREAM);
    assert_string_equal(s->data[3], "{}");
}

static void test_envelope_stream_decodes_whole_stream(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = sample_stream(buf);
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_stream_feed(&d, buf, n, record, &s), 0);
    check_sample(&s);
    assert_true(d.ended);
    assert_false(kl__envelope_decoder_partial(&d));
    kl__envelope_decoder_free(&d);
}

static void test_envelope_stream_every_single_split_point(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = sample_stream(buf);
    for (size_t cut = 0; cut <= n; cut++) {
        struct kl__envelope_decoder d;
        struct seen s = {0};
        kl__envelope_decoder_init(&d, 1024);
        assert_int_equal(kl__envelope_stream_feed(&d, buf, cut, record, &s), 0);
        assert_int_equal(kl__envelope_stream_feed(&d, buf + cut, n - cut, record, &s), 0);
        check_sample(&s);
        kl__envelope_decoder_free(&d);
    }
}

static void test_envelope_stream_every_pair_of_split_points(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = sample_stream(buf);
    for (size_t a = 0; a <= n; a++) {
        for (size_t b = a; b <= n; b++) {
            struct kl__envelope_decoder d;
            struct seen s = {0};
            kl__envelope_decoder_init(&d, 1024);
            assert_int_equal(kl__envelope_stream_feed(&d, buf, a, record, &s), 0);
            assert_int_equal(kl__envelope_stream_feed(&d, buf + a, b - a, record, &s), 0);
            assert_int_equal(kl__envelope_stream_feed(&d, buf + b, n - b, record, &s), 0);
            check_sample(&s);
            kl__envelope_decoder_free(&d);
        }
    }
}

static void test_envelope_stream_byte_by_byte(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = sample_stream(buf);
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_decoder_init(&d, 1024);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(kl__envelope_stream_feed(&d, buf + i, 1, record, &s), 0);
        /* Between envelopes exactly after each complete one. */
    }
    check_sample(&s);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_stream_partial_is_not_idle(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t n = put(buf, 0, "abc");
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_stream_feed(&d, buf, n - 1, record, &s), 0);
    assert_true(kl__envelope_decoder_partial(&d));
    assert_int_equal(s.n, 0);
    assert_int_equal(kl__envelope_stream_feed(&d, buf + n - 1, 1, record, &s), 0);
    assert_false(kl__envelope_decoder_partial(&d));
    assert_int_equal(s.n, 1);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_stream_rejects_oversized_message(void **state)
{
    (void)state;
    uint8_t hdr[KL__ENVELOPE_HEADER];
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_header(hdr, 0, 1025);
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_stream_feed(&d, hdr, sizeof(hdr), record, &s),
                     KL__ENVELOPE_TOO_LARGE);
    /* Sticky: later data is refused too. */
    assert_int_equal(kl__envelope_stream_feed(&d, hdr, 1, record, &s), KL__ENVELOPE_TOO_LARGE);
    assert_int_equal(s.n, 0);
    kl__envelope_decoder_free(&d);

    /* The largest length a header can carry does not allocate. */
    kl__envelope_header(hdr, 0, 0xffffffffu);
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_stream_feed(&d, hdr, sizeof(hdr), record, &s),
                     KL__ENVELOPE_TOO_LARGE);
    assert_null(d.msg);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_stream_rejects_compressed_message(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t n = put(buf, KL__ENVELOPE_FLAG_COMPRESSED, "zz");
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_stream_feed(&d, buf, n, record, &s), KL__ENVELOPE_COMPRESSED);
    assert_int_equal(s.n, 0);
    kl__envelope_decoder_free(&d);

    /* As soon as the header says so, before the message arrives. */
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_stream_feed(&d, buf, KL__ENVELOPE_HEADER, record, &s),
                     KL__ENVELOPE_COMPRESSED);
    assert_int_equal(s.n, 0);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_stream_rejects_data_after_end(void **state)
{
    (void)state;
    uint8_t buf[64];
    size_t n = put(buf, KL__ENVELOPE_FLAG_END_STREAM, "{}");
    n += put(buf + n, 0, "late");
    struct kl__envelope_decoder d;
    struct seen s = {0};
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_stream_feed(&d, buf, n, record, &s), KL__ENVELOPE_AFTER_END);
    assert_int_equal(s.n, 1);
    kl__envelope_decoder_free(&d);
}

static void test_envelope_stream_callback_error_stops_decoding(void **state)
{
    (void)state;
    uint8_t buf[256];
    size_t n = sample_stream(buf);
    struct kl__envelope_decoder d;
    struct seen s = {0};
    s.stop_after = 2;
    kl__envelope_decoder_init(&d, 1024);
    assert_int_equal(kl__envelope_stream_feed(&d, buf, n, record, &s), KL__ENVELOPE_STOPPED);
    assert_int_equal(s.stopped_with, -99);
    assert_int_equal(s.n, 2);
    /* Sticky. */
    assert_int_equal(kl__envelope_stream_feed(&d, buf, n, record, &s), KL__ENVELOPE_STOPPED);
    assert_int_equal(s.n, 2);
    kl__envelope_decoder_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_envelope_decoder_every_split_point),
        cmocka_unit_test(test_envelope_decoder_partial_and_too_large),
        cmocka_unit_test(test_envelope_decoder_holds_a_frame_until_taken),
        cmocka_unit_test(test_envelope_header_is_big_endian),
        cmocka_unit_test(test_envelope_stream_decodes_whole_stream),
        cmocka_unit_test(test_envelope_stream_every_single_split_point),
        cmocka_unit_test(test_envelope_stream_every_pair_of_split_points),
        cmocka_unit_test(test_envelope_stream_byte_by_byte),
        cmocka_unit_test(test_envelope_stream_partial_is_not_idle),
        cmocka_unit_test(test_envelope_stream_rejects_oversized_message),
        cmocka_unit_test(test_envelope_stream_rejects_compressed_message),
        cmocka_unit_test(test_envelope_stream_rejects_data_after_end),
        cmocka_unit_test(test_envelope_stream_callback_error_stops_decoding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
