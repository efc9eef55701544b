/* The story of each followed Lease: its last ENGINE_TERMS_MAX terms
 * (ListTerms) and how long it has had no live holder (the
 * kubelease_lease_* series alerts use).
 *
 * A term enters the history two ways: served here (term.c tells its start,
 * its end and why), or seen in the Lease through the watch — another
 * replica's term, or the Lease's term when this replica starts following
 * it (so a restart rebuilds the current term from holder, acquireTime and
 * leaseTransitions). A term seen only in the Lease ends when the engine
 * stops seeing it live: replaced by another holder (SUPERSEDED, HANDED_OFF
 * when the record is a handoff's transfer), released (RESIGNED: the Lease
 * does not say whether its holder resigned or stopped confirming; the
 * replica that served it knows), expired by observed time (EXPIRED) or
 * deleted (DELETED).
 *
 * "Leaderless" is what engine_live_holder says plus this replica's own
 * view of its term: from the end of the last term (or from when the Lease
 * was first seen without a holder) until the next term starts. The gauge
 * is refreshed every second while the gap lasts, the counter with it.
 *
 * Memory: a Lease's records are allocated when its first term is seen and
 * grow by doubling up to ENGINE_TERMS_MAX (docs/design.md, "Limits").
 * Engine thread only. */
#include <stdlib.h>
#include <string.h>

#include "core/metrics.h"
#include "engine/internal.h"

#define LEADERLESS_REFRESH_MS 1000

/* ---------- the records ---------- */

/* The i-th record, oldest first. */
static engine_term_rec *rec_at(lease_state *ls, unsigned i)
{
    return &ls->hist.recs[(ls->hist.head + i) % ls->hist.cap];
}

static engine_term_rec *newest(lease_state *ls)
{
    return ls->hist.n ? rec_at(ls, ls->hist.n - 1u) : NULL;
}

/* The newest record when its term goes on. */
static engine_term_rec *current(lease_state *ls)
{
    engine_term_rec *r = newest(ls);
    return r && !r->end_unix_ms ? r : NULL;
}

/* A new newest record (its holder copied), the oldest dropped when full;
 * NULL when out of memory (the history misses that term). The ring only
 * wraps at ENGINE_TERMS_MAX, so growing it copies it in order. */
static engine_term_rec *push(lease_state *ls, const char *holder)
{
    char *h = strdup(holder);
    if (!h)
        return NULL;
    if (ls->hist.n == ls->hist.cap && ls->hist.cap < ENGINE_TERMS_MAX) {
        unsigned cap = ls->hist.cap ? ls->hist.cap * 2u : 2u;
        engine_term_rec *grown = realloc(ls->hist.recs, cap * sizeof *grown);
        if (!grown) {
            free(h);
            return NULL;
        }
        ls->hist.recs = grown;
        ls->hist.cap = (uint8_t)cap;
    }
    engine_term_rec *r;
    if (ls->hist.n == ls->hist.cap) { /* full: the oldest goes */
        r = rec_at(ls, 0);
        free(r->holder);
        ls->hist.head = (uint8_t)((ls->hist.head + 1u) % ls->hist.cap);
    } else {
        r = rec_at(ls, ls->hist.n++);
    }
    memset(r, 0, sizeof *r);
    r->holder = h;
    return r;
}

static bool same_term(const engine_term_rec *r, const char *holder, int64_t epoch)
{
    return r && r->epoch == epoch && strcmp(r->holder, holder) == 0;
}

static int64_t wall_ms(const engine *e)
{
    return engine_wall_us(e) / 1000;
}

/* The unix time of loop time at (in the past, or now). */
static int64_t wall_of(const engine *e, int64_t at)
{
    return wall_ms(e) - (engine_now_ms(e) - at);
}

/* ---------- leaderless time ---------- */

static void labels_of(const lease_state *ls, char *out, size_t n)
{
    engine_lease_labels(ls, out, n);
}

