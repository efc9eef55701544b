/* The Kubernetes store: coordination.k8s.io/v1 Leases through the apiserver.
 * This file makes and destroys the store and holds what its operations
 * (kube_ops.c: one request each; updates are conditional JSON merge patches
 * of the spec) and its watches (kube_watch.c: list, then watch with
 * bookmarks, relist after 410 Gone) share. Everything the apiserver says is
 * turned into store terms in kube_map.c. Loop thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "kube/incluster.h"
#include "kube/kubeconfig.h"
#include "store/kube_map.h"
#include "store/kube_internal.h"

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS  5000

static uint64_t rnd(kube_store *ks)
{
    /* xorshift64*: jitter only, no need for quality. */
    ks->rng ^= ks->rng >> 12;
    ks->rng ^= ks->rng << 25;
    ks->rng ^= ks->rng >> 27;
    return ks->rng * 2685821657736338717ULL;
}

int store_kube_backoff_ms(kube_store *ks, int failures)
{
    if (failures <= 0)
        return 0;
    int64_t d = BACKOFF_BASE_MS;
    for (int i = 1; i < failures && d < BACKOFF_CAP_MS; i++)
        d *= 2;
    if (d > BACKOFF_CAP_MS)
        d = BACKOFF_CAP_MS;
    /* Between half and all of it, so that many watches do not retry in step. */
    return (int)(d / 2 + (int64_t)(rnd(ks) % (uint64_t)(d / 2 + 1)));
}

void store_kube_note_reachable(kube_store *ks, long http_code)
{
    ks->reachable = store_kube_reachable_after(http_code);
}

static bool kube_reachable(store *s)
{
    return ((kube_store *)s)->reachable;
}

/* Cancels everything without callbacks. Not to be called from inside a
 * callback of this store (the engine destroys the store after its loop). */
static void kube_destroy(store *s)
{
    kube_store *ks = (kube_store *)s;
    store_kube_ops_cancel_all(ks);
    store_kube_watches_free(ks);
    kube_client_free(ks->c);
    free(ks);
}

static const store_ops kube_ops = {
    .get = store_kube_get,
    .create = store_kube_create,
    .update = store_kube_update,
    .remove = store_kube_remove,
    .pod_label = store_kube_pod_label,
    .pod_get = store_kube_pod_get,
    .record_event = store_kube_record_event,
    .watch = store_kube_watch,
    .unwatch = store_kube_unwatch,
    .reachable = kube_reachable,
    .destroy = kube_destroy,
};

store *store_kube_new(loop *l, const store_kube_opts *opts, char *err, size_t err_len)
{
    kube_config cfg;
    int rc = opts && opts->kubeconfig
                 ? kube_kubeconfig_load(opts->kubeconfig, opts->context, &cfg, err, err_len)
                 : kube_incluster_load_env(opts ? opts->sa_dir : NULL, &cfg, err, err_len);
    if (rc != 0)
        return NULL;
    if (kube_config_check(&cfg, opts && opts->allow_token_over_http, err, err_len) != 0) {
        kube_config_clear(&cfg);
        return NULL;
    }
    kube_store *ks = calloc(1, sizeof *ks);
    if (!ks) {
        kube_config_clear(&cfg);
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    log_event(LOG_INFO, "kube_config", "source=%s server=%s auth=%s insecure=%s", log_q(cfg.source),
              log_q(cfg.server),
              cfg.client_cert.data ? "client-certificate"
              : cfg.token_file     ? "token-file"
                                   : "token",
              cfg.insecure ? "true" : "false");
    ks->base.ops = &kube_ops;
    ks->base.kind = "kube";
    ks->l = l;
    ks->rng = (uint64_t)mono_us() * 0x9E3779B97F4A7C15ULL | 1;
    ks->c = kube_client_new(l, &cfg, err, err_len);
    if (!ks->c) {
        kube_config_clear(&cfg);
        free(ks);
        return NULL;
    }
    return &ks->base;
}
