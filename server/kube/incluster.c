/* In-cluster configuration (what client-go's rest.InClusterConfig reads).
 * Blocking reads at start-up; no global state, any thread. */
#include "kube/incluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *path_in(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static int valid_host(const char *h)
{
    for (; *h; h++) {
        if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') || (*h >= '0' && *h <= '9') ||
              *h == '.' || *h == '-' || *h == ':' || *h == '%'))
            return 0;
    }
    return 1;
}

int kube_incluster_load(const char *host, const char *port, const char *sa_dir, kube_config *out,
                        char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    char e[512];
    char *p = NULL;
    if (!sa_dir)
        sa_dir = KUBE_SA_DIR_DEFAULT;
    if (!host || !host[0] || !port || !port[0]) {
        snprintf(err, err_len,
                 "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
                 "(not running in a pod? use --kubeconfig)");
        return -1;
    }
    if (!valid_host(host)) {
        snprintf(err, err_len, "in-cluster: KUBERNETES_SERVICE_HOST is not a host name or address");
        return -1;
    }
    char *end;
    long pn = strtol(port, &end, 10);
    if (*end || pn < 1 || pn > 65535) {
        snprintf(err, err_len, "in-cluster: KUBERNETES_SERVICE_PORT is not a port number");
        return -1;
    }
    size_t n = strlen(host) + 32;
    out->server = malloc(n);
    out->source = strdup("in-cluster");
    if (!out->server || !out->source)
        goto oom;
    if (strchr(host, ':'))
        snprintf(out->server, n, "https://[%s]:%ld", host, pn);
    else
        snprintf(out->server, n, "https://%s:%ld", host, pn);

    out->token_file = path_in(sa_dir, "token");
    if (!out->token_file)
        goto oom;
    if (kube_config_token_refresh(out, e, sizeof e) != 0) {
        snprintf(err, err_len, "in-cluster: service-account token: %s", e);
        goto fail;
    }
    if (!(p = path_in(sa_dir, "ca.crt")))
        goto oom;
    if (kube_read_file(p, KUBE_FILE_MAX, &out->ca, e, sizeof e) != 0) {
        snprintf(err, err_len, "in-cluster: service-account CA: %s", e);
        goto fail;
    }
    free(p);
    if (!(p = path_in(sa_dir, "namespace")))
        goto oom;
    /* The namespace file is optional (it only provides a default). */
    char *ns = kube_read_token(p, e, sizeof e);
    if (ns)
        out->ns = ns;
    free(p);
    return 0;
oom:
    snprintf(err, err_len, "in-cluster: out of memory");
fail:
    free(p);
    kube_config_clear(out);
    return -1;
}

int kube_incluster_load_env(const char *sa_dir, kube_config *out, char *err, size_t err_len)
{
    return kube_incluster_load(getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT"),
                               sa_dir, out, err, err_len);
}
