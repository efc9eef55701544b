/* In-cluster configuration: the apiserver address from the environment and
 * the pod's service-account token, CA bundle and namespace. */
#ifndef KL_KUBE_INCLUSTER_H
#define KL_KUBE_INCLUSTER_H

#include <stddef.h>

#include "kube/config.h"

#define KUBE_SA_DIR_DEFAULT "/var/run/secrets/kubernetes.io/serviceaccount"

/* Builds the config from host and port (KUBERNETES_SERVICE_HOST/PORT; an IPv6
 * host is put in brackets) and the files token, ca.crt and namespace of
 * sa_dir (NULL: KUBE_SA_DIR_DEFAULT). The token is re-read from its file by
 * the client (token_file is set). Returns 0, or -1 with err naming what is
 * missing. */
int kube_incluster_load(const char *host, const char *port, const char *sa_dir, kube_config *out,
                        char *err, size_t err_len);

/* The same with host and port taken from the environment. */
int kube_incluster_load_env(const char *sa_dir, kube_config *out, char *err, size_t err_len);

#endif
