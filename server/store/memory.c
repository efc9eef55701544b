/* The in-process store. Every operation takes effect in a task run on the
 * loop (never inside the call), then reports to its caller and finally to
 * the watches, in that order. Events are kept, the last MEM_EVENTS of
 * them, for tests and --dev. The injected latency and watch delay are loop
 * timers, measured on the loop's clock; the store owns what they carry and
 * frees it if destroyed first. Loop thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/memory.h"
#include "store/memory_pods.h"

#include "common/list.h"

typedef struct mem_entry {
    struct kl__list link; /* in mem_store.entries */
    store_lease lease;
} mem_entry;

struct store_watch {
    struct kl__list link; /* in mem_store.watches */
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX]; /* "" for a whole namespace */
    store_watch_cb cb;
    void *ctx;
    bool dead;         /* unwatched; freed when no delivery is running */
    bool sync_pending; /* the initial report is queued and refers to it */
};

/* The Events kept: a ring of the last ones recorded. */
#define MEM_EVENTS 64

typedef struct mem_op mem_op;

typedef struct mem_store {
    store base;
    loop *loop;
    struct kl__list entries; /* mem_entry: the Leases */
    mem_pods pods;           /* memory_pods.c */
    struct kl__list watches; /* store_watch: not yet freed (a dead one may wait for a delivery) */
    struct kl__list delayed; /* mem_op: operations and deliveries waiting on their timer */
    struct kl__list posted;  /* mem_op: posted to the loop, not run yet (freed at destroy) */
    int64_t revision;
    int delivering; /* nesting depth of watch deliveries */
    bool available;
    store_status writes_fail; /* STORE_OK: writes are applied */
    int writes_fail_left;     /* how many more writes fail so; -1: all */
    bool answers_lost;        /* writes are applied but answered unavailable */
    int64_t writes;           /* Lease writes applied (store_memory_writes) */
    int latency_ms;
    int watch_delay_ms;
    store_lease_event events[MEM_EVENTS];
    int64_t n_events; /* recorded in all; the last MEM_EVENTS are kept */
} mem_store;

typedef enum mem_op_kind {
    OP_GET,
    OP_CREATE,
    OP_UPDATE,
    OP_REMOVE,
    OP_WATCH_SYNC,
    OP_DELIVER, /* a watch event on its way (store_memory_set_watch_delay) */
    OP_POD_GET,
    OP_POD_LABEL,
    OP_EVENT,
} mem_op_kind;

struct mem_op {
    struct kl__list link; /* in mem_store.delayed while its timer runs */
    loop_timer timer;
    mem_store *m;
    mem_op_kind kind;
    store_lease lease;
    char rv[STORE_RV_MAX];
    store_cb cb;
    void *ctx;
    struct store_watch *watch;       /* OP_WATCH_SYNC */
    store_event_type event;          /* OP_DELIVER */
    char key[STORE_LABEL_KEY_MAX];   /* OP_POD_LABEL */
    char value[STORE_LABEL_VAL_MAX]; /* OP_POD_LABEL */
    bool has_value;                  /* OP_POD_LABEL: set (else remove) */
    store_lease_event event_rec;     /* OP_EVENT */
};

static mem_entry *entry_of(const struct kl__list *link)
{
    return KL__LIST_ENTRY(link, mem_entry, link);
}

static struct store_watch *watch_of(const struct kl__list *link)
{
    return KL__LIST_ENTRY(link, struct store_watch, link);
}

static mem_entry *find(mem_store *m, const char *ns, const char *name)
{
    KL__LIST_FOREACH (link, &m->entries) {
        mem_entry *e = entry_of(link);
        if (strcmp(e->lease.ns, ns) == 0 && strcmp(e->lease.name, name) == 0)
            return e;
    }
    return NULL;
}

static bool watch_matches(const struct store_watch *w, const store_lease *l)
{
    return !w->dead && strcmp(w->ns, l->ns) == 0 && (!w->name[0] || strcmp(w->name, l->name) == 0);
}

static void sweep_watches(mem_store *m)
{
    if (m->delivering)
        return;
    KL__LIST_FOREACH_SAFE (link, &m->watches) {
        struct store_watch *w = watch_of(link);
        if (w->dead && !w->sync_pending) {
            kl__list_remove(link);
            free(w);
        }
    }
}

