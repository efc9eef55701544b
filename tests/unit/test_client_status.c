/* The status table, error mapping and the leadership deadline arithmetic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "election.h"
#include "status.h"
#include "util.h"

static void test_status_every_code_has_its_own_string(void **state)
{
    (void)state;
    static const struct {
        int code;
        const char *text;
    } table[] = {
#define ROW(name, value, text) {value, text},
        KL_STATUS_MAP(ROW)
#undef ROW
    };
    size_t n = sizeof(table) / sizeof(table[0]);
    for (size_t i = 0; i < n; i++) {
        const char *s = kl_strerror(table[i].code);
        assert_non_null(s);
        assert_string_equal(s, table[i].text);
        assert_string_not_equal(s, "unknown status code");
        for (size_t j = 0; j < i; j++)
            assert_int_not_equal(table[i].code, table[j].code);
    }
    assert_int_equal(KL_OK, 0);
    assert_int_equal(KL_NOT_FOUND, 1);
}

static void test_status_unknown_codes(void **state)
{
    (void)state;
    int unknown[] = {2, 100, -14, -1000, INT32_MIN, INT32_MAX};
    for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++)
        assert_string_equal(kl_strerror(unknown[i]), "unknown status code");
}

static void test_status_version_matches_macros(void **state)
{
    (void)state;
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", KL_VERSION_MAJOR, KL_VERSION_MINOR, KL_VERSION_PATCH);
    assert_string_equal(kl_version(), want);
}

static void test_status_connect_codes_map(void **state)
{
    (void)state;
    assert_int_equal(kl__status_from_connect("not_found"), KL_NOT_FOUND);
    assert_int_equal(kl__status_from_connect("failed_precondition"), KL_ERR_LOST);
    assert_int_equal(kl__status_from_connect("invalid_argument"), KL_ERR_INVALID_ARGUMENT);
    assert_int_equal(kl__status_from_connect("unavailable"), KL_ERR_UNAVAILABLE);
    assert_int_equal(kl__status_from_connect("deadline_exceeded"), KL_ERR_TIMEOUT);
    assert_int_equal(kl__status_from_connect("permission_denied"), KL_ERR_PERMISSION_DENIED);
    assert_int_equal(kl__status_from_connect("unauthenticated"), KL_ERR_PERMISSION_DENIED);
    assert_int_equal(kl__status_from_connect("no_such_code"), KL_ERR_PROTOCOL);
    assert_int_equal(kl__status_from_http(503), KL_ERR_UNAVAILABLE);
    assert_int_equal(kl__status_from_http(404), KL_ERR_PROTOCOL);
    assert_int_equal(kl__status_from_http(500), KL_ERR_INTERNAL);
}

static void test_status_seterr_fills_and_truncates(void **state)
{
    (void)state;
    kl_error err;
    char longer[600];
    memset(longer, 'x', sizeof(longer) - 1);
    longer[sizeof(longer) - 1] = 0;
    assert_int_equal(kl__seterr(&err, KL_ERR_TIMEOUT, "%s", longer), KL_ERR_TIMEOUT);
    assert_int_equal(err.code, KL_ERR_TIMEOUT);
    assert_int_equal(strlen(err.message), sizeof(err.message) - 1);
    assert_int_equal(kl__seterr(NULL, KL_ERR_LOST, "ignored"), KL_ERR_LOST);
    kl__clearerr(&err);
    assert_int_equal(err.code, KL_OK);
    assert_string_equal(err.message, "");
}

/* Rule 2: the deadline is anchored to the send time of the confirmation, so
 * it never exceeds the service's (which started later). */
static void test_deadline_is_send_time_plus_validity(void **state)
{
    (void)state;
    assert_int_equal(kl__deadline_after_confirm(10000, 2000), 12000);
    /* A reply arriving late does not move the deadline. */
    assert_int_equal(kl__deadline_after_confirm(10000, 2000), 12000);
    /* No validity: the deadline is the send time itself (already passed). */
    assert_int_equal(kl__deadline_after_confirm(10000, 0), 10000);
    assert_int_equal(kl__deadline_after_confirm(10000, -5), 10000);
}

static void test_deadline_reconfirm_after_a_third(void **state)
{
    (void)state;
    assert_int_equal(kl__next_confirm_at(10000, 3000), 11000);
    assert_int_equal(kl__next_confirm_at(10000, 2000), 10666);
    /* Tiny validities still move forward. */
    assert_int_equal(kl__next_confirm_at(10000, 1), 10001);
    assert_true(kl__next_confirm_at(10000, 2000) < kl__deadline_after_confirm(10000, 2000));
}

/* An unanswered Confirm is sent again halfway to the deadline: at 15/10/2,
 * one sent a third into the grant is retried with a third still left. */
static void test_deadline_confirm_retried_halfway(void **state)
{
    (void)state;
    assert_int_equal(kl__confirm_retry_at(10666, 12000), 11333);
    assert_int_equal(kl__confirm_retry_at(10333, 11000), 10666);
    /* Past the deadline already: at once. */
    assert_int_equal(kl__confirm_retry_at(12000, 12000), 12000);
    assert_int_equal(kl__confirm_retry_at(12500, 12000), 12500);
}

static void test_deadline_remaining(void **state)
{
    (void)state;
    assert_int_equal(kl__remaining_ms(12000, 11000), 1000);
    assert_int_equal(kl__remaining_ms(12000, 12000), 0);
    assert_int_equal(kl__remaining_ms(12000, 13000), 0);
}

static void test_backoff_doubles_and_caps(void **state)
{
    (void)state;
    int64_t b = kl__next_backoff(0, 2000);
    assert_int_equal(b, 50);
    b = kl__next_backoff(b, 2000);
    assert_int_equal(b, 100);
    for (int i = 0; i < 20; i++)
        b = kl__next_backoff(b, 2000);
    assert_int_equal(b, 2000);
    assert_int_equal(kl__next_backoff(0, 10), 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_every_code_has_its_own_string),
        cmocka_unit_test(test_status_unknown_codes),
        cmocka_unit_test(test_status_version_matches_macros),
        cmocka_unit_test(test_status_connect_codes_map),
        cmocka_unit_test(test_status_seterr_fills_and_truncates),
        cmocka_unit_test(test_deadline_is_send_time_plus_validity),
        cmocka_unit_test(test_deadline_reconfirm_after_a_third),
        cmocka_unit_test(test_deadline_confirm_retried_halfway),
        cmocka_unit_test(test_deadline_remaining),
        cmocka_unit_test(test_backoff_doubles_and_caps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
