/* The test control plane as the engine-level integration tests see it: its
 * env file (the test namespace, the apiserver's and the control endpoint's
 * URLs), a Kubernetes store with kubeleased's credentials, and requests to
 * the apiserver as cluster admin (as kubectl would make them). Header-only;
 * include after support/engine_harness.h. */
#ifndef KL_TESTS_KUBE_ENV_H
#define KL_TESTS_KUBE_ENV_H

#include <curl/curl.h>

#include "store/kube.h"

static char env_dir[1024];
static char test_ns[64];
static char control_url[256];
static char apiserver_url[256];
static char run_id[32]; /* tells this run's Leases from earlier runs' */

/* Reads $KUBELEASE_TEST_ENV/env; false (the test is skipped) without it. */
static inline bool kube_env_read(void)
{
    const char *dir = getenv("KUBELEASE_TEST_ENV");
    if (!dir || !*dir)
        return false;
    snprintf(env_dir, sizeof env_dir, "%s", dir);
    snprintf(run_id, sizeof run_id, "%lx", (unsigned long)(mono_us() & 0xffffff));
    char path[1100];
    snprintf(path, sizeof path, "%s/env", env_dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        const char *v = eq + 1;
        if (strcmp(line, "KL_TEST_NAMESPACE") == 0)
            snprintf(test_ns, sizeof test_ns, "%s", v);
        else if (strcmp(line, "KL_CONTROL_URL") == 0)
            snprintf(control_url, sizeof control_url, "%s", v);
        else if (strcmp(line, "KL_APISERVER_URL") == 0)
            snprintf(apiserver_url, sizeof apiserver_url, "%s", v);
    }
    fclose(f);
    return true;
}

/* A Kubernetes store with kubeleased's ServiceAccount credentials. */
static inline store *sa_store(loop *l)
{
    char kubeconfig[1100], err[256];
    snprintf(kubeconfig, sizeof kubeconfig, "%s/sa.kubeconfig", env_dir);
    store_kube_opts o = {.kubeconfig = kubeconfig};
    store *s = store_kube_new(l, &o, err, sizeof err);
    if (!s)
        fail_msg("store_kube_new: %s", err);
    return s;
}

typedef struct membuf {
    char *p;
    size_t len;
} membuf;

static size_t membuf_write(char *data, size_t size, size_t n, void *ctx)
{
    membuf *m = ctx;
    char *p = realloc(m->p, m->len + size * n + 1);
    if (!p)
        return 0;
    memcpy(p + m->len, data, size * n);
    m->p = p;
    m->len += size * n;
    m->p[m->len] = '\0';
    return size * n;
}

/* GET path (patch NULL) or merge-PATCH it with patch, on the apiserver as
 * cluster admin; the body (to free), failing the test unless it answered
 * 200. */
static inline char *admin_request(const char *path, const char *patch, size_t *len)
{
    char url[512], cert[1100], key[1100], ca[1100];
    snprintf(url, sizeof url, "%s%s", apiserver_url, path);
    snprintf(cert, sizeof cert, "%s/pki/admin.crt", env_dir);
    snprintf(key, sizeof key, "%s/pki/admin.key", env_dir);
    snprintf(ca, sizeof ca, "%s/pki/ca.crt", env_dir);
    membuf m = {0};
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/merge-patch+json");
    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_SSLCERT, cert);
    curl_easy_setopt(h, CURLOPT_SSLKEY, key);
    curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, membuf_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &m);
    if (patch) {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PATCH");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, patch);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    }
    long code = 0;
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdr);
    if (rc != CURLE_OK || code != 200 || !m.p)
        fail_msg("%s %s: %s %ld %s", patch ? "PATCH" : "GET", url, curl_easy_strerror(rc), code,
                 m.p ? m.p : "");
    if (len)
        *len = m.len;
    return m.p;
}

#endif
