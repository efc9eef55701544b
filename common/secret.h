/* Secrets in memory: a bearer token, a key, or a request body that holds
 * one is wiped before its memory goes back to the allocator, so that it does
 * not linger in the heap for a core dump or a later allocation to show.
 * Pure C, no state; any thread. */
#ifndef KL_COMMON_SECRET_H
#define KL_COMMON_SECRET_H

#include <stddef.h>

/* Zeroes len bytes at p in a way the compiler cannot drop. */
void kl__secret_wipe(void *p, size_t len);

/* Zeroes a NUL-terminated string, then frees it. NULL does nothing. */
void kl__secret_free(char *s);

#endif