/* Sets the gauge to the gap so far and adds the time since the last
 * refresh to the counter. */
static void leaderless_refresh(lease_state *ls, int64_t now)
{
    char labels[ENGINE_LABELS_MAX];
    labels_of(ls, labels, sizeof labels);
    int64_t since = ls->hist.leaderless_since_ms;
    double add = 0, gap = 0;
    if (since) {
        if (now > ls->hist.counted_ms) {
            add = (double)(now - ls->hist.counted_ms) / 1000.0;
            ls->hist.counted_ms = now;
        }
        gap = now > since ? (double)(now - since) / 1000.0 : 0;
    }
    if (since || !ls->hist.seen) { /* on first sight, both samples at 0 */
        metrics_add("kubelease_lease_leaderless_seconds_total", labels, add);
        metrics_set("kubelease_lease_leaderless_seconds", labels, gap);
    }
    ls->hist.seen = true;
}

static void leaderless_fire(void *arg)
{
    engine *e = arg;
    int64_t now = engine_now_ms(e);
    for (unsigned b = 0; b < ENGINE_BUCKETS; b++)
        for (lease_state *ls = e->leases[b]; ls; ls = ls->hash_next)
            if (ls->hist.leaderless_since_ms)
                leaderless_refresh(ls, now);
    if (e->n_leaderless > 0 && !atomic_load(&e->stopping))
        loop_timer_start(&e->leaderless_timer, now + LEADERLESS_REFRESH_MS, leaderless_fire, e);
}

/* The gap begins at since (loop time, at most now); known: at the end of a
 * term seen here, so the next term can tell how long it was. */
static void leaderless_start(lease_state *ls, int64_t since, bool known)
{
    engine *e = ls->e;
    if (ls->hist.leaderless_since_ms)
        return;
    int64_t now = engine_now_ms(e);
    ls->hist.leaderless_since_ms = since < now && since > 0 ? since : now;
    ls->hist.counted_ms = ls->hist.leaderless_since_ms;
    ls->hist.gap_known = known;
    e->n_leaderless++;
    leaderless_refresh(ls, now);
    if (!loop_timer_active(&e->leaderless_timer) && !atomic_load(&e->stopping))
        loop_timer_start(&e->leaderless_timer, now + LEADERLESS_REFRESH_MS, leaderless_fire, e);
}

/* A live holder again: the gap is counted to now and the gauge drops to 0.
 * Returns the gap (ms), -1 when its start is not known (no term seen
 * before it), 0 when there was none. */
static int64_t leaderless_stop(lease_state *ls)
{
    int64_t now = engine_now_ms(ls->e);
    int64_t since = ls->hist.leaderless_since_ms;
    if (!since) {
        leaderless_refresh(ls, now); /* the samples, at 0, on first sight */
        return newest(ls) ? 0 : -1;  /* no term before: unknown */
    }
    leaderless_refresh(ls, now);
    ls->hist.leaderless_since_ms = 0;
    ls->e->n_leaderless--;
    char labels[ENGINE_LABELS_MAX];
    labels_of(ls, labels, sizeof labels);
    metrics_set("kubelease_lease_leaderless_seconds", labels, 0);
    return ls->hist.gap_known ? now - since : -1;
}

/* kubelease_lease_duration_seconds follows the record's terms (not a
 * release's leaseDurationSeconds 1). */
static void duration_update(lease_state *ls, int32_t duration_s)
{
    if (duration_s <= 0 || duration_s == ls->hist.duration_s)
        return;
    ls->hist.duration_s = duration_s;
    char labels[ENGINE_LABELS_MAX];
    labels_of(ls, labels, sizeof labels);
    metrics_set("kubelease_lease_duration_seconds", labels, duration_s);
}

/* ---------- terms ---------- */

static void rec_end(engine_term_rec *r, engine_lost_reason reason, int64_t end_unix_ms)
{
    r->end_unix_ms = end_unix_ms > r->start_unix_ms ? end_unix_ms : r->start_unix_ms + 1;
    r->end_reason = reason;
}

