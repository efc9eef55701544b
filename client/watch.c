/* Holder reads (GetHolder, on the caller's thread) and holder watches (a
 * WatchHolder stream per watch, driven by the I/O thread, whose callbacks run
 * on the I/O thread without the client lock). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kubelease/v1/kubelease.pb-c.h"

struct kl__watch {
    struct kl__watch *next;
    char *key;
    char *ns;
    char *name;
    kl_holder_cb cb;
    void *ctx;
    int cancelled;   /* no callback may start any more */
    int in_callback; /* a callback of this watch is running */
    int waiters;     /* kl_cancel_watch calls waiting for in_callback */
    /* The last state delivered (to skip repeats, also across reconnects). */
    int delivered;
    int last_exists;
    char *last_holder;
    int64_t last_epoch;
    /* Driven by the I/O thread. */
    struct kl__xfer *stream;
    int64_t reconnect_at;
    int64_t backoff_ms;
};

static void watch_free(struct kl__watch *w)
{
    kl__xfer_free(w->stream);
    free(w->key);
    free(w->ns);
    free(w->name);
    free(w->last_holder);
    free(w);
}

static void start_stream(struct kl_client *c, struct kl__watch *w)
{
    Kubelease__V1__WatchHolderRequest req = KUBELEASE__V1__WATCH_HOLDER_REQUEST__INIT;
    size_t len = 0;
    uint8_t *body;
    struct kl__xfer *x;

    req.namespace_ = w->ns;
    req.name = w->name;
    body = kl__pack(&req.base, &len);
    x = body ? kl__xfer_new(c, KL__XFER_WATCH, "WatchHolder", body, len, 1, 0) : NULL;
    if (!x || curl_multi_add_handle(c->multi, x->h) != CURLM_OK) {
        kl__xfer_free(x);
        w->backoff_ms = kl__next_backoff(w->backoff_ms, c->opts.max_backoff_ms);
        w->reconnect_at = kl__now_ms() + w->backoff_ms;
        return;
    }
    x->owner = w;
    w->stream = x;
}

int64_t kl__watches_process(struct kl_client *c, int64_t now)
{
    int64_t next = INT64_MAX;
    struct kl__watch **p = &c->watches;
    while (*p) {
        struct kl__watch *w = *p;
        if (w->cancelled) {
            /* Only the I/O thread runs callbacks, and it is here: none runs.
             * Free once no kl_cancel_watch still looks at the record. */
            if (w->stream) {
                curl_multi_remove_handle(c->multi, w->stream->h);
                kl__xfer_free(w->stream);
                w->stream = NULL;
            }
            if (w->waiters == 0) {
                *p = w->next;
                watch_free(w);
                continue;
            }
        } else if (!w->stream) {
            if (now >= w->reconnect_at)
                start_stream(c, w);
            else if (w->reconnect_at < next)
                next = w->reconnect_at;
        }
        p = &w->next;
    }
    return next;
}

void kl__watch_xfer_done(struct kl_client *c, struct kl__xfer *x, CURLcode rc)
{
    struct kl__watch *w = x->owner;
    (void)rc;
    if (w->stream == x)
        w->stream = NULL;
    /* Whatever the reason, a watch reconnects until it is cancelled. */
    w->backoff_ms = kl__next_backoff(w->backoff_ms, c->opts.max_backoff_ms);
    w->reconnect_at = kl__now_ms() + w->backoff_ms;
    kl__xfer_free(x);
}

int kl__watches_idle(struct kl_client *c)
{
    return c->watches == NULL;
}

void kl__watches_cancel_all(struct kl_client *c)
{
    for (struct kl__watch *w = c->watches; w; w = w->next)
        w->cancelled = 1;
}

void kl__watches_free_all(struct kl_client *c)
{
    struct kl__watch *w = c->watches;
    while (w) {
        struct kl__watch *next = w->next;
        watch_free(w);
        w = next;
    }
    c->watches = NULL;
}

/* Records the new state; returns 1 if it differs from the last delivered. */
static int watch_update(struct kl__watch *w, int exists, const char *holder, int64_t epoch)
{
    const char *last = w->last_holder ? w->last_holder : "";
    if (w->delivered && w->last_exists == exists && w->last_epoch == epoch &&
        strcmp(last, holder) == 0)
        return 0;
    char *copy = strdup(holder);
    if (!copy)
        return 0;
    free(w->last_holder);
    w->last_holder = copy;
    w->last_exists = exists;
    w->last_epoch = epoch;
    w->delivered = 1;
    return 1;
}

