/* The Kubernetes store's watches: one apiserver watch per namespace in
 * use, shared by every consumer watching a Lease there or the whole
 * namespace, as client-go's informers share one watch per resource
 * (docs/design.md, "Watches"). It lists the namespace's Leases, then
 * watches from the list's resourceVersion with bookmarks; kube_cache.c keeps
 * what it saw and reports to each consumer what concerns it. A stream that
 * ends normally is resumed at once from the last resourceVersion seen; a
 * broken one is reported BROKEN and resumed with backoff, and once it is
 * back the last known state is re-reported and SYNCED (store.h's rule).
 * 410 Gone, as an HTTP status or an ERROR event, means the resourceVersion
 * is too old: list again. The watch stops with its last consumer.
 *
 * Loop thread only; kube_watch.h has the lifetimes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/names.h"
#include "core/log.h"
#include "core/metrics.h"
#include "kube/lease_json.h"
#include "store/kube_map.h"
#include "store/kube_watch.h"

#define WATCH_TIMEOUT_S 300  /* the apiserver ends a watch after this; we resume */
#define QUICK_END_MS    1000 /* a "clean" watch end sooner than this counts as a failure */

static void nsw_free(ns_watch *nw)
{
    kube_store *ks = nw->ks;
    kube_client_cancel(ks->c, nw->req);
    loop_timer_stop(&nw->timer);
    kl__list_remove(&nw->link);
    kube_watch_parser_free(&nw->parser);
    store_kube_cache_free(nw);
    log_event(LOG_INFO, "kube_watch_stopped", "ns=%s", nw->ns);
    free(nw);
    metrics_set("kubelease_apiserver_watches", "", (double)--ks->n_namespaces);
}

void store_kube_nsw_enter(ns_watch *nw)
{
    nw->depth++;
}

void store_kube_nsw_leave(ns_watch *nw)
{
    if (--nw->depth > 0)
        return;
    store_kube_cache_sweep(nw);
    if (nw->n_subs == 0)
        nsw_free(nw);
}

static void watch_path(const ns_watch *nw, char *out, size_t len, bool watch)
{
    int n = snprintf(out, len, LEASES_PATH, nw->ns);
    if (watch)
        snprintf(out + n, len - (size_t)n,
                 "?watch=1&resourceVersion=%s&allowWatchBookmarks=true&timeoutSeconds=%d", nw->rv,
                 WATCH_TIMEOUT_S);
}

static void watch_start_list(ns_watch *nw);
static void watch_start_stream(ns_watch *nw);

static void retry_fire(void *arg)
{
    ns_watch *nw = arg;
    store_kube_nsw_enter(nw);
    if (nw->rv[0])
        watch_start_stream(nw);
    else
        watch_start_list(nw);
    store_kube_nsw_leave(nw);
}

/* Plans the next attempt after delay_ms (0: at once, still from the loop). */
static void watch_retry(ns_watch *nw, int delay_ms)
{
    loop_timer_start(&nw->timer, loop_now(nw->ks->l) + delay_ms, retry_fire, nw);
}

/* The watch cannot go on: report BROKEN once, then retry with backoff. */
static void watch_broken(ns_watch *nw, const char *why)
{
    nw->failures++;
    int delay = store_kube_backoff_ms(nw->ks, nw->failures);
    log_event(nw->broken ? LOG_DEBUG : LOG_WARN, "kube_watch_broken", "ns=%s error=%s retry_ms=%d",
              nw->ns, log_q(why), delay);
    watch_retry(nw, delay);
    store_kube_cache_broken(nw);
}

/* A broken watch is back (its stream or its list answered 200). */
static void watch_reconnected(ns_watch *nw)
{
    metrics_add("kubelease_watch_reconnects_total", "", 1);
    log_event(LOG_INFO, "kube_watch_reconnected", "ns=%s failures=%d", nw->ns, nw->failures);
}

/* Reports a list's state and watches on from its resourceVersion. */
static void list_apply(ns_watch *nw, const kube_lease_list *list)
{
    if (list->n_bad)
        log_event(LOG_WARN, "kube_lease_undecodable", "ns=%s count=%zu error=%s", nw->ns,
                  list->n_bad, log_q(list->bad_reason));
    bool was_broken = nw->broken;
    if (store_kube_cache_apply_list(nw, list) != 0) {
        watch_broken(nw, "out of memory");
        return;
    }
    if (was_broken)
        watch_reconnected(nw);
    memcpy(nw->rv, list->resource_version, sizeof nw->rv);
    watch_start_stream(nw);
}

