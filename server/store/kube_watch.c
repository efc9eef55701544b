/* The Kubernetes store's watches. A watch lists first (reporting every
 * Lease, a DELETE for a named Lease that is absent, then SYNCED), then
 * watches from the list's resourceVersion with bookmarks. A stream that
 * ends normally is resumed at once from the last resourceVersion seen; a
 * broken one is reported BROKEN and resumed with backoff, and once it is
 * back the last known state is re-reported and SYNCED (store.h's rule).
 * 410 Gone, as an HTTP status or an ERROR event, means the resourceVersion
 * is too old: list again.
 *
 * Loop thread only. Every entry point (a timer, a request callback) runs
 * between enter() and leave(), so that a consumer that unwatches from inside
 * its callback frees the watch only once nothing of it runs any more. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/names.h"
#include "core/log.h"
#include "core/metrics.h"
#include "kube/lease_json.h"
#include "kube/watch_stream.h"
#include "store/kube_map.h"
#include "store/kube_store.h"

#define WATCH_TIMEOUT_S 300  /* the apiserver ends a watch after this; we resume */
#define QUICK_END_MS    1000 /* a "clean" watch end sooner than this counts as a failure */

typedef enum watch_state { W_IDLE, W_LISTING, W_WATCHING } watch_state;

struct store_watch {
    struct kl__list link; /* in kube_store.watches */
    kube_store *ks;
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX]; /* "" for a whole namespace */
    store_watch_cb cb;
    void *ctx;
    watch_state state;
    kube_request *req;
    loop_timer timer;      /* the next attempt */
    char rv[STORE_RV_MAX]; /* resume point; "" means list first */
    bool broken;           /* BROKEN reported and not yet SYNCED again */
    bool need_relist;      /* 410 Gone seen on the current stream */
    bool stream_failed;    /* the current stream had a bad event or ERROR */
    int failures;          /* consecutive failures, for backoff */
    int gone_streak;       /* consecutive 410s without progress */
    kube_watch_parser parser;
    store_lease *known; /* the Leases last reported as existing */
    size_t n_known, cap_known;
    int depth;   /* nesting of entry points running for this watch */
    bool closed; /* unwatched: freed when depth drops to 0 */
};

static void watch_free(store_watch *w)
{
    kube_store *ks = w->ks;
    kube_client_cancel(ks->c, w->req);
    loop_timer_stop(&w->timer);
    kl__list_remove(&w->link);
    kube_watch_parser_free(&w->parser);
    free(w->known);
    free(w);
}

static void enter(store_watch *w)
{
    w->depth++;
}

static void leave(store_watch *w)
{
    if (--w->depth == 0 && w->closed)
        watch_free(w);
}

/* Runs the consumer's callback; false when it unwatched (stop at once). */
static bool emit(store_watch *w, store_event_type type, const store_lease *lease)
{
    if (w->closed)
        return false;
    w->cb(w->ctx, type, lease);
    return !w->closed;
}

static ssize_t known_find(store_watch *w, const char *name)
{
    for (size_t i = 0; i < w->n_known; i++)
        if (strcmp(w->known[i].name, name) == 0)
            return (ssize_t)i;
    return -1;
}

static int known_put(store_watch *w, const store_lease *l)
{
    ssize_t i = known_find(w, l->name);
    if (i >= 0) {
        w->known[i] = *l;
        return 0;
    }
    if (w->n_known == w->cap_known) {
        size_t cap = w->cap_known ? w->cap_known * 2 : 4;
        store_lease *k = realloc(w->known, cap * sizeof *k);
        if (!k)
            return -1;
        w->known = k;
        w->cap_known = cap;
    }
    w->known[w->n_known++] = *l;
    return 0;
}

static void known_del(store_watch *w, const char *name)
{
    ssize_t i = known_find(w, name);
    if (i >= 0)
        w->known[i] = w->known[--w->n_known];
}

