/* The simulated Lease store: one set of Leases shared by every engine, each
 * engine reaching it through a view of its own (a store of store.h), with
 * the semantics of the kube store (store/kube*.c): resourceVersion
 * compare-and-swap, watches that lag, break and relist, and the faults of a
 * real apiserver — requests lost before or after they took effect, retried
 * requests applied twice (the answer is the retry's: a conflict), 409s
 * nobody's write explains, 429/5xx, slow writes that outlive their timeout
 * and land later. Every answer and watch event reaches its engine at a
 * simulated time, on its loop's clock (loop_update_time first), never
 * inside the call that asked, and waits while the engine is paused. */
#include <stdlib.h>
#include <string.h>

#include "core/metrics.h"
#include "sim_internal.h"

typedef struct sim_view {
    store base;
    sim_engine *e;
    unsigned gen; /* the engine's incarnation */
    bool dead;
    bool reachable;
    struct sim_view *next;
} sim_view;

struct store_watch {
    sim_view *v;
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX]; /* "" whole namespace */
    store_watch_cb cb;
    void *ctx;
    bool alive;
    unsigned wgen;   /* a restart drops what is in flight */
    int64_t last_at; /* deliveries keep their order */
    struct store_watch *next;
};

#define MAX_ENTRIES 64

typedef struct entry {
    bool exists;
    store_lease lease;
} entry;

typedef enum op_kind { OP_GET, OP_CREATE, OP_UPDATE, OP_REMOVE, OP_POD, OP_EVENT } op_kind;

typedef struct op {
    sim_view *v;
    op_kind kind;
    store_lease lease;
    char rv[STORE_RV_MAX];
    store_cb cb;
    void *ctx;
    int fault; /* FAULT_* decided when asked */
    int64_t deadline;
    bool answered;
    store_result res;
    bool pod_label; /* OP_POD: a label patch (else a read) */
    bool has_value;
    char key[STORE_LABEL_KEY_MAX];
    char value[STORE_LABEL_VAL_MAX];
} op;

enum { FAULT_NONE, FAULT_LOST_REQUEST, FAULT_LOST_ANSWER, FAULT_DUP, FAULT_409, FAULT_5XX };

/* The leader labels on Pods (rule 9): Pod pod-c<i> carries SIM_LABEL_KEY
 * with value label[i] ("" none). */
#define MAX_PODS 64
static char pod_labels[MAX_PODS][STORE_LABEL_VAL_MAX];

/* kubelease_pod_label_given_up_total, over every engine (the metrics are
 * the process's): a removal that failed for leaseDurationSeconds and was
 * given up so that the next term goes ahead (docs/design.md, rule 9,
 * "Routing versus liveness"). */
static double given_up_total(void)
{
    size_t len = 0;
    char *text = metrics_render(&len);
    double v = 0;
    const char *name = "\nkubelease_pod_label_given_up_total ";
    const char *at = text ? strstr(text, name) : NULL;
    if (at)
        v = strtod(at + strlen(name), NULL);
    free(text);
    return v;
}

/* The given-up count when each Pod was (newly) labelled, and whether its
 * label is one whose removal was given up (until the Pod's label changes). */
static double pod_given_up_at[MAX_PODS];
static bool pod_given_up[MAX_PODS];

/* A label patch landed: never two Pods labelled for one Lease, but for the
 * documented exception: the older label's removal was given up. */
