/* In-cluster configuration from a temporary service-account directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "kube/incluster.h"

static char dir[256];

static void write_file(const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void remove_file(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kl-sa-XXXXXX");
    assert_non_null(mkdtemp(dir));
    write_file("token", "eyJhbGciOiJSUzI1NiJ9.sa-token-1\n");
    write_file("ca.crt", "-----BEGIN CERTIFICATE-----\nSA-CA\n-----END CERTIFICATE-----\n");
    write_file("namespace", "team-b");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

static void test_incluster_loads_sa_dir(void **state)
{
    (void)state;
    kube_config c;
    char err[512];
    assert_int_equal(kube_incluster_load("10.96.0.1", "443", dir, &c, err, sizeof err), 0);
    assert_string_equal(c.server, "https://10.96.0.1:443");
    assert_string_equal(c.token, "eyJhbGciOiJSUzI1NiJ9.sa-token-1");
    assert_non_null(strstr((char *)c.ca.data, "SA-CA"));
    assert_string_equal(c.ns, "team-b");
    assert_string_equal(c.source, "in-cluster");
    /* A rotated token is picked up on refresh. */
    write_file("token", "eyJhbGciOiJSUzI1NiJ9.sa-token-2");
    assert_int_equal(kube_config_token_refresh(&c, err, sizeof err), 0);
    assert_string_equal(c.token, "eyJhbGciOiJSUzI1NiJ9.sa-token-2");
    kube_config_clear(&c);
}

static void test_incluster_ipv6_host_in_brackets(void **state)
{
    (void)state;
    kube_config c;
    char err[512];
    assert_int_equal(kube_incluster_load("fd00::1", "6443", dir, &c, err, sizeof err), 0);
    assert_string_equal(c.server, "https://[fd00::1]:6443");
    kube_config_clear(&c);
}

static void test_incluster_env(void **state)
{
    (void)state;
    kube_config c;
    char err[512];
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(kube_incluster_load_env(dir, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "KUBERNETES_SERVICE_HOST"));
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
    assert_int_equal(kube_incluster_load_env(dir, &c, err, sizeof err), 0);
    assert_string_equal(c.server, "https://127.0.0.1:6443");
    kube_config_clear(&c);
}

static void expect_error(const char *host, const char *port, const char *needle)
{
    kube_config c;
    char err[512] = "";
    assert_int_equal(kube_incluster_load(host, port, dir, &c, err, sizeof err), -1);
    if (!strstr(err, needle))
        fail_msg("\"%s\" does not contain \"%s\"", err, needle);
    assert_null(c.server);
    assert_null(c.token);
}

static void test_incluster_errors(void **state)
{
    (void)state;
    expect_error("10.0.0.1", "http", "KUBERNETES_SERVICE_PORT is not a port");
    expect_error("10.0.0.1", "70000", "KUBERNETES_SERVICE_PORT is not a port");
    expect_error("bad/host", "443", "KUBERNETES_SERVICE_HOST is not");
    expect_error("", "443", "must be set");
    remove_file("token");
    expect_error("10.0.0.1", "443", "service-account token");
    write_file("token", "   \n");
    expect_error("10.0.0.1", "443", "token file is empty");
    write_file("token", "t");
    remove_file("ca.crt");
    expect_error("10.0.0.1", "443", "service-account CA");
    write_file("ca.crt", "CA");
    /* The namespace file is optional. */
    remove_file("namespace");
    kube_config c;
    char err[512];
    assert_int_equal(kube_incluster_load("10.0.0.1", "443", dir, &c, err, sizeof err), 0);
    assert_null(c.ns);
    kube_config_clear(&c);
    /* A directory in place of the token file is refused, not read. */
    remove_file("token");
    char p[512];
    snprintf(p, sizeof p, "%s/token", dir);
    assert_int_equal(mkdir(p, 0700), 0);
    expect_error("10.0.0.1", "443", "not a regular file");
    rmdir(p);
    write_file("token", "t");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_incluster_loads_sa_dir),
        cmocka_unit_test(test_incluster_ipv6_host_in_brackets),
        cmocka_unit_test(test_incluster_env),
        cmocka_unit_test(test_incluster_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