static void watch_path(const store_watch *w, char *out, size_t len, bool watch)
{
    int n = snprintf(out, len, LEASES_PATH "?", w->ns);
    if (w->name[0])
        n += snprintf(out + n, len - (size_t)n, "fieldSelector=metadata.name%%3D%s&", w->name);
    if (watch)
        n += snprintf(out + n, len - (size_t)n,
                      "watch=1&resourceVersion=%s&allowWatchBookmarks=true&timeoutSeconds=%d&",
                      w->rv, WATCH_TIMEOUT_S);
    out[n - 1] = 0; /* the trailing '&' or '?' */
}

static void watch_start_list(store_watch *w);
static void watch_start_stream(store_watch *w);

static void retry_fire(void *arg)
{
    store_watch *w = arg;
    enter(w);
    if (w->rv[0])
        watch_start_stream(w);
    else
        watch_start_list(w);
    leave(w);
}

/* Plans the next attempt after delay_ms (0: at once, still from the loop). */
static void watch_retry(store_watch *w, int delay_ms)
{
    w->state = W_IDLE;
    loop_timer_start(&w->timer, loop_now(w->ks->l) + delay_ms, retry_fire, w);
}

/* The watch cannot go on: report BROKEN once, then retry with backoff. */
static void watch_broken(store_watch *w, const char *why)
{
    w->failures++;
    int delay = store_kube_backoff_ms(w->ks, w->failures);
    log_event(w->broken ? LOG_DEBUG : LOG_WARN, "kube_watch_broken",
              "ns=%s name=%s error=%s retry_ms=%d", w->ns, log_q(w->name), log_q(why), delay);
    watch_retry(w, delay);
    if (!w->broken) {
        w->broken = true;
        emit(w, STORE_EVENT_BROKEN, NULL);
    }
}

/* A broken watch is back (its stream or its list answered 200). */
static void watch_reconnected(store_watch *w)
{
    metrics_add("kubelease_watch_reconnects_total", "", 1);
    log_event(LOG_INFO, "kube_watch_reconnected", "ns=%s name=%s failures=%d", w->ns,
              log_q(w->name), w->failures);
}

/* Re-reports the last known state, then SYNCED. */
static void report_known(store_watch *w)
{
    if (w->name[0] && w->n_known == 0) {
        store_lease l;
        store_lease_absent(&l, w->ns, w->name);
        if (!emit(w, STORE_EVENT_DELETE, &l))
            return;
    }
    for (size_t i = 0; i < w->n_known; i++) {
        store_lease l = w->known[i];
        if (!emit(w, STORE_EVENT_PUT, &l))
            return;
    }
    w->broken = false;
    emit(w, STORE_EVENT_SYNCED, NULL);
}

/* Reports the Leases we knew that the list no longer has. Returns false
 * when the consumer unwatched. */
static bool report_gone(store_watch *w, const kube_lease_list *list, bool *reported)
{
    for (size_t i = 0; i < w->n_known;) {
        bool present = false;
        for (size_t j = 0; j < list->n && !present; j++)
            present = strcmp(list->items[j].name, w->known[i].name) == 0;
        if (present) {
            i++;
            continue;
        }
        store_lease gone = w->known[i];
        w->known[i] = w->known[--w->n_known];
        *reported = true;
        if (!emit(w, STORE_EVENT_DELETE, &gone))
            return false;
    }
    return true;
}

/* Reports a list's state: what is gone, what exists, then SYNCED, and
 * watches on from its resourceVersion. */
static void list_apply(store_watch *w, const kube_lease_list *list)
{
    if (list->n_bad)
        log_event(LOG_WARN, "kube_lease_undecodable", "ns=%s count=%zu error=%s", w->ns,
                  list->n_bad, log_q(list->bad_reason));
    bool reported_gone = false;
    if (!report_gone(w, list, &reported_gone))
        return;
    /* A named Lease that does not exist (unless it exists but is undecodable). */
    if (w->name[0] && list->n == 0 && list->n_bad == 0 && !reported_gone) {
        store_lease l;
        store_lease_absent(&l, w->ns, w->name);
        if (!emit(w, STORE_EVENT_DELETE, &l))
            return;
    }
    for (size_t j = 0; j < list->n; j++) {
        store_lease l;
        store_lease_from_kube(&list->items[j], &l);
        if (known_put(w, &l) != 0) {
            watch_broken(w, "out of memory");
            return;
        }
        if (!emit(w, STORE_EVENT_PUT, &l))
            return;
    }
    memcpy(w->rv, list->resource_version, sizeof w->rv);
    if (w->broken)
        watch_reconnected(w);
    w->broken = false;
    if (!emit(w, STORE_EVENT_SYNCED, NULL))
        return;
    watch_start_stream(w);
}

