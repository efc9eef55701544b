/* What the Kubernetes store's files share: the store object and its
 * helpers (store/kube.c), single operations (store/kube_ops.c) and watches
 * (store/kube_watch.c). Everything runs on the loop thread that the store
 * was made for; no locks. Private to store/kube*.c: the store's public
 * face is store/kube.h. */
#ifndef KL_STORE_KUBE_INTERNAL_H
#define KL_STORE_KUBE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "core/loop.h"
#include "kube/client.h"
#include "store/kube.h"

#define LEASES_PATH     "/apis/coordination.k8s.io/v1/namespaces/%s/leases"
#define LIST_TIMEOUT_MS 10000 /* also the default timeout of an operation */

typedef struct kube_op kube_op;

typedef struct kube_store {
    store base;
    loop *l;
    kube_client *c;
    bool reachable;             /* the last answer showed the apiserver reachable */
    struct kl__list ops;        /* kube_op: operations not yet completed */
    struct kl__list namespaces; /* ns_watch: one apiserver watch per namespace in use */
    size_t n_namespaces;
    struct kl__list silent; /* store_watch of invalid names, which report nothing */
    uint64_t rng;           /* backoff jitter */
} kube_store;

/* ---- kube.c: helpers -------------------------------------------------- */

/* The delay before retry number `failures` (0: none): doubling from 100 ms
 * up to 5 s, with jitter (between half and all of it). */
int store_kube_backoff_ms(kube_store *ks, int failures);
/* Records whether an answer (HTTP status, 0: none) shows the apiserver reachable. */
void store_kube_note_reachable(kube_store *ks, long http_code);

/* ---- kube_ops.c: get, create, update (a conditional merge patch), remove - */

void store_kube_get(store *s, const char *ns, const char *name, int timeout_ms, store_cb cb,
                    void *ctx);
void store_kube_create(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx);
void store_kube_update(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx);
void store_kube_remove(store *s, const char *ns, const char *name, const char *rv, int timeout_ms,
                       store_cb cb, void *ctx);
/* Pods: a GET, and a merge patch of one label (store.h). */
void store_kube_pod_get(store *s, const char *ns, const char *pod, int timeout_ms, store_cb cb,
                        void *ctx);
void store_kube_pod_label(store *s, const char *ns, const char *pod, const char *key,
                          const char *value, int timeout_ms, store_cb cb, void *ctx);
/* Events: a POST of a core/v1 Event (store.h, record_event). */
void store_kube_record_event(store *s, const store_lease_event *ev, int timeout_ms, store_cb cb,
                             void *ctx);
/* Cancels every operation without callbacks (store destruction). */
void store_kube_ops_cancel_all(kube_store *ks);

/* ---- kube_watch.c: one list and watch per namespace, shared ------------- */

store_watch *store_kube_watch(store *s, const char *ns, const char *name, store_watch_cb cb,
                              void *ctx);
void store_kube_unwatch(store *s, store_watch *w);
/* Frees every watch without callbacks (store destruction). */
void store_kube_watches_free(kube_store *ks);

#endif