static void pod_label_apply(const char *pod, const char *key, const char *value)
{
    if (strncmp(pod, "pod-c", 5) != 0 || strcmp(key, SIM_LABEL_KEY) != 0)
        return;
    int i = atoi(pod + 5);
    if (i < 0 || i >= MAX_PODS)
        return;
    bool newly = value && strcmp(pod_labels[i], value) != 0;
    if (!value || newly)
        pod_given_up[i] = false;
    snprintf(pod_labels[i], sizeof pod_labels[i], "%s", value ? value : "");
    sim_trace("store: pod-c%d %s", i, value ? "labelled" : "unlabelled");
    if (!value)
        return;
    double given_up = newly ? given_up_total() : 0;
    if (newly)
        pod_given_up_at[i] = given_up;
    for (int j = 0; j < MAX_PODS; j++) {
        if (j == i || strcmp(pod_labels[j], value) != 0)
            continue;
        if (pod_given_up[j])
            continue;
        if (newly && given_up > pod_given_up_at[j]) {
            sim_trace("rule 9: pod-c%d keeps %s=%s: its removal was given up (the next term "
                      "goes ahead, docs/design.md)",
                      j, key, value);
            pod_given_up[j] = true;
            pod_given_up_at[j] = given_up;
            continue;
        }
        sim_violation("rule 9: pod-c%d and pod-c%d both labelled %s=%s", j, i, key, value);
    }
}

typedef struct delivery {
    struct store_watch *w;
    unsigned wgen;
    store_event_type type;
    store_lease lease;
} delivery;

static struct {
    entry entries[MAX_ENTRIES];
    int n_entries;
    int64_t revision;
    int level; /* fault level; 0 none */
    sim_view *views;
    /* Watches not yet seen dead; the scans move dead ones to `dead` (an
     * event in flight may still point at one: all are freed with the
     * store). */
    struct store_watch *watches;
    struct store_watch *dead;
} S;

int sim_lease_index(const char *name)
{
    if (strncmp(name, "lease-", 6) != 0)
        return -1;
    int i = atoi(name + 6);
    return i >= 0 && i < W.opts.leases ? i : -1;
}

void sim_store_faults(int level)
{
    S.level = level;
    if (level)
        sim_trace("store: faults at level %d", level);
}

void sim_store_faults_off(void *arg, uint64_t a, uint64_t b)
{
    (void)arg;
    (void)a;
    (void)b;
    if (S.level)
        sim_trace("store: faults off");
    S.level = 0;
}

static int64_t latency(void)
{
    if (!S.level)
        return sim_between(1, 8);
    if (sim_chance(0.05))
        return sim_between(500, 1500 * (int64_t)S.level); /* a slow write */
    return sim_between(1, 100 * (int64_t)S.level);
}

static int64_t watch_delay(void)
{
    return S.level ? sim_between(1, 300 * (int64_t)S.level) : sim_between(1, 20);
}

static entry *find(const char *ns, const char *name)
{
    for (int i = 0; i < S.n_entries; i++)
        if (strcmp(S.entries[i].lease.ns, ns) == 0 && strcmp(S.entries[i].lease.name, name) == 0)
            return &S.entries[i];
    return NULL;
}

static bool view_runs(const sim_view *v)
{
    return !v->dead && v->e->up && v->e->gen == v->gen;
}

/* ---------- watches ---------- */

static void deliver(void *arg, uint64_t a, uint64_t b)
{
    (void)a;
    (void)b;
    delivery *d = arg;
    struct store_watch *w = d->w;
    if (!w->alive || w->wgen != d->wgen || !view_runs(w->v)) {
        free(d);
        return;
    }
    if (!sim_engine_runs(w->v->e)) {
        sim_at_owned(w->v->e->paused_until, deliver, d, 0, 0);
        return;
    }
    loop_update_time(w->v->e->loop);
    sim_debug_engine(w->v->e);
    w->cb(w->ctx, d->type,
          d->type == STORE_EVENT_PUT || d->type == STORE_EVENT_DELETE ? &d->lease : NULL);
    free(d);
}

static void send_event(struct store_watch *w, store_event_type type, const store_lease *l,
                       int64_t delay)
{
    delivery *d = calloc(1, sizeof *d);
    if (!d)
        abort();
    d->w = w;
    d->wgen = w->wgen;
    d->type = type;
    if (l)
        d->lease = *l;
    int64_t at = W.now + delay;
    if (at < w->last_at)
        at = w->last_at;
    w->last_at = at;
    sim_at_owned(at, deliver, d, 0, 0);
}

