/* kubeconfig parsing and loading: data vs file, token vs tokenFile vs client
 * certificate, named contexts, and errors that name what is missing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "kube/kubeconfig.h"

static char tmpdir[256];

static void write_file(const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kl-kubeconfig-XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    write_file("ca.pem", "-----BEGIN CERTIFICATE-----\nCAFILE\n-----END CERTIFICATE-----\n");
    write_file("client.pem", "CERTFILE\n");
    write_file("client.key", "KEYFILE\n");
    write_file("token", "  file-token-1\n");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    return system(cmd);
}

/* "CADATA" and "CERTDATA"/"KEYDATA" in base64. */
static const char *const full = "apiVersion: v1\n"
                                "kind: Config\n"
                                "current-context: admin@test\n"
                                "preferences: {}\n"
                                "clusters:\n"
                                "- name: test\n"
                                "  cluster:\n"
                                "    server: https://127.0.0.1:6443/\n"
                                "    certificate-authority-data: Q0FEQVRB\n"
                                "- name: filecluster\n"
                                "  cluster:\n"
                                "    server: https://127.0.0.1:6444\n"
                                "    certificate-authority: ca.pem\n"
                                "- name: insecure\n"
                                "  cluster:\n"
                                "    server: http://127.0.0.1:8080\n"
                                "    insecure-skip-tls-verify: true\n"
                                "users:\n"
                                "- name: admin\n"
                                "  user:\n"
                                "    client-certificate-data: Q0VSVERBVEE=\n"
                                "    client-key-data: S0VZREFUQQ==\n"
                                "- name: certfiles\n"
                                "  user:\n"
                                "    client-certificate: client.pem\n"
                                "    client-key: client.key\n"
                                "- name: sa\n"
                                "  user:\n"
                                "    token: inline-token\n"
                                "- name: safile\n"
                                "  user:\n"
                                "    token: ignored-token\n"
                                "    tokenFile: token\n"
                                "- name: nothing\n"
                                "  user: {}\n"
                                "- name: execuser\n"
                                "  user:\n"
                                "    exec:\n"
                                "      command: get-token\n"
                                "- name: halfcert\n"
                                "  user:\n"
                                "    client-certificate-data: Q0VSVERBVEE=\n"
                                "contexts:\n"
                                "- name: admin@test\n"
                                "  context:\n"
                                "    cluster: test\n"
                                "    user: admin\n"
                                "- name: files\n"
                                "  context:\n"
                                "    cluster: filecluster\n"
                                "    user: certfiles\n"
                                "    namespace: team-a\n"
                                "- name: sa\n"
                                "  context:\n"
                                "    cluster: insecure\n"
                                "    user: sa\n"
                                "- name: safile\n"
                                "  context:\n"
                                "    cluster: test\n"
                                "    user: safile\n"
                                "- name: nocreds\n"
                                "  context:\n"
                                "    cluster: test\n"
                                "    user: nothing\n"
                                "- name: exec\n"
                                "  context:\n"
                                "    cluster: test\n"
                                "    user: execuser\n"
                                "- name: half\n"
                                "  context:\n"
                                "    cluster: test\n"
                                "    user: halfcert\n"
                                "- name: nouser\n"
                                "  context:\n"
                                "    cluster: test\n"
                                "    user: ghost\n"
                                "- name: nocluster\n"
                                "  context:\n"
                                "    cluster: ghost\n"
                                "    user: admin\n";

static void load(const char *context, kube_config *c, int want_rc, char *err, size_t err_len)
{
    write_file("config", full);
    char p[512];
    snprintf(p, sizeof p, "%s/config", tmpdir);
    int rc = kube_kubeconfig_load(p, context, c, err, err_len);
    if (rc != want_rc)
        fail_msg("load(%s) = %d: %s", context ? context : "(current)", rc, err);
}

static void test_kubeconfig_current_context_with_data(void **state)
{
    (void)state;
    kube_config c;
    char err[512];
    load(NULL, &c, 0, err, sizeof err);
    assert_string_equal(c.server, "https://127.0.0.1:6443");
    assert_int_equal(c.ca.len, 6);
    assert_memory_equal(c.ca.data, "CADATA", 6);
    assert_string_equal((char *)c.client_cert.data, "CERTDATA");
    assert_string_equal((char *)c.client_key.data, "KEYDATA");
    assert_null(c.token);
    assert_null(c.token_file);
    assert_false(c.insecure);
    assert_null(c.ns);
    assert_non_null(strstr(c.source, "kubeconfig "));
    kube_config_clear(&c);
    kube_config_clear(&c); /* twice is harmless */
}

