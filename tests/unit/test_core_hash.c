/* core/hash.h: FNV-1a (32 bits) gives the published values, and chained
 * calls hash as one call over the concatenation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/hash.h"

static void test_hash_fnv1a_known_values(void **state)
{
    (void)state;
    /* The reference values of the FNV authors' test suite (FNV-1a, 32 bits). */
    assert_int_equal(hash_fnv1a(HASH_FNV1A_INIT, "", 0), 0x811c9dc5u);
    assert_int_equal(hash_fnv1a(HASH_FNV1A_INIT, "a", 1), 0xe40c292cu);
    assert_int_equal(hash_fnv1a(HASH_FNV1A_INIT, "foobar", 6), 0xbf9cf968u);
    assert_int_equal(hash_fnv1a_str(HASH_FNV1A_INIT, "foobar"), 0xbf9cf968u);
    assert_int_equal(hash_fnv1a_str(HASH_FNV1A_INIT, ""), HASH_FNV1A_INIT);
}

static void test_hash_fnv1a_chains_like_one_call(void **state)
{
    (void)state;
    const char *whole = "kube-system/kv-master";
    uint32_t one = hash_fnv1a(HASH_FNV1A_INIT, whole, strlen(whole));
    uint32_t h = hash_fnv1a_str(HASH_FNV1A_INIT, "kube-system");
    h = hash_fnv1a_str(hash_fnv1a(h, "/", 1), "kv-master");
    assert_int_equal(h, one);
    /* Bytes above 0x7f hash as unsigned, whatever char's signedness. */
    const uint8_t high[] = {0xff, 0x80};
    assert_int_equal(hash_fnv1a(HASH_FNV1A_INIT, high, 2),
                     hash_fnv1a_str(HASH_FNV1A_INIT, "\xff\x80"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hash_fnv1a_known_values),
        cmocka_unit_test(test_hash_fnv1a_chains_like_one_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