static bool matches(const struct store_watch *w, const store_lease *l)
{
    return w->alive && strcmp(w->ns, l->ns) == 0 && (!w->name[0] || strcmp(w->name, l->name) == 0);
}

/* The current state of what w covers, then SYNCED (a list, or a relist). */
static void sync_watch(struct store_watch *w, int64_t delay)
{
    bool seen = false;
    for (int i = 0; i < S.n_entries; i++) {
        entry *e = &S.entries[i];
        if (e->exists && matches(w, &e->lease)) {
            send_event(w, STORE_EVENT_PUT, &e->lease, delay);
            seen = true;
        }
    }
    if (!seen && w->name[0]) {
        store_lease gone;
        store_lease_absent(&gone, w->ns, w->name);
        send_event(w, STORE_EVENT_DELETE, &gone, delay);
    }
    send_event(w, STORE_EVENT_SYNCED, NULL, delay);
}

/* The next live watch from *pp on, moving the dead ones it passes to
 * S.dead; NULL at the end. */
static struct store_watch *next_alive(struct store_watch **pp)
{
    while (*pp && !(*pp)->alive) {
        struct store_watch *w = *pp;
        *pp = w->next;
        w->next = S.dead;
        S.dead = w;
    }
    return *pp;
}

static void notify(store_event_type type, const store_lease *l)
{
    for (struct store_watch **pp = &S.watches, *w; (w = next_alive(pp)); pp = &w->next)
        if (matches(w, l) && view_runs(w->v))
            send_event(w, type, l, watch_delay());
}

static void relist(void *arg, uint64_t wgen, uint64_t b)
{
    (void)b;
    struct store_watch *w = arg;
    if (w->alive && w->wgen == wgen && view_runs(w->v))
        sync_watch(w, watch_delay());
}

/* A watch breaks: what it had in flight is lost; BROKEN, then after a
 * while the relist (the state now, SYNCED). */
static void restart_watch(struct store_watch *w)
{
    w->wgen++;
    w->last_at = W.now;
    send_event(w, STORE_EVENT_BROKEN, NULL, 1);
    sim_at(W.now + sim_between(10, 3000), relist, w, w->wgen, 0);
}

void sim_store_restart_watches(void)
{
    sim_trace("store: watches restart");
    for (struct store_watch **pp = &S.watches, *w; (w = next_alive(pp)); pp = &w->next)
        if (view_runs(w->v) && sim_chance(0.6))
            restart_watch(w);
}

static store_watch *v_watch(store *s, const char *ns, const char *name, store_watch_cb cb,
                            void *ctx)
{
    struct store_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->v = (sim_view *)s;
    snprintf(w->ns, sizeof w->ns, "%s", ns);
    snprintf(w->name, sizeof w->name, "%s", name ? name : "");
    w->cb = cb;
    w->ctx = ctx;
    w->alive = true;
    w->last_at = W.now;
    w->next = S.watches;
    S.watches = w;
    sync_watch(w, watch_delay());
    return w;
}

static void v_unwatch(store *s, store_watch *w)
{
    (void)s;
    if (w)
        w->alive = false;
}

/* ---------- requests ---------- */

static void fail(store_result *r, store_status st, const char *what)
{
    r->status = st;
    snprintf(r->message, sizeof r->message, "sim store: %s", what);
}

static void answer(void *arg, uint64_t a, uint64_t b)
{
    (void)a;
    (void)b;
    op *o = arg;
    if (!view_runs(o->v)) {
        free(o);
        return;
    }
    if (!sim_engine_runs(o->v->e)) {
        sim_at_owned(o->v->e->paused_until, answer, o, 0, 0);
        return;
    }
    o->v->reachable = o->res.status != STORE_UNAVAILABLE;
    loop_update_time(o->v->e->loop);
    sim_debug_engine(o->v->e);
    o->cb(o->ctx, &o->res);
    free(o);
}

