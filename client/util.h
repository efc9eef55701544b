/* Small helpers shared by the modules of libkubelease: monotonic time,
 * reconnection backoff and "ns/lease" keys (the byte buffer, the list and
 * the envelope codec are common/'s).
 * Pure functions with no shared state: safe from any thread. */
#ifndef KL_UTIL_H
#define KL_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds. */
int64_t kl__now_ms(void);

static inline int64_t kl__min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* The next reconnection backoff after prev_ms (0 = first attempt): 50 ms,
 * then doubling, capped at max_ms. */
int64_t kl__next_backoff(int64_t prev_ms, int64_t max_ms);

/* Returns a malloc'd "ns/lease", or NULL on out of memory. */
char *kl__key_new(const char *ns, const char *lease);
/* 1 when key is "ns/lease". */
int kl__key_is(const char *key, const char *ns, const char *lease);

#endif
