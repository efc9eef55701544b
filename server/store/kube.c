/* The Kubernetes store: coordination.k8s.io/v1 Leases through the apiserver.
 *
 * Operations map to one request each (GET, POST, PUT with
 * metadata.resourceVersion, DELETE with a resourceVersion precondition).
 * A watch lists first (reporting every Lease, a DELETE for a named Lease that
 * is absent, then SYNCED), then watches from the list's resourceVersion with
 * bookmarks. A stream that ends normally is resumed at once from the last
 * resourceVersion seen; a broken one is reported BROKEN and resumed with
 * backoff, and once it is back the last known state is re-reported and
 * SYNCED (store.h's rule). 410 Gone, as an HTTP status or an ERROR event,
 * means the resourceVersion is too old: list again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/metrics.h"
#include "kube/client.h"
#include "kube/incluster.h"
#include "kube/kubeconfig.h"
#include "kube/lease_json.h"
#include "kube/watch_stream.h"
#include "store/kube.h"
#include "store/kube_map.h"

#define LEASES_PATH     "/apis/coordination.k8s.io/v1/namespaces/%s/leases"
#define WATCH_TIMEOUT_S 300 /* the apiserver ends a watch after this; we resume */
#define LIST_TIMEOUT_MS 10000
#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS  5000
#define QUICK_END_MS    1000 /* a "clean" watch end sooner than this counts as a failure */

typedef struct kube_op kube_op;

typedef struct kube_store {
    store base;
    loop *l;
    kube_client *c;
    bool reachable;
    kube_op *ops;
    store_watch *watches;
    uint64_t rng;
} kube_store;

struct kube_op {
    kube_op *prev, *next;
    kube_store *ks;
    kube_request *req;
    loop_timer timer; /* delivers a failure found before any request */
    kube_verb verb;
    store_cb cb;
    void *ctx;
    store_result res;
};

typedef enum watch_state { W_IDLE, W_LISTING, W_WATCHING } watch_state;

