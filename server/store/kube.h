/* The Kubernetes store: coordination.k8s.io/v1 Leases through the apiserver. */
#ifndef KL_STORE_KUBE_H
#define KL_STORE_KUBE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/loop.h"
#include "store/store.h"

/* Where the apiserver and its credentials come from. */
typedef struct store_kube_opts {
    const char *kubeconfig;     /* path; NULL: in-cluster config */
    const char *context;        /* kubeconfig context; NULL: current-context */
    const char *sa_dir;         /* in-cluster service-account directory; NULL: the standard one */
    bool allow_token_over_http; /* a bearer token may go to an http:// server */
} store_kube_opts;

/* Loads the configuration, checks it (kube_config_check) and returns a
 * store whose I/O runs on l. Returns NULL with a message naming what is
 * wrong in err (e.g. "kubeconfig ~/.kube/config: context \"x\" not
 * found"). */
store *store_kube_new(loop *l, const store_kube_opts *opts, char *err, size_t err_len);

#endif