static void notify_now(mem_store *m, store_event_type type, const store_lease *l)
{
    m->delivering++;
    KL__LIST_FOREACH (link, &m->watches) {
        struct store_watch *w = watch_of(link);
        if (watch_matches(w, l))
            w->cb(w->ctx, type, l);
    }
    m->delivering--;
    sweep_watches(m);
}

static void run_op(void *arg);

/* Runs op on the loop's next pass; -1 when it cannot be posted. Until it
 * runs it is on m->posted, so that a store destroyed before (the loop
 * stopped first) frees it. */
static int post(mem_store *m, mem_op *op)
{
    kl__list_insert_head(&m->posted, &op->link);
    if (loop_post(m->loop, run_op, op) != 0) {
        kl__list_remove(&op->link);
        return -1;
    }
    return 0;
}

/* Runs op after ms on the loop's clock; the store keeps it until then. */
static void delay(mem_store *m, mem_op *op, int ms)
{
    kl__list_insert_head(&m->delayed, &op->link);
    loop_timer_init(m->loop, &op->timer);
    loop_timer_start(&op->timer, loop_now(m->loop) + ms, run_op, op);
}

static void notify(mem_store *m, store_event_type type, const store_lease *l)
{
    if (m->watch_delay_ms > 0) {
        mem_op *d = calloc(1, sizeof *d);
        if (d) {
            d->m = m;
            d->kind = OP_DELIVER;
            d->event = type;
            d->lease = *l;
            delay(m, d, m->watch_delay_ms);
            return;
        }
    }
    notify_now(m, type, l);
}

/* Reports the current state of everything w covers, then SYNCED. */
static void sync_watch(mem_store *m, struct store_watch *w)
{
    m->delivering++;
    bool seen = false;
    KL__LIST_FOREACH (link, &m->entries) {
        mem_entry *e = entry_of(link);
        if (w->dead)
            break;
        if (watch_matches(w, &e->lease)) {
            seen = true;
            w->cb(w->ctx, STORE_EVENT_PUT, &e->lease);
        }
    }
    if (!seen && w->name[0] && !w->dead) {
        store_lease gone;
        store_lease_absent(&gone, w->ns, w->name);
        w->cb(w->ctx, STORE_EVENT_DELETE, &gone);
    }
    if (!w->dead)
        w->cb(w->ctx, STORE_EVENT_SYNCED, NULL);
    m->delivering--;
    sweep_watches(m);
}

/* what: e.g. "not found"; the message names the Lease. */
static void fail(store_result *r, store_status st, const char *what, const store_lease *l)
{
    r->status = st;
    snprintf(r->message, sizeof r->message, "lease %.60s/%.150s: %s", l->ns, l->name, what);
}

/* Writes l over e's Lease as an update: the uid is the store's and stays,
 * and so do spec.preferredHolder and spec.strategy as others wrote them
 * (as the Kubernetes store's merge patch keeps them). */
static void entry_update(mem_entry *e, const store_lease *l)
{
    store_lease kept = e->lease;
    e->lease = *l;
    memcpy(e->lease.uid, kept.uid, sizeof e->lease.uid);
    memcpy(e->lease.preferred_holder, kept.preferred_holder, sizeof e->lease.preferred_holder);
    memcpy(e->lease.strategy, kept.strategy, sizeof e->lease.strategy);
}

/* Applies a get, create, update or remove to the entries and fills *r.
 * Returns true when the entries changed (*ev: how the watches hear of it). */