/* A new term begins now (its start: acquireTime when the record has it);
 * the gap before it closes. */
static void rec_start(lease_state *ls, const char *holder, int64_t epoch, bool here)
{
    int64_t gap = leaderless_stop(ls);
    engine_term_rec *r = push(ls, holder);
    if (!r)
        return;
    r->epoch = epoch;
    bool recorded = ls->exists && ls->record.transitions == epoch &&
                    strcmp(ls->record.holder, holder) == 0 && ls->record.acquire_time_us > 0;
    int64_t now_unix = wall_ms(ls->e);
    r->start_unix_ms = recorded ? ls->record.acquire_time_us / 1000 : now_unix;
    if (r->start_unix_ms > now_unix)
        r->start_unix_ms = now_unix; /* another writer's clock ahead of ours */
    r->gap_before_ms = gap;
    r->here = here;
    r->end_reason = ENGINE_LOST_UNSPECIFIED;
}

void engine_history_term_started(lease_state *ls, const term *t)
{
    duration_update(ls, t->lease_s);
    engine_term_rec *cur = current(ls);
    if (same_term(cur, t->identity, t->epoch)) {
        cur->here = true; /* seen in the Lease first, or resumed here */
        leaderless_stop(ls);
        return;
    }
    if (cur) /* a term seen in the Lease, taken over without its end seen */
        rec_end(cur, ENGINE_LOST_SUPERSEDED, wall_ms(ls->e));
    rec_start(ls, t->identity, t->epoch, true);
}

void engine_history_term_ended(lease_state *ls, const term *t, engine_lost_reason reason)
{
    engine_term_rec *cur = current(ls);
    if (!same_term(cur, t->identity, t->epoch))
        return; /* it never started (engine_term_start refused it) */
    rec_end(cur, reason, wall_ms(ls->e));
    cur->here = true;
    leaderless_start(ls, engine_now_ms(ls->e), true);
}

void engine_history_renewed(lease_state *ls, int64_t renew_time_us)
{
    char labels[ENGINE_LABELS_MAX];
    labels_of(ls, labels, sizeof labels);
    metrics_set("kubelease_lease_last_renewal_timestamp_seconds", labels,
                (double)renew_time_us / 1e6);
}

/* Why a term seen in the Lease is over when the record no longer shows it
 * live, and since when (loop time). */
static engine_lost_reason gone_reason(const lease_state *ls, int64_t now, int64_t *at)
{
    *at = now;
    if (!ls->exists)
        return ENGINE_LOST_DELETED;
    if (!ls->record.holder[0])
        return ENGINE_LOST_RESIGNED;
    *at = ls->observed_ms + (int64_t)ls->record.lease_duration_s * 1000;
    if (*at > now)
        *at = now;
    return ENGINE_LOST_EXPIRED;
}

void engine_history_observe(lease_state *ls)
{
    if (!ls->synced)
        return;
    engine *e = ls->e;
    int64_t now = engine_now_ms(e);
    const term *t = ls->term;
    if (t && !engine_term_over(t))
        return; /* term.c tells its start and end */
    const store_lease *rec = &ls->record;
    /* The Lease's holder, live by observed time, unless it is this
     * replica's term that is over (its release may be in flight). */
    bool live = ls->exists && rec->holder[0] &&
                now - ls->observed_ms <= (int64_t)rec->lease_duration_s * 1000 &&
                !(t && strcmp(t->identity, rec->holder) == 0 && t->epoch == rec->transitions);
    engine_term_rec *cur = current(ls);
    if (live) {
        duration_update(ls, rec->lease_duration_s);
        if (same_term(cur, rec->holder, rec->transitions)) {
            leaderless_stop(ls);
            return;
        }
        engine_term_rec *last = newest(ls);
        /* A term that ended here while the Lease still shows it (its release
         * failed): not live again unless written since (resumed elsewhere). */
        if (!cur && same_term(last, rec->holder, rec->transitions) &&
            wall_of(e, ls->observed_ms) <= last->end_unix_ms)
            return;
        if (cur)
            rec_end(cur,
                    rec->handed_to == rec->transitions ? ENGINE_LOST_HANDED_OFF
                                                       : ENGINE_LOST_SUPERSEDED,
                    wall_ms(e));
        rec_start(ls, rec->holder, rec->transitions, false);
        return;
    }
    if (cur) {
        int64_t at;
        engine_lost_reason why = gone_reason(ls, now, &at);
        rec_end(cur, why, wall_of(e, at));
        leaderless_start(ls, at, true);
        return;
    }
    leaderless_start(ls, now, false);
}

