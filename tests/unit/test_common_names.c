/* common/names.h: the namespace (DNS-1123 label), Lease name (DNS-1123
 * subdomain) and identity (printable ASCII) rules the client, the service's
 * validation and the stores share: what each accepts, and why each refusal
 * is one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/names.h"

/* n copies of ch, in buf (at least n + 1 bytes). */
static const char *repeat(char *buf, char ch, size_t n)
{
    memset(buf, ch, n);
    buf[n] = '\0';
    return buf;
}

static void test_names_namespace_is_a_dns1123_label(void **state)
{
    (void)state;
    char b[80];
    const char *ok[] = {"default", "a", "0", "kube-system", "a-b-c", "9lives"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (kl__name_check_namespace(ok[i]) != KL__NAME_OK)
            fail_msg("\"%s\" was refused", ok[i]);
    assert_int_equal(kl__name_check_namespace(repeat(b, 'n', 63)), KL__NAME_OK);

    assert_int_equal(kl__name_check_namespace(NULL), KL__NAME_EMPTY);
    assert_int_equal(kl__name_check_namespace(""), KL__NAME_EMPTY);
    assert_int_equal(kl__name_check_namespace(repeat(b, 'n', 64)), KL__NAME_TOO_LONG);
    /* Dots are for subdomains, not labels (the kube store once let them in). */
    const char *bad[] = {"Default", "-a", "a-", "a.b", "a_b", "a b", "ns/x", "é"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (kl__name_check_namespace(bad[i]) != KL__NAME_INVALID)
            fail_msg("\"%s\" was not refused as invalid", bad[i]);
}

static void test_names_lease_is_a_dns1123_subdomain(void **state)
{
    (void)state;
    char b[300];
    const char *ok[] = {"kv-master", "kv.master-lease", "a.b.c", "0", "x1.y2"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (kl__name_check_lease(ok[i]) != KL__NAME_OK)
            fail_msg("\"%s\" was refused", ok[i]);
    /* 253 bytes of four labels: the longest name. */
    repeat(b, 'l', 253);
    b[63] = b[127] = b[191] = '.';
    assert_int_equal(kl__name_check_lease(b), KL__NAME_OK);

    assert_int_equal(kl__name_check_lease(NULL), KL__NAME_EMPTY);
    assert_int_equal(kl__name_check_lease(""), KL__NAME_EMPTY);
    repeat(b, 'l', 254);
    b[63] = b[127] = b[191] = '.';
    assert_int_equal(kl__name_check_lease(b), KL__NAME_TOO_LONG);
    /* Each label is a DNS-1123 label, at most 63 bytes. */
    repeat(b, 'l', 64);
    assert_int_equal(kl__name_check_lease(b), KL__NAME_INVALID);
    const char *bad[] = {"DB", "db..x", "db.", ".db", "db_x", "-db", "db-", "db.-x", "a/b", "."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (kl__name_check_lease(bad[i]) != KL__NAME_INVALID)
            fail_msg("\"%s\" was not refused as invalid", bad[i]);
}

static void test_names_identity_is_printable_ascii(void **state)
{
    (void)state;
    char b[300];
    size_t at = 999;
    const char *ok[] = {"node-1:8080", "with space", "~!@#$%^&*()", "x", "Pod/Name_1"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (kl__name_check_identity(ok[i], &at) != KL__NAME_OK)
            fail_msg("\"%s\" was refused", ok[i]);
    assert_int_equal(kl__name_check_identity(repeat(b, 'i', 253), NULL), KL__NAME_OK);
    assert_int_equal(at, 999); /* untouched unless invalid */

    assert_int_equal(kl__name_check_identity(NULL, &at), KL__NAME_EMPTY);
    assert_int_equal(kl__name_check_identity("", &at), KL__NAME_EMPTY);
    assert_int_equal(kl__name_check_identity(repeat(b, 'i', 254), &at), KL__NAME_TOO_LONG);
    const struct {
        const char *s;
        size_t at;
    } bad[] = {{"a\nb", 1}, {"tab\there", 3}, {"\x7f", 0}, {"caf\xc3\xa9", 3}, {"x\x01", 1}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        at = 999;
        assert_int_equal(kl__name_check_identity(bad[i].s, &at), KL__NAME_INVALID);
        assert_int_equal(at, bad[i].at);
    }
    assert_int_equal(kl__name_check_identity("a\nb", NULL), KL__NAME_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_namespace_is_a_dns1123_label),
        cmocka_unit_test(test_names_lease_is_a_dns1123_subdomain),
        cmocka_unit_test(test_names_identity_is_printable_ascii),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