static bool apply(mem_store *m, const mem_op *op, store_result *r, store_event_type *ev)
{
    mem_entry *e = find(m, op->lease.ns, op->lease.name);
    switch (op->kind) {
    case OP_GET:
        if (!e)
            fail(r, STORE_NOT_FOUND, "not found", &op->lease);
        else
            r->lease = e->lease;
        return false;
    case OP_CREATE:
        if (e) {
            fail(r, STORE_EXISTS, "already exists", &op->lease);
            return false;
        }
        e = calloc(1, sizeof *e);
        if (!e) {
            fail(r, STORE_INTERNAL, "out of memory", &op->lease);
            return false;
        }
        e->lease = op->lease;
        snprintf(e->lease.resource_version, STORE_RV_MAX, "%lld", (long long)++m->revision);
        snprintf(e->lease.uid, STORE_UID_MAX, "memory-%lld", (long long)m->revision);
        kl__list_insert_head(&m->entries, &e->link);
        r->lease = e->lease;
        return true;
    case OP_UPDATE:
        if (!e) {
            fail(r, STORE_NOT_FOUND, "not found", &op->lease);
            return false;
        }
        if (strcmp(e->lease.resource_version, op->lease.resource_version) != 0) {
            fail(r, STORE_CONFLICT, "the object has been modified", &op->lease);
            return false;
        }
        entry_update(e, &op->lease);
        snprintf(e->lease.resource_version, STORE_RV_MAX, "%lld", (long long)++m->revision);
        r->lease = e->lease;
        return true;
    case OP_REMOVE:
        if (!e) {
            fail(r, STORE_NOT_FOUND, "not found", &op->lease);
            return false;
        }
        if (op->rv[0] && strcmp(e->lease.resource_version, op->rv) != 0) {
            fail(r, STORE_CONFLICT, "the object has been modified", &op->lease);
            return false;
        }
        r->lease = e->lease;
        kl__list_remove(&e->link);
        free(e);
        *ev = STORE_EVENT_DELETE;
        return true;
    case OP_POD_GET:
    case OP_POD_LABEL:
        mem_pods_apply(&m->pods, &op->lease, op->kind == OP_POD_LABEL ? op->key : NULL,
                       op->has_value ? op->value : NULL, r);
        return false;
    case OP_EVENT:
        m->events[m->n_events++ % MEM_EVENTS] = op->event_rec;
        r->lease = op->lease;
        return false;
    case OP_WATCH_SYNC:
    case OP_DELIVER:
        break;
    }
    return false;
}

static void run_op(void *arg)
{
    mem_op *op = arg;
    mem_store *m = op->m;
    store_result r = {0};
    store_event_type ev = STORE_EVENT_PUT;

    kl__list_remove(&op->link); /* from m->delayed or m->posted */
    if (op->kind == OP_DELIVER) {
        notify_now(m, op->event, &op->lease);
        free(op);
        return;
    }
    if (op->kind == OP_WATCH_SYNC) {
        op->watch->sync_pending = false;
        if (!op->watch->dead && m->available)
            sync_watch(m, op->watch);
        sweep_watches(m);
        free(op);
        return;
    }
    if (!m->available) {
        fail(&r, STORE_UNAVAILABLE, "memory store unavailable (fault injected)", &op->lease);
        op->cb(op->ctx, &r);
        free(op);
        return;
    }
    if (m->writes_fail != STORE_OK && op->kind != OP_GET) {
        fail(&r, m->writes_fail, "memory store refuses writes (fault injected)", &op->lease);
        if (m->writes_fail_left > 0 && --m->writes_fail_left == 0)
            m->writes_fail = STORE_OK;
        op->cb(op->ctx, &r);
        free(op);
        return;
    }
    bool changed = apply(m, op, &r, &ev);
    if (changed && (op->kind == OP_CREATE || op->kind == OP_UPDATE || op->kind == OP_REMOVE))
        m->writes++;
    if (m->answers_lost &&
        (op->kind == OP_CREATE || op->kind == OP_UPDATE || op->kind == OP_REMOVE)) {
        store_lease applied = r.lease;
        fail(&r, STORE_UNAVAILABLE, "memory store lost the answer (fault injected)", &applied);
    }
    op->cb(op->ctx, &r);
    if (changed)
        notify(m, ev, &r.lease);
    free(op);
}

static void submit(mem_store *m, mem_op *op)
{
    if (m->latency_ms > 0) {
        delay(m, op, m->latency_ms);
        return;
    }
    if (post(m, op) != 0)
        run_op(op); /* out of memory: complete now rather than never */
}

static mem_op *new_op(mem_store *m, mem_op_kind kind, const char *ns, const char *name, store_cb cb,
                      void *ctx)
{
    mem_op *op = calloc(1, sizeof *op);
    if (!op) {
        store_result r = {.status = STORE_INTERNAL};
        snprintf(r.message, sizeof r.message, "out of memory");
        cb(ctx, &r);
        return NULL;
    }
    op->m = m;
    op->kind = kind;
    op->cb = cb;
    op->ctx = ctx;
    snprintf(op->lease.ns, sizeof op->lease.ns, "%s", ns);
    snprintf(op->lease.name, sizeof op->lease.name, "%s", name);
    return op;
}

