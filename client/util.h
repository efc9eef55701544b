/* Small helpers shared by the modules of libkubelease: monotonic time,
 * reconnection backoff, "ns/lease" keys and a growable byte buffer.
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

/* A NUL-terminated byte buffer; zero-initialise it, release it with
 * kl__buf_free. */
struct kl__buf {
    char *data;
    size_t len;
    size_t cap;
};
/* Appends n bytes. Returns KL_OK, KL_ERR_PROTOCOL when the buffer would
 * exceed limit bytes, or KL_ERR_NO_MEMORY (the buffer is then unchanged). */
int kl__buf_append(struct kl__buf *b, const void *p, size_t n, size_t limit);
void kl__buf_free(struct kl__buf *b);

#endif