static void count_write(const store_lease *l)
{
    W.store_writes++;
    int i = sim_lease_index(l->name);
    if (i >= 0)
        sim_check_write(i, l);
}

/* Another writer (an operator, a controller of coordinated leader
 * election) sets spec.preferredHolder of lease-i to holder ("": clears it),
 * as the real apiserver would take it: a new resourceVersion, a watch
 * event, the rest of the Lease as it was. Engines read it and never write
 * it (their updates keep it, apply). */
void sim_store_set_preferred(int i, const char *holder)
{
    char name[32];
    snprintf(name, sizeof name, "lease-%d", i);
    entry *e = find("default", name);
    if (!e || !e->exists)
        return;
    sim_trace("store: lease-%d preferredHolder %s", i, holder[0] ? holder : "cleared");
    snprintf(e->lease.preferred_holder, sizeof e->lease.preferred_holder, "%s", holder);
    snprintf(e->lease.resource_version, STORE_RV_MAX, "%lld", (long long)++S.revision);
    W.store_writes++;
    notify(STORE_EVENT_PUT, &e->lease);
}

/* Applies o to the Leases; returns the result the apiserver would answer. */
static store_result apply(op *o)
{
    store_result r = {0};
    entry *e = find(o->lease.ns, o->lease.name);
    bool exists = e && e->exists;
    switch (o->kind) {
    case OP_GET:
        if (!exists)
            fail(&r, STORE_NOT_FOUND, "not found");
        else
            r.lease = e->lease;
        break;
    case OP_CREATE:
        if (exists) {
            fail(&r, STORE_EXISTS, "already exists");
            break;
        }
        if (!e) {
            if (S.n_entries == MAX_ENTRIES) {
                fail(&r, STORE_INTERNAL, "too many Leases");
                break;
            }
            e = &S.entries[S.n_entries++];
        }
        e->exists = true;
        e->lease = o->lease;
        snprintf(e->lease.resource_version, STORE_RV_MAX, "%lld", (long long)++S.revision);
        snprintf(e->lease.uid, STORE_UID_MAX, "sim-%lld", (long long)S.revision);
        r.lease = e->lease;
        count_write(&e->lease);
        notify(STORE_EVENT_PUT, &e->lease);
        break;
    case OP_UPDATE:
        if (!exists) {
            fail(&r, STORE_NOT_FOUND, "not found");
            break;
        }
        if (strcmp(e->lease.resource_version, o->lease.resource_version) != 0) {
            fail(&r, STORE_CONFLICT, "the object has been modified");
            break;
        }
        {
            store_lease kept = e->lease;
            e->lease = o->lease;
            memcpy(e->lease.uid, kept.uid, sizeof kept.uid);
            memcpy(e->lease.preferred_holder, kept.preferred_holder, sizeof kept.preferred_holder);
            memcpy(e->lease.strategy, kept.strategy, sizeof kept.strategy);
            if (!o->lease.term_nonce[0])
                memcpy(e->lease.term_nonce, kept.term_nonce, sizeof kept.term_nonce);
        }
        snprintf(e->lease.resource_version, STORE_RV_MAX, "%lld", (long long)++S.revision);
        r.lease = e->lease;
        count_write(&e->lease);
        notify(STORE_EVENT_PUT, &e->lease);
        break;
    case OP_REMOVE:
        if (!exists) {
            fail(&r, STORE_NOT_FOUND, "not found");
            break;
        }
        if (o->rv[0] && strcmp(e->lease.resource_version, o->rv) != 0) {
            fail(&r, STORE_CONFLICT, "the object has been modified");
            break;
        }
        r.lease = e->lease;
        e->exists = false;
        W.store_writes++;
        notify(STORE_EVENT_DELETE, &r.lease);
        break;
    case OP_POD:
        if (o->pod_label)
            pod_label_apply(o->lease.name, o->key, o->has_value ? o->value : NULL);
        r.lease = o->lease;
        snprintf(r.pod_ip, sizeof r.pod_ip, "10.0.0.1");
        break;
    case OP_EVENT:
        r.lease = o->lease;
        snprintf(r.pod_ip, sizeof r.pod_ip, "10.0.0.1");
        break;
    }
    return r;
}

