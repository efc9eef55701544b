/* Where the apiserver is and how to authenticate to it: the result of loading
 * a kubeconfig (kubeconfig.c) or the in-cluster service-account files
 * (incluster.c). Plain data; no I/O happens after loading except re-reading
 * the token file (kube_config_token_refresh). */
#ifndef KL_KUBE_CONFIG_H
#define KL_KUBE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits on what we read from disk: certificates and tokens are small. */
#define KUBE_FILE_MAX  (1024 * 1024)
#define KUBE_TOKEN_MAX (64 * 1024)

typedef struct kube_blob {
    unsigned char *data; /* malloc'd, NUL-terminated for convenience; NULL when absent */
    size_t len;
} kube_blob;

typedef struct kube_config {
    char *server;          /* "https://host:port" without a trailing slash */
    kube_blob ca;          /* PEM bundle; absent: the system's CAs */
    kube_blob client_cert; /* PEM; with client_key */
    kube_blob client_key;  /* PEM (secret: never logged) */
    char *token;           /* bearer token (secret: never logged); NULL when none */
    char *token_file;      /* when set, token is re-read from it (rotation) */
    bool insecure;         /* insecure-skip-tls-verify */
    char *ns;              /* default namespace (context or service account); may be NULL */
    char *source;          /* "kubeconfig PATH" or "in-cluster" (for messages) */
} kube_config;

/* Frees every member and zeroes *c; NULL is a no-op. Secrets are wiped. */
void kube_config_clear(kube_config *c);

/* What a loaded configuration must satisfy before anything is sent: a
 * bearer token (or token file) goes to an http:// server, in cleartext, only
 * when allow_token_over_http (client-go refuses it outright). Returns 0, or
 * -1 with err naming the configuration's source and the way out. */
int kube_config_check(const kube_config *c, bool allow_token_over_http, char *err, size_t err_len);

/* Re-reads c->token_file into c->token. Returns 0, or -1 with err filled (the
 * old token is kept). A no-op returning 0 when there is no token file. */
int kube_config_token_refresh(kube_config *c, char *err, size_t err_len);

/* Reads a whole file (at most max bytes) into a NUL-terminated malloc'd buffer.
 * Returns 0, or -1 with err naming the file and the reason. Only regular files
 * are read (a FIFO or device would block or never end). */
int kube_read_file(const char *path, size_t max, kube_blob *out, char *err, size_t err_len);

/* Reads a token file: surrounding whitespace trimmed, must be non-empty and
 * printable. Returns a malloc'd string, or NULL with err filled. */
char *kube_read_token(const char *path, char *err, size_t err_len);

void kube_blob_free(kube_blob *b);

#endif
