/* common/buf.h: the growable byte buffer. Appends grow it and keep it
 * NUL-terminated, the limit refuses what would pass it, failures are sticky
 * and leave the contents, printf appends of any length, take hands the
 * memory over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"

static void test_buf_zeroed_is_empty_without_limit(void **state)
{
    (void)state;
    struct kl__buf b = {0};
    assert_null(b.data);
    char big[10000];
    memset(big, 'x', sizeof big);
    for (int i = 0; i < 50; i++)
        assert_int_equal(kl__buf_append(&b, big, sizeof big), KL__BUF_OK);
    assert_int_equal(b.len, 50 * sizeof big);
    assert_int_equal(b.data[b.len], '\0');
    assert_true(b.cap > b.len);
    kl__buf_free(&b);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    kl__buf_free(NULL);
}

static void test_buf_appends_stay_nul_terminated(void **state)
{
    (void)state;
    struct kl__buf b;
    kl__buf_init(&b, 0);
    assert_int_equal(kl__buf_append(&b, NULL, 0), KL__BUF_OK);
    assert_non_null(b.data); /* allocated even for nothing: a string */
    assert_string_equal(b.data, "");
    assert_int_equal(kl__buf_append(&b, "hello", 5), KL__BUF_OK);
    assert_int_equal(kl__buf_append(&b, ", world", 7), KL__BUF_OK);
    assert_string_equal(b.data, "hello, world");
    assert_int_equal(b.len, 12);
    /* Binary data, NULs included, is kept as given. */
    assert_int_equal(kl__buf_append(&b, "\0z", 2), KL__BUF_OK);
    assert_int_equal(b.len, 14);
    assert_memory_equal(b.data + 12, "\0z\0", 3);
    kl__buf_free(&b);
}

static void test_buf_limit_refuses_and_is_sticky(void **state)
{
    (void)state;
    struct kl__buf b;
    kl__buf_init(&b, 8);
    assert_int_equal(kl__buf_append(&b, "12345678", 8), KL__BUF_OK); /* exactly max */
    assert_int_equal(kl__buf_append(&b, "9", 1), KL__BUF_TOO_LARGE);
    assert_int_equal(b.error, KL__BUF_TOO_LARGE);
    assert_string_equal(b.data, "12345678"); /* unchanged */
    /* Sticky: even what would fit is refused now. */
    assert_int_equal(kl__buf_append(&b, "", 0), KL__BUF_TOO_LARGE);
    assert_int_equal(kl__buf_printf(&b, "%d", 1), KL__BUF_TOO_LARGE);
    assert_int_equal(b.len, 8);
    /* Reset empties it and clears the error; the limit stays. */
    kl__buf_reset(&b);
    assert_int_equal(b.error, KL__BUF_OK);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    assert_int_equal(kl__buf_append(&b, "123456789", 9), KL__BUF_TOO_LARGE);
    assert_int_equal(b.len, 0);
    kl__buf_free(&b);
    assert_int_equal(b.max, 8);
    assert_int_equal(b.error, KL__BUF_OK);
}

static void test_buf_limit_counts_one_append_past_it(void **state)
{
    (void)state;
    struct kl__buf b;
    kl__buf_init(&b, 100);
    assert_int_equal(kl__buf_append(&b, "abc", 3), KL__BUF_OK);
    /* A huge length cannot wrap the check around. */
    assert_int_equal(kl__buf_append(&b, "x", SIZE_MAX), KL__BUF_TOO_LARGE);
    kl__buf_free(&b);
    struct kl__buf u = {0};
    assert_int_equal(kl__buf_append(&u, "x", SIZE_MAX - 1), KL__BUF_NO_MEMORY);
    assert_null(u.data);
    kl__buf_free(&u);
}

static void test_buf_printf_formats_past_the_room_left(void **state)
{
    (void)state;
    struct kl__buf b = {0};
    assert_int_equal(kl__buf_printf(&b, "%s=%d;", "a", 1), KL__BUF_OK);
    char word[1000];
    memset(word, 'w', sizeof word - 1);
    word[sizeof word - 1] = '\0';
    /* Longer than the first allocation: grows and formats again. */
    assert_int_equal(kl__buf_printf(&b, "[%s]%lld", word, 42LL), KL__BUF_OK);
    assert_int_equal(b.len, 4 + 1 + 999 + 1 + 2);
    assert_memory_equal(b.data, "a=1;[www", 8);
    assert_string_equal(b.data + b.len - 3, "]42");
    assert_int_equal(kl__buf_printf(&b, "%s", ""), KL__BUF_OK);
    assert_int_equal(b.len, 1007);
    kl__buf_free(&b);

    /* Past the limit: refused, the contents and their NUL intact. */
    kl__buf_init(&b, 10);
    assert_int_equal(kl__buf_printf(&b, "%s", "12345"), KL__BUF_OK);
    assert_int_equal(kl__buf_printf(&b, "%s", "678901"), KL__BUF_TOO_LARGE);
    assert_string_equal(b.data, "12345");
    kl__buf_free(&b);
}

static void test_buf_take_hands_the_memory_over(void **state)
{
    (void)state;
    struct kl__buf b;
    kl__buf_init(&b, 64);
    size_t len = 99;
    assert_null(kl__buf_take(&b, &len)); /* never appended: nothing */
    assert_int_equal(len, 0);
    assert_int_equal(kl__buf_append(&b, "body", 4), KL__BUF_OK);
    char *s = kl__buf_take(&b, &len);
    assert_string_equal(s, "body");
    assert_int_equal(len, 4);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.cap, 0);
    assert_int_equal(b.max, 64);
    free(s);
    /* The buffer is usable again. */
    assert_int_equal(kl__buf_append(&b, "more", 4), KL__BUF_OK);
    s = kl__buf_take(&b, NULL);
    assert_string_equal(s, "more");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_zeroed_is_empty_without_limit),
        cmocka_unit_test(test_buf_appends_stay_nul_terminated),
        cmocka_unit_test(test_buf_limit_refuses_and_is_sticky),
        cmocka_unit_test(test_buf_limit_counts_one_append_past_it),
        cmocka_unit_test(test_buf_printf_formats_past_the_room_left),
        cmocka_unit_test(test_buf_take_hands_the_memory_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