void engine_history_forget(lease_state *ls)
{
    char labels[ENGINE_LABELS_MAX];
    labels_of(ls, labels, sizeof labels);
    metrics_remove("kubelease_lease_leaderless_seconds", labels);
    metrics_remove("kubelease_lease_leaderless_seconds_total", labels);
    metrics_remove("kubelease_lease_last_renewal_timestamp_seconds", labels);
    metrics_remove("kubelease_lease_duration_seconds", labels);
    if (ls->hist.leaderless_since_ms) {
        ls->hist.leaderless_since_ms = 0;
        ls->e->n_leaderless--;
    }
}

void engine_history_free(lease_state *ls)
{
    for (unsigned i = 0; i < ls->hist.n; i++)
        free(rec_at(ls, i)->holder);
    free(ls->hist.recs);
    ls->hist.recs = NULL;
    ls->hist.n = ls->hist.cap = ls->hist.head = 0;
}

/* ---------- ListTerms ---------- */

void engine_history_list(cmd *k)
{
    engine *e = k->e;
    lease_state *ls = engine_lease_find(e, k->req.ns, k->req.name);
    if (!ls) {
        engine_reply nf = {.code = ENGINE_NOT_FOUND};
        snprintf(nf.message, sizeof nf.message,
                 "lease %s/%s is not followed by this replica (it knows the terms of Leases it "
                 "follows: campaigned on, watched or read here)",
                 k->req.ns, k->req.name);
        k->done(k->ctx, &nf);
        return;
    }
    engine_term_status *rows = ls->hist.n ? calloc(ls->hist.n, sizeof *rows) : NULL;
    if (ls->hist.n && !rows) {
        engine_reply oom = {.code = ENGINE_INTERNAL, .message = "out of memory"};
        k->done(k->ctx, &oom);
        return;
    }
    for (unsigned i = 0; i < ls->hist.n; i++) {
        const engine_term_rec *r = rec_at(ls, i);
        engine_term_status *row = &rows[i];
        engine_copy_str(row->holder, sizeof row->holder, r->holder);
        row->epoch = r->epoch;
        row->start_unix_ms = r->start_unix_ms;
        row->end_unix_ms = r->end_unix_ms;
        row->end_reason = r->end_reason;
        row->gap_before_ms = r->gap_before_ms;
        engine_copy_str(row->replica, sizeof row->replica, r->here ? e->replica : "");
    }
    int64_t now = engine_now_ms(e);
    engine_reply r = {.code = ENGINE_OK};
    r.n_terms = ls->hist.n;
    r.terms = rows;
    r.now_unix_ms = wall_ms(e);
    if (ls->hist.leaderless_since_ms)
        r.leaderless_since_unix_ms = wall_of(e, ls->hist.leaderless_since_ms);
    const term *t = ls->term;
    if (t && !engine_term_over(t) && t->granted_until_ms > now)
        r.valid_for_ms = t->granted_until_ms - now; /* as ListLeases says it */
    r.lease_duration_s = ls->hist.duration_s;
    r.epoch = ls->record.transitions;
    engine_copy_str(r.replica, sizeof r.replica, e->replica);
    k->done(k->ctx, &r);
    free(rows);
}
