/* The election engine. Everything below engine_* (public) runs on the loop
 * thread and is the only code that touches lease state.
 *
 * A lease_state exists for every Lease the engine follows: its last record
 * as seen through the store's watch, the monotonic time at which that record
 * last changed (observed time, as client-go judges expiry), the candidates
 * campaigning here, the holder watchers, and — when one of this engine's
 * candidates holds the Lease — the term.
 *
 * A term lives while its holder keeps confirming it. The engine renews the
 * Lease every retry period; each Confirm grants at most
 *   min(last renewal send time + renewDeadline, now + grant) - now
 * and granted_until remembers the latest such deadline. When granted_until
 * passes without a fresher Confirm (holder dead, frozen, or its stream gone),
 * the term ends and the Lease is released: nobody can still believe in it
 * (safety rule 3). A resignation releases at once. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/metrics.h"
#include "engine/engine.h"

#define N_BUCKETS 1024
/* namespace="...",lease="..." with every byte escaped at worst */
#define LABELS_MAX (2 * STORE_NS_MAX + 2 * STORE_NAME_MAX + 32)

typedef struct lease_state lease_state;
typedef struct pending_get pending_get;
typedef struct candidate candidate;
typedef struct watcher watcher;

struct candidate {
    candidate *next;      /* in lease_state.candidates */
    candidate *hash_next; /* in engine.campaigns */
    uint64_t id;
    lease_state *ls;
    engine_campaign_req req;
    engine_listener listener;
};

struct watcher {
    watcher *next;
    watcher *hash_next;
    uint64_t id;
    lease_state *ls;
    engine_listener listener;
    bool sent; /* the current state has been sent at least once */
    bool last_exists;
    char last_holder[STORE_HOLDER_MAX];
    int64_t last_epoch;
};

typedef struct term {
    candidate *owner; /* NULL once its stream is gone (waiting for granted_until) */
    char identity[STORE_HOLDER_MAX];
    int64_t epoch;
    int32_t lease_s, renew_s, retry_s;
    int64_t renewed_sent_ms; /* send time of the last successful write */
    int64_t granted_until_ms;
    bool renewing;       /* a renewal is in flight */
    bool ending;         /* over: waiting for the renewal in flight, or releasing */
    bool release_wanted; /* write a release once no renewal is in flight */
    loop_timer renew_timer;
    loop_timer guard_timer;  /* fires at granted_until / the renew deadline */
    int64_t renew_sent_ms;   /* send time of the renewal in flight */
    engine_done resign_done; /* a Resign waiting for the release to land */
    void *resign_ctx;
    /* The resourceVersion of this term's last successful write. Renewals and
     * the release are compare-and-swap on it, not on the latest record seen:
     * if another replica of the service took over the term (a resume there),
     * our writes fail instead of overwriting — or releasing — its term. */
    char rv[STORE_RV_MAX];
} term;

/* GetHolder waiting for a watch to sync, or for a consistent read. */
struct pending_get {
    struct pending_get *prev, *next; /* engine.gets: freed if the engine goes first */
    lease_state *ls;
    engine_done done;
    void *ctx;
};

struct lease_state {
    lease_state *hash_next;
    engine *e;
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX];
    store_watch *watch;
    bool synced;
    bool exists;
    store_lease record;
    int64_t observed_ms;   /* when record last changed, by our clock */
    int64_t vacant_ms;     /* when the Lease was last seen without a live holder; 0: held */
    int64_t transition_ms; /* when holder or epoch last changed */
    bool writing;          /* an acquisition is in flight: */
    struct {
        int64_t sent_ms;
        uint64_t campaign_id; /* the candidate it is for */
        bool resume;
    } acq;
    candidate *candidates;
    watcher *watchers;
    term *term;
    loop_timer expiry_timer;
    int64_t expiry_due_ms;
    loop_timer tick_timer; /* keep-alive to standbys */
    loop_timer retry_timer;
    int64_t idle_since_ms; /* when the sweep first found it idle; 0: in use */
};

struct engine {
    loop *loop;
    store *store;
    int64_t max_grant_ms;
    bool volatile_store;
    int64_t idle_forget_ms;
    loop_timer sweep_timer; /* runs while any lease is followed */
    int64_t started_ms;
    lease_state *leases[N_BUCKETS];
    candidate *campaigns[N_BUCKETS];
    watcher *watchers[N_BUCKETS];
    atomic_uint_fast64_t next_id;
    atomic_bool reachable;
    atomic_int unsynced;
    atomic_bool stopping;
    int n_candidates, n_watchers, n_leases; /* engine thread only, mirrored in metrics */
    struct pending_get *gets;               /* consistent reads in flight */
};

static void lease_labels(const lease_state *ls, char *out, size_t n);

static void update_gauges(engine *e)
{
    int active = 0;
    for (unsigned b = 0; b < N_BUCKETS; b++)
        for (lease_state *ls = e->leases[b]; ls; ls = ls->hash_next)
            active += ls->candidates != NULL;
    metrics_set("kubelease_elections_active", "", active);
    metrics_set("kubelease_candidates", "", e->n_candidates);
    metrics_set("kubelease_watchers", "", e->n_watchers);
}

/* ---------- small helpers ---------- */

static unsigned hash_str2(const char *a, const char *b)
{
    unsigned h = 2166136261u;
    for (; *a; a++)
        h = (h ^ (unsigned char)*a) * 16777619u;
    h = (h ^ '/') * 16777619u;
    for (; *b; b++)
        h = (h ^ (unsigned char)*b) * 16777619u;
    return h % N_BUCKETS;
}

/* The engine's time: its loop's (docs/design.md, rule 1: observed monotonic
 * time, never a Lease's wall-clock timestamps). */
static int64_t now_ms(const engine *e)
{
    return loop_now(e->loop);
}

static int64_t lease_timeout_ms(int32_t renew_s)
{
    /* A request may take at most half the renew deadline. */
    int64_t t = (int64_t)renew_s * 1000 / 2;
    return t < 500 ? 500 : t;
}

static void send_event(const engine_listener *l, const engine_event *ev)
{
    if (l->on_event)
        l->on_event(l->ctx, ev);
}

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

/* The holder as an observer should see it: "" when free or expired. */
static const char *live_holder(const lease_state *ls, int64_t now)
{
    if (!ls->exists || !ls->record.holder[0])
        return "";
    if (ls->term)
        return ls->record.holder;
    int64_t dur = (int64_t)ls->record.lease_duration_s * 1000;
    if (now - ls->observed_ms > dur)
        return "";
    return ls->record.holder;
}

static bool record_expired(const lease_state *ls, int64_t now)
{
    return !ls->record.holder[0] ||
           now - ls->observed_ms > (int64_t)ls->record.lease_duration_s * 1000;
}

static void lease_labels(const lease_state *ls, char *out, size_t n)
{
    char ns[2 * STORE_NS_MAX], name[2 * STORE_NAME_MAX];
    metrics_label_escape(ls->ns, ns, sizeof ns);
    metrics_label_escape(ls->name, name, sizeof name);
    snprintf(out, n, "namespace=\"%s\",lease=\"%s\"", ns, name);
}

/* ---------- lookup tables ---------- */

