/* Framing of a Kubernetes watch response: newline-delimited JSON events
 * {"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}} arriving in
 * arbitrary chunks. Pure: feed it bytes, it calls back once per event. */
#ifndef KL_KUBE_WATCH_STREAM_H
#define KL_KUBE_WATCH_STREAM_H

#include <stddef.h>

#include "common/buf.h"
#include "kube/api.h"

#define KUBE_WATCH_LINE_MAX_DEFAULT (1024 * 1024)

typedef enum kube_watch_type {
    KUBE_WATCH_ADDED,
    KUBE_WATCH_MODIFIED,
    KUBE_WATCH_DELETED,
    KUBE_WATCH_BOOKMARK, /* lease.resource_version only */
    KUBE_WATCH_ERROR,    /* status (410 Gone: the resourceVersion is too old; relist) */
    KUBE_WATCH_INVALID,  /* an ADDED/MODIFIED/DELETED whose Lease could not be decoded:
                            status.message says why; lease.resource_version is set
                            when it could be read */
} kube_watch_type;

typedef struct kube_watch_event {
    kube_watch_type type;
    kube_lease lease;
    kube_status status;
} kube_watch_event;

/* Return 0 to go on, non-zero to stop feeding (kube_watch_parser_feed then
 * returns 1 and drops the rest of the chunk). */
typedef int (*kube_watch_event_cb)(void *ctx, const kube_watch_event *ev);

typedef struct kube_watch_parser {
    struct kl__buf buf; /* the start of an event whose newline has not come */
    size_t line_max;
    int overflow; /* the current line exceeded line_max */
} kube_watch_parser;

/* line_max 0: KUBE_WATCH_LINE_MAX_DEFAULT. */
void kube_watch_parser_init(kube_watch_parser *p, size_t line_max);
/* Drops buffered bytes (for a new stream). */
void kube_watch_parser_reset(kube_watch_parser *p);
void kube_watch_parser_free(kube_watch_parser *p);
/* Feeds a chunk. Returns 0; 1 when the callback asked to stop; -1 with err
 * filled when the stream is malformed (a line longer than line_max, a line
 * that is not a watch event, out of memory) — the stream cannot be trusted
 * after that. */
int kube_watch_parser_feed(kube_watch_parser *p, const char *data, size_t len,
                           kube_watch_event_cb cb, void *ctx, char *err, size_t err_len);
/* Bytes of an incomplete event buffered (non-zero at the end of a stream
 * means the last event was cut off). */
size_t kube_watch_parser_pending(const kube_watch_parser *p);

/* Decodes one complete event line (exposed for tests). Returns 0 or -1. */
int kube_watch_event_decode(const char *line, size_t len, kube_watch_event *ev, char *err,
                            size_t err_len);

#endif
