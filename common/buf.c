/* The growable byte buffer (see buf.h). Pure: no I/O, no globals; the only
 * allocations are the buffer's own, through malloc and realloc. */
#include "common/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_FIRST_CAP 256

void kl__buf_init(struct kl__buf *b, size_t max)
{
    memset(b, 0, sizeof *b);
    b->max = max;
}

/* Makes room for n more bytes and the NUL. Returns KL__BUF_OK or an error
 * (not yet recorded); the buffer is unchanged on failure. */
static int grow(struct kl__buf *b, size_t n)
{
    if (n > (b->max ? b->max : (size_t)-1 / 2) - b->len)
        return b->max ? KL__BUF_TOO_LARGE : KL__BUF_NO_MEMORY;
    size_t need = b->len + n + 1;
    if (need <= b->cap)
        return KL__BUF_OK;
    size_t cap = b->cap ? b->cap : BUF_FIRST_CAP;
    while (cap < need)
        cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d)
        return KL__BUF_NO_MEMORY;
    b->data = d;
    b->cap = cap;
    return KL__BUF_OK;
}

int kl__buf_append(struct kl__buf *b, const void *p, size_t n)
{
    if (b->error)
        return b->error;
    int rc = grow(b, n);
    if (rc != KL__BUF_OK)
        return b->error = rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return KL__BUF_OK;
}

int kl__buf_printf(struct kl__buf *b, const char *fmt, ...)
{
    if (b->error)
        return b->error;
    /* Formats into the room left; when that is too small, grows to fit and
     * formats again (twice at most). */
    for (;;) {
        size_t room = b->data ? b->cap - b->len : 0;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
        va_end(ap);
        int rc = KL__BUF_OK;
        if (n < 0)
            rc = KL__BUF_NO_MEMORY;
        else if (b->max && (size_t)n > b->max - b->len)
            rc = KL__BUF_TOO_LARGE;
        else if ((size_t)n < room) {
            b->len += (size_t)n;
            return KL__BUF_OK;
        } else
            rc = grow(b, (size_t)n);
        if (rc != KL__BUF_OK) {
            if (b->data)
                b->data[b->len] = '\0'; /* an attempt may have written there */
            return b->error = rc;
        }
    }
}

void kl__buf_reset(struct kl__buf *b)
{
    b->len = 0;
    b->error = KL__BUF_OK;
    if (b->data)
        b->data[0] = '\0';
}

char *kl__buf_take(struct kl__buf *b, size_t *len)
{
    char *d = b->data;
    if (len)
        *len = b->len;
    kl__buf_init(b, b->max);
    return d;
}

void kl__buf_free(struct kl__buf *b)
{
    if (!b)
        return;
    free(b->data);
    kl__buf_init(b, b->max);
}