static void test_kubeconfig_named_context_with_files(void **state)
{
    (void)state;
    kube_config c;
    char err[512];
    load("files", &c, 0, err, sizeof err);
    assert_string_equal(c.server, "https://127.0.0.1:6444");
    assert_non_null(strstr((char *)c.ca.data, "CAFILE"));
    assert_string_equal((char *)c.client_cert.data, "CERTFILE\n");
    assert_string_equal((char *)c.client_key.data, "KEYFILE\n");
    assert_string_equal(c.ns, "team-a");
    kube_config_clear(&c);
}

static void test_kubeconfig_token_and_insecure(void **state)
{
    (void)state;
    kube_config c;
    char err[512];
    load("sa", &c, 0, err, sizeof err);
    assert_string_equal(c.server, "http://127.0.0.1:8080");
    assert_true(c.insecure);
    assert_string_equal(c.token, "inline-token");
    assert_null(c.ca.data);
    assert_null(c.client_cert.data);
    kube_config_clear(&c);
}

static void test_kubeconfig_token_file_wins_and_is_reread(void **state)
{
    (void)state;
    kube_config c;
    char err[512];
    load("safile", &c, 0, err, sizeof err);
    assert_string_equal(c.token, "file-token-1");
    assert_non_null(c.token_file);
    write_file("token", "file-token-2\n");
    assert_int_equal(kube_config_token_refresh(&c, err, sizeof err), 0);
    assert_string_equal(c.token, "file-token-2");
    /* A vanished token file keeps the old token and says why. */
    char p[512];
    snprintf(p, sizeof p, "%s/token", tmpdir);
    unlink(p);
    assert_int_equal(kube_config_token_refresh(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "token"));
    assert_string_equal(c.token, "file-token-2");
    kube_config_clear(&c);
    write_file("token", "file-token-1\n");
}

static void expect_error(const char *context, const char *needle)
{
    kube_config c;
    char err[512] = "";
    load(context, &c, -1, err, sizeof err);
    if (!strstr(err, needle))
        fail_msg("error for %s: \"%s\" does not contain \"%s\"", context, err, needle);
    /* Nothing is left allocated on failure. */
    assert_null(c.server);
    assert_null(c.token);
    /* Secrets never appear in messages. */
    assert_null(strstr(err, "inline-token"));
    assert_null(strstr(err, "S0VZREFUQQ"));
}

static void test_kubeconfig_errors_name_what_is_missing(void **state)
{
    (void)state;
    expect_error("nope", "context \"nope\" not found");
    expect_error("nocreds", "user \"nothing\" has no credentials");
    expect_error("exec", "exec or auth-provider");
    expect_error("half", "client-certificate without client-key");
    expect_error("nouser", "user \"ghost\" not found");
    expect_error("nocluster", "cluster \"ghost\" not found");
}

static void parse_error(const char *text, const char *context, const char *needle)
{
    kube_kubeconfig_sel s;
    char err[512] = "";
    int rc = kube_kubeconfig_parse(text, strlen(text), context, &s, err, sizeof err);
    assert_int_equal(rc, -1);
    if (!strstr(err, needle))
        fail_msg("error \"%s\" does not contain \"%s\"", err, needle);
}