static void schedule_answer(op *o, int64_t at)
{
    if (at > o->deadline) {
        /* the client's timeout: unavailable, whatever became of it */
        store_result r = {0};
        fail(&r, STORE_UNAVAILABLE, "timeout");
        o->res = r;
        at = o->deadline;
    }
    sim_at_owned(at, answer, o, 0, 0);
}

static void arrive(void *arg, uint64_t a, uint64_t b)
{
    (void)a;
    (void)b;
    op *o = arg;
    int64_t back = latency();
    /* A Pod patch that reaches the apiserver after its caller gave up is
     * dropped, unless KL_SIM_LATE_POD_PATCHES: then it lands, late (the
     * apiserver may finish a request whose client is gone; a Lease write
     * landing late is refused by its compare-and-swap, a Pod label patch
     * is not). */
    if (o->kind == OP_POD && o->pod_label && W.now > o->deadline && !W.late_pod_patches)
        o->fault = FAULT_LOST_REQUEST;
    switch (o->fault) {
    case FAULT_LOST_REQUEST:
    case FAULT_5XX:
        fail(&o->res, STORE_UNAVAILABLE,
             o->fault == FAULT_5XX ? "503 (or 429): try again" : "the request was lost");
        break;
    case FAULT_409:
        fail(&o->res, STORE_CONFLICT, "409 nobody's write explains");
        break;
    case FAULT_LOST_ANSWER:
        apply(o);
        fail(&o->res, STORE_UNAVAILABLE, "the answer was lost");
        break;
    case FAULT_DUP:
        apply(o);
        o->res = apply(o); /* the retry's answer */
        break;
    default:
        o->res = apply(o);
    }
    schedule_answer(o, W.now + back);
}

static op *submit(sim_view *v, op_kind kind, const store_lease *l, const char *rv, int timeout_ms,
                  store_cb cb, void *ctx)
{
    op *o = calloc(1, sizeof *o);
    if (!o)
        abort();
    o->v = v;
    o->kind = kind;
    o->lease = *l;
    snprintf(o->rv, sizeof o->rv, "%s", rv ? rv : "");
    o->cb = cb;
    o->ctx = ctx;
    o->deadline = W.now + (timeout_ms > 0 ? timeout_ms : 10000);
    bool write = kind == OP_CREATE || kind == OP_UPDATE || kind == OP_REMOVE;
    if (S.level) {
        double p = 0.03 * S.level;
        if (sim_chance(p))
            o->fault = FAULT_5XX;
        else if (sim_chance(p / 2))
            o->fault = FAULT_LOST_REQUEST;
        else if (write && sim_chance(p))
            o->fault = FAULT_LOST_ANSWER;
        else if (write && kind != OP_REMOVE && sim_chance(p / 2))
            o->fault = FAULT_DUP;
        else if (write && kind == OP_UPDATE && sim_chance(p / 2))
            o->fault = FAULT_409;
    }
    if (o->fault == FAULT_LOST_REQUEST) {
        fail(&o->res, STORE_UNAVAILABLE, "the request was lost");
        schedule_answer(o, INT64_MAX);
        return o;
    }
    sim_at_owned(W.now + latency(), arrive, o, 0, 0);
    return o;
}

static void v_get(store *s, const char *ns, const char *name, int timeout_ms, store_cb cb,
                  void *ctx)
{
    store_lease l;
    store_lease_absent(&l, ns, name);
    submit((sim_view *)s, OP_GET, &l, NULL, timeout_ms, cb, ctx);
}

