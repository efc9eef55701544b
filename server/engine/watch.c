/* The store's watch events for one lease: the cached record follows them
 * (never backwards: the watch may lag behind our own writes' responses), a
 * term whose Lease another writer changed or deleted ends, and every change
 * wakes what waits on the lease — watchers, standbys, resumes, the next
 * acquisition. Engine thread only. */
#include <string.h>

#include "core/log.h"
#include "engine/internal.h"

static void on_synced(lease_state *ls)
{
    engine *e = ls->e;
    atomic_store(&e->reachable, true);
    if (!ls->synced) {
        ls->synced = true;
        atomic_fetch_sub(&e->unsynced, 1);
        engine_notify_watchers(ls, true);
        engine_notify_standbys(ls);
    }
    engine_history_observe(ls);
    engine_process_resumes(ls);
    engine_try_acquire(ls);
}

static void on_delete(lease_state *ls, const store_lease *lease, int64_t now)
{
    /* A deletion older than the record we hold (we created it again since)
     * is history. */
    if (ls->exists && lease->resource_version[0] &&
        engine_rv_newer(ls->record.resource_version, lease->resource_version))
        return;
    if (ls->exists) {
        ls->exists = false;
        ls->transition_ms = now;
        memset(&ls->record, 0, sizeof ls->record);
        loop_timer_stop(&ls->expiry_timer);
        if (ls->term && !engine_term_over(ls->term))
            engine_term_end(ls, ENGINE_LOST_DELETED, "the Lease was deleted", false);
        engine_notify_watchers(ls, false);
        engine_notify_standbys(ls);
    }
    engine_history_observe(ls);
    engine_try_acquire(ls);
}

static void on_put(lease_state *ls, const store_lease *lease, int64_t now)
{
    if (ls->exists && !engine_rv_newer(lease->resource_version, ls->record.resource_version))
        return; /* seen already, or older than what our own write returned */
    engine_term_follow(ls, lease);
    engine_adopt_record(ls, lease, now);
    if (!lease->holder[0] && !ls->vacant_ms)
        ls->vacant_ms = now;
    term *t = ls->term;
    if (t && !engine_term_over(t) &&
        (strcmp(lease->holder, t->identity) != 0 || lease->transitions != t->epoch)) {
        engine_term_end(ls, ENGINE_LOST_SUPERSEDED, "another writer changed the Lease", false);
    } else if (t) {
        engine_handoff_requested(ls); /* another replica asks for a handoff (handoff-to) */
    }
    engine_notify_watchers(ls, false);
    if (!ls->term)
        engine_notify_standbys(ls);
    engine_schedule_expiry(ls);
    engine_history_observe(ls);
    engine_process_resumes(ls);
    engine_try_acquire(ls);
}

void engine_on_watch(void *ctx, store_event_type type, const store_lease *lease)
{
    lease_state *ls = ctx;
    int64_t now = engine_now_ms(ls->e);
    if (log_enabled(LOG_DEBUG))
        log_event(LOG_DEBUG, "watch_event", "ns=%s lease=%s type=%d holder=%s epoch=%lld rv=%s",
                  ls->ns, ls->name, (int)type, lease ? log_q(lease->holder) : "-",
                  lease ? (long long)lease->transitions : 0LL,
                  lease ? lease->resource_version : "-");
    switch (type) {
    case STORE_EVENT_BROKEN:
        atomic_store(&ls->e->reachable, false);
        return;
    case STORE_EVENT_SYNCED:
        on_synced(ls);
        return;
    case STORE_EVENT_DELETE:
        on_delete(ls, lease, now);
        return;
    case STORE_EVENT_PUT:
        on_put(ls, lease, now);
        return;
    }
}