int kl__watch_on_message(struct kl__xfer *x, const uint8_t *msg, size_t len)
{
    struct kl_client *c = x->client;
    Kubelease__V1__HolderEvent *ev = kubelease__v1__holder_event__unpack(NULL, len, msg);
    if (!ev)
        return KL_ERR_PROTOCOL;
    const char *holder = ev->holder ? ev->holder : "";
    int64_t epoch = ev->exists ? ev->epoch : 0;
    if (!ev->exists)
        holder = "";

    pthread_mutex_lock(&c->mu);
    struct kl__watch *w = x->owner;
    w->backoff_ms = 0;
    int call = !w->cancelled && w->stream == x && watch_update(w, ev->exists, holder, epoch);
    if (call)
        w->in_callback = 1;
    pthread_mutex_unlock(&c->mu);

    if (call) {
        size_t hl = strlen(holder);
        w->cb(w->ctx, hl ? holder : NULL, hl, epoch);
        pthread_mutex_lock(&c->mu);
        w->in_callback = 0;
        pthread_cond_broadcast(&c->cv);
        pthread_mutex_unlock(&c->mu);
    }
    kubelease__v1__holder_event__free_unpacked(ev, NULL);
    return 0;
}

static struct kl__watch *watch_find(struct kl_client *c, const char *ns, const char *lease)
{
    for (struct kl__watch *w = c->watches; w; w = w->next)
        if (!w->cancelled && kl__key_is(w->key, ns, lease))
            return w;
    return NULL;
}

int kl_watch_holder(kl_client *c, const char *ns, const char *lease, kl_holder_cb cb, void *ctx,
                    kl_error *err)
{
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (!cb)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "cb (the callback) is NULL");
    struct kl__watch *w = calloc(1, sizeof(*w));
    if (!w || !(w->key = kl__key_new(ns, lease)) || !(w->ns = strdup(ns)) ||
        !(w->name = strdup(lease))) {
        if (w)
            watch_free(w);
        return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory starting the watch");
    }
    w->cb = cb;
    w->ctx = ctx;
    pthread_mutex_lock(&c->mu);
    if (c->stopping) {
        rc = kl__seterr(err, KL_ERR_CANCELLED, "the client is being freed");
    } else if (watch_find(c, ns, lease)) {
        rc = kl__seterr(err, KL_ERR_ALREADY_WATCHING, "watch for %s/%s already running", ns, lease);
    } else {
        w->next = c->watches;
        c->watches = w;
        w = NULL;
        kl__client_wake(c);
    }
    pthread_mutex_unlock(&c->mu);
    if (w)
        watch_free(w);
    return rc;
}

int kl_cancel_watch(kl_client *c, const char *ns, const char *lease, kl_error *err)
{
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    pthread_mutex_lock(&c->mu);
    struct kl__watch *w = watch_find(c, ns, lease);
    if (w) {
        w->cancelled = 1;
        /* On the I/O thread no callback of this watch can be running except
         * the caller itself; elsewhere, wait for a running one to return. */
        if (!kl__client_on_io_thread(c)) {
            w->waiters++;
            while (w->in_callback)
                kl__client_wait_until(c, -1);
            w->waiters--;
        }
        kl__client_wake(c);
    }
    pthread_mutex_unlock(&c->mu);
    return KL_OK;
}

int kl_get_holder(kl_client *c, const char *ns, const char *lease, char **holder,
                  int64_t *lease_transitions, kl_error *err)
{
    Kubelease__V1__GetHolderRequest req = KUBELEASE__V1__GET_HOLDER_REQUEST__INIT;
    struct kl__buf out = {0};
    size_t len = 0;
    uint8_t *body;

    if (holder)
        *holder = NULL;
    if (lease_transitions)
        *lease_transitions = 0;
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (!holder)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "holder (the output pointer) is NULL");
    req.namespace_ = (char *)ns;
    req.name = (char *)lease;
    body = kl__pack(&req.base, &len);
    if (!body)
        return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory preparing GetHolder");
    rc = kl__unary_sync(c, "GetHolder", body, len, &out, err);
    if (rc == KL_NOT_FOUND)
        return rc; /* err says which Lease */
    if (rc != KL_OK)
        return rc;
    Kubelease__V1__GetHolderResponse *r =
        kubelease__v1__get_holder_response__unpack(NULL, out.len, (uint8_t *)out.data);
    kl__buf_free(&out);
    if (!r)
        return kl__seterr(err, KL_ERR_PROTOCOL,
                          "kubelease service at %s sent an unreadable GetHolder answer",
                          c->endpoint);
    if (r->holder && r->holder[0]) {
        *holder = strdup(r->holder);
        if (!*holder) {
            kubelease__v1__get_holder_response__free_unpacked(r, NULL);
            return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory copying the holder");
        }
    }
    if (lease_transitions)
        *lease_transitions = r->epoch;
    kubelease__v1__get_holder_response__free_unpacked(r, NULL);
    return KL_OK;
}