static const char *const lost_reasons[] = {"unspecified", "resigned", "renew_failed",
                                           "superseded",  "deleted",  "resume_failed",
                                           "shutdown",    "expired"};
#define N_LOST_REASONS (sizeof lost_reasons / sizeof lost_reasons[0])

static const char *lost_reason_name(engine_lost_reason r)
{
    return (unsigned)r < N_LOST_REASONS ? lost_reasons[r] : "unknown";
}

/* The labels of kubelease_terms_lost_total: the lease's and the reason. */
static void lost_labels(const char *lease, engine_lost_reason r, char *out, size_t n)
{
    snprintf(out, n, "%s,reason=\"%s\"", lease, lost_reason_name(r));
}

static lease_state *lease_find(engine *e, const char *ns, const char *name)
{
    for (lease_state *ls = e->leases[hash_str2(ns, name)]; ls; ls = ls->hash_next)
        if (strcmp(ls->ns, ns) == 0 && strcmp(ls->name, name) == 0)
            return ls;
    return NULL;
}

static void on_watch(void *ctx, store_event_type type, const store_lease *lease);
static void ensure_sweep(engine *e);

static lease_state *lease_get(engine *e, const char *ns, const char *name)
{
    lease_state *ls = lease_find(e, ns, name);
    if (ls)
        return ls;
    ls = calloc(1, sizeof *ls);
    if (!ls)
        return NULL;
    ls->e = e;
    loop_timer_init(e->loop, &ls->expiry_timer);
    loop_timer_init(e->loop, &ls->tick_timer);
    loop_timer_init(e->loop, &ls->retry_timer);
    copy_str(ls->ns, sizeof ls->ns, ns);
    copy_str(ls->name, sizeof ls->name, name);
    ls->watch = e->store->ops->watch(e->store, ns, name, on_watch, ls);
    if (!ls->watch) {
        free(ls);
        return NULL;
    }
    atomic_fetch_add(&e->unsynced, 1);
    unsigned h = hash_str2(ns, name);
    ls->hash_next = e->leases[h];
    e->leases[h] = ls;
    metrics_set("kubelease_leases_followed", "", ++e->n_leases);
    ensure_sweep(e);
    return ls;
}

static candidate **campaign_slot(engine *e, uint64_t id)
{
    candidate **p = &e->campaigns[id % N_BUCKETS];
    while (*p && (*p)->id != id)
        p = &(*p)->hash_next;
    return p;
}

static watcher **watcher_slot(engine *e, uint64_t id)
{
    watcher **p = &e->watchers[id % N_BUCKETS];
    while (*p && (*p)->id != id)
        p = &(*p)->hash_next;
    return p;
}

/* ---------- events to streams ---------- */

static void notify_candidate(candidate *c)
{
    lease_state *ls = c->ls;
    engine_event ev = {.kind = ENGINE_EVENT_CANDIDATE};
    copy_str(ev.holder, sizeof ev.holder, live_holder(ls, now_ms(ls->e)));
    ev.epoch = ls->exists ? ls->record.transitions : 0;
    send_event(&c->listener, &ev);
}

static void notify_standbys(lease_state *ls)
{
    for (candidate *c = ls->candidates; c; c = c->next)
        if (!ls->term || ls->term->owner != c)
            notify_candidate(c);
}

/* Sends the holder state to watchers whose view differs (all when force). */
static void notify_watchers(lease_state *ls, bool force)
{
    if (!ls->synced)
        return;
    const char *holder = live_holder(ls, now_ms(ls->e));
    int64_t epoch = ls->exists ? ls->record.transitions : 0;
    for (watcher *w = ls->watchers; w; w = w->next) {
        if (!force && w->sent && w->last_exists == ls->exists && w->last_epoch == epoch &&
            strcmp(w->last_holder, holder) == 0)
            continue;
        w->sent = true;
        w->last_exists = ls->exists;
        w->last_epoch = epoch;
        copy_str(w->last_holder, sizeof w->last_holder, holder);
        engine_event ev = {.kind = ENGINE_EVENT_HOLDER, .exists = ls->exists, .epoch = epoch};
        copy_str(ev.holder, sizeof ev.holder, holder);
        send_event(&w->listener, &ev);
    }
}

/* Removes a candidate, sending Lost (when reason != 0) and closing it. */
static void candidate_end(candidate *c, engine_lost_reason reason, int64_t epoch, const char *msg)
{
    lease_state *ls = c->ls;
    for (candidate **p = &ls->candidates; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            break;
        }
    }
    candidate **slot = campaign_slot(ls->e, c->id);
    if (*slot == c)
        *slot = c->hash_next;
    if (ls->term && ls->term->owner == c)
        ls->term->owner = NULL;
    if (reason != ENGINE_LOST_UNSPECIFIED) {
        engine_event ev = {.kind = ENGINE_EVENT_LOST, .reason = reason, .epoch = epoch};
        copy_str(ev.message, sizeof ev.message, msg);
        send_event(&c->listener, &ev);
    }
    if (c->listener.on_close)
        c->listener.on_close(c->listener.ctx);
    free(c);
    ls->e->n_candidates--;
    update_gauges(ls->e);
}

/* ---------- terms ---------- */

static void try_acquire(lease_state *ls);
static void term_schedule_guard(lease_state *ls);
static void term_finish(lease_state *ls);

static int64_t e_grant_ms(const engine *e, int32_t retry_s)
{
    return e->max_grant_ms > 0 ? e->max_grant_ms : (int64_t)retry_s * 1000;
}

static int64_t grant_ms(const engine *e, const term *t)
{
    return e_grant_ms(e, t->retry_s);
}

/* Validity the engine may grant now (rule 3), 0 when none. */
static int64_t term_valid_for(const engine *e, const term *t, int64_t now)
{
    int64_t until = t->renewed_sent_ms + (int64_t)t->renew_s * 1000;
    int64_t v = until - now;
    int64_t g = grant_ms(e, t);
    if (v > g)
        v = g;
    return v > 0 ? v : 0;
}

/* Records a grant and returns its validity (0: the term cannot be vouched for). */
static int64_t term_grant(lease_state *ls, int64_t now)
{
    term *t = ls->term;
    int64_t v = term_valid_for(ls->e, t, now);
    if (v > 0 && now + v > t->granted_until_ms) {
        t->granted_until_ms = now + v;
        term_schedule_guard(ls);
    }
    return v;
}

/* released: the release write landed. */
static void term_free(lease_state *ls, bool released)
{
    term *t = ls->term;
    if (!t)
        return;
    if (t->resign_done) {
        engine_reply r = {.code = ENGINE_OK, .released = released, .epoch = t->epoch};
        t->resign_done(t->resign_ctx, &r);
    }
    loop_timer_stop(&t->renew_timer);
    loop_timer_stop(&t->guard_timer);
    ls->term = NULL;
    free(t);
}

static void release_done(void *ctx, const store_result *r);

/* Ends the term: tells its owner why, and releases the Lease when release is
 * true (only once nobody can believe in the term any more, or on resign). */
