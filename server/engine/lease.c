/* The lease table: one lease_state per Lease the engine follows, found by
 * namespace and name; the record cached from the store's watch; and the
 * campaigns (candidates) and holder watches attached to each lease, with
 * the counts the gauges mirror. Engine thread only. */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "core/metrics.h"
#include "engine/internal.h"

/* The bucket of "ns/name". */
static unsigned lease_bucket(const char *ns, const char *name)
{
    uint32_t h = hash_fnv1a_str(HASH_FNV1A_INIT, ns);
    h = hash_fnv1a_str(hash_fnv1a(h, "/", 1), name);
    return h % ENGINE_BUCKETS;
}

/* The counts are kept as streams come and go, never recounted. */
static void gauges_update(const engine *e)
{
    metrics_set("kubelease_elections_active", "", e->n_elections);
    metrics_set("kubelease_candidates", "", e->n_candidates);
    metrics_set("kubelease_watchers", "", e->n_watchers);
}

/* ---------- names and labels ---------- */

static const char *const lost_reasons[ENGINE_N_LOST_REASONS] = {
    "unspecified",   "resigned", "renew_failed", "superseded", "deleted",
    "resume_failed", "shutdown", "expired",      "handed_off"};

const char *engine_lost_reason_name(engine_lost_reason r)
{
    return (unsigned)r < ENGINE_N_LOST_REASONS ? lost_reasons[r] : "unknown";
}

void engine_lease_labels(const lease_state *ls, char *out, size_t n)
{
    char ns[2 * STORE_NS_MAX], name[2 * STORE_NAME_MAX];
    metrics_label_escape(ls->ns, ns, sizeof ns);
    metrics_label_escape(ls->name, name, sizeof name);
    snprintf(out, n, "namespace=\"%s\",lease=\"%s\"", ns, name);
}

void engine_lost_labels(const char *lease_labels, engine_lost_reason r, char *out, size_t n)
{
    snprintf(out, n, "%s,reason=\"%s\"", lease_labels, engine_lost_reason_name(r));
}

/* ---------- the table ---------- */

lease_state *engine_lease_find(engine *e, const char *ns, const char *name)
{
    for (lease_state *ls = e->leases[lease_bucket(ns, name)]; ls; ls = ls->hash_next)
        if (strcmp(ls->ns, ns) == 0 && strcmp(ls->name, name) == 0)
            return ls;
    return NULL;
}

lease_state *engine_lease_get(engine *e, const char *ns, const char *name, const char *caller)
{
    lease_state *ls = engine_lease_find(e, ns, name);
    if (ls)
        return ls;
    ls = calloc(1, sizeof *ls);
    if (!ls)
        return NULL;
    ls->e = e;
    loop_timer_init(e->loop, &ls->expiry_timer);
    loop_timer_init(e->loop, &ls->tick_timer);
    loop_timer_init(e->loop, &ls->retry_timer);
    loop_timer_init(e->loop, &ls->label.retry_timer);
    engine_copy_str(ls->ns, sizeof ls->ns, ns);
    engine_copy_str(ls->name, sizeof ls->name, name);
    if (engine_quota_follow(ls, caller) != 0) {
        free(ls);
        return NULL;
    }
    ls->watch = e->store->ops->watch(e->store, ns, name, engine_on_watch, ls);
    if (!ls->watch) {
        engine_quota_forget(ls);
        free(ls);
        return NULL;
    }
    atomic_fetch_add(&e->unsynced, 1);
    unsigned h = lease_bucket(ns, name);
    ls->hash_next = e->leases[h];
    e->leases[h] = ls;
    metrics_set("kubelease_leases_followed", "", ++e->n_leases);
    engine_absent_drop(e, ns, name); /* the watch is the truth from now on */
    engine_sweep_ensure(e);
    return ls;
}

