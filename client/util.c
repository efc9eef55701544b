/* Helpers shared by the modules of libkubelease (see util.h). */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kubelease.h"

int64_t kl__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t kl__next_backoff(int64_t prev_ms, int64_t max_ms)
{
    int64_t n = prev_ms <= 0 ? 50 : prev_ms * 2;
    return n > max_ms ? max_ms : n;
}

char *kl__key_new(const char *ns, const char *lease)
{
    size_t n = strlen(ns) + strlen(lease) + 2;
    char *k = malloc(n);
    if (k)
        snprintf(k, n, "%s/%s", ns, lease);
    return k;
}

int kl__key_is(const char *key, const char *ns, const char *lease)
{
    size_t nl = strlen(ns);
    return strncmp(key, ns, nl) == 0 && key[nl] == '/' && strcmp(key + nl + 1, lease) == 0;
}

int kl__buf_append(struct kl__buf *b, const void *p, size_t n, size_t limit)
{
    if (b->len + n > limit)
        return KL_ERR_PROTOCOL;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return KL_ERR_NO_MEMORY;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return KL_OK;
}

void kl__buf_free(struct kl__buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