static void term_end(lease_state *ls, engine_lost_reason reason, const char *msg, bool release)
{
    term *t = ls->term;
    if (!t || t->ending)
        return;
    log_event(reason == ENGINE_LOST_RESIGNED ? LOG_INFO : LOG_WARN, "term_lost",
              "ns=%s lease=%s identity=%s epoch=%lld reason=%s released=%d msg=%s", ls->ns,
              ls->name, log_q(t->identity), (long long)t->epoch, lost_reason_name(reason),
              (int)release, log_q(msg));
    char labels[LABELS_MAX], with_reason[LABELS_MAX + 64];
    lease_labels(ls, labels, sizeof labels);
    lost_labels(labels, reason, with_reason, sizeof with_reason);
    metrics_add("kubelease_terms_lost_total", with_reason, 1);
    metrics_set("kubelease_leader", labels, 0);
    ls->vacant_ms = now_ms(ls->e);
    if (t->owner)
        candidate_end(t->owner, reason, t->epoch, msg);
    loop_timer_stop(&t->renew_timer);
    loop_timer_stop(&t->guard_timer);
    t->ending = true;
    t->release_wanted = release;
    if (!t->renewing)
        term_finish(ls);
}

/* The second half of term_end, once no renewal of the term is in flight:
 * release the Lease if asked and it is still this term's, else forget it. */
static void term_finish(lease_state *ls)
{
    term *t = ls->term;
    if (!t->release_wanted || !ls->exists || strcmp(ls->record.holder, t->identity) != 0 ||
        ls->record.transitions != t->epoch) {
        term_free(ls, false);
        try_acquire(ls);
        return;
    }
    /* Release as client-go does: empty holder, leaseDurationSeconds 1. */
    store_lease rel = ls->record;
    copy_str(rel.resource_version, sizeof rel.resource_version, t->rv);
    rel.transitions = t->epoch;
    rel.holder[0] = '\0';
    rel.lease_duration_s = 1;
    rel.acquire_time_us = rel.renew_time_us = wall_us();
    ls->e->store->ops->update(ls->e->store, &rel, (int)lease_timeout_ms(t->renew_s), release_done,
                              ls);
}

/* True when resourceVersion a is newer than b. Kubernetes calls them opaque,
 * but both stores (etcd revisions, the memory store's counter) use decimal
 * integers that only grow, as client-go's watch cache assumes too; anything
 * else is compared for inequality only. The watch can lag behind the
 * responses to our own writes, so an event may be older than the record we
 * already hold: it must not move the state backwards. */
static bool rv_newer(const char *a, const char *b)
{
    char *end_a, *end_b;
    errno = 0;
    unsigned long long x = strtoull(a, &end_a, 10), y = strtoull(b, &end_b, 10);
    if (errno || !*a || !*b || *end_a || *end_b)
        return strcmp(a, b) != 0;
    return x > y;
}

/* Adopts a record written by this engine (or read back) as the latest state. */
static void adopt_record(lease_state *ls, const store_lease *rec, int64_t now)
{
    bool changed_holder = !ls->exists || strcmp(ls->record.holder, rec->holder) != 0 ||
                          ls->record.transitions != rec->transitions;
    if (!ls->exists || strcmp(ls->record.resource_version, rec->resource_version) != 0)
        ls->observed_ms = now;
    if (changed_holder)
        ls->transition_ms = now;
    ls->record = *rec;
    ls->exists = true;
}

static void release_done(void *ctx, const store_result *r)
{
    lease_state *ls = ctx;
    if (r->status == STORE_OK)
        adopt_record(ls, &r->lease, now_ms(ls->e));
    else
        log_event(LOG_WARN, "release_failed", "ns=%s lease=%s status=%s msg=%s", ls->ns, ls->name,
                  store_status_name(r->status), log_q(r->message));
    term_free(ls, r->status == STORE_OK);
    notify_watchers(ls, false);
    notify_standbys(ls);
    try_acquire(ls);
}

static void guard_fire(void *arg)
{
    lease_state *ls = arg;
    term *t = ls->term;
    int64_t now = now_ms(ls->e);
    int64_t renew_deadline = t->renewed_sent_ms + (int64_t)t->renew_s * 1000;
    if (now >= renew_deadline) {
        term_end(ls, ENGINE_LOST_RENEW_FAILED,
                 "the Lease could not be renewed within the renew deadline", true);
    } else if (now >= t->granted_until_ms) {
        term_end(ls, ENGINE_LOST_EXPIRED,
                 t->owner ? "the term was not confirmed in time" : "the holder's stream is gone",
                 true);
    } else {
        term_schedule_guard(ls);
    }
}

static void term_schedule_guard(lease_state *ls)
{
    term *t = ls->term;
    int64_t renew_deadline = t->renewed_sent_ms + (int64_t)t->renew_s * 1000;
    int64_t due = t->granted_until_ms < renew_deadline ? t->granted_until_ms : renew_deadline;
    loop_timer_start(&t->guard_timer, due, guard_fire, ls);
}

static void renew_fire(void *arg);

static void schedule_renew(lease_state *ls, int64_t due)
{
    term *t = ls->term;
    loop_timer_start(&t->renew_timer, due, renew_fire, ls);
}

/* Tells the holder the term goes on. A heartbeat reports what remains of
 * the validity already granted and never extends it: only Confirm does, so
 * that a holder that stopped confirming (dead or frozen) loses the term even
 * while its socket still accepts data. */
static void heartbeat(lease_state *ls)
{
    term *t = ls->term;
    if (!t || !t->owner)
        return;
    int64_t left = t->granted_until_ms - now_ms(ls->e);
    engine_event ev = {.kind = ENGINE_EVENT_HEARTBEAT, .epoch = t->epoch};
    ev.valid_for_ms = left > 0 ? left : 0;
    send_event(&t->owner->listener, &ev);
}

static void renew_done(void *ctx, const store_result *r)
{
    lease_state *ls = ctx;
    term *t = ls->term;
    int64_t sent = t->renew_sent_ms;
    /* A term is never freed while its renewal is in flight (term_end waits). */
    t->renewing = false;
    int64_t now = now_ms(ls->e);
    if (t->ending) {
        if (r->status == STORE_OK) {
            copy_str(t->rv, sizeof t->rv, r->lease.resource_version);
            adopt_record(ls, &r->lease, now);
        } else if (r->status == STORE_CONFLICT || r->status == STORE_NOT_FOUND) {
            t->release_wanted = false; /* no longer ours */
        }
        term_finish(ls);
        return;
    }
    if (r->status == STORE_OK) {
        metrics_add("kubelease_renewals_total", "", 1);
        copy_str(t->rv, sizeof t->rv, r->lease.resource_version);
        t->renewed_sent_ms = sent;
        adopt_record(ls, &r->lease, now);
        term_schedule_guard(ls);
        schedule_renew(ls, sent + (int64_t)t->retry_s * 1000);
        heartbeat(ls);
        return;
    }
    if (r->status == STORE_CONFLICT || r->status == STORE_NOT_FOUND) {
        /* Someone else wrote the Lease: the term is over, and the Lease is
         * no longer ours to release. */
        term_end(ls, r->status == STORE_CONFLICT ? ENGINE_LOST_SUPERSEDED : ENGINE_LOST_DELETED,
                 r->message, false);
        return;
    }
    log_event(LOG_WARN, "renew_failed", "ns=%s lease=%s status=%s msg=%s", ls->ns, ls->name,
              store_status_name(r->status), log_q(r->message));
    char st[64];
    snprintf(st, sizeof st, "status=\"%s\"", store_status_name(r->status));
    metrics_add("kubelease_renewal_failures_total", st, 1);
    /* Retry soon; the guard ends the term at the renew deadline. */
    int64_t retry = (int64_t)t->retry_s * 1000 / 2;
    schedule_renew(ls, now + (retry < 200 ? 200 : retry));
}

