/* The Connect error JSON parser: nested and flat errors, escapes, truncation
 * to the caller's buffers, and malformed input read without overrunning.
 * Pure: no sockets. (The envelope codec: test_common_envelope.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "connect_error.h"

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
    memset(code, 'Z', sizeof(code));
    assert_int_equal(
        kl__connect_error_parse(bad, sizeof(bad), code, sizeof(code), msg, sizeof(msg)), 0);
    assert_string_equal(code, "x"); /* what came, terminated */
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
        cmocka_unit_test(test_connect_error_nested_and_flat),
        cmocka_unit_test(test_connect_error_missing_truncated_and_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
