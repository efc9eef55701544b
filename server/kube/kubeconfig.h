/* kubeconfig files (the format kubectl reads), parsed with libyaml. */
#ifndef KL_KUBE_KUBECONFIG_H
#define KL_KUBE_KUBECONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/config.h"

/* What a context selects, before any referenced file is read. Strings are
 * malloc'd; NULL when absent. */
typedef struct kube_kubeconfig_sel {
    char *context, *cluster, *user, *ns;
    char *server;
    char *ca_data, *ca_file;     /* certificate-authority(-data) */
    char *cert_data, *cert_file; /* client-certificate(-data) */
    char *key_data, *key_file;   /* client-key(-data) (secret) */
    char *token, *token_file;    /* token, tokenFile (secret) */
    bool insecure;               /* insecure-skip-tls-verify */
} kube_kubeconfig_sel;

/* Parses kubeconfig text and selects a context (NULL: current-context).
 * Pure: reads no file. Returns 0, or -1 with err saying what is missing or
 * wrong, e.g. `context "x" not found` or `user "y" has no credentials`. */
int kube_kubeconfig_parse(const char *text, size_t len, const char *context,
                          kube_kubeconfig_sel *out, char *err, size_t err_len);
void kube_kubeconfig_sel_clear(kube_kubeconfig_sel *s);

/* Turns a selection into a config: decodes the -data fields, reads the
 * referenced files (relative paths are relative to dir), reads tokenFile.
 * Returns 0, or -1 with err filled and *out left empty. */
int kube_kubeconfig_resolve(const kube_kubeconfig_sel *sel, const char *dir, kube_config *out,
                            char *err, size_t err_len);

/* Reads the kubeconfig at path, selects context (NULL: current-context) and
 * resolves it. Errors start with "kubeconfig PATH: ". */
int kube_kubeconfig_load(const char *path, const char *context, kube_config *out, char *err,
                         size_t err_len);

#endif