static void renew_fire(void *arg)
{
    lease_state *ls = arg;
    term *t = ls->term;
    /* A term whose stream is gone is not renewed: it ends at granted_until. */
    if (t->renewing || t->ending || !t->owner)
        return;
    t->renew_sent_ms = now_ms(ls->e);
    t->renewing = true;
    store_lease rec = ls->record;
    copy_str(rec.resource_version, sizeof rec.resource_version, t->rv);
    copy_str(rec.holder, sizeof rec.holder, t->identity);
    rec.transitions = t->epoch;
    rec.renew_time_us = wall_us();
    rec.lease_duration_s = t->lease_s;
    ls->e->store->ops->update(ls->e->store, &rec, (int)lease_timeout_ms(t->renew_s), renew_done,
                              ls);
}

/* Starts a term for c from a record it has just written (sent at sent_ms). */
static void term_start(lease_state *ls, candidate *c, const store_lease *rec, int64_t sent_ms,
                       bool resumed)
{
    term *t = calloc(1, sizeof *t);
    if (!t) {
        candidate_end(c, ENGINE_LOST_RENEW_FAILED, 0, "out of memory");
        return;
    }
    loop_timer_init(ls->e->loop, &t->renew_timer);
    loop_timer_init(ls->e->loop, &t->guard_timer);
    t->owner = c;
    copy_str(t->identity, sizeof t->identity, c->req.identity);
    t->epoch = rec->transitions;
    t->lease_s = c->req.lease_duration_s;
    t->renew_s = c->req.renew_deadline_s;
    t->retry_s = c->req.retry_period_s;
    t->renewed_sent_ms = sent_ms;
    copy_str(t->rv, sizeof t->rv, rec->resource_version);
    ls->term = t;
    int64_t now = now_ms(ls->e);
    adopt_record(ls, rec, now);
    engine_event ev = {.kind = ENGINE_EVENT_ELECTED, .epoch = t->epoch, .resumed = resumed};
    ev.valid_for_ms = term_grant(ls, now);
    if (ev.valid_for_ms <= 0) {
        term_end(ls, ENGINE_LOST_RENEW_FAILED,
                 "the acquisition took longer than the renew deadline", true);
        return;
    }
    log_event(LOG_INFO, resumed ? "term_resumed" : "term_started",
              "ns=%s lease=%s identity=%s epoch=%lld valid_for_ms=%lld", ls->ns, ls->name,
              log_q(t->identity), (long long)t->epoch, (long long)ev.valid_for_ms);
    send_event(&c->listener, &ev);
    char labels[LABELS_MAX];
    lease_labels(ls, labels, sizeof labels);
    metrics_add("kubelease_terms_started_total", labels, 1);
    metrics_set("kubelease_leader", labels, 1);
    if (ls->vacant_ms && !resumed)
        metrics_observe("kubelease_failover_seconds", "", (double)(now - ls->vacant_ms) / 1000.0);
    ls->vacant_ms = 0;
    schedule_renew(ls, sent_ms + (int64_t)t->retry_s * 1000);
    notify_standbys(ls);
    notify_watchers(ls, false);
}

/* ---------- acquisition ---------- */

static void retry_fire(void *arg)
{
    try_acquire(arg);
}

/* An acquisition whose candidate left while it was being written: nobody
 * was told it was elected, so the Lease is given back at once, through the
 * same release path as a term's. */
static void release_unclaimed(lease_state *ls, const store_lease *rec)
{
    adopt_record(ls, rec, now_ms(ls->e));
    term *t = ls->term ? NULL : calloc(1, sizeof *t);
    if (!t)
        return; /* out of memory (or a term exists): the Lease expires by itself */
    loop_timer_init(ls->e->loop, &t->renew_timer);
    loop_timer_init(ls->e->loop, &t->guard_timer);
    copy_str(t->identity, sizeof t->identity, rec->holder);
    copy_str(t->rv, sizeof t->rv, rec->resource_version);
    t->epoch = rec->transitions;
    t->renew_s = t->retry_s = t->lease_s = 2;
    t->ending = t->release_wanted = true;
    ls->term = t;
    term_finish(ls);
}

static void acquire_done(void *ctx, const store_result *r)
{
    lease_state *ls = ctx;
    ls->writing = false;
    log_event(LOG_DEBUG, "acquire_done", "ns=%s lease=%s status=%s rv=%s", ls->ns, ls->name,
              store_status_name(r->status),
              r->status == STORE_OK ? r->lease.resource_version : "-");
    candidate *c = *campaign_slot(ls->e, ls->acq.campaign_id);
    bool resume = ls->acq.resume;
    int64_t sent = ls->acq.sent_ms;
    if (r->status == STORE_OK) {
        if (!c || ls->term) {
            release_unclaimed(ls, &r->lease);
            return;
        }
        term_start(ls, c, &r->lease, sent, resume);
        return;
    }
    if (resume && c) {
        candidate_end(c, ENGINE_LOST_RESUME_FAILED, 0, r->message);
        return;
    }
    if (r->status == STORE_CONFLICT || r->status == STORE_EXISTS) {
        /* Lost the race; the watch brings the winner's record. */
        return;
    }
    log_event(LOG_WARN, "acquire_failed", "ns=%s lease=%s status=%s msg=%s", ls->ns, ls->name,
              store_status_name(r->status), log_q(r->message));
    if (!loop_timer_active(&ls->retry_timer) && c) {
        int64_t retry = (int64_t)c->req.retry_period_s * 1000;
        loop_timer_start(&ls->retry_timer, now_ms(ls->e) + retry, retry_fire, ls);
    }
}

static void expiry_fire(void *arg)
{
    lease_state *ls = arg;
    if (!ls->vacant_ms)
        ls->vacant_ms = now_ms(ls->e);
    notify_watchers(ls, false);
    notify_standbys(ls);
    try_acquire(ls);
}

static void schedule_expiry(lease_state *ls)
{
    if (!ls->exists || !ls->record.holder[0] || ls->term)
        return;
    int64_t due = ls->observed_ms + (int64_t)ls->record.lease_duration_s * 1000 + 1;
    if (loop_timer_active(&ls->expiry_timer) && ls->expiry_due_ms == due)
        return;
    ls->expiry_due_ms = due;
    loop_timer_start(&ls->expiry_timer, due, expiry_fire, ls);
}

static void write_for(lease_state *ls, candidate *c, bool create, const store_lease *rec,
                      bool resume)
{
    ls->acq.campaign_id = c->id;
    ls->acq.resume = resume;
    ls->acq.sent_ms = now_ms(ls->e);
    ls->writing = true;
    int timeout = (int)lease_timeout_ms(c->req.renew_deadline_s);
    log_event(LOG_DEBUG, "acquire", "ns=%s lease=%s holder=%s epoch=%lld rv=%s create=%d", ls->ns,
              ls->name, log_q(rec->holder), (long long)rec->transitions, rec->resource_version,
              (int)create);
    if (create)
        ls->e->store->ops->create(ls->e->store, rec, timeout, acquire_done, ls);
    else
        ls->e->store->ops->update(ls->e->store, rec, timeout, acquire_done, ls);
}