struct store_watch {
    store_watch *prev, *next;
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

/* ---- helpers ------------------------------------------------------------ */

static bool valid_name(const char *s, size_t max)
{
    size_t n = 0;
    for (; s[n]; n++) {
        char ch = s[n];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
            return false;
    }
    return n > 0 && n <= max;
}

static uint64_t rnd(kube_store *ks)
{
    /* xorshift64*: jitter only, no need for quality. */
    ks->rng ^= ks->rng >> 12;
    ks->rng ^= ks->rng << 25;
    ks->rng ^= ks->rng >> 27;
    return ks->rng * 2685821657736338717ULL;
}

static int backoff_ms(kube_store *ks, int failures)
{
    if (failures <= 0)
        return 0;
    int64_t d = BACKOFF_BASE_MS;
    for (int i = 1; i < failures && d < BACKOFF_CAP_MS; i++)
        d *= 2;
    if (d > BACKOFF_CAP_MS)
        d = BACKOFF_CAP_MS;
    /* Between half and all of it, so that many watches do not retry in step. */
    return (int)(d / 2 + (int64_t)(rnd(ks) % (uint64_t)(d / 2 + 1)));
}

static void note_reachable(kube_store *ks, long http_code)
{
    ks->reachable = store_kube_reachable_after(http_code);
}

/* ---- single operations -------------------------------------------------- */

static void op_unlink(kube_op *op)
{
    kube_store *ks = op->ks;
    if (op->prev)
        op->prev->next = op->next;
    else
        ks->ops = op->next;
    if (op->next)
        op->next->prev = op->prev;
}

static void op_complete(kube_op *op)
{
    op_unlink(op);
    op->cb(op->ctx, &op->res);
    free(op);
}

static void op_fail_fire(void *arg)
{
    op_complete(arg);
}

static kube_op *op_new(kube_store *ks, kube_verb verb, const char *ns, const char *name,
                       store_cb cb, void *ctx)
{
    kube_op *op = calloc(1, sizeof *op);
    if (!op)
        return NULL;
    op->ks = ks;
    loop_timer_init(ks->l, &op->timer);
    op->verb = verb;
    op->cb = cb;
    op->ctx = ctx;
    snprintf(op->res.lease.ns, sizeof op->res.lease.ns, "%s", ns ? ns : "");
    snprintf(op->res.lease.name, sizeof op->res.lease.name, "%s", name ? name : "");
    op->next = ks->ops;
    if (ks->ops)
        ks->ops->prev = op;
    ks->ops = op;
    return op;
}

/* Reports a failure later, from the loop (never inside the starting call). */
static void op_fail(kube_op *op, store_status st, const char *msg)
{
    op->res.status = st;
    snprintf(op->res.message, sizeof op->res.message, "%s", msg);
    loop_timer_start(&op->timer, loop_now(op->ks->l), op_fail_fire, op);
}

/* A 2xx answer: the Lease it carries (a delete may answer with a Status). */
static void op_succeeded(kube_op *op, const kube_response *r)
{
    store_result *res = &op->res;
    kube_lease kl;
    char e[200];
    if (kube_lease_decode(r->body, r->body_len, &kl, e, sizeof e) == 0) {
        store_lease_from_kube(&kl, &res->lease);
        res->status = STORE_OK;
    } else if (op->verb == KUBE_VERB_DELETE) {
        res->status = STORE_OK; /* the body may be a Status; ns and name are set */
    } else {
        res->status = STORE_INTERNAL;
        snprintf(res->message, sizeof res->message, "apiserver: bad Lease in response: %s", e);
    }
}

static void op_done(void *ctx, const kube_response *r)
{
    kube_op *op = ctx;
    store_result *res = &op->res;
    op->req = NULL;
    res->http_code = (int)r->http_code;
    note_reachable(op->ks, r->http_code);
    if (r->http_code >= 200 && r->http_code < 300) {
        op_succeeded(op, r);
    } else {
        kube_status st;
        bool have = store_kube_describe(r, &st, res->message, sizeof res->message);
        res->status = store_kube_map_status(r->http_code, have ? &st : NULL, op->verb);
        /* Conflicts and absent Leases are part of the protocol (debug);
         * anything else is worth a warning. */
        if (r->http_code == 0)
            log_event(LOG_WARN, "apiserver_error", "op=%s code=0 error=%s",
                      kube_verb_name(op->verb), log_q(r->error));
        else
            log_event(r->http_code == 409 || r->http_code == 404 ? LOG_DEBUG : LOG_WARN,
                      "apiserver_error", "op=%s code=%ld reason=%s message=%s",
                      kube_verb_name(op->verb), r->http_code, log_q(have ? st.reason : ""),
                      log_q(res->message));
    }
    if (res->status != STORE_OK)
        memset(&res->lease, 0, sizeof res->lease);
    op_complete(op);
}

static void op_start(kube_op *op, const char *method, const char *path, const char *body,
                     size_t body_len, const char *content_type, int timeout_ms)
{
    kube_request_opts o = {
        .method = method,
        .path = path,
        .body = body,
        .body_len = body_len,
        .content_type = content_type,
        .timeout_ms = timeout_ms > 0 ? timeout_ms : LIST_TIMEOUT_MS,
        .on_done = op_done,
        .ctx = op,
    };
    op->req = kube_client_start(op->ks->c, &o);
    if (!op->req)
        op_fail(op, STORE_INTERNAL, "cannot start the request (out of memory)");
}

static bool check_names(kube_op *op, const char *ns, const char *name)
{
    if (!ns || !valid_name(ns, STORE_NS_MAX - 1)) {
        op_fail(op, STORE_INVALID, "invalid namespace");
        return false;
    }
    if (name && !valid_name(name, STORE_NAME_MAX - 1)) {
        op_fail(op, STORE_INVALID, "invalid lease name");
        return false;
    }
    return true;
}

static void kube_get(store *s, const char *ns, const char *name, int timeout_ms, store_cb cb,
                     void *ctx)
{
    kube_store *ks = (kube_store *)s;
    kube_op *op = op_new(ks, KUBE_VERB_GET, ns, name, cb, ctx);
    if (!op || !check_names(op, ns, name ? name : ""))
        return;
    char path[512];
    snprintf(path, sizeof path, LEASES_PATH "/%s", ns, name);
    op_start(op, "GET", path, NULL, 0, NULL, timeout_ms);
}

/* Create is a POST of the whole object; update is a JSON merge patch of the
 * spec, conditional on the resourceVersion, so that labels, annotations and
 * fields other writers set survive (a PUT would replace them). The body, or
 * NULL when a value cannot be encoded: */
static char *write_body(const store_lease *lease, bool create, size_t *len)
{
    kube_lease kl;
    if (!store_lease_to_kube(lease, &kl))
        return NULL;
    return create ? kube_lease_encode(&kl, false, len) : kube_lease_merge_patch(&kl, len);
}

static void write_lease(kube_store *ks, kube_verb verb, const store_lease *lease, int timeout_ms,
                        store_cb cb, void *ctx)
{
    kube_op *op = op_new(ks, verb, lease->ns, lease->name, cb, ctx);
    if (!op || !check_names(op, lease->ns, lease->name))
        return;
    bool create = verb == KUBE_VERB_CREATE;
    if (!create && !lease->resource_version[0]) {
        op_fail(op, STORE_INVALID, "update without a resourceVersion");
        return;
    }
    size_t len;
    char *body = write_body(lease, create, &len);
    if (!body) {
        op_fail(op, STORE_INVALID, "the Lease cannot be encoded (a value is out of range)");
        return;
    }
    char path[512];
    if (create)
        snprintf(path, sizeof path, LEASES_PATH, lease->ns);
    else
        snprintf(path, sizeof path, LEASES_PATH "/%s", lease->ns, lease->name);
    op_start(op, create ? "POST" : "PATCH", path, body, len,
             create ? NULL : "application/merge-patch+json", timeout_ms);
    free(body);
}

static void kube_create(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx)
{
    write_lease((kube_store *)s, KUBE_VERB_CREATE, lease, timeout_ms, cb, ctx);
}

static void kube_update(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx)
{
    write_lease((kube_store *)s, KUBE_VERB_PATCH, lease, timeout_ms, cb, ctx);
}

static void kube_remove(store *s, const char *ns, const char *name, const char *rv, int timeout_ms,
                        store_cb cb, void *ctx)
{
    kube_store *ks = (kube_store *)s;
    kube_op *op = op_new(ks, KUBE_VERB_DELETE, ns, name, cb, ctx);
    if (!op || !check_names(op, ns, name ? name : ""))
        return;
    char path[512], body[256];
    snprintf(path, sizeof path, LEASES_PATH "/%s", ns, name);
    if (!rv || !rv[0]) {
        op_start(op, "DELETE", path, NULL, 0, NULL, timeout_ms);
        return;
    }
    /* The resourceVersion is a precondition: a stale one gets 409 Conflict. */
    for (const char *p = rv; *p; p++) {
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 || p - rv >= STORE_RV_MAX) {
            op_fail(op, STORE_INVALID, "invalid resourceVersion");
            return;
        }
    }
    int n = snprintf(body, sizeof body,
                     "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\","
                     "\"preconditions\":{\"resourceVersion\":\"%s\"}}",
                     rv);
    op_start(op, "DELETE", path, body, (size_t)n, NULL, timeout_ms);
}

