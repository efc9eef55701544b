/* Holder watches (see watch.h): the WatchHolder stream of each watch, its
 * reconnection, and the callbacks, which skip repeated states. Every function
 * runs with the loop's mutex held, except the stream's message callback,
 * which takes it around its bookkeeping and runs the user's callback
 * without it. */
#include "watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubelease/v1/kubelease.pb-c.h"
#include "transport.h"
#include "util.h"

#ifndef KL_TRACE_STATES
#define KL_TRACE_STATES 0
#endif

static int watch_on_message(struct kl__xfer *x, const uint8_t *msg, size_t len);
static void watch_done(struct kl__xfer *x, CURLcode rc);

static const struct kl__xfer_type watch_type = {"WatchHolder", 1, watch_on_message, watch_done};

static const char *const state_names[] = {
    [KL__W_IDLE] = "idle",           [KL__W_OPEN] = "open",
    [KL__W_CALLBACK] = "callback",   [KL__W_CANCELLING] = "cancelling",
    [KL__W_CANCELLED] = "cancelled",
};

/* The one place where a watch changes state. */
static void w_set_state(struct kl__watch *w, enum kl__watch_state to)
{
    if (KL_TRACE_STATES && w->state != to)
        fprintf(stderr, "kubelease: watch %s: %s -> %s\n", w->key, state_names[w->state],
                state_names[to]);
    w->state = to;
}

void kl__watch_free(struct kl__watch *w)
{
    kl__xfer_drop(w->stream);
    free(w->key);
    free(w->ns);
    free(w->name);
    free(w->last_holder);
    free(w->last_value);
    free(w);
}

static void start_stream(struct kl__watch *w)
{
    Kubelease__V1__WatchHolderRequest req = KUBELEASE__V1__WATCH_HOLDER_REQUEST__INIT;
    struct kl__xfer *x;

    req.namespace_ = w->ns;
    req.name = w->name;
    x = kl__xfer_new(&w->loop->tr, &watch_type, &req.base, 0, w);
    if (!x || kl__xfer_start(x) != KL_OK) {
        kl__xfer_drop(x);
        w->backoff_ms = kl__next_backoff(w->backoff_ms, w->loop->opts.max_backoff_ms);
        w->reconnect_at = kl__now_ms() + w->backoff_ms;
        return;
    }
    w->stream = x;
    w_set_state(w, KL__W_OPEN);
}

int64_t kl__watches_process(struct kl__list *list, int64_t now)
{
    int64_t next = INT64_MAX;
    KL__LIST_FOREACH_SAFE (link, list) {
        struct kl__watch *w = kl__watch_of(link);
        if (kl__watch_cancelled(w)) {
            /* Only the I/O thread runs callbacks, and it is here: none runs.
             * Free once no kl_cancel_watch still looks at the record. */
            kl__xfer_drop(w->stream);
            w->stream = NULL;
            if (w->waiters == 0) {
                kl__list_remove(link);
                kl__watch_free(w);
            }
        } else if (w->state == KL__W_IDLE) {
            if (now >= w->reconnect_at)
                start_stream(w);
            else if (w->reconnect_at < next)
                next = w->reconnect_at;
        }
    }
    return next;
}

static void watch_done(struct kl__xfer *x, CURLcode rc)
{
    struct kl__watch *w = x->data;
    (void)rc;
    if (w->stream == x)
        w->stream = NULL;
    if (w->state == KL__W_OPEN)
        w_set_state(w, KL__W_IDLE);
    /* Whatever the reason, a watch reconnects until it is cancelled. */
    w->backoff_ms = kl__next_backoff(w->backoff_ms, w->loop->opts.max_backoff_ms);
    w->reconnect_at = kl__now_ms() + w->backoff_ms;
}

/* Records the new state; returns 1 if it differs from the last delivered
 * (the value counts for a watch with the value, cb_ex). */
static int watch_update(struct kl__watch *w, int exists, const char *holder, int64_t epoch,
                        const ProtobufCBinaryData *value)
{
    size_t vl = w->cb_ex ? value->len : 0;
    if (w->last_holder && w->last_exists == exists && w->last_epoch == epoch &&
        strcmp(w->last_holder, holder) == 0 && w->last_value_len == vl &&
        (!vl || memcmp(w->last_value, value->data, vl) == 0))
        return 0;
    char *copy = strdup(holder);
    void *vcopy = vl ? malloc(vl) : NULL;
    if (!copy || (vl && !vcopy)) {
        free(copy);
        free(vcopy);
        return 0;
    }
    if (vl)
        memcpy(vcopy, value->data, vl);
    free(w->last_holder);
    free(w->last_value);
    w->last_holder = copy;
    w->last_value = vcopy;
    w->last_value_len = vl;
    w->last_exists = exists;
    w->last_epoch = epoch;
    return 1;
}

/* A WatchHolder stream message (I/O thread, the mutex not held). */
static int watch_on_message(struct kl__xfer *x, const uint8_t *msg, size_t len)
{
    struct kl__watch *w = x->data;
    struct kl__loop *l = w->loop;
    Kubelease__V1__HolderEvent *ev = kubelease__v1__holder_event__unpack(NULL, len, msg);
    if (!ev)
        return KL_ERR_PROTOCOL;
    const char *holder = ev->holder ? ev->holder : "";
    int64_t epoch = ev->exists ? ev->epoch : 0;
    if (!ev->exists)
        holder = "";

    pthread_mutex_lock(&l->mu);
    w->backoff_ms = 0;
    ProtobufCBinaryData none = {0, NULL}, *value = ev->exists && holder[0] ? &ev->value : &none;
    int call = w->state == KL__W_OPEN && w->stream == x &&
               watch_update(w, ev->exists, holder, epoch, value);
    if (call)
        w_set_state(w, KL__W_CALLBACK);
    pthread_mutex_unlock(&l->mu);

    if (call) {
        size_t hl = strlen(holder);
        if (w->cb_ex)
            w->cb_ex(w->ctx, hl ? holder : NULL, hl, epoch, value->len ? value->data : NULL,
                     value->len);
        else
            w->cb(w->ctx, hl ? holder : NULL, hl, epoch);
        pthread_mutex_lock(&l->mu);
        w_set_state(w, w->state == KL__W_CANCELLING ? KL__W_CANCELLED : KL__W_OPEN);
        kl__loop_changed(l);
        pthread_mutex_unlock(&l->mu);
    }
    kubelease__v1__holder_event__free_unpacked(ev, NULL);
    return 0;
}

struct kl__watch *kl__watch_new(struct kl__loop *l, const char *ns, const char *lease,
                                kl_holder_cb cb, kl_holder_ex_cb cb_ex, void *ctx)
{
    struct kl__watch *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->loop = l;
    w->cb = cb;
    w->cb_ex = cb_ex;
    w->ctx = ctx;
    if (!(w->key = kl__key_new(ns, lease)) || !(w->ns = strdup(ns)) || !(w->name = strdup(lease))) {
        kl__watch_free(w);
        return NULL;
    }
    return w;
}

void kl__watch_cancel(struct kl__watch *w)
{
    if (!kl__watch_cancelled(w))
        w_set_state(w, w->state == KL__W_CALLBACK ? KL__W_CANCELLING : KL__W_CANCELLED);
}