/* Starts an acquisition for the first waiting candidate when the Lease is
 * free, absent, or expired by observed time. */
static void try_acquire(lease_state *ls)
{
    if (!ls->synced || ls->term || ls->writing || atomic_load(&ls->e->stopping))
        return;
    candidate *c = ls->candidates;
    while (c && c->req.resume_epoch != 0)
        c = c->next; /* resumes are handled when they arrive */
    if (!c)
        return;
    int64_t now = now_ms(ls->e);
    store_lease rec = {0};
    copy_str(rec.ns, sizeof rec.ns, ls->ns);
    copy_str(rec.name, sizeof rec.name, ls->name);
    copy_str(rec.holder, sizeof rec.holder, c->req.identity);
    rec.lease_duration_s = c->req.lease_duration_s;
    rec.acquire_time_us = rec.renew_time_us = wall_us();
    if (!ls->exists) {
        int64_t grant = e_grant_ms(ls->e, c->req.retry_period_s);
        if (ls->e->volatile_store && now < ls->e->started_ms + grant) {
            if (!loop_timer_active(&ls->retry_timer))
                loop_timer_start(&ls->retry_timer, ls->e->started_ms + grant, retry_fire, ls);
            return;
        }
        rec.transitions = 1;
        write_for(ls, c, true, &rec, false);
        return;
    }
    if (!record_expired(ls, now)) {
        schedule_expiry(ls);
        return;
    }
    /* Every new term gets a larger epoch (rule 4), even for the same identity. */
    rec.transitions = ls->record.transitions + 1;
    copy_str(rec.resource_version, sizeof rec.resource_version, ls->record.resource_version);
    write_for(ls, c, false, &rec, false);
}

/* A candidate asks to resume its term at epoch: reattach to our term, or
 * take over a term another replica of the service was renewing. */
static void try_resume(lease_state *ls, candidate *c)
{
    int64_t now = now_ms(ls->e);
    term *t = ls->term;
    if (t && !t->ending && strcmp(t->identity, c->req.identity) == 0 &&
        t->epoch == c->req.resume_epoch && term_valid_for(ls->e, t, now) > 0) {
        if (t->owner && t->owner != c)
            candidate_end(t->owner, ENGINE_LOST_EXPIRED, t->epoch,
                          "replaced by a resumed campaign");
        t->owner = c;
        c->req.resume_epoch = 0;
        engine_event ev = {.kind = ENGINE_EVENT_ELECTED, .epoch = t->epoch, .resumed = true};
        ev.valid_for_ms = term_grant(ls, now);
        log_event(LOG_INFO, "term_resumed", "ns=%s lease=%s identity=%s epoch=%lld", ls->ns,
                  ls->name, log_q(t->identity), (long long)t->epoch);
        send_event(&c->listener, &ev);
        return;
    }
    if (!t && ls->exists && strcmp(ls->record.holder, c->req.identity) == 0 &&
        ls->record.transitions == c->req.resume_epoch && !record_expired(ls, now) && !ls->writing) {
        /* Renew the record as ours; the CAS fails if anyone wrote since. */
        store_lease rec = ls->record;
        rec.renew_time_us = wall_us();
        rec.lease_duration_s = c->req.lease_duration_s;
        c->req.resume_epoch = 0;
        write_for(ls, c, false, &rec, true);
        return;
    }
    if (ls->writing)
        return; /* decided when the write in flight completes */
    candidate_end(c, ENGINE_LOST_RESUME_FAILED, c->req.resume_epoch,
                  "the term to resume is over (the Lease has another holder or epoch, or expired)");
}

static void process_resumes(lease_state *ls)
{
    for (candidate *c = ls->candidates, *next; c; c = next) {
        next = c->next;
        if (c->req.resume_epoch != 0)
            try_resume(ls, c);
    }
}

/* ---------- the watch ---------- */

static void on_watch(void *ctx, store_event_type type, const store_lease *lease)
{
    lease_state *ls = ctx;
    engine *e = ls->e;
    int64_t now = now_ms(ls->e);
    if (log_enabled(LOG_DEBUG))
        log_event(LOG_DEBUG, "watch_event", "ns=%s lease=%s type=%d holder=%s epoch=%lld rv=%s",
                  ls->ns, ls->name, (int)type, lease ? log_q(lease->holder) : "-",
                  lease ? (long long)lease->transitions : 0LL,
                  lease ? lease->resource_version : "-");
    switch (type) {
    case STORE_EVENT_BROKEN:
        atomic_store(&e->reachable, false);
        return;
    case STORE_EVENT_SYNCED:
        atomic_store(&e->reachable, true);
        if (!ls->synced) {
            ls->synced = true;
            atomic_fetch_sub(&e->unsynced, 1);
            notify_watchers(ls, true);
            notify_standbys(ls);
        }
        process_resumes(ls);
        try_acquire(ls);
        return;
    case STORE_EVENT_DELETE:
        /* A deletion older than the record we hold (we created it again
         * since) is history. */
        if (ls->exists && lease->resource_version[0] &&
            rv_newer(ls->record.resource_version, lease->resource_version))
            return;
        if (ls->exists) {
            ls->exists = false;
            ls->transition_ms = now;
            memset(&ls->record, 0, sizeof ls->record);
            loop_timer_stop(&ls->expiry_timer);
            if (ls->term && !ls->term->ending)
                term_end(ls, ENGINE_LOST_DELETED, "the Lease was deleted", false);
            notify_watchers(ls, false);
            notify_standbys(ls);
        }
        try_acquire(ls);
        return;
    case STORE_EVENT_PUT:
        break;
    }
    if (ls->exists && !rv_newer(lease->resource_version, ls->record.resource_version))
        return; /* seen already, or older than what our own write returned */
    adopt_record(ls, lease, now);
    if (!lease->holder[0] && !ls->vacant_ms)
        ls->vacant_ms = now;
    term *t = ls->term;
    if (t && !t->ending &&
        (strcmp(lease->holder, t->identity) != 0 || lease->transitions != t->epoch)) {
        term_end(ls, ENGINE_LOST_SUPERSEDED, "another writer changed the Lease", false);
    }
    notify_watchers(ls, false);
    if (!ls->term)
        notify_standbys(ls);
    schedule_expiry(ls);
    process_resumes(ls);
    try_acquire(ls);
}

/* ---------- keep-alive to standbys ---------- */

static void tick_fire(void *arg)
{
    lease_state *ls = arg;
    int32_t period = 0;
    for (candidate *c = ls->candidates; c; c = c->next) {
        if (ls->term && ls->term->owner == c)
            continue;
        notify_candidate(c);
        if (!period || c->req.retry_period_s < period)
            period = c->req.retry_period_s;
    }
    if (period)
        loop_timer_start(&ls->tick_timer, now_ms(ls->e) + (int64_t)period * 1000, tick_fire, ls);
}

static void ensure_tick(lease_state *ls, int32_t period_s)
{
    if (!loop_timer_active(&ls->tick_timer))
        loop_timer_start(&ls->tick_timer, now_ms(ls->e) + (int64_t)period_s * 1000, tick_fire, ls);
}