static void test_kubeconfig_parse_errors(void **state)
{
    (void)state;
    parse_error("", NULL, "empty");
    parse_error("[1, 2]", NULL, "not a mapping");
    parse_error("a: [\n", NULL, "invalid YAML");
    parse_error("kind: Config\n", NULL, "no current-context");
    /* Deep nesting is refused quickly (libyaml is quadratic in the depth). */
    size_t deep_len = 1 << 20;
    char *deep = malloc(deep_len + 1);
    assert_non_null(deep);
    memset(deep, '[', deep_len);
    deep[deep_len] = 0;
    parse_error(deep, NULL, "nested more than 64 levels deep");
    free(deep);
    parse_error("current-context: x\ncontexts: 5\n", NULL, "contexts is not a list");
    parse_error("current-context: x\ncontexts:\n- name: x\n", NULL, "has no context section");
    parse_error("current-context: x\ncontexts:\n- name: x\n  context: {user: u}\n", NULL,
                "names no cluster");
    parse_error("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                "clusters:\n- name: c\n  cluster: {}\n",
                NULL, "cluster \"c\" has no server");
    parse_error("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                "clusters:\n- name: c\n  cluster: {server: 'ftp://x'}\n",
                NULL, "must start with https://");
    parse_error("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                "clusters:\n- name: c\n  cluster: {server: 'https://x', "
                "insecure-skip-tls-verify: maybe}\n",
                NULL, "insecure-skip-tls-verify must be true or false");
    parse_error("current-context: x\ncontexts:\n- name: x\n  context: {cluster: [1], user: u}\n",
                NULL, "cluster is not a string");
}

static void test_kubeconfig_bad_base64_and_missing_file(void **state)
{
    (void)state;
    const char *text = "current-context: x\n"
                       "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                       "clusters:\n- name: c\n  cluster: {server: 'https://h', "
                       "certificate-authority-data: '!!notbase64'}\n"
                       "users:\n- name: u\n  user: {token: t}\n";
    kube_kubeconfig_sel s;
    kube_config c;
    char err[512];
    assert_int_equal(kube_kubeconfig_parse(text, strlen(text), NULL, &s, err, sizeof err), 0);
    assert_int_equal(kube_kubeconfig_resolve(&s, tmpdir, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "certificate-authority-data is not valid base64"));
    kube_kubeconfig_sel_clear(&s);

    const char *text2 = "current-context: x\n"
                        "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                        "clusters:\n- name: c\n  cluster: {server: 'https://h', "
                        "certificate-authority: missing.pem}\n"
                        "users:\n- name: u\n  user: {token: t}\n";
    assert_int_equal(kube_kubeconfig_parse(text2, strlen(text2), NULL, &s, err, sizeof err), 0);
    assert_int_equal(kube_kubeconfig_resolve(&s, tmpdir, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "certificate-authority:"));
    assert_non_null(strstr(err, "missing.pem"));
    kube_kubeconfig_sel_clear(&s);

    /* A missing kubeconfig names the path. */
    assert_int_equal(kube_kubeconfig_load("/nonexistent/kubeconfig", NULL, &c, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "kubeconfig /nonexistent/kubeconfig"));
}

/* client-go's rules: a CA with insecure-skip-tls-verify is refused (the
 * skip would silently win), and a bearer token goes to an http:// server
 * only when explicitly allowed. */
static void test_kubeconfig_insecure_with_ca_and_token_over_http(void **state)
{
    (void)state;
    const char *head = "current-context: x\n"
                       "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                       "users:\n- name: u\n  user: {token: t}\n";
    char text[512];
    snprintf(text, sizeof text,
             "%sclusters:\n- name: c\n  cluster: {server: 'https://h', "
             "certificate-authority-data: Q0FEQVRB, insecure-skip-tls-verify: true}\n",
             head);
    parse_error(text, NULL,
                "cluster \"c\": certificate-authority and insecure-skip-tls-verify are both set");
    snprintf(text, sizeof text,
             "%sclusters:\n- name: c\n  cluster: {server: 'https://h', "
             "certificate-authority: ca.pem, insecure-skip-tls-verify: true}\n",
             head);
    parse_error(text, NULL, "are both set");

    kube_config c;
    char err[512];
    load("sa", &c, 0, err, sizeof err); /* http://, a token */
    assert_int_equal(kube_config_check(&c, false, err, sizeof err), -1);
    if (!strstr(err, "bearer token would be sent in cleartext to http://127.0.0.1:8080") ||
        !strstr(err, "--allow-token-over-http"))
        fail_msg("error: %s", err);
    assert_int_equal(kube_config_check(&c, true, err, sizeof err), 0);
    kube_config_clear(&c);
    load("safile", &c, 0, err, sizeof err); /* https://, a token file */
    assert_int_equal(kube_config_check(&c, false, err, sizeof err), 0);
    kube_config_clear(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kubeconfig_current_context_with_data),
        cmocka_unit_test(test_kubeconfig_named_context_with_files),
        cmocka_unit_test(test_kubeconfig_token_and_insecure),
        cmocka_unit_test(test_kubeconfig_token_file_wins_and_is_reread),
        cmocka_unit_test(test_kubeconfig_errors_name_what_is_missing),
        cmocka_unit_test(test_kubeconfig_parse_errors),
        cmocka_unit_test(test_kubeconfig_bad_base64_and_missing_file),
        cmocka_unit_test(test_kubeconfig_insecure_with_ca_and_token_over_http),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