static void list_done(void *ctx, const kube_response *r)
{
    store_watch *w = ctx;
    w->req = NULL;
    enter(w);
    store_kube_note_reachable(w->ks, r->http_code);
    kube_lease_list list = {0};
    char e[300];
    if (r->http_code != 200) {
        kube_status st;
        store_kube_describe(r, &st, e, sizeof e);
        watch_broken(w, e);
    } else if (kube_lease_list_decode(r->body, r->body_len, &list, e, sizeof e) != 0) {
        watch_broken(w, e);
    } else {
        list_apply(w, &list);
    }
    kube_lease_list_clear(&list);
    leave(w);
}

static void watch_start_list(store_watch *w)
{
    char path[600];
    watch_path(w, path, sizeof path, false);
    kube_request_opts o = {
        .method = "GET",
        .path = path,
        .timeout_ms = LIST_TIMEOUT_MS,
        .on_done = list_done,
        .ctx = w,
    };
    w->state = W_LISTING;
    w->req = kube_client_start(w->ks->c, &o);
    if (!w->req)
        watch_broken(w, "cannot start the list request");
}

static int on_event(void *ctx, const kube_watch_event *ev)
{
    store_watch *w = ctx;
    store_lease l;
    switch (ev->type) {
    case KUBE_WATCH_ADDED:
    case KUBE_WATCH_MODIFIED:
        w->gone_streak = 0;
        memcpy(w->rv, ev->lease.resource_version, sizeof w->rv);
        store_lease_from_kube(&ev->lease, &l);
        if (known_put(w, &l) != 0) {
            w->stream_failed = true;
            return 1;
        }
        return emit(w, STORE_EVENT_PUT, &l) ? 0 : 1;
    case KUBE_WATCH_DELETED:
        w->gone_streak = 0;
        memcpy(w->rv, ev->lease.resource_version, sizeof w->rv);
        known_del(w, ev->lease.name);
        store_lease_from_kube(&ev->lease, &l);
        return emit(w, STORE_EVENT_DELETE, &l) ? 0 : 1;
    case KUBE_WATCH_BOOKMARK:
        w->gone_streak = 0;
        memcpy(w->rv, ev->lease.resource_version, sizeof w->rv);
        return 0;
    case KUBE_WATCH_INVALID:
        log_event(LOG_WARN, "kube_lease_undecodable", "ns=%s count=1 error=%s", w->ns,
                  log_q(ev->status.message));
        if (ev->lease.resource_version[0])
            memcpy(w->rv, ev->lease.resource_version, sizeof w->rv);
        return 0;
    case KUBE_WATCH_ERROR:
        if (ev->status.code == 410) {
            w->need_relist = true;
        } else {
            w->stream_failed = true;
            log_event(LOG_WARN, "kube_watch_error", "ns=%s name=%s code=%d reason=%s error=%s",
                      w->ns, log_q(w->name), ev->status.code, log_q(ev->status.reason),
                      log_q(ev->status.message));
        }
        return 1;
    }
    return 0;
}

static void stream_headers(void *ctx, long code)
{
    store_watch *w = ctx;
    enter(w);
    store_kube_note_reachable(w->ks, code);
    if (code == 200) {
        w->failures = 0;
        /* Back after a break: the consumer gets the state again, then SYNCED;
         * the events missed meanwhile follow on this stream. */
        if (w->broken) {
            watch_reconnected(w);
            report_known(w);
        }
    }
    leave(w);
}