/* ---------- forgetting idle leases ---------- */

/* Nothing here depends on the lease: no campaign, watch, term, acquisition
 * or read in flight. Its cached record only serves GetHolder, and a fresh
 * watch rebuilds it (observed time restarts then, which only delays an
 * expiry judgement: the safe side). */
static bool lease_idle(const lease_state *ls)
{
    if (ls->candidates || ls->watchers || ls->term || ls->writing)
        return false;
    for (const pending_get *p = ls->e->gets; p; p = p->next)
        if (p->ls == ls)
            return false;
    return true;
}

/* Stops what runs for an unused lease_state and frees it (the caller has
 * unlinked it, or is freeing the whole engine). */
static void lease_drop(lease_state *ls)
{
    engine *e = ls->e;
    loop_timer_stop(&ls->expiry_timer);
    loop_timer_stop(&ls->tick_timer);
    loop_timer_stop(&ls->retry_timer);
    e->store->ops->unwatch(e->store, ls->watch);
    free(ls);
}

static void lease_forget(lease_state *ls)
{
    engine *e = ls->e;
    for (lease_state **p = &e->leases[hash_str2(ls->ns, ls->name)]; *p; p = &(*p)->hash_next) {
        if (*p == ls) {
            *p = ls->hash_next;
            break;
        }
    }
    if (!ls->synced)
        atomic_fetch_sub(&e->unsynced, 1);
    /* Its series go too, so that they follow the leases in use. */
    char labels[LABELS_MAX], with_reason[LABELS_MAX + 64];
    lease_labels(ls, labels, sizeof labels);
    metrics_remove("kubelease_leader", labels);
    metrics_remove("kubelease_terms_started_total", labels);
    for (unsigned r = 0; r < N_LOST_REASONS; r++) {
        lost_labels(labels, (engine_lost_reason)r, with_reason, sizeof with_reason);
        metrics_remove("kubelease_terms_lost_total", with_reason);
    }
    metrics_set("kubelease_leases_followed", "", --e->n_leases);
    log_event(LOG_DEBUG, "lease_forgotten", "ns=%s lease=%s idle_ms=%lld", ls->ns, ls->name,
              (long long)(now_ms(ls->e) - ls->idle_since_ms));
    lease_drop(ls);
}

static void sweep_fire(void *arg)
{
    engine *e = arg;
    int64_t now = now_ms(e);
    for (unsigned b = 0; b < N_BUCKETS; b++) {
        for (lease_state *ls = e->leases[b], *next; ls; ls = next) {
            next = ls->hash_next;
            if (!lease_idle(ls))
                ls->idle_since_ms = 0;
            else if (!ls->idle_since_ms)
                ls->idle_since_ms = now;
            else if (now - ls->idle_since_ms >= e->idle_forget_ms)
                lease_forget(ls);
        }
    }
    ensure_sweep(e);
}

/* Sweeps every eighth of the idle period while any lease is followed, so an
 * idle lease is forgotten between one and one and an eighth idle periods
 * after its last use. */
static void ensure_sweep(engine *e)
{
    if (!loop_timer_active(&e->sweep_timer) && e->n_leases > 0 && !atomic_load(&e->stopping))
        loop_timer_start(&e->sweep_timer, now_ms(e) + (e->idle_forget_ms + 7) / 8, sweep_fire, e);
}

/* ---------- commands posted from other threads ---------- */

typedef enum cmd_kind {
    CMD_CAMPAIGN,
    CMD_DETACH,
    CMD_CONFIRM,
    CMD_RESIGN,
    CMD_GET,
    CMD_LIST,
    CMD_WATCH,
    CMD_UNWATCH,
    CMD_STOP,
} cmd_kind;

typedef struct cmd {
    engine *e;
    cmd_kind kind;
    uint64_t id;
    engine_campaign_req req; /* ns, name, identity used by every kind */
    int64_t epoch;
    bool consistent;
    engine_listener listener;
    engine_done done;
    void *ctx;
} cmd;

static void reply_code(cmd *k, engine_code code, const char *msg)
{
    engine_reply r = {.code = code};
    copy_str(r.message, sizeof r.message, msg);
    k->done(k->ctx, &r);
}

static void do_campaign(cmd *k)
{
    engine *e = k->e;
    candidate *c = calloc(1, sizeof *c);
    lease_state *ls = c ? lease_get(e, k->req.ns, k->req.name) : NULL;
    if (!ls) {
        free(c);
        engine_event ev = {.kind = ENGINE_EVENT_LOST, .reason = ENGINE_LOST_UNSPECIFIED};
        copy_str(ev.message, sizeof ev.message, "out of memory");
        send_event(&k->listener, &ev);
        if (k->listener.on_close)
            k->listener.on_close(k->listener.ctx);
        return;
    }
    c->id = k->id;
    c->ls = ls;
    c->req = k->req;
    c->listener = k->listener;
    candidate **slot = campaign_slot(e, c->id);
    c->hash_next = *slot;
    *slot = c;
    candidate **tail = &ls->candidates;
    bool duplicate = false;
    for (; *tail; tail = &(*tail)->next)
        if (strcmp((*tail)->req.identity, c->req.identity) == 0)
            duplicate = true;
    /* A resume may replace a stream the service has not yet seen break. */
    if (c->req.resume_epoch != 0)
        duplicate = false;
    *tail = c;
    e->n_candidates++;
    update_gauges(e);
    if (duplicate) {
        candidate_end(c, ENGINE_LOST_EXPIRED, 0,
                      "already campaigning: another live campaign has this lease and identity");
        return;
    }
    log_event(LOG_INFO, "campaign", "ns=%s lease=%s identity=%s resume_epoch=%lld", ls->ns,
              ls->name, log_q(c->req.identity), (long long)c->req.resume_epoch);
    ensure_tick(ls, c->req.retry_period_s);
    if (c->req.resume_epoch != 0) {
        if (ls->synced)
            try_resume(ls, c);
        return;
    }
    if (ls->synced)
        notify_candidate(c);
    try_acquire(ls);
}

static void do_detach(cmd *k)
{
    candidate *c = *campaign_slot(k->e, k->id);
    if (!c)
        return;
    lease_state *ls = c->ls;
    log_event(LOG_INFO, "client_gone", "ns=%s lease=%s identity=%s", ls->ns, ls->name,
              log_q(c->req.identity));
    /* If it led, the term stays until granted_until passes (the guard timer
     * then releases), unless the client resumes before that. */
    candidate_end(c, ENGINE_LOST_UNSPECIFIED, 0, NULL);
}

static term *term_of(lease_state *ls, const char *identity)
{
    if (!ls || !ls->term || ls->term->ending || strcmp(ls->term->identity, identity) != 0)
        return NULL;
    return ls->term;
}

