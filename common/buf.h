/* A growable byte buffer, the shape of curl's dynbuf: appends grow it
 * (doubling from 256 bytes), an optional limit refuses appends that would
 * take it past max bytes, and the contents are always NUL-terminated so
 * that text can be read as a string.
 *
 * A failed append leaves the contents as they were and is sticky: every
 * later append does nothing and returns the same error, so a writer may
 * append many pieces and look at b->error once at the end.
 *
 * Ownership: the buffer owns data (malloc'd) until kl__buf_take hands it to
 * the caller or kl__buf_free frees it. Zeroed (or "= {0}") it is an empty
 * buffer without a limit. Not thread-safe: one owner at a time. */
#ifndef KL_COMMON_BUF_H
#define KL_COMMON_BUF_H

#include <stddef.h>

enum {
    KL__BUF_OK = 0,
    KL__BUF_TOO_LARGE = -1, /* the append would pass max */
    KL__BUF_NO_MEMORY = -2,
};

struct kl__buf {
    char *data; /* NUL-terminated; NULL until the first append */
    size_t len; /* bytes held, not counting the NUL */
    size_t cap; /* bytes allocated */
    size_t max; /* the largest len accepted; 0: no limit */
    int error;  /* the first failed append's KL__BUF_*, until kl__buf_reset */
};

/* An empty buffer that accepts at most max bytes (0: no limit). */
void kl__buf_init(struct kl__buf *b, size_t max);
/* Appends n bytes of p (p may be NULL when n is 0; the buffer is allocated
 * all the same). Returns KL__BUF_OK, or the sticky error. */
int kl__buf_append(struct kl__buf *b, const void *p, size_t n);
/* Appends printf-formatted text. Returns KL__BUF_OK, or the sticky error
 * (KL__BUF_NO_MEMORY also when the format itself fails). */
int kl__buf_printf(struct kl__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Empties the buffer and clears its error; keeps its memory and limit. */
void kl__buf_reset(struct kl__buf *b);
/* Hands the contents over: returns data (the caller frees it; NULL when
 * nothing was ever appended), its length in *len (may be NULL), and leaves
 * the buffer empty, without memory, error cleared, limit kept. */
char *kl__buf_take(struct kl__buf *b, size_t *len);
/* Frees the contents; the buffer is then empty, error cleared, limit kept.
 * NULL is a no-op. */
void kl__buf_free(struct kl__buf *b);

#endif