static void mem_get(store *s, const char *ns, const char *name, int timeout_ms, store_cb cb,
                    void *ctx)
{
    (void)timeout_ms;
    mem_op *op = new_op((mem_store *)s, OP_GET, ns, name, cb, ctx);
    if (op)
        submit((mem_store *)s, op);
}

static void mem_write(store *s, mem_op_kind kind, const store_lease *lease, store_cb cb, void *ctx)
{
    mem_op *op = new_op((mem_store *)s, kind, lease->ns, lease->name, cb, ctx);
    if (!op)
        return;
    op->lease = *lease;
    submit((mem_store *)s, op);
}

static void mem_create(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx)
{
    (void)timeout_ms;
    mem_write(s, OP_CREATE, lease, cb, ctx);
}

static void mem_update(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx)
{
    (void)timeout_ms;
    mem_write(s, OP_UPDATE, lease, cb, ctx);
}

static void mem_remove(store *s, const char *ns, const char *name, const char *rv, int timeout_ms,
                       store_cb cb, void *ctx)
{
    (void)timeout_ms;
    mem_op *op = new_op((mem_store *)s, OP_REMOVE, ns, name, cb, ctx);
    if (!op)
        return;
    snprintf(op->rv, sizeof op->rv, "%s", rv ? rv : "");
    submit((mem_store *)s, op);
}

static void mem_pod_get(store *s, const char *ns, const char *pod, int timeout_ms, store_cb cb,
                        void *ctx)
{
    (void)timeout_ms;
    mem_op *op = new_op((mem_store *)s, OP_POD_GET, ns, pod, cb, ctx);
    if (op)
        submit((mem_store *)s, op);
}

static void mem_pod_label(store *s, const char *ns, const char *pod, const char *key,
                          const char *value, int timeout_ms, store_cb cb, void *ctx)
{
    (void)timeout_ms;
    mem_op *op = new_op((mem_store *)s, OP_POD_LABEL, ns, pod, cb, ctx);
    if (!op)
        return;
    snprintf(op->key, sizeof op->key, "%s", key);
    snprintf(op->value, sizeof op->value, "%s", value ? value : "");
    op->has_value = value != NULL;
    submit((mem_store *)s, op);
}

static void mem_record_event(store *s, const store_lease_event *ev, int timeout_ms, store_cb cb,
                             void *ctx)
{
    (void)timeout_ms;
    mem_op *op = new_op((mem_store *)s, OP_EVENT, ev->lease.ns, ev->lease.name, cb, ctx);
    if (!op)
        return;
    op->event_rec = *ev;
    submit((mem_store *)s, op);
}

int64_t store_memory_event_count(store *s)
{
    return ((mem_store *)s)->n_events;
}

const store_lease_event *store_memory_event(store *s, int64_t i)
{
    mem_store *m = (mem_store *)s;
    if (i < 0 || i >= m->n_events || i < m->n_events - MEM_EVENTS)
        return NULL;
    return &m->events[i % MEM_EVENTS];
}

int store_memory_pod_put(store *s, const char *ns, const char *pod, const char *ip)
{
    return mem_pods_put(&((mem_store *)s)->pods, ns, pod, ip);
}

void store_memory_set_auto_pods(store *s, bool on)
{
    ((mem_store *)s)->pods.auto_add = on;
}

void store_memory_set_pod_labels_fail(store *s, store_status status)
{
    ((mem_store *)s)->pods.labels_fail = status;
}

const char *store_memory_pod_label(store *s, const char *ns, const char *pod, const char *key)
{
    return mem_pods_label(&((mem_store *)s)->pods, ns, pod, key);
}

