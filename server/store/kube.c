/* Placeholder until the Kubernetes store lands (branch kube). */
#include <stdio.h>

#include "store/kube.h"

store *store_kube_new(loop *l, const store_kube_opts *opts, char *err, size_t err_len)
{
    (void)l;
    (void)opts;
    snprintf(err, err_len, "the Kubernetes store is not built yet; use --dev");
    return NULL;
}
