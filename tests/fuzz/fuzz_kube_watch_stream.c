/* Fuzzes the watch framing: no crash, and the events do not depend on how
 * the bytes are cut into chunks (the first byte picks the chunk size). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kube/watch_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct sink {
    kube_watch_event ev[64];
    int n;
} sink;

static int on_event(void *ctx, const kube_watch_event *ev)
{
    sink *s = ctx;
    if (s->n < 64)
        s->ev[s->n] = *ev;
    s->n++;
    return 0;
}

/* Feeds in chunks of `chunk` bytes; returns the first non-zero feed result. */
static int run(const char *buf, size_t len, size_t chunk, sink *s)
{
    kube_watch_parser p;
    char err[256];
    int rc = 0;
    kube_watch_parser_init(&p, 4096);
    memset(s, 0, sizeof *s);
    for (size_t off = 0; off < len && rc == 0; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        rc = kube_watch_parser_feed(&p, buf + off, n, on_event, s, err, sizeof err);
    }
    kube_watch_parser_free(&p);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t chunk = (size_t)data[0] % 17 + 1;
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    static sink whole, parts;
    int a = run(buf, len, len ? len : 1, &whole);
    int b = run(buf, len, chunk, &parts);
    if (a != b || whole.n != parts.n)
        abort();
    int n = whole.n < 64 ? whole.n : 64;
    if (memcmp(whole.ev, parts.ev, sizeof whole.ev[0] * (size_t)n) != 0)
        abort();
    return 0;
}
