/* libkubelease over TLS, against a real kubeleased serving HTTPS
 * (--tls-cert-file, --tls-key-file; the test control plane's apiserver when
 * there is one, else --dev), with certificates made here (openssl):
 * - a client given the service's CA (ca_file, or $KUBELEASE_CA_FILE) is
 *   elected and keeps its term confirmed over https;
 * - a client trusting another CA is refused, and its error names the TLS
 *   failure (kl_get_holder at once; kl_wait_elected's timeout as its last
 *   problem);
 * - the certificate rotates (renewed under the same CA, as cert-manager
 *   does) while clients stay connected: they keep leading, and new
 *   connections get the new certificate; a pair that does not load (a key
 *   of another certificate) is not served, the previous one stays. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "client_harness.h"
#include "kubelease.h"

static struct server srv;
static char dir[256], ca[300], other_ca[300], cert[300], key[300];

static void make_certs(const char *prefix, const char *cn)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "bash '%s/tests/support/make_certs.sh' '%s' '%s' '%s'",
             getenv("KL_SOURCE_DIR"), dir, prefix, cn);
    if (system(cmd) != 0)
        fail_msg("cannot make test certificates: %s", cmd);
}

static int group_setup(void **state)
{
    (void)state;
    h_require_server();
    if (!getenv("KL_SOURCE_DIR") || system("command -v openssl >/dev/null") != 0) {
        fprintf(stderr, "SKIP: needs openssl and $KL_SOURCE_DIR\n");
        exit(77);
    }
    snprintf(dir, sizeof(dir), "%s/kl-test-tls-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    make_certs("", "kubeleased");
    make_certs("other-", "kubeleased elsewhere");
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(other_ca, sizeof(other_ca), "%s/other-ca.crt", dir);
    snprintf(cert, sizeof(cert), "%s/server.crt", dir);
    snprintf(key, sizeof(key), "%s/server.key", dir);
    srv.tls_cert = cert;
    srv.tls_key = key;
    srv.tls_ca = ca;
    h_server_start(&srv, 0);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[400];
    h_server_cleanup(&srv);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static kl_client *client_trusting(const char *ca_file)
{
    kl_client_options o;
    kl_error err;
    kl_client_options_init(&o);
    o.ca_file = ca_file;
    kl_client *c = kl_client_new_opts(srv.endpoint, &o, &err);
    if (!c)
        fail_msg("kl_client_new_opts: %s", err.message);
    return c;
}

static void win(kl_client *c, const char *lease, const char *id, int64_t *epoch)
{
    kl_error err;
    if (kl_run_election(c, h_ns, lease, id, 5, 4, 1, &err) != KL_OK ||
        kl_wait_elected(c, h_ns, lease, 15, epoch, &err) != KL_OK)
        fail_msg("%s could not win %s over https: %s", id, lease, err.message);
}

/* No loss for ms (three validities at least): Confirms go through. */
static void still_leads(kl_client *c, const char *lease, int ms)
{
    kl_error err;
    int rc = kl_wait_lost_timeout(c, h_ns, lease, ms, &err);
    if (rc != KL_ERR_TIMEOUT)
        fail_msg("leadership of %s lost over https: %s", lease, err.message);
    assert_int_equal(kl_is_leader(c, h_ns, lease, NULL, &err), 1);
}

static void test_tls_elects_with_ca_file(void **state)
{
    (void)state;
    assert_non_null(strstr(srv.endpoint, "https://"));
    kl_client *c = client_trusting(ca);
    kl_error err;
    int64_t epoch = 0, hepoch = 0;
    win(c, "tls", "tls-leader", &epoch);
    still_leads(c, "tls", 3000);
    char *holder = NULL;
    assert_int_equal(kl_get_holder(c, h_ns, "tls", &holder, &hepoch, &err), KL_OK);
    assert_string_equal(holder, "tls-leader");
    kl_free(holder);
    assert_int_equal(hepoch, epoch);
    assert_int_equal(kl_cancel_election(c, h_ns, "tls", &err), KL_OK);
    assert_int_equal(kl_wait_ended(c, h_ns, "tls", 5000, &err), KL_OK);
    kl_client_free(c);

    /* The CA from the environment, as kl_replica and every program get it. */
    setenv("KUBELEASE_CA_FILE", ca, 1);
    c = kl_client_new(srv.endpoint, &err);
    unsetenv("KUBELEASE_CA_FILE");
    assert_non_null(c);
    holder = NULL;
    assert_int_equal(kl_get_holder(c, h_ns, "tls", &holder, &hepoch, &err), KL_OK);
    assert_null(holder); /* released */
    kl_client_free(c);
}

