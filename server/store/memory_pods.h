/* The Pods of the memory store (store.h, pod_get and pod_label): only what
 * the store contract touches, their addresses and labels. Private to
 * store/memory*.c; loop thread only. */
#ifndef KL_STORE_MEMORY_PODS_H
#define KL_STORE_MEMORY_PODS_H

#include <stdbool.h>

#include "common/list.h"
#include "store/store.h"

typedef struct mem_pods {
    struct kl__list pods;     /* mem_pod */
    bool auto_add;            /* a Pod named for the first time exists (--dev) */
    store_status labels_fail; /* every label request fails so (STORE_OK: none) */
} mem_pods;

/* Pod p->ns/p->name (of a request's lease fields): read (key NULL), or its
 * label key set to value (value NULL: removed), keeping the others. The
 * answer goes to *r: the Pod's addresses, or why not. */
void mem_pods_apply(mem_pods *m, const store_lease *p, const char *key, const char *value,
                    store_result *r);
/* Adds Pod ns/pod with address ip, or sets its address. Returns 0, or -1
 * when out of memory. */
int mem_pods_put(mem_pods *m, const char *ns, const char *pod, const char *ip);
/* Label key of Pod ns/pod; NULL when the Pod or the label is absent. */
const char *mem_pods_label(mem_pods *m, const char *ns, const char *pod, const char *key);
void mem_pods_free(mem_pods *m);

#endif