static void v_create(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx)
{
    submit((sim_view *)s, OP_CREATE, lease, NULL, timeout_ms, cb, ctx);
}

static void v_update(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx)
{
    submit((sim_view *)s, OP_UPDATE, lease, NULL, timeout_ms, cb, ctx);
}

static void v_remove(store *s, const char *ns, const char *name, const char *rv, int timeout_ms,
                     store_cb cb, void *ctx)
{
    store_lease l;
    store_lease_absent(&l, ns, name);
    submit((sim_view *)s, OP_REMOVE, &l, rv, timeout_ms, cb, ctx);
}

static void v_pod_label(store *s, const char *ns, const char *pod, const char *key,
                        const char *value, int timeout_ms, store_cb cb, void *ctx)
{
    store_lease l;
    store_lease_absent(&l, ns, pod);
    op *o = submit((sim_view *)s, OP_POD, &l, NULL, timeout_ms, cb, ctx);
    o->pod_label = true;
    o->has_value = value != NULL;
    snprintf(o->key, sizeof o->key, "%s", key);
    snprintf(o->value, sizeof o->value, "%s", value ? value : "");
}

static void v_pod_get(store *s, const char *ns, const char *pod, int timeout_ms, store_cb cb,
                      void *ctx)
{
    store_lease l;
    store_lease_absent(&l, ns, pod);
    submit((sim_view *)s, OP_POD, &l, NULL, timeout_ms, cb, ctx);
}

static void v_record_event(store *s, const store_lease_event *ev, int timeout_ms, store_cb cb,
                           void *ctx)
{
    store_lease l;
    store_lease_absent(&l, ev->lease.ns, ev->lease.name);
    submit((sim_view *)s, OP_EVENT, &l, NULL, timeout_ms, cb, ctx);
}

static bool v_reachable(store *s)
{
    return ((sim_view *)s)->reachable;
}

static void v_destroy(store *s)
{
    sim_store_view_dead(s);
}

static const store_ops sim_ops = {
    .get = v_get,
    .create = v_create,
    .update = v_update,
    .remove = v_remove,
    .watch = v_watch,
    .unwatch = v_unwatch,
    .pod_label = v_pod_label,
    .pod_get = v_pod_get,
    .record_event = v_record_event,
    .reachable = v_reachable,
    .destroy = v_destroy,
};

store *sim_store_view(sim_engine *e)
{
    sim_view *v = calloc(1, sizeof *v);
    if (!v)
        abort();
    v->base.ops = &sim_ops;
    v->base.kind = "sim";
    v->e = e;
    v->gen = e->gen;
    v->reachable = true;
    v->next = S.views;
    S.views = v;
    return &v->base;
}

/* The engine is gone: nothing reaches it any more (its answers, events and
 * watches die with it; the view itself is freed with the store). */
void sim_store_view_dead(store *s)
{
    if (!s)
        return;
    sim_view *v = (sim_view *)s;
    v->dead = true;
    for (struct store_watch **pp = &S.watches, *w; (w = next_alive(pp)); pp = &w->next)
        if (w->v == v)
            w->alive = false;
}

void sim_store_init(void)
{
    /* The one family the rule 9 check reads (given_up_total). */
    metrics_declare("kubelease_pod_label_given_up_total", METRICS_COUNTER,
                    "Leader label removals given up.", NULL, 0);
    memset(&S, 0, sizeof S);
    memset(pod_labels, 0, sizeof pod_labels);
    memset(pod_given_up, 0, sizeof pod_given_up);
}

void sim_store_free(void)
{
    for (int i = 0; i < 2; i++)
        for (struct store_watch *w = i ? S.dead : S.watches, *n; w; w = n) {
            n = w->next;
            free(w);
        }
    for (sim_view *v = S.views, *n; v; v = n) {
        n = v->next;
        free(v);
    }
    memset(&S, 0, sizeof S);
}
