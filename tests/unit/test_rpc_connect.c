/* Connect protocol pieces: the code table, error JSON, envelope framing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "rpc/connect.h"

static void test_rpc_code_table_matches_connect_spec(void **state)
{
    (void)state;
    static const struct {
        rpc_code code;
        const char *name;
        int status;
    } want[] = {
        {RPC_CANCELED, "canceled", 499},
        {RPC_UNKNOWN, "unknown", 500},
        {RPC_INVALID_ARGUMENT, "invalid_argument", 400},
        {RPC_DEADLINE_EXCEEDED, "deadline_exceeded", 504},
        {RPC_NOT_FOUND, "not_found", 404},
        {RPC_ALREADY_EXISTS, "already_exists", 409},
        {RPC_PERMISSION_DENIED, "permission_denied", 403},
        {RPC_RESOURCE_EXHAUSTED, "resource_exhausted", 429},
        {RPC_FAILED_PRECONDITION, "failed_precondition", 400},
        {RPC_ABORTED, "aborted", 409},
        {RPC_OUT_OF_RANGE, "out_of_range", 400},
        {RPC_UNIMPLEMENTED, "unimplemented", 501},
        {RPC_INTERNAL, "internal", 500},
        {RPC_UNAVAILABLE, "unavailable", 503},
        {RPC_DATA_LOSS, "data_loss", 500},
        {RPC_UNAUTHENTICATED, "unauthenticated", 401},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_string_equal(rpc_code_name(want[i].code), want[i].name);
        assert_int_equal(rpc_code_http_status(want[i].code), want[i].status);
        rpc_code back;
        assert_int_equal(rpc_code_from_name(want[i].name, &back), 0);
        assert_int_equal(back, want[i].code);
    }
    rpc_code c;
    assert_int_equal(rpc_code_from_name("INVALID_ARGUMENT", &c), -1);
    assert_string_equal(rpc_code_name((rpc_code)999), "unknown");
    assert_int_equal(rpc_code_http_status((rpc_code)999), 500);
}

static void test_rpc_error_json_has_code_and_escaped_message(void **state)
{
    (void)state;
    char *s = rpc_error_json(RPC_FAILED_PRECONDITION, "term \"7\" is over");
    assert_non_null(s);
    cJSON *o = cJSON_Parse(s);
    assert_non_null(o);
    assert_string_equal(cJSON_GetObjectItem(o, "code")->valuestring, "failed_precondition");
    assert_string_equal(cJSON_GetObjectItem(o, "message")->valuestring, "term \"7\" is over");
    cJSON_Delete(o);
    free(s);

    /* Bytes that are not printable ASCII never reach the JSON. */
    s = rpc_error_json(RPC_INVALID_ARGUMENT, "name: \"\xff\x01x\"");
    assert_string_equal(s, "{\"code\":\"invalid_argument\",\"message\":\"name: \\\"??x\\\"\"}");
    free(s);

    s = rpc_end_stream_json(RPC_OK, NULL);
    assert_string_equal(s, "{}");
    free(s);
    s = rpc_end_stream_json(RPC_UNAVAILABLE, "shutting down");
    assert_string_equal(s, "{\"error\":{\"code\":\"unavailable\",\"message\":\"shutting down\"}}");
    free(s);
}

/* Three frames (one empty, one end-of-stream) concatenated, fed split at
 * every pair of points: every frame comes out whole and in order. */
static void test_rpc_envelope_decoder_every_split_point(void **state)
{
    (void)state;
    const char *msgs[] = {"hello", "", "{\"error\":{}}"};
    const uint8_t flags[] = {0, 0, RPC_FLAG_END_STREAM};
    uint8_t wire[64];
    size_t wlen = 0;
    for (int i = 0; i < 3; i++) {
        size_t n;
        uint8_t *e = rpc_envelope_encode(flags[i], (const uint8_t *)msgs[i], strlen(msgs[i]), &n);
        assert_non_null(e);
        assert_int_equal(n, 5 + strlen(msgs[i]));
        memcpy(wire + wlen, e, n);
        wlen += n;
        free(e);
    }
    for (size_t a = 0; a <= wlen; a++) {
        for (size_t b = a; b <= wlen; b++) {
            rpc_envelope_decoder d;
            rpc_envelope_decoder_init(&d, 1024);
            size_t cuts[] = {0, a, b, wlen};
            int got = 0;
            for (int s = 0; s < 3; s++) {
                size_t off = cuts[s], end = cuts[s + 1];
                while (off < end) {
                    size_t used;
                    rpc_envelope_status st =
                        rpc_envelope_decoder_feed(&d, wire + off, end - off, &used);
                    off += used;
                    if (st == RPC_ENVELOPE_NEED_MORE) {
                        assert_int_equal(off, end);
                        break;
                    }
                    assert_int_equal(st, RPC_ENVELOPE_FRAME);
                    uint8_t f;
                    uint8_t *m;
                    size_t len;
                    rpc_envelope_decoder_take(&d, &f, &m, &len);
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
                assert_int_equal(rpc_envelope_decoder_feed(&d, NULL, 0, &used), RPC_ENVELOPE_FRAME);
            assert_int_equal(got, 3);
            assert_false(rpc_envelope_decoder_partial(&d));
            rpc_envelope_decoder_free(&d);
        }
    }
}

static void test_rpc_envelope_decoder_partial_and_too_large(void **state)
{
    (void)state;
    rpc_envelope_decoder d;
    rpc_envelope_decoder_init(&d, 16);
    uint8_t hdr[5];
    rpc_envelope_header(0, 17, hdr);
    size_t used;
    assert_int_equal(rpc_envelope_decoder_feed(&d, hdr, 3, &used), RPC_ENVELOPE_NEED_MORE);
    assert_true(rpc_envelope_decoder_partial(&d));
    assert_int_equal(rpc_envelope_decoder_feed(&d, hdr + 3, 2, &used), RPC_ENVELOPE_TOO_LARGE);
    /* Sticky. */
    assert_int_equal(rpc_envelope_decoder_feed(&d, hdr, 5, &used), RPC_ENVELOPE_TOO_LARGE);
    assert_int_equal(used, 0);
    rpc_envelope_decoder_free(&d);

    rpc_envelope_decoder_init(&d, 16);
    rpc_envelope_header(RPC_FLAG_COMPRESSED, 16, hdr);
    assert_int_equal(hdr[0], 1);
    assert_int_equal(hdr[4], 16);
    uint8_t body[21] = {0};
    memcpy(body, hdr, 5);
    assert_int_equal(rpc_envelope_decoder_feed(&d, body, 20, &used), RPC_ENVELOPE_NEED_MORE);
    assert_int_equal(used, 20);
    assert_true(rpc_envelope_decoder_partial(&d));
    rpc_envelope_decoder_free(&d); /* frees the half-built message */
}

static void test_rpc_envelope_header_is_big_endian(void **state)
{
    (void)state;
    uint8_t h[5];
    rpc_envelope_header(RPC_FLAG_END_STREAM, 0x01020304u, h);
    const uint8_t want[5] = {2, 1, 2, 3, 4};
    assert_memory_equal(h, want, 5);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_code_table_matches_connect_spec),
        cmocka_unit_test(test_rpc_error_json_has_code_and_escaped_message),
        cmocka_unit_test(test_rpc_envelope_decoder_every_split_point),
        cmocka_unit_test(test_rpc_envelope_decoder_partial_and_too_large),
        cmocka_unit_test(test_rpc_envelope_header_is_big_endian),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
