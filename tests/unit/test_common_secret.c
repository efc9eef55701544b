/* common/secret.h: a wipe zeroes exactly the bytes it is given; freeing a
 * secret takes NULL and any string (ASan and valgrind check the free). */
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

static void test_secret_free_takes_null_and_strings(void **state)
{
    (void)state;
    kl__secret_free(NULL);
    kl__secret_free(strdup(""));
    kl__secret_free(strdup("eyJhbGciOiJSUzI1NiJ9.a-token.sig"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_secret_wipe_zeroes_exactly_its_range),
        cmocka_unit_test(test_secret_free_takes_null_and_strings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
