/* Helpers shared by the modules of libkubelease (see util.h). */
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