void engine_lease_drop(lease_state *ls)
{
    engine *e = ls->e;
    loop_timer_stop(&ls->expiry_timer);
    loop_timer_stop(&ls->tick_timer);
    loop_timer_stop(&ls->retry_timer);
    engine_podlabel_drop(ls);
    engine_history_free(ls);
    e->store->ops->unwatch(e->store, ls->watch);
    free(ls);
}

void engine_lease_forget(lease_state *ls)
{
    engine *e = ls->e;
    for (lease_state **p = &e->leases[lease_bucket(ls->ns, ls->name)]; *p; p = &(*p)->hash_next) {
        if (*p == ls) {
            *p = ls->hash_next;
            break;
        }
    }
    if (!ls->synced)
        atomic_fetch_sub(&e->unsynced, 1);
    /* Its series go too, so that they follow the leases in use. */
    char labels[ENGINE_LABELS_MAX], with_reason[ENGINE_REASON_LABELS_MAX];
    engine_lease_labels(ls, labels, sizeof labels);
    metrics_remove("kubelease_leader", labels);
    metrics_remove("kubelease_terms_started_total", labels);
    for (unsigned r = 0; r < ENGINE_N_LOST_REASONS; r++) {
        engine_lost_labels(labels, (engine_lost_reason)r, with_reason, sizeof with_reason);
        metrics_remove("kubelease_terms_lost_total", with_reason);
    }
    engine_history_forget(ls);
    metrics_set("kubelease_leases_followed", "", --e->n_leases);
    engine_quota_forget(ls);
    engine_epoch_forget(ls);
    log_event(LOG_DEBUG, "lease_forgotten", "ns=%s lease=%s idle_ms=%lld", ls->ns, ls->name,
              (long long)(engine_now_ms(e) - ls->idle_since_ms));
    engine_lease_drop(ls);
}

/* ---------- the cached record ---------- */

const char *engine_live_holder(const lease_state *ls, int64_t now)
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

bool engine_record_expired(const lease_state *ls, int64_t now)
{
    return !ls->record.holder[0] ||
           now - ls->observed_ms > (int64_t)ls->record.lease_duration_s * 1000;
}

void engine_adopt_record(lease_state *ls, const store_lease *rec, int64_t now)
{
    bool changed_holder = !ls->exists || strcmp(ls->record.holder, rec->holder) != 0 ||
                          ls->record.transitions != rec->transitions;
    if (!ls->exists || strcmp(ls->record.resource_version, rec->resource_version) != 0)
        ls->observed_ms = now;
    if (changed_holder)
        ls->transition_ms = now;
    if (!ls->exists || ls->record.value_len != rec->value_len ||
        memcmp(ls->record.value, rec->value, rec->value_len) != 0)
        ls->value_gen++;
    ls->record = *rec;
    ls->exists = true;
}

/* Kubernetes calls resourceVersions opaque, but both stores (etcd revisions,
 * the memory store's counter) use decimal integers that only grow, as
 * client-go's watch cache assumes too; anything else is compared for
 * inequality only. The watch can lag behind the responses to our own writes,
 * so an event may be older than the record we already hold: it must not
 * move the state backwards. */
bool engine_rv_newer(const char *a, const char *b)
{
    char *end_a, *end_b;
    errno = 0;
    unsigned long long x = strtoull(a, &end_a, 10), y = strtoull(b, &end_b, 10);
    if (errno || !*a || !*b || *end_a || *end_b)
        return strcmp(a, b) != 0;
    return x > y;
}

/* ---------- campaigns and watches ---------- */

candidate **engine_campaign_slot(engine *e, uint64_t id)
{
    candidate **p = &e->campaigns[id % ENGINE_BUCKETS];
    while (*p && (*p)->id != id)
        p = &(*p)->hash_next;
    return p;
}

watcher **engine_watcher_slot(engine *e, uint64_t id)
{
    watcher **p = &e->watchers[id % ENGINE_BUCKETS];
    while (*p && (*p)->id != id)
        p = &(*p)->hash_next;
    return p;
}

static const char *campaign_state_name(campaign_state s)
{
    static const char *const names[] = {"verifying", "resuming", "standby", "leading"};
    return names[s];
}