static void do_confirm(cmd *k)
{
    lease_state *ls = lease_find(k->e, k->req.ns, k->req.name);
    term *t = term_of(ls, k->req.identity);
    if (!t) {
        bool campaigning = false;
        for (candidate *c = ls ? ls->candidates : NULL; c; c = c->next)
            campaigning |= strcmp(c->req.identity, k->req.identity) == 0;
        reply_code(k, campaigning ? ENGINE_FAILED_PRECONDITION : ENGINE_NOT_FOUND,
                   campaigning ? "not the holder: the term is over"
                               : "no campaign for this lease and identity");
        return;
    }
    if (t->epoch != k->epoch || !t->owner) {
        reply_code(k, ENGINE_FAILED_PRECONDITION,
                   t->epoch != k->epoch ? "epoch mismatch: that term is over"
                                        : "the campaign stream is gone; resume it first");
        return;
    }
    engine_reply r = {.code = ENGINE_OK, .epoch = t->epoch};
    r.valid_for_ms = term_grant(ls, now_ms(ls->e));
    if (r.valid_for_ms <= 0) {
        reply_code(k, ENGINE_FAILED_PRECONDITION, "the term could not be renewed in time");
        return;
    }
    k->done(k->ctx, &r);
}

static void do_resign(cmd *k)
{
    lease_state *ls = lease_find(k->e, k->req.ns, k->req.name);
    engine_reply r = {.code = ENGINE_OK};
    if (!ls) {
        k->done(k->ctx, &r);
        return;
    }
    term *t = term_of(ls, k->req.identity);
    for (candidate *c = ls->candidates, *next; c; c = next) {
        next = c->next;
        if (strcmp(c->req.identity, k->req.identity) == 0 && (!t || t->owner != c))
            candidate_end(c, ENGINE_LOST_RESIGNED, 0, "resigned");
    }
    if (t) {
        /* Answered once the release has landed (or could not be written). */
        t->resign_done = k->done;
        t->resign_ctx = k->ctx;
        term_end(ls, ENGINE_LOST_RESIGNED, "resigned", true);
        return;
    }
    k->done(k->ctx, &r);
}

static void fill_holder_reply(lease_state *ls, engine_reply *r, int64_t now)
{
    r->code = ENGINE_OK;
    r->exists = ls->exists;
    copy_str(r->holder, sizeof r->holder, live_holder(ls, now));
    r->epoch = ls->record.transitions;
    r->since_transition_ms = ls->transition_ms ? now - ls->transition_ms : 0;
}

static void get_done(void *ctx, const store_result *res)
{
    pending_get *p = ctx;
    lease_state *ls = p->ls;
    if (p->prev)
        p->prev->next = p->next;
    else
        ls->e->gets = p->next;
    if (p->next)
        p->next->prev = p->prev;
    engine_reply r = {0};
    int64_t now = now_ms(ls->e);
    if (res->status == STORE_OK) {
        if (!ls->exists || rv_newer(res->lease.resource_version, ls->record.resource_version)) {
            bool unseen = !ls->exists;
            adopt_record(ls, &res->lease, now);
            if (unseen)
                schedule_expiry(ls);
        }
        fill_holder_reply(ls, &r, now);
    } else if (res->status == STORE_NOT_FOUND) {
        r.code = ENGINE_NOT_FOUND;
        snprintf(r.message, sizeof r.message, "lease %.60s/%.150s not found", ls->ns, ls->name);
    } else {
        r.code = res->status == STORE_FORBIDDEN ? ENGINE_PERMISSION_DENIED : ENGINE_UNAVAILABLE;
        copy_str(r.message, sizeof r.message, res->message);
    }
    p->done(p->ctx, &r);
    free(p);
}

static void do_get(cmd *k)
{
    lease_state *ls = lease_get(k->e, k->req.ns, k->req.name);
    if (!ls) {
        reply_code(k, ENGINE_INTERNAL, "out of memory");
        return;
    }
    ls->idle_since_ms = 0; /* a read is a use: a polled lease stays followed */
    if (ls->synced && !k->consistent) {
        engine_reply r = {0};
        if (!ls->exists) {
            r.code = ENGINE_NOT_FOUND;
            snprintf(r.message, sizeof r.message, "lease %.60s/%.150s not found", ls->ns, ls->name);
        } else {
            fill_holder_reply(ls, &r, now_ms(ls->e));
        }
        k->done(k->ctx, &r);
        return;
    }
    /* Not in the cache yet (the watch just started), or asked for a
     * consistent read: read from the store. */
    pending_get *p = calloc(1, sizeof *p);
    if (!p) {
        reply_code(k, ENGINE_INTERNAL, "out of memory");
        return;
    }
    p->ls = ls;
    p->done = k->done;
    p->ctx = k->ctx;
    p->next = k->e->gets;
    if (p->next)
        p->next->prev = p;
    k->e->gets = p;
    k->e->store->ops->get(k->e->store, ls->ns, ls->name, 2000, get_done, p);
}

static void do_list(cmd *k)
{
    engine *e = k->e;
    size_t n = 0, i = 0;
    for (unsigned b = 0; b < N_BUCKETS; b++)
        for (lease_state *ls = e->leases[b]; ls; ls = ls->hash_next)
            n += ls->exists || ls->candidates || ls->watchers;
    engine_lease_status *rows = calloc(n ? n : 1, sizeof *rows);
    if (!rows) {
        reply_code(k, ENGINE_INTERNAL, "out of memory");
        return;
    }
    int64_t now = now_ms(e);
    for (unsigned b = 0; b < N_BUCKETS; b++) {
        for (lease_state *ls = e->leases[b]; ls; ls = ls->hash_next) {
            if (!ls->exists && !ls->candidates && !ls->watchers)
                continue;
            engine_lease_status *row = &rows[i++];
            copy_str(row->ns, sizeof row->ns, ls->ns);
            copy_str(row->name, sizeof row->name, ls->name);
            copy_str(row->holder, sizeof row->holder, live_holder(ls, now));
            row->epoch = ls->record.transitions;
            row->since_transition_ms = ls->transition_ms ? now - ls->transition_ms : 0;
            row->lease_duration_s = ls->record.lease_duration_s;
            if (ls->term && ls->term->granted_until_ms > now)
                row->valid_for_ms = ls->term->granted_until_ms - now;
            for (candidate *c = ls->candidates; c; c = c->next)
                row->candidates++;
            for (watcher *w = ls->watchers; w; w = w->next)
                row->watchers++;
        }
    }
    engine_reply r = {.code = ENGINE_OK, .n_leases = i, .leases = rows};
    k->done(k->ctx, &r);
    free(rows);
}

static void do_watch(cmd *k)
{
    engine *e = k->e;
    watcher *w = calloc(1, sizeof *w);
    lease_state *ls = w ? lease_get(e, k->req.ns, k->req.name) : NULL;
    if (!ls) {
        free(w);
        if (k->listener.on_close)
            k->listener.on_close(k->listener.ctx);
        return;
    }
    w->id = k->id;
    w->ls = ls;
    w->listener = k->listener;
    w->next = ls->watchers;
    ls->watchers = w;
    watcher **slot = watcher_slot(e, w->id);
    w->hash_next = *slot;
    *slot = w;
    e->n_watchers++;
    update_gauges(e);
    if (ls->synced)
        notify_watchers(ls, false);
}

