/* The client re-reads a rotating service-account token at least every
 * minute and right after a 401, and keeps the old one when the file is
 * briefly unreadable. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "kube/client.h"
#include "kube/incluster.h"

static char dir[64];

static void write_file(const char *name, const char *text)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_kube_client_token_reread_every_minute_and_after_401(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kl-tok-XXXXXX");
    assert_non_null(mkdtemp(dir));
    write_file("token", "tok-1");
    write_file("ca.crt", "CA");
    kube_config cfg;
    char err[256];
    assert_int_equal(kube_incluster_load("127.0.0.1", "6443", dir, &cfg, err, sizeof err), 0);
    loop *l = loop_new();
    assert_non_null(l);
    kube_client *c = kube_client_new(l, &cfg, err, sizeof err);
    assert_non_null(c);
    assert_null(cfg.token); /* the client took the config */
    assert_string_equal(kube_client_token(c), "tok-1");
    assert_int_equal(kube_client_token_reads(c), 1);

    int64_t t0 = mono_ms();
    write_file("token", "tok-2");
    /* Not yet due. */
    assert_false(kube_client_token_maybe_refresh(c, t0 + KUBE_TOKEN_REREAD_MS / 2));
    assert_string_equal(kube_client_token(c), "tok-1");
    /* A minute later it is. */
    assert_true(kube_client_token_maybe_refresh(c, t0 + KUBE_TOKEN_REREAD_MS + 1));
    assert_string_equal(kube_client_token(c), "tok-2");
    int64_t t1 = t0 + KUBE_TOKEN_REREAD_MS + 1;
    /* A 401 makes the next request re-read at once. */
    write_file("token", "tok-3");
    assert_false(kube_client_token_maybe_refresh(c, t1 + 1));
    kube_client_token_stale(c);
    assert_true(kube_client_token_maybe_refresh(c, t1 + 2));
    assert_string_equal(kube_client_token(c), "tok-3");
    /* An unreadable file keeps the token in use. */
    char p[128];
    snprintf(p, sizeof p, "%s/token", dir);
    unlink(p);
    kube_client_token_stale(c);
    assert_false(kube_client_token_maybe_refresh(c, t1 + 3));
    assert_string_equal(kube_client_token(c), "tok-3");
    assert_int_equal(kube_client_token_reads(c), 3);

    kube_client_free(c);
    kube_client_free(NULL);
    loop_free(l);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kube_client_token_reread_every_minute_and_after_401),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
