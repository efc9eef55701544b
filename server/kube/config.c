/* Shared helpers of the Kubernetes configuration loaders: reading files and
 * tokens, freeing a configuration, and the check a configuration passes
 * before anything is sent (base64 is core/base64.c's). Blocking file I/O,
 * no global state: any thread (in practice start-up, and the loop thread
 * re-reading a rotated token). */
#include "kube/config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Overwrites memory that held a secret before freeing it, in a way the
 * compiler may not elide. */
static void wipe(void *p, size_t n)
{
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}

void kube_blob_free(kube_blob *b)
{
    if (!b)
        return;
    if (b->data)
        wipe(b->data, b->len);
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

void kube_config_clear(kube_config *c)
{
    if (!c)
        return;
    free(c->server);
    kube_blob_free(&c->ca);
    kube_blob_free(&c->client_cert);
    kube_blob_free(&c->client_key);
    if (c->token)
        wipe(c->token, strlen(c->token));
    free(c->token);
    free(c->token_file);
    free(c->ns);
    free(c->source);
    memset(c, 0, sizeof *c);
}

int kube_config_check(const kube_config *c, bool allow_token_over_http, char *err, size_t err_len)
{
    bool cleartext = c->server && strncmp(c->server, "http://", 7) == 0;
    if (cleartext && (c->token || c->token_file) && !allow_token_over_http) {
        snprintf(err, err_len,
                 "%s: a bearer token would be sent in cleartext to %s: use https://, or "
                 "--allow-token-over-http if that is really meant",
                 c->source ? c->source : "kube config", c->server);
        return -1;
    }
    return 0;
}

int kube_read_file(const char *path, size_t max, kube_blob *out, char *err, size_t err_len)
{
    out->data = NULL;
    out->len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, err_len, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, err_len, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    if ((uint64_t)st.st_size > max) {
        snprintf(err, err_len, "%s: larger than %zu bytes", path, max);
        close(fd);
        return -1;
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    unsigned char *buf = malloc(cap);
    if (!buf) {
        snprintf(err, err_len, "%s: out of memory", path);
        close(fd);
        return -1;
    }
    for (;;) {
        if (len + 1 == cap) {
            /* The file grew while we read it; read at most max bytes. */
            if (cap > max) {
                snprintf(err, err_len, "%s: larger than %zu bytes", path, max);
                goto fail;
            }
            unsigned char *n = realloc(buf, cap * 2);
            if (!n) {
                snprintf(err, err_len, "%s: out of memory", path);
                goto fail;
            }
            buf = n;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + len, cap - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            snprintf(err, err_len, "%s: %s", path, strerror(errno));
            goto fail;
        }
        if (got == 0)
            break;
        len += (size_t)got;
    }
    close(fd);
    buf[len] = 0;
    out->data = buf;
    out->len = len;
    return 0;
fail:
    wipe(buf, cap);
    free(buf);
    close(fd);
    return -1;
}

char *kube_read_token(const char *path, char *err, size_t err_len)
{
    kube_blob b;
    if (kube_read_file(path, KUBE_TOKEN_MAX, &b, err, err_len) != 0)
        return NULL;
    size_t start = 0, end = b.len;
    while (start < end && strchr(" \t\r\n", b.data[start]))
        start++;
    while (end > start && strchr(" \t\r\n", b.data[end - 1]))
        end--;
    if (start == end) {
        snprintf(err, err_len, "%s: token file is empty", path);
        kube_blob_free(&b);
        return NULL;
    }
    for (size_t i = start; i < end; i++) {
        if (b.data[i] < 0x21 || b.data[i] > 0x7e) {
            snprintf(err, err_len, "%s: token contains a non-printable byte", path);
            kube_blob_free(&b);
            return NULL;
        }
    }
    char *tok = malloc(end - start + 1);
    if (!tok) {
        snprintf(err, err_len, "%s: out of memory", path);
        kube_blob_free(&b);
        return NULL;
    }
    memcpy(tok, b.data + start, end - start);
    tok[end - start] = 0;
    kube_blob_free(&b);
    return tok;
}

int kube_config_token_refresh(kube_config *c, char *err, size_t err_len)
{
    if (!c->token_file)
        return 0;
    char *tok = kube_read_token(c->token_file, err, err_len);
    if (!tok)
        return -1;
    if (c->token) {
        wipe(c->token, strlen(c->token));
        free(c->token);
    }
    c->token = tok;
    return 0;
}
