/* common/secret.h: a wipe zeroes exactly the bytes it is given; freeing a
 * secret zeroes the whole string before its memory goes back to the
 * allocator, and takes NULL. The test wraps free (-Wl,--wrap=free, see
 * tests/CMakeLists.txt) to look at the bytes as they are handed back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/secret.h"

static void test_secret_wipe_zeroes_exactly_its_range(void **state)
{
    (void)state;
    char b[16];
    memset(b, 'x', sizeof b);
    kl__secret_wipe(b + 4, 8);
    for (size_t i = 0; i < sizeof b; i++)
        assert_int_equal(b[i], i >= 4 && i < 12 ? 0 : 'x');
    kl__secret_wipe(NULL, 8); /* nothing to wipe */
    kl__secret_wipe(b, 0);
    assert_int_equal(b[0], 'x');
}

/* What __wrap_free saw of the block it watches: freed, and every byte of
 * its string zero at that moment. */
static struct {
    const char *watch;
    size_t len;
    int freed;
    int zeroed;
} seen;

void __real_free(void *p);
void __wrap_free(void *p);
void __wrap_free(void *p)
{
    if (p && p == seen.watch) {
        seen.freed++;
        seen.zeroed = 1;
        for (size_t i = 0; i < seen.len; i++)
            if (seen.watch[i] != 0)
                seen.zeroed = 0;
    }
    __real_free(p);
}

static void test_secret_free_zeroes_the_string_before_freeing_it(void **state)
{
    (void)state;
    static const char token[] = "eyJhbGciOiJSUzI1NiJ9.a-token.sig";
    char *s = strdup(token);
    assert_non_null(s);
    seen.watch = s;
    seen.len = sizeof token - 1;
    kl__secret_free(s);
    seen.watch = NULL;
    assert_int_equal(seen.freed, 1);
    assert_int_equal(seen.zeroed, 1);

    seen.freed = 0;
    kl__secret_free(NULL); /* nothing to free */
    assert_int_equal(seen.freed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secret_wipe_zeroes_exactly_its_range),
        cmocka_unit_test(test_secret_free_zeroes_the_string_before_freeing_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