static void test_tls_wrong_ca_is_refused_with_a_clear_message(void **state)
{
    (void)state;
    kl_client *c = client_trusting(other_ca);
    kl_error err;
    char *holder = NULL;
    assert_int_equal(kl_get_holder(c, h_ns, "tls-wrong", &holder, NULL, &err), KL_ERR_UNAVAILABLE);
    assert_null(holder);
    printf("kl_get_holder: %s\n", err.message);
    assert_non_null(strstr(err.message, "TLS"));
    assert_non_null(strstr(err.message, "certificate"));
    assert_non_null(strstr(err.message, other_ca));
    assert_int_equal(kl_run_election(c, h_ns, "tls-wrong", "nobody", 5, 4, 1, &err), KL_OK);
    assert_int_equal(kl_wait_elected(c, h_ns, "tls-wrong", 2, NULL, &err), KL_ERR_TIMEOUT);
    printf("kl_wait_elected: %s\n", err.message);
    assert_non_null(strstr(err.message, "TLS"));
    kl_client_free(c);

    /* No CA given: the system's store does not know the test CA either.
     * (Reading that store is slow under valgrind: a generous timeout.) */
    kl_client_options o;
    kl_client_options_init(&o);
    o.request_timeout_ms = 30000;
    c = kl_client_new_opts(srv.endpoint, &o, &err);
    assert_non_null(c);
    assert_int_equal(kl_get_holder(c, h_ns, "tls-wrong", &holder, NULL, &err), KL_ERR_UNAVAILABLE);
    assert_non_null(strstr(err.message, "TLS"));
    assert_non_null(strstr(err.message, "the system's"));
    kl_client_free(c);

    /* An unreadable CA file is an invalid argument, named. */
    o.ca_file = "/nonexistent/ca.crt";
    assert_null(kl_client_new_opts(srv.endpoint, &o, &err));
    assert_int_equal(err.code, KL_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "ca_file"));
}

static size_t discard(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

/* The subject of the certificate a new connection gets ("" when the
 * handshake fails). */
static void served_subject(char *out, size_t n)
{
    char url[128];
    struct curl_certinfo *ci = NULL;
    out[0] = 0;
    CURL *h = curl_easy_init();
    snprintf(url, sizeof(url), "%s/livez", srv.endpoint);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    curl_easy_setopt(h, CURLOPT_CERTINFO, 1L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 2000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
    if (curl_easy_perform(h) == CURLE_OK &&
        curl_easy_getinfo(h, CURLINFO_CERTINFO, &ci) == CURLE_OK && ci && ci->num_of_certs > 0) {
        for (struct curl_slist *s = ci->certinfo[0]; s; s = s->next)
            if (strncmp(s->data, "Subject:", 8) == 0)
                snprintf(out, n, "%s", s->data + 8);
    }
    curl_easy_cleanup(h);
}

/* Waits (5 s at most) until new connections get a certificate whose subject
 * contains want. */
static void wait_served(const char *want)
{
    char got[256] = "";
    int64_t until = h_now_ms() + 5000;
    for (;;) {
        served_subject(got, sizeof(got));
        if (strstr(got, want))
            return;
        if (h_now_ms() > until)
            fail_msg("new connections get \"%s\", not \"%s\"", got, want);
        h_sleep_ms(100);
    }
}

static void test_tls_certificate_rotation_keeps_clients(void **state)
{
    (void)state;
    kl_client *c = client_trusting(ca), *w = client_trusting(ca);
    kl_error err;
    int64_t epoch = 0;
    wait_served("kubeleased");
    win(c, "tls-rotate", "rotating-leader", &epoch);
    assert_int_equal(kl_run_election(w, h_ns, "tls-rotate", "rotating-standby", 5, 4, 1, &err),
                     KL_OK);

    /* cert-manager renews: a new key and certificate, the same CA. */
    make_certs("", "kubeleased renewed");
    wait_served("kubeleased renewed");
    still_leads(c, "tls-rotate", 3000);

    /* A broken pair (the key of another certificate) is not served. */
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "cp '%s/other-server.key' '%s.new' && mv '%s.new' '%s'", dir, key,
             key, key);
    assert_int_equal(system(cmd), 0);
    h_sleep_ms(1500); /* more than the reload check period */
    wait_served("kubeleased renewed");
    snprintf(cmd, sizeof(cmd), "grep -q 'event=tls_certificate_reload_failed' '%s'", srv.log);
    assert_int_equal(system(cmd), 0);
    still_leads(c, "tls-rotate", 1000);

    /* Fixed by the next renewal. */
    make_certs("", "kubeleased renewed again");
    wait_served("kubeleased renewed again");
    still_leads(c, "tls-rotate", 2000);
    int64_t hepoch = 0;
    char *holder = NULL;
    assert_int_equal(kl_get_holder(w, h_ns, "tls-rotate", &holder, &hepoch, &err), KL_OK);
    assert_string_equal(holder, "rotating-leader");
    kl_free(holder);
    assert_int_equal(hepoch, epoch);
    assert_int_equal(kl_cancel_election(c, h_ns, "tls-rotate", &err), KL_OK);
    assert_int_equal(kl_wait_elected(w, h_ns, "tls-rotate", 15, NULL, &err), KL_OK);
    kl_client_free(c);
    kl_client_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_elects_with_ca_file),
        cmocka_unit_test(test_tls_wrong_ca_is_refused_with_a_clear_message),
        cmocka_unit_test(test_tls_certificate_rotation_keeps_clients),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