int store_memory_set_preferred_holder(store *s, const char *ns, const char *name,
                                      const char *holder, const char *strategy)
{
    mem_store *m = (mem_store *)s;
    mem_entry *e = find(m, ns, name);
    if (!e)
        return -1;
    snprintf(e->lease.preferred_holder, sizeof e->lease.preferred_holder, "%s",
             holder ? holder : "");
    snprintf(e->lease.strategy, sizeof e->lease.strategy, "%s", strategy ? strategy : "");
    snprintf(e->lease.resource_version, STORE_RV_MAX, "%lld", (long long)++m->revision);
    notify(m, STORE_EVENT_PUT, &e->lease);
    return 0;
}

int64_t store_memory_writes(store *s)
{
    return ((mem_store *)s)->writes;
}

int store_memory_watch_count(store *s)
{
    int n = 0;
    KL__LIST_FOREACH (link, &((mem_store *)s)->watches)
        n += !watch_of(link)->dead;
    return n;
}

static store_watch *mem_watch(store *s, const char *ns, const char *name, store_watch_cb cb,
                              void *ctx)
{
    mem_store *m = (mem_store *)s;
    struct store_watch *w = calloc(1, sizeof *w);
    mem_op *op = calloc(1, sizeof *op);
    if (!w || !op) {
        free(w);
        free(op);
        return NULL;
    }
    snprintf(w->ns, sizeof w->ns, "%s", ns);
    snprintf(w->name, sizeof w->name, "%s", name ? name : "");
    w->cb = cb;
    w->ctx = ctx;
    w->sync_pending = true;
    kl__list_insert_head(&m->watches, &w->link);
    op->m = m;
    op->kind = OP_WATCH_SYNC;
    op->watch = w;
    if (post(m, op) != 0) {
        free(op);
        w->dead = true;
        w->sync_pending = false;
        sweep_watches(m);
        return NULL;
    }
    return w;
}

static void mem_unwatch(store *s, store_watch *w)
{
    if (!w)
        return;
    w->dead = true;
    sweep_watches((mem_store *)s);
}

static bool mem_reachable(store *s)
{
    return ((mem_store *)s)->available;
}

static void mem_destroy(store *s)
{
    mem_store *m = (mem_store *)s;
    KL__LIST_FOREACH_SAFE (link, &m->delayed) {
        mem_op *op = KL__LIST_ENTRY(link, mem_op, link);
        loop_timer_stop(&op->timer);
        free(op);
    }
    KL__LIST_FOREACH_SAFE (link, &m->posted)
        free(KL__LIST_ENTRY(link, mem_op, link));
    KL__LIST_FOREACH_SAFE (link, &m->entries)
        free(entry_of(link));
    KL__LIST_FOREACH_SAFE (link, &m->watches)
        free(watch_of(link));
    mem_pods_free(&m->pods);
    free(m);
}

static const store_ops mem_ops = {
    .get = mem_get,
    .create = mem_create,
    .update = mem_update,
    .remove = mem_remove,
    .pod_label = mem_pod_label,
    .pod_get = mem_pod_get,
    .record_event = mem_record_event,
    .watch = mem_watch,
    .unwatch = mem_unwatch,
    .reachable = mem_reachable,
    .destroy = mem_destroy,
};

store *store_memory_new(loop *l)
{
    mem_store *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->base.ops = &mem_ops;
    m->base.kind = "memory";
    m->loop = l;
    m->available = true;
    return &m->base;
}

void store_memory_set_available(store *s, bool available)
{
    mem_store *m = (mem_store *)s;
    if (m->available == available)
        return;
    m->available = available;
    m->delivering++;
    KL__LIST_FOREACH (link, &m->watches) {
        struct store_watch *w = watch_of(link);
        if (w->dead)
            continue;
        if (!available)
            w->cb(w->ctx, STORE_EVENT_BROKEN, NULL);
        else
            sync_watch(m, w);
    }
    m->delivering--;
    sweep_watches(m);
}

void store_memory_set_watch_delay(store *s, int ms)
{
    ((mem_store *)s)->watch_delay_ms = ms;
}

void store_memory_set_writes_fail(store *s, store_status status, int count)
{
    ((mem_store *)s)->writes_fail = status;
    ((mem_store *)s)->writes_fail_left = count;
}

void store_memory_set_answers_lost(store *s, bool lost)
{
    ((mem_store *)s)->answers_lost = lost;
}

void store_memory_set_latency(store *s, int ms)
{
    ((mem_store *)s)->latency_ms = ms;
}