static int stream_data(void *ctx, const char *data, size_t len)
{
    store_watch *w = ctx;
    char e[200];
    enter(w);
    int rc = kube_watch_parser_feed(&w->parser, data, len, on_event, w, e, sizeof e);
    if (rc < 0) {
        log_event(LOG_WARN, "kube_watch_bad_stream", "ns=%s name=%s error=%s", w->ns,
                  log_q(w->name), log_q(e));
        w->stream_failed = true;
    }
    leave(w);
    return rc != 0;
}

static void stream_done(void *ctx, const kube_response *r)
{
    store_watch *w = ctx;
    w->req = NULL;
    enter(w);
    if (r->http_code == 410)
        w->need_relist = true;
    if (w->need_relist) {
        log_event(LOG_INFO, "kube_watch_relist", "ns=%s name=%s rv=%s", w->ns, log_q(w->name),
                  log_q(w->rv));
        metrics_add("kubelease_watch_relists_total", "", 1);
        w->rv[0] = 0;
        watch_retry(w, store_kube_backoff_ms(w->ks, w->gone_streak++));
    } else if (r->http_code == 200 && r->curl_code == 0 && !w->stream_failed &&
               r->elapsed_ms >= QUICK_END_MS) {
        /* The apiserver ended the watch (timeoutSeconds): resume at once. */
        watch_retry(w, 0);
    } else {
        char e[300];
        if (r->http_code != 200 && r->http_code != 0) {
            kube_status st;
            store_kube_describe(r, &st, e, sizeof e);
        } else if (r->curl_code != 0) {
            snprintf(e, sizeof e, "apiserver: %s", r->error);
            store_kube_note_reachable(w->ks, 0);
        } else {
            snprintf(e, sizeof e, "watch stream ended early or carried an error");
        }
        watch_broken(w, e);
    }
    leave(w);
}

static void watch_start_stream(store_watch *w)
{
    char path[700];
    watch_path(w, path, sizeof path, true);
    kube_request_opts o = {
        .method = "GET",
        .path = path,
        /* The apiserver ends the stream after WATCH_TIMEOUT_S; a stream that
         * outlives that by far is dead (TCP keepalive catches most earlier). */
        .timeout_ms = (WATCH_TIMEOUT_S + 30) * 1000,
        .on_headers = stream_headers,
        .on_data = stream_data,
        .on_done = stream_done,
        .ctx = w,
    };
    kube_watch_parser_reset(&w->parser);
    w->need_relist = false;
    w->stream_failed = false;
    w->state = W_WATCHING;
    w->req = kube_client_start(w->ks->c, &o);
    if (!w->req)
        watch_broken(w, "cannot start the watch request");
}

store_watch *store_kube_watch(store *s, const char *ns, const char *name, store_watch_cb cb,
                              void *ctx)
{
    kube_store *ks = (kube_store *)s;
    store_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->ks = ks;
    loop_timer_init(ks->l, &w->timer);
    w->cb = cb;
    w->ctx = ctx;
    snprintf(w->ns, sizeof w->ns, "%s", ns ? ns : "");
    snprintf(w->name, sizeof w->name, "%s", name ? name : "");
    kube_watch_parser_init(&w->parser, 0);
    kl__list_insert_head(&ks->watches, &w->link);
    if (kl__name_check_namespace(w->ns) != KL__NAME_OK ||
        (name && kl__name_check_lease(w->name) != KL__NAME_OK)) {
        /* Nothing can be watched (the engine validates names first): the
         * watch stays silent and never syncs. */
        log_event(LOG_ERROR, "kube_watch_invalid", "ns=%s name=%s", log_q(w->ns), log_q(w->name));
        return w;
    }
    /* Start from the loop, not inside this call. */
    watch_retry(w, 0);
    return w;
}

void store_kube_unwatch(store *s, store_watch *w)
{
    (void)s;
    if (!w || w->closed)
        return;
    w->closed = true;
    kube_client_cancel(w->ks->c, w->req);
    w->req = NULL;
    loop_timer_stop(&w->timer);
    if (w->depth == 0)
        watch_free(w);
}

void store_kube_watches_free(kube_store *ks)
{
    while (!kl__list_empty(&ks->watches))
        watch_free(KL__LIST_ENTRY(kl__list_first(&ks->watches), store_watch, link));
}
