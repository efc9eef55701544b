/* core/base64.h: the encoder, and the decoder in both of the service's
 * dialects: kubeconfig *-data (canonical, white space skipped) and proto3
 * JSON bytes (either alphabet, padding optional). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base64.h"

#define KUBECONFIG (BASE64_SKIP_SPACE | BASE64_CANONICAL)
#define JSON       BASE64_URL_SAFE

static void decodes(unsigned flags, const char *in, int want_rc, const char *want)
{
    uint8_t *out = (uint8_t *)"not touched";
    size_t len = 99;
    int rc = base64_decode(in, strlen(in), flags, &out, &len);
    if (rc != want_rc)
        fail_msg("\"%s\" (flags %u): %d, not %d", in, flags, rc, want_rc);
    if (rc == 0) {
        assert_non_null(out);
        assert_int_equal(len, strlen(want));
        assert_memory_equal(out, want, len);
        assert_int_equal(out[len], 0);
    } else {
        assert_null(out);
        assert_int_equal(len, 0);
    }
    free(out);
}

static void test_base64_kubeconfig_data_is_canonical(void **state)
{
    (void)state;
    decodes(KUBECONFIG, "", 0, "");
    decodes(KUBECONFIG, "Zg==", 0, "f");
    decodes(KUBECONFIG, "Zg", 0, "f");
    decodes(KUBECONFIG, "Zm8=", 0, "fo");
    decodes(KUBECONFIG, "Zm9v", 0, "foo");
    decodes(KUBECONFIG, "Zm9v\nYmFy", 0, "foobar");
    decodes(KUBECONFIG, " Zm9v\r\n\tYm Fy \n", 0, "foobar");
    decodes(KUBECONFIG, "Z", BASE64_INVALID, NULL);
    decodes(KUBECONFIG, "Zh==", BASE64_INVALID, NULL); /* non-zero unused bits */
    decodes(KUBECONFIG, "Zg==Zg==", BASE64_INVALID, NULL);
    decodes(KUBECONFIG, "Zg=", BASE64_INVALID, NULL);
    decodes(KUBECONFIG, "Zg===", BASE64_INVALID, NULL);
    decodes(KUBECONFIG, "Z*==", BASE64_INVALID, NULL);
    decodes(KUBECONFIG, "-_8=", BASE64_INVALID, NULL); /* the URL-safe alphabet */
}

static void test_base64_json_bytes_accept_both_alphabets(void **state)
{
    (void)state;
    decodes(JSON, "", 0, "");
    decodes(JSON, "Zm9v", 0, "foo");
    decodes(JSON, "Zg", 0, "f");
    decodes(JSON, "Zg==", 0, "f");
    decodes(JSON, "Zg====", 0, "f"); /* trailing padding, however much */
    decodes(JSON, "+/8=", 0, "\xfb\xff");
    decodes(JSON, "-_8=", 0, "\xfb\xff");
    decodes(JSON, "Zh", 0, "f");      /* unused bits are not checked */
    decodes(JSON, "Zm9vY", 0, "foo"); /* nor a lone last character */
    decodes(JSON, "Zg==Zg", BASE64_INVALID, NULL);
    decodes(JSON, "Zm9v Zm9v", BASE64_INVALID, NULL); /* no white space */
    decodes(JSON, "Zm9v\n", BASE64_INVALID, NULL);
    decodes(JSON, "Z*", BASE64_INVALID, NULL);
}

static void test_base64_encode_pads_and_round_trips(void **state)
{
    (void)state;
    const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        char *s = base64_encode((const uint8_t *)plain[i], strlen(plain[i]));
        assert_string_equal(s, coded[i]);
        free(s);
    }
    uint8_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    for (size_t n = 0; n <= sizeof all; n += 37) {
        char *s = base64_encode(all, n);
        for (unsigned flags = 0; flags < 8; flags++) {
            uint8_t *back;
            size_t len;
            assert_int_equal(base64_decode(s, strlen(s), flags, &back, &len), 0);
            assert_int_equal(len, n);
            assert_memory_equal(back, all, n);
            free(back);
        }
        free(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_base64_kubeconfig_data_is_canonical),
        cmocka_unit_test(test_base64_json_bytes_accept_both_alphabets),
        cmocka_unit_test(test_base64_encode_pads_and_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