static void list_done(void *ctx, const kube_response *r)
{
    ns_watch *nw = ctx;
    nw->req = NULL;
    store_kube_nsw_enter(nw);
    store_kube_note_reachable(nw->ks, r->http_code);
    kube_lease_list list = {0};
    char e[300];
    if (r->http_code != 200) {
        kube_status st;
        store_kube_describe(r, &st, e, sizeof e);
        watch_broken(nw, e);
    } else if (kube_lease_list_decode(r->body, r->body_len, &list, e, sizeof e) != 0) {
        watch_broken(nw, e);
    } else {
        list_apply(nw, &list);
    }
    kube_lease_list_clear(&list);
    store_kube_nsw_leave(nw);
}

static void watch_start_list(ns_watch *nw)
{
    char path[300];
    watch_path(nw, path, sizeof path, false);
    kube_request_opts o = {
        .method = "GET",
        .path = path,
        .timeout_ms = LIST_TIMEOUT_MS,
        .on_done = list_done,
        .ctx = nw,
    };
    nw->req = kube_client_start(nw->ks->c, &o);
    if (!nw->req)
        watch_broken(nw, "cannot start the list request");
}

/* One event of the stream. Returns non-zero to stop reading it. */
static int on_event(void *ctx, const kube_watch_event *ev)
{
    ns_watch *nw = ctx;
    store_lease l;
    switch (ev->type) {
    case KUBE_WATCH_ADDED:
    case KUBE_WATCH_MODIFIED:
        nw->gone_streak = 0;
        memcpy(nw->rv, ev->lease.resource_version, sizeof nw->rv);
        store_lease_from_kube(&ev->lease, &l);
        if (store_kube_cache_put(nw, &l) != 0) {
            nw->stream_failed = true;
            return 1;
        }
        break;
    case KUBE_WATCH_DELETED:
        nw->gone_streak = 0;
        memcpy(nw->rv, ev->lease.resource_version, sizeof nw->rv);
        store_lease_from_kube(&ev->lease, &l);
        store_kube_cache_delete(nw, &l);
        break;
    case KUBE_WATCH_BOOKMARK:
        nw->gone_streak = 0;
        memcpy(nw->rv, ev->lease.resource_version, sizeof nw->rv);
        break;
    case KUBE_WATCH_INVALID:
        log_event(LOG_WARN, "kube_lease_undecodable", "ns=%s count=1 error=%s", nw->ns,
                  log_q(ev->status.message));
        if (ev->lease.resource_version[0])
            memcpy(nw->rv, ev->lease.resource_version, sizeof nw->rv);
        break;
    case KUBE_WATCH_ERROR:
        if (ev->status.code == 410) {
            nw->need_relist = true;
        } else {
            nw->stream_failed = true;
            log_event(LOG_WARN, "kube_watch_error", "ns=%s code=%d reason=%s error=%s", nw->ns,
                      ev->status.code, log_q(ev->status.reason), log_q(ev->status.message));
        }
        return 1;
    }
    return nw->n_subs == 0; /* nobody is left to tell */
}

static void stream_headers(void *ctx, long code)
{
    ns_watch *nw = ctx;
    store_kube_nsw_enter(nw);
    store_kube_note_reachable(nw->ks, code);
    if (code == 200) {
        nw->failures = 0;
        /* Back after a break: the consumers get the state again, then
         * SYNCED; the events missed meanwhile follow on this stream. */
        if (nw->broken) {
            watch_reconnected(nw);
            store_kube_cache_report(nw);
        }
    }
    store_kube_nsw_leave(nw);
}

static int stream_data(void *ctx, const char *data, size_t len)
{
    ns_watch *nw = ctx;
    char e[200];
    store_kube_nsw_enter(nw);
    int rc = kube_watch_parser_feed(&nw->parser, data, len, on_event, nw, e, sizeof e);
    if (rc < 0) {
        log_event(LOG_WARN, "kube_watch_bad_stream", "ns=%s error=%s", nw->ns, log_q(e));
        nw->stream_failed = true;
    }
    store_kube_nsw_leave(nw);
    return rc != 0;
}

static void stream_done(void *ctx, const kube_response *r)
{
    ns_watch *nw = ctx;
    nw->req = NULL;
    store_kube_nsw_enter(nw);
    if (r->http_code == 410)
        nw->need_relist = true;
    if (nw->need_relist) {
        log_event(LOG_INFO, "kube_watch_relist", "ns=%s rv=%s", nw->ns, log_q(nw->rv));
        metrics_add("kubelease_watch_relists_total", "", 1);
        nw->rv[0] = 0;
        watch_retry(nw, store_kube_backoff_ms(nw->ks, nw->gone_streak++));
    } else if (r->http_code == 200 && r->curl_code == 0 && !nw->stream_failed &&
               r->elapsed_ms >= QUICK_END_MS) {
        /* The apiserver ended the watch: resume at once. Before its
         * timeoutSeconds, it may have found us too slow a reader. */
        if (r->elapsed_ms < (WATCH_TIMEOUT_S - 5) * 1000)
            log_event(LOG_INFO, "kube_watch_ended_early", "ns=%s after_ms=%lld rv=%s", nw->ns,
                      (long long)r->elapsed_ms, log_q(nw->rv));
        watch_retry(nw, 0);
    } else {
        char e[300];
        if (r->http_code != 200 && r->http_code != 0) {
            kube_status st;
            store_kube_describe(r, &st, e, sizeof e);
        } else if (r->curl_code != 0) {
            snprintf(e, sizeof e, "apiserver: %s", r->error);
            store_kube_note_reachable(nw->ks, 0);
        } else {
            snprintf(e, sizeof e, "watch stream ended early or carried an error");
        }
        watch_broken(nw, e);
    }
    store_kube_nsw_leave(nw);
}