void engine_campaign_set(candidate *c, campaign_state state)
{
    if (c->state == state)
        return;
    log_event(LOG_DEBUG, "campaign_state", "ns=%s lease=%s identity=%s from=%s to=%s", c->ls->ns,
              c->ls->name, log_q(c->req.identity), campaign_state_name(c->state),
              campaign_state_name(state));
    c->state = state;
}

void engine_candidate_add(lease_state *ls, candidate *c)
{
    engine *e = ls->e;
    c->ls = ls;
    candidate **slot = engine_campaign_slot(e, c->id);
    c->hash_next = *slot;
    *slot = c;
    if (kl__list_empty(&ls->candidates))
        e->n_elections++;
    kl__list_insert_tail(&ls->candidates, &c->link);
    c->since_ms = engine_now_ms(e);
    e->n_candidates++;
    gauges_update(e);
}

/* Takes c out of its lease and the id table (no callback). */
static void candidate_unlink(candidate *c)
{
    lease_state *ls = c->ls;
    engine *e = ls->e;
    kl__list_remove(&c->link);
    candidate **slot = engine_campaign_slot(e, c->id);
    if (*slot == c)
        *slot = c->hash_next;
    if (ls->term && ls->term->owner == c)
        ls->term->owner = NULL;
    e->n_candidates--;
    if (kl__list_empty(&ls->candidates))
        e->n_elections--;
}

/* Removes c, sends ev (when not NULL) and closes it. */
static void candidate_close(candidate *c, const engine_event *ev)
{
    engine *e = c->ls->e;
    candidate_unlink(c);
    if (ev)
        engine_send_event(&c->listener, ev);
    if (c->listener.on_close)
        c->listener.on_close(c->listener.ctx);
    OPENSSL_cleanse(c->req.term_token, sizeof c->req.term_token);
    free(c);
    gauges_update(e);
}

void engine_candidate_end(candidate *c, engine_lost_reason reason, int64_t epoch, const char *msg)
{
    engine_event ev = {.kind = ENGINE_EVENT_LOST, .reason = reason, .epoch = epoch};
    engine_copy_str(ev.message, sizeof ev.message, msg);
    candidate_close(c, reason != ENGINE_LOST_UNSPECIFIED ? &ev : NULL);
}

void engine_candidate_refuse(candidate *c, engine_code code, const char *msg)
{
    engine_event ev = {
        .kind = ENGINE_EVENT_LOST, .reason = ENGINE_LOST_RESUME_FAILED, .code = code};
    engine_copy_str(ev.message, sizeof ev.message, msg);
    candidate_close(c, &ev);
}

void engine_watcher_add(lease_state *ls, watcher *w)
{
    engine *e = ls->e;
    w->ls = ls;
    kl__list_insert_head(&ls->watchers, &w->link);
    watcher **slot = engine_watcher_slot(e, w->id);
    w->hash_next = *slot;
    *slot = w;
    e->n_watchers++;
    gauges_update(e);
}

static void watcher_unlink(watcher *w)
{
    lease_state *ls = w->ls;
    kl__list_remove(&w->link);
    watcher **slot = engine_watcher_slot(ls->e, w->id);
    if (*slot == w)
        *slot = w->hash_next;
    ls->e->n_watchers--;
}

void engine_watcher_close(watcher *w)
{
    engine *e = w->ls->e;
    watcher_unlink(w);
    if (w->listener.on_close)
        w->listener.on_close(w->listener.ctx);
    free(w);
    gauges_update(e);
}

void engine_lease_drop_streams(lease_state *ls)
{
    while (!kl__list_empty(&ls->candidates)) {
        candidate *c = engine_candidate_of(kl__list_first(&ls->candidates));
        candidate_unlink(c);
        free(c);
    }
    while (!kl__list_empty(&ls->watchers)) {
        watcher *w = engine_watcher_of(kl__list_first(&ls->watchers));
        watcher_unlink(w);
        free(w);
    }
}
