/* Holder watches: one WatchHolder stream per watch, driven by the client's
 * I/O thread, whose callbacks run on the I/O thread without the loop's mutex.
 *
 * Threads. Every field is protected by the loop's mutex, except cb and ctx
 * (set before the watch is listed, then only read). Only the I/O thread runs
 * callbacks, one at a time, and only it frees a listed watch, so a watch is
 * never freed under its running callback. The stream is created, started
 * and dropped only by the I/O thread. */
#ifndef KL_WATCH_H
#define KL_WATCH_H

#include <stdint.h>

#include "kubelease.h"
#include "common/list.h"
#include "loop.h"

/* The life of a watch. Changed only by w_set_state in watch.c (traced when
 * built with -DKL_TRACE_STATES=1). */
enum kl__watch_state {
    KL__W_IDLE,       /* no stream: (re)opened at reconnect_at */
    KL__W_OPEN,       /* the stream is open */
    KL__W_CALLBACK,   /* the stream is open and its callback runs (mutex not held) */
    KL__W_CANCELLING, /* cancelled while its callback runs: the callback is the last */
    KL__W_CANCELLED,  /* no callback runs or will; the I/O thread frees it */
};

struct kl__watch {
    struct kl__list link; /* in the client's list */
    struct kl__loop *loop;
    char *key; /* "ns/lease" */
    char *ns;
    char *name;
    kl_holder_cb cb;
    kl_holder_ex_cb cb_ex; /* instead of cb (kl_watch_holder_ex): the value too */
    void *ctx;
    enum kl__watch_state state;
    int waiters; /* kl_cancel_watch calls waiting for the end of CANCELLING */
    /* The last state delivered (to skip repeats, also across reconnects);
     * last_holder is NULL until the first. */
    char *last_holder;
    int last_exists;
    int64_t last_epoch;
    void *last_value; /* cb_ex: the value delivered (NULL: none) */
    size_t last_value_len;
    /* Driven by the I/O thread. */
    struct kl__xfer *stream;
    int64_t reconnect_at;
    int64_t backoff_ms;
};

/* A new watch, not yet running; NULL on out of memory. ns and lease are
 * copied. Exactly one of cb and cb_ex is set. */
struct kl__watch *kl__watch_new(struct kl__loop *l, const char *ns, const char *lease,
                                kl_holder_cb cb, kl_holder_ex_cb cb_ex, void *ctx);
void kl__watch_free(struct kl__watch *w);
/* No callback of w may start any more; the I/O thread frees it. */
void kl__watch_cancel(struct kl__watch *w);

/* 1 once cancelled (CANCELLING or CANCELLED). */
static inline int kl__watch_cancelled(const struct kl__watch *w)
{
    return w->state >= KL__W_CANCELLING;
}

static inline struct kl__watch *kl__watch_of(const struct kl__list *link)
{
    return KL__LIST_ENTRY(link, struct kl__watch, link);
}

/* The I/O thread's work on a list of watches (linked by their link): opens
 * and reopens streams and unlinks and frees cancelled watches nobody looks
 * at any more. Returns the next time it needs to run (monotonic ms) or
 * INT64_MAX. */
int64_t kl__watches_process(struct kl__list *list, int64_t now);

#endif