static void watcher_close(engine *e, watcher *w)
{
    lease_state *ls = w->ls;
    for (watcher **p = &ls->watchers; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    watcher **slot = watcher_slot(e, w->id);
    if (*slot == w)
        *slot = w->hash_next;
    if (w->listener.on_close)
        w->listener.on_close(w->listener.ctx);
    free(w);
    e->n_watchers--;
    update_gauges(e);
}

static void do_unwatch(cmd *k)
{
    watcher *w = *watcher_slot(k->e, k->id);
    if (w)
        watcher_close(k->e, w);
}

static void do_stop(cmd *k)
{
    engine *e = k->e;
    atomic_store(&e->stopping, true);
    for (unsigned b = 0; b < N_BUCKETS; b++) {
        for (lease_state *ls = e->leases[b]; ls; ls = ls->hash_next) {
            /* Keep held Leases: their holders resume on another replica. */
            while (ls->candidates) {
                candidate *c = ls->candidates;
                int64_t epoch = ls->term && ls->term->owner == c ? ls->term->epoch : 0;
                candidate_end(c, ENGINE_LOST_SHUTDOWN, epoch,
                              "the service is shutting down; resume on another replica");
            }
            while (ls->watchers)
                watcher_close(e, ls->watchers);
        }
    }
    loop_stop(e->loop);
}

static void run_cmd(void *arg)
{
    cmd *k = arg;
    switch (k->kind) {
    case CMD_CAMPAIGN:
        do_campaign(k);
        break;
    case CMD_DETACH:
        do_detach(k);
        break;
    case CMD_CONFIRM:
        do_confirm(k);
        break;
    case CMD_RESIGN:
        do_resign(k);
        break;
    case CMD_GET:
        do_get(k);
        break;
    case CMD_LIST:
        do_list(k);
        break;
    case CMD_WATCH:
        do_watch(k);
        break;
    case CMD_UNWATCH:
        do_unwatch(k);
        break;
    case CMD_STOP:
        do_stop(k);
        break;
    }
    free(k);
}

static cmd *cmd_new(engine *e, cmd_kind kind, const char *ns, const char *name,
                    const char *identity)
{
    cmd *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->e = e;
    k->kind = kind;
    copy_str(k->req.ns, sizeof k->req.ns, ns);
    copy_str(k->req.name, sizeof k->req.name, name);
    copy_str(k->req.identity, sizeof k->req.identity, identity);
    return k;
}

static int cmd_post(cmd *k)
{
    if (loop_post(k->e->loop, run_cmd, k) != 0) {
        free(k);
        return -1;
    }
    return 0;
}

/* ---------- public API ---------- */

engine *engine_new(const engine_config *cfg)
{
    engine *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->loop = cfg->loop;
    e->store = cfg->store;
    e->max_grant_ms = cfg->max_grant_ms;
    e->volatile_store = cfg->volatile_store;
    e->idle_forget_ms =
        cfg->idle_forget_ms > 0 ? cfg->idle_forget_ms : ENGINE_IDLE_FORGET_MS_DEFAULT;
    loop_timer_init(e->loop, &e->sweep_timer);
    e->started_ms = loop_now(e->loop);
    atomic_init(&e->next_id, 1);
    atomic_init(&e->reachable, true);
    atomic_init(&e->unsynced, 0);
    atomic_init(&e->stopping, false);
    return e;
}

void engine_run(engine *e)
{
    loop_run(e->loop);
}

void engine_stop(engine *e)
{
    cmd *k = cmd_new(e, CMD_STOP, "", "", "");
    if (!k || cmd_post(k) != 0) {
        atomic_store(&e->stopping, true);
        loop_stop(e->loop);
    }
}

void engine_free(engine *e)
{
    if (!e)
        return;
    /* Reads the store will never complete (it is destroyed after us). */
    for (pending_get *p = e->gets, *next; p; p = next) {
        next = p->next;
        free(p);
    }
    loop_timer_stop(&e->sweep_timer);
    for (unsigned b = 0; b < N_BUCKETS; b++) {
        for (lease_state *ls = e->leases[b], *next; ls; ls = next) {
            next = ls->hash_next;
            while (ls->candidates)
                candidate_end(ls->candidates, ENGINE_LOST_UNSPECIFIED, 0, NULL);
            while (ls->watchers)
                watcher_close(e, ls->watchers);
            term_free(ls, false);
            lease_drop(ls);
        }
    }
    free(e);
}

/* Posts a stream command (campaign, watch) and returns its id, 0 on failure. */
static uint64_t post_stream(engine *e, cmd *k, engine_listener listener)
{
    if (!k)
        return 0;
    k->listener = listener;
    k->id = atomic_fetch_add(&e->next_id, 1);
    uint64_t id = k->id;
    return cmd_post(k) == 0 ? id : 0;
}

/* Posts a command that names a stream by its id (detach, unwatch). */
static void post_id(engine *e, cmd_kind kind, uint64_t id)
{
    cmd *k = cmd_new(e, kind, "", "", "");
    if (!k)
        return;
    k->id = id;
    cmd_post(k);
}

/* A unary command, not yet posted; NULL when out of memory. */
static cmd *unary_cmd(engine *e, cmd_kind kind, const char *ns, const char *name,
                      const char *identity, engine_done done, void *ctx)
{
    cmd *k = cmd_new(e, kind, ns, name, identity);
    if (k) {
        k->done = done;
        k->ctx = ctx;
    }
    return k;
}

uint64_t engine_campaign(engine *e, const engine_campaign_req *req, engine_listener listener)
{
    cmd *k = cmd_new(e, CMD_CAMPAIGN, req->ns, req->name, req->identity);
    if (k)
        k->req = *req;
    return post_stream(e, k, listener);
}

void engine_campaign_detach(engine *e, uint64_t campaign_id)
{
    post_id(e, CMD_DETACH, campaign_id);
}

int engine_confirm(engine *e, const char *ns, const char *name, const char *identity, int64_t epoch,
                   engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_CONFIRM, ns, name, identity, done, ctx);
    if (!k)
        return -1;
    k->epoch = epoch;
    return cmd_post(k);
}

int engine_resign(engine *e, const char *ns, const char *name, const char *identity,
                  engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_RESIGN, ns, name, identity, done, ctx);
    return k ? cmd_post(k) : -1;
}

int engine_get_holder(engine *e, const char *ns, const char *name, bool consistent,
                      engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_GET, ns, name, "", done, ctx);
    if (!k)
        return -1;
    k->consistent = consistent;
    return cmd_post(k);
}

int engine_list(engine *e, engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_LIST, "", "", "", done, ctx);
    return k ? cmd_post(k) : -1;
}

uint64_t engine_watch(engine *e, const char *ns, const char *name, engine_listener listener)
{
    return post_stream(e, cmd_new(e, CMD_WATCH, ns, name, ""), listener);
}

void engine_unwatch(engine *e, uint64_t watch_id)
{
    post_id(e, CMD_UNWATCH, watch_id);
}

bool engine_ready(engine *e, char *why, size_t why_len)
{
    if (!atomic_load(&e->reachable)) {
        snprintf(why, why_len, "the lease store is unreachable");
        return false;
    }
    int unsynced = atomic_load(&e->unsynced);
    if (unsynced > 0) {
        snprintf(why, why_len, "%d lease watch(es) not synced yet", unsynced);
        return false;
    }
    if (atomic_load(&e->stopping)) {
        snprintf(why, why_len, "shutting down");
        return false;
    }
    snprintf(why, why_len, "ok");
    return true;
}