/* ---- watches ------------------------------------------------------------ */

static void watch_free(store_watch *w)
{
    kube_store *ks = w->ks;
    kube_client_cancel(ks->c, w->req);
    loop_timer_stop(&w->timer);
    if (w->prev)
        w->prev->next = w->next;
    else
        ks->watches = w->next;
    if (w->next)
        w->next->prev = w->prev;
    kube_watch_parser_free(&w->parser);
    free(w->known);
    free(w);
}

/* Entry points (timers and request callbacks) bracket their work with
 * enter/leave, so that an unwatch from inside a callback frees the watch
 * only once nothing of it runs any more. */
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
    int delay = backoff_ms(w->ks, w->failures);
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
    note_reachable(w->ks, r->http_code);
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
    note_reachable(w->ks, code);
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
        watch_retry(w, backoff_ms(w->ks, w->gone_streak++));
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
            note_reachable(w->ks, 0);
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

static store_watch *kube_watch(store *s, const char *ns, const char *name, store_watch_cb cb,
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
    w->next = ks->watches;
    if (ks->watches)
        ks->watches->prev = w;
    ks->watches = w;
    if (!valid_name(w->ns, STORE_NS_MAX - 1) ||
        (name && !valid_name(w->name, STORE_NAME_MAX - 1))) {
        /* Nothing can be watched (the engine validates names first): the
         * watch stays silent and never syncs. */
        log_event(LOG_ERROR, "kube_watch_invalid", "ns=%s name=%s", log_q(w->ns), log_q(w->name));
        return w;
    }
    /* Start from the loop, not inside this call. */
    watch_retry(w, 0);
    return w;
}

static void kube_unwatch(store *s, store_watch *w)
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

static bool kube_reachable(store *s)
{
    return ((kube_store *)s)->reachable;
}

/* Cancels everything without callbacks. Not to be called from inside a
 * callback of this store (the engine destroys the store after its loop). */
static void kube_destroy(store *s)
{
    kube_store *ks = (kube_store *)s;
    while (ks->ops) {
        kube_op *op = ks->ops;
        kube_client_cancel(ks->c, op->req);
        loop_timer_stop(&op->timer);
        op_unlink(op);
        free(op);
    }
    while (ks->watches)
        watch_free(ks->watches);
    kube_client_free(ks->c);
    free(ks);
}

static const store_ops kube_ops = {
    .get = kube_get,
    .create = kube_create,
    .update = kube_update,
    .remove = kube_remove,
    .watch = kube_watch,
    .unwatch = kube_unwatch,
    .reachable = kube_reachable,
    .destroy = kube_destroy,
};

store *store_kube_new(loop *l, const store_kube_opts *opts, char *err, size_t err_len)
{
    kube_config cfg;
    int rc = opts && opts->kubeconfig
                 ? kube_kubeconfig_load(opts->kubeconfig, opts->context, &cfg, err, err_len)
                 : kube_incluster_load_env(opts ? opts->sa_dir : NULL, &cfg, err, err_len);
    if (rc != 0)
        return NULL;
    kube_store *ks = calloc(1, sizeof *ks);
    if (!ks) {
        kube_config_clear(&cfg);
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    log_event(LOG_INFO, "kube_config", "source=%s server=%s auth=%s insecure=%s", log_q(cfg.source),
              log_q(cfg.server),
              cfg.client_cert.data ? "client-certificate"
              : cfg.token_file     ? "token-file"
                                   : "token",
              cfg.insecure ? "true" : "false");
    ks->base.ops = &kube_ops;
    ks->base.kind = "kube";
    ks->l = l;
    ks->rng = (uint64_t)mono_us() * 0x9E3779B97F4A7C15ULL | 1;
    ks->c = kube_client_new(l, &cfg, err, err_len);
    if (!ks->c) {
        kube_config_clear(&cfg);
        free(ks);
        return NULL;
    }
    return &ks->base;
}