static void watch_start_stream(ns_watch *nw)
{
    char path[400];
    watch_path(nw, path, sizeof path, true);
    kube_request_opts o = {
        .method = "GET",
        .path = path,
        /* The apiserver ends the stream after WATCH_TIMEOUT_S; a stream that
         * outlives that by far is dead (TCP keepalive catches most earlier). */
        .timeout_ms = (WATCH_TIMEOUT_S + 30) * 1000,
        .on_headers = stream_headers,
        .on_data = stream_data,
        .on_done = stream_done,
        .ctx = nw,
    };
    kube_watch_parser_reset(&nw->parser);
    nw->need_relist = false;
    nw->stream_failed = false;
    nw->req = kube_client_start(nw->ks->c, &o);
    if (!nw->req)
        watch_broken(nw, "cannot start the watch request");
}

/* The namespace's watch, started if nobody watched there yet (NULL when out
 * of memory). */
static ns_watch *nsw_get(kube_store *ks, const char *ns)
{
    KL__LIST_FOREACH (node, &ks->namespaces) {
        ns_watch *nw = KL__LIST_ENTRY(node, ns_watch, link);
        if (strcmp(nw->ns, ns) == 0)
            return nw;
    }
    ns_watch *nw = calloc(1, sizeof *nw);
    if (!nw)
        return NULL;
    nw->ks = ks;
    snprintf(nw->ns, sizeof nw->ns, "%s", ns);
    loop_timer_init(ks->l, &nw->timer);
    kube_watch_parser_init(&nw->parser, 0);
    kl__list_insert_tail(&ks->namespaces, &nw->link);
    metrics_set("kubelease_apiserver_watches", "", (double)++ks->n_namespaces);
    log_event(LOG_INFO, "kube_watch_started", "ns=%s", nw->ns);
    /* Start from the loop, not inside the consumer's call. */
    watch_retry(nw, 0);
    return nw;
}

store_watch *store_kube_watch(store *s, const char *ns, const char *name, store_watch_cb cb,
                              void *ctx)
{
    kube_store *ks = (kube_store *)s;
    store_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    loop_timer_init(ks->l, &w->timer);
    w->cb = cb;
    w->ctx = ctx;
    if (!ns || kl__name_check_namespace(ns) != KL__NAME_OK ||
        (name && kl__name_check_lease(name) != KL__NAME_OK)) {
        /* Nothing can be watched (the engine validates names first): the
         * watch stays silent and never syncs. */
        log_event(LOG_ERROR, "kube_watch_invalid", "ns=%s name=%s", log_q(ns ? ns : ""),
                  log_q(name ? name : ""));
        kl__list_insert_tail(&ks->silent, &w->link);
        return w;
    }
    ns_watch *nw = nsw_get(ks, ns);
    if (nw && name && !(w->entry = store_kube_cache_get(nw, name)))
        nw = NULL;
    if (!nw) {
        free(w);
        return NULL; /* a new namespace watch without consumers goes at its first pass */
    }
    w->nw = nw;
    kl__list_insert_tail(w->entry ? &w->entry->subs : &nw->all_subs, &w->link);
    nw->n_subs++;
    store_kube_cache_join(w);
    return w;
}

void store_kube_unwatch(store *s, store_watch *w)
{
    (void)s;
    if (!w || w->closed)
        return;
    w->closed = true;
    loop_timer_stop(&w->timer);
    ns_watch *nw = w->nw;
    if (!nw) {
        kl__list_remove(&w->link);
        free(w);
        return;
    }
    nw->n_subs--;
    nw->garbage = true;
    /* Freed now, or by the entry point running (kube_watch.h). */
    store_kube_nsw_enter(nw);
    store_kube_nsw_leave(nw);
}

void store_kube_watches_free(kube_store *ks)
{
    while (!kl__list_empty(&ks->namespaces))
        nsw_free(KL__LIST_ENTRY(kl__list_first(&ks->namespaces), ns_watch, link));
    KL__LIST_FOREACH_SAFE (node, &ks->silent) {
        kl__list_remove(node);
        free(KL__LIST_ENTRY(node, store_watch, link));
    }
}
