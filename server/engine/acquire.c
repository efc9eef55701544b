/* Acquisitions and resumes: the writes that start a term. The first standby
 * candidate acquires a lease that is absent, free, or expired by observed
 * time, with a larger epoch than any before (docs/design.md, rule 4) and a
 * fresh nonce, from which the term's token derives; a resuming candidate
 * takes back its own term, here or from another replica of the service, if
 * it is still valid (docs/design.md, rule 5) and it presents the term's
 * token (docs/design.md, rule 8). Each of these writes takes the Lease's
 * one write slot (write.c) and ends it in its callback. A foreign holder's
 * expiry is a timer at the observed time plus its leaseDurationSeconds.
 * Engine thread only. */
#include <string.h>

#include "core/log.h"
#include "core/metrics.h"
#include "engine/internal.h"

#define REREAD_TIMEOUT_MS 2000

static void retry_fire(void *arg)
{
    engine_try_acquire(arg);
}

static candidate *next_in_line(const lease_state *ls);

/* The next attempt, a retry period from now: c's, or, when c has left,
 * that of whoever is next in line (a write that failed for a candidate
 * gone must not leave the others waiting for an event that may never
 * come). */
static void retry_later(lease_state *ls, const candidate *c)
{
    if (!c)
        c = next_in_line(ls);
    if (!loop_timer_active(&ls->retry_timer) && c) {
        int64_t retry = (int64_t)c->req.retry_period_s * 1000;
        loop_timer_start(&ls->retry_timer, engine_now_ms(ls->e) + retry, retry_fire, ls);
    }
}

/* The leader value a write starting (or resuming) req's term records. */
static void set_value(store_lease *rec, const engine_campaign_req *req)
{
    rec->value_len = req->value_len;
    memcpy(rec->value, req->value, req->value_len);
}

/* The Lease as read back after a conflicting acquisition: a newer record
 * is taken as the watch would bring it (the watch's copy is then old news).
 * If the Lease is still what the write replaced, nothing explains the
 * conflict (an apiserver or a proxy refusing for another reason): the next
 * attempt waits a retry period, so a refusal that persists is not a loop. */
#ifdef KL_SIM_BREAKS
static store_lease sim_attempt; /* the last acquisition written (KL_SIM_BROKEN(4)) */
#endif

static void reread_done(void *ctx, const store_result *r)
{
    lease_state *ls = ctx;
    lease_write_slot w = engine_write_end(ls);
    bool newer =
        r->status == STORE_OK &&
        (!ls->exists || engine_rv_newer(r->lease.resource_version, ls->record.resource_version));
    bool moved = newer || (ls->exists ? strcmp(ls->record.resource_version, ls->acq.base_rv) != 0
                                      : ls->acq.base_rv[0] != '\0');
    log_event(LOG_INFO, "acquire_reread", "ns=%s lease=%s status=%s moved=%d", ls->ns, ls->name,
              store_status_name(r->status), (int)moved);
    if (newer) {
        /* Taken as a watch event: resumes and the next acquisition follow. */
        engine_on_watch(ls, STORE_EVENT_PUT, &r->lease);
        return;
    }
    if (moved) {
        engine_lease_next(ls);
        return;
    }
    engine_process_resumes(ls);
    retry_later(ls, *engine_campaign_slot(ls->e, w.by));
}

/* The read back holds the write slot for the acquisition's candidate by. */
static void reread(lease_state *ls, uint64_t by)
{
    engine_write_begin(ls, WRITE_REREAD, by, NULL);
    ls->e->store->ops->get(ls->e->store, ls->ns, ls->name, REREAD_TIMEOUT_MS, reread_done, ls);
}

/* A claim of a handed-to term that failed: nothing starts, the record is
 * not claimed again, and the Lease expires as after a failed handoff (a
 * claim whose answer was lost is not recognised: it expires too). The
 * write slot is free again: what came meanwhile is served (a Lease
 * released meanwhile has no expiry to wait for). */
static void claim_failed(lease_state *ls, const store_result *r)
{
    log_event(LOG_WARN, "handoff_claim_failed", "ns=%s lease=%s status=%s msg=%s", ls->ns, ls->name,
              store_status_name(r->status), log_q(r->message));
    engine_copy_str(ls->acq.claim_failed_rv, sizeof ls->acq.claim_failed_rv, ls->acq.base_rv);
    engine_schedule_expiry(ls);
    engine_lease_next(ls);
}

static void acquire_done(void *ctx, const store_result *r)
{
    lease_state *ls = ctx;
    lease_write_slot w = engine_write_end(ls);
    bool resume = w.what == WRITE_RESUME;
    bool claim = w.what == WRITE_CLAIM;
    log_event(LOG_DEBUG, "acquire_done", "ns=%s lease=%s status=%s rv=%s", ls->ns, ls->name,
              store_status_name(r->status),
              r->status == STORE_OK ? r->lease.resource_version : "-");
    candidate *c = *engine_campaign_slot(ls->e, w.by);
    int64_t sent = w.sent_ms;
    if (r->status == STORE_OK) {
        ls->acq.lost.epoch = 0;
        /* A resumed term's holder may believe in the grants of the replica
         * it comes from until the record this resume replaced would have
         * expired (they never reach past that replica's last renewal's
         * send time plus the renew deadline): that replica's copy may
         * still grant Confirms that reach it, until it sees the resume. */
        int64_t replaced_until = 0;
        if (resume && ls->exists) {
            int64_t lease_ms = (int64_t)ls->record.lease_duration_s * 1000;
            replaced_until = ls->observed_ms + lease_ms + engine_rate_allowance_ms(lease_ms);
            /* The replica this term comes from sent label sets only while
             * its grant was live, from its last write that landed — at the
             * latest the record this resume replaced, seen at observed_ms
             * (rule 9). Until that record would have expired, one of them
             * may still land: a removal waits for it (podlabel.c). */
            ls->label.foreign_sets_until_ms = ls->observed_ms + lease_ms;
        }
        if (!c || ls->term) {
            /* Its candidate left while it was written: given back, a
             * resume's once its holder cannot believe in it (rule 3). */
            engine_term_release_unclaimed(ls, &r->lease, replaced_until);
            return;
        }
        engine_term_start(ls, c, &r->lease, sent, resume, replaced_until);
        return;
    }
    if (claim) {
        claim_failed(ls, r);
        return;
    }
    if (resume) {
        /* The write slot is free again: the resumes and standbys that came
         * while the resume was in flight are served now, whether or not
         * its own candidate is still here (engine_try_acquire returned
         * early for them, and a Lease that expired meanwhile has no timer
         * left to call it again; next_in_line does not wait for resumes). */
        if (c)
            engine_candidate_end(c, ENGINE_LOST_RESUME_FAILED, 0, r->message);
        engine_lease_next(ls);
        return;
    }
#ifdef KL_SIM_BREAKS
    /* The simulator's break: a conflict counts as won. */
    if (KL_SIM_BROKEN(4) && c && !ls->term &&
        (r->status == STORE_CONFLICT || r->status == STORE_EXISTS)) {
        engine_term_start(ls, c, &sim_attempt, sent, false, 0);
        return;
    }
#endif
    if (r->status == STORE_CONFLICT || r->status == STORE_EXISTS) {
        /* Lost the race, most likely: the Lease is read back rather than
         * waiting for the watch, which may never bring anything if the
         * conflict came from something other than a newer write. */
        reread(ls, w.by);
        return;
    }
    log_event(LOG_WARN, "acquire_failed", "ns=%s lease=%s status=%s msg=%s", ls->ns, ls->name,
              store_status_name(r->status), log_q(r->message));
    if (!resume && (r->status == STORE_UNAVAILABLE || r->status == STORE_INTERNAL)) {
        /* The answer is lost, not necessarily the write. */
        ls->acq.lost.epoch = ls->acq.epoch;
        ls->acq.lost.sent_ms = sent;
        ls->acq.lost.campaign_id = w.by;
        engine_copy_str(ls->acq.lost.nonce, sizeof ls->acq.lost.nonce, ls->acq.nonce);
    }
    /* The write slot is free again: the resumes that came while the write
     * was in flight are decided now (the retry only serves standbys). */
    engine_process_resumes(ls);
    retry_later(ls, c);
}

static void expiry_fire(void *arg)
{
    lease_state *ls = arg;
    /* A foreign holder's last sign of life is its last renewal we saw. */
    if (!ls->vacant_ms)
        ls->vacant_ms = ls->observed_ms;
    engine_history_observe(ls);
    engine_notify_watchers(ls, false);
    engine_notify_standbys(ls);
    engine_try_acquire(ls);
}

void engine_schedule_expiry(lease_state *ls)
{
    if (!ls->exists || !ls->record.holder[0] || ls->term)
        return;
    int64_t due = ls->observed_ms + (int64_t)ls->record.lease_duration_s * 1000 + 1;
    if (loop_timer_active(&ls->expiry_timer) && ls->expiry_due_ms == due)
        return;
    ls->expiry_due_ms = due;
    loop_timer_start(&ls->expiry_timer, due, expiry_fire, ls);
}

/* Writes rec for c: a new term (WRITE_ACQUIRE, with a fresh nonce), a
 * resumed one (WRITE_RESUME) or one handed to it (WRITE_CLAIM). */
static void write_for(lease_state *ls, candidate *c, bool create, store_lease *rec,
                      lease_write what)
{
    if (what == WRITE_ACQUIRE && engine_token_nonce(rec->term_nonce) != 0) {
        /* No randomness, no token: no term (tried again a retry period later). */
        log_event(LOG_ERROR, "acquire_failed", "ns=%s lease=%s msg=%s", ls->ns, ls->name,
                  log_q("the random generator failed"));
        if (!loop_timer_active(&ls->retry_timer))
            loop_timer_start(&ls->retry_timer,
                             engine_now_ms(ls->e) + (int64_t)c->req.retry_period_s * 1000,
                             retry_fire, ls);
        return;
    }
    ls->acq.epoch = rec->transitions;
    engine_copy_str(ls->acq.nonce, sizeof ls->acq.nonce, rec->term_nonce);
    engine_copy_str(ls->acq.base_rv, sizeof ls->acq.base_rv, create ? "" : rec->resource_version);
    engine_write_begin(ls, what, c->id, rec);
    int timeout = engine_request_timeout_ms(c->req.renew_deadline_s);
    log_event(LOG_DEBUG, "acquire", "ns=%s lease=%s holder=%s epoch=%lld rv=%s create=%d", ls->ns,
              ls->name, log_q(rec->holder), (long long)rec->transitions, rec->resource_version,
              (int)create);
#ifdef KL_SIM_BREAKS
    sim_attempt = *rec;
#endif
    if (create)
        ls->e->store->ops->create(ls->e->store, rec, timeout, acquire_done, ls);
    else
        ls->e->store->ops->update(ls->e->store, rec, timeout, acquire_done, ls);
}

/* The Lease does not exist: create it, unless the store is volatile and a
 * previous run of the service may still have holders acting on its grants. */
static void acquire_absent(lease_state *ls, candidate *c, store_lease *rec, int64_t now)
{
    engine *e = ls->e;
    int64_t grant = engine_grant_ms(e, c->req.retry_period_s);
    if (e->volatile_store && now < e->started_ms + grant) {
        if (!loop_timer_active(&ls->retry_timer))
            loop_timer_start(&ls->retry_timer, e->started_ms + grant, retry_fire, ls);
        return;
    }
    rec->transitions = 1;
    write_for(ls, c, true, rec, WRITE_ACQUIRE);
}

/* The Lease's preferred holder (spec.preferredHolder) if it waits here,
 * else the longest-waiting candidate; never one resuming (resumes are
 * handled when they arrive) or with a Pod to verify. NULL: none. */
static candidate *next_in_line(const lease_state *ls)
{
    candidate *first = NULL;
    KL__LIST_FOREACH (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (c->state == CAMPAIGN_RESUMING || c->state == CAMPAIGN_VERIFYING)
            continue;
        if (engine_preferred(ls, c->req.identity))
            return c;
        if (!first)
            first = c;
    }
    return first;
}

/* An acquisition whose answer was lost, seen in the Lease after all: its
 * epoch and its nonce, which nobody else can have written (each new term
 * draws a fresh one). The term starts from when that write was sent, as if
 * its answer had come (its grant is then shorter, never longer); had its
 * candidate left, the Lease is given back. True when it was. */
static bool recognise_lost_write(lease_state *ls)
{
    if (!ls->acq.lost.epoch || !ls->exists)
        return false;
    if (ls->record.transitions != ls->acq.lost.epoch || !ls->acq.lost.nonce[0] ||
        strcmp(ls->record.term_nonce, ls->acq.lost.nonce) != 0) {
        if (ls->record.transitions >= ls->acq.lost.epoch)
            ls->acq.lost.epoch = 0; /* that epoch went to another write */
        return false;
    }
    ls->acq.lost.epoch = 0;
    store_lease rec = ls->record;
    candidate *c = *engine_campaign_slot(ls->e, ls->acq.lost.campaign_id);
    log_event(LOG_INFO, "acquire_recognised", "ns=%s lease=%s holder=%s epoch=%lld claimed=%d",
              ls->ns, ls->name, log_q(rec.holder), (long long)rec.transitions,
              (int)(c && c->state == CAMPAIGN_STANDBY));
    if (c && c->state == CAMPAIGN_STANDBY && strcmp(c->req.identity, rec.holder) == 0)
        engine_term_start(ls, c, &rec, ls->acq.lost.sent_ms, false, 0);
    else
        engine_term_release_unclaimed(ls, &rec, 0);
    return true;
}

/* The standby here whose identity is holder, or NULL. */
static candidate *standby_named(const lease_state *ls, const char *holder)
{
    KL__LIST_FOREACH (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (c->state == CAMPAIGN_STANDBY && strcmp(c->req.identity, holder) == 0)
            return c;
    }
    return NULL;
}

/* A term another replica handed to a standby campaigning here (the Lease
 * holds it, marked handed-to at its epoch, not expired): claimed with one
 * compare-and-swap on that record, as a resume renews a record (a later
 * renewTime, the marker cleared, holder, epoch and nonce kept), and
 * started here once written, so the standby gets the term's token in
 * Elected (docs/design.md, rules 3 and 8). A record naming a standby here
 * without the marker is another replica's term, or an acquisition of ours
 * (recognise_lost_write): never claimed. True when the claim is written. */
static bool claim_handed_to(lease_state *ls, int64_t now)
{
    const store_lease *r = &ls->record;
    if (!ls->exists || !r->handed_to || r->handed_to != r->transitions || !r->term_nonce[0] ||
        strcmp(r->resource_version, ls->acq.claim_failed_rv) == 0 || engine_record_expired(ls, now))
        return false;
    candidate *c = standby_named(ls, r->holder);
    if (!c)
        return false;
    store_lease rec = *r;
    int64_t wall = engine_wall_us(ls->e);
    rec.renew_time_us = wall > rec.renew_time_us ? wall : rec.renew_time_us + 1;
    rec.lease_duration_s = c->req.lease_duration_s;
    rec.handed_to = 0;
    rec.handoff_to[0] = '\0';
    set_value(&rec, &c->req);
    log_event(LOG_INFO, "handoff_claim", "ns=%s lease=%s holder=%s epoch=%lld", ls->ns, ls->name,
              log_q(rec.holder), (long long)rec.transitions);
    write_for(ls, c, false, &rec, WRITE_CLAIM);
    return true;
}

#define EPOCH_EXHAUSTED_MSG                                                                        \
    "lease %.40s/%.50s cannot be elected again: its leaseTransitions is at 2147483647, the "       \
    "largest epoch; delete the Lease (epochs restart at 1: fencing servers must forget theirs) "   \
    "or campaign under another name"

static void epoch_flag(lease_state *ls, bool exhausted)
{
    if (ls->epoch_exhausted == exhausted)
        return;
    ls->epoch_exhausted = exhausted;
    ls->e->n_epoch_exhausted += exhausted ? 1 : -1;
    metrics_set("kubelease_leases_epoch_exhausted", "", ls->e->n_epoch_exhausted);
}

void engine_epoch_forget(lease_state *ls)
{
    epoch_flag(ls, false);
}

/* A Lease at ENGINE_EPOCH_MAX can start no new term (rule 4): said once
 * (an error in the log, the gauge, a Warning Event with --events), and
 * every standby is ended with the message saying what to do, a code the
 * library does not retry on, so that nothing tries again in a loop. A live
 * term (here or elsewhere) goes on at its epoch: renewals and resumes keep
 * it. True when ls is such a Lease. */
static bool epoch_exhausted(lease_state *ls)
{
    bool at_max = ls->exists && ls->record.transitions >= ENGINE_EPOCH_MAX;
    bool first = at_max && !ls->epoch_exhausted;
    epoch_flag(ls, at_max);
    if (!at_max)
        return false;
    char msg[256];
    snprintf(msg, sizeof msg, EPOCH_EXHAUSTED_MSG, ls->ns, ls->name);
    if (first) {
        log_event(LOG_ERROR, "epoch_exhausted", "ns=%s lease=%s epoch=%lld msg=%s", ls->ns,
                  ls->name, (long long)ls->record.transitions, log_q(msg));
        engine_events_epoch_exhausted(ls, msg);
    }
    KL__LIST_FOREACH_SAFE (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (c->state == CAMPAIGN_STANDBY && !(engine_lease_writing(ls) && ls->write.by == c->id))
            engine_candidate_refuse(c, ENGINE_FAILED_PRECONDITION, msg);
    }
    return true;
}

void engine_try_acquire(lease_state *ls)
{
    if (!ls->synced || atomic_load(&ls->e->stopping) || epoch_exhausted(ls))
        return;
    if (ls->term || engine_lease_writing(ls))
        return; /* the write's end (engine_lease_next) comes back here */
    if (recognise_lost_write(ls))
        return;
    if (claim_handed_to(ls, engine_now_ms(ls->e)))
        return;
    candidate *c = next_in_line(ls);
    if (!c) {
        engine_podlabel_clear_stale(ls);
        return;
    }
    int64_t now = engine_now_ms(ls->e);
    store_lease rec = {0};
    engine_copy_str(rec.ns, sizeof rec.ns, ls->ns);
    engine_copy_str(rec.name, sizeof rec.name, ls->name);
    engine_copy_str(rec.holder, sizeof rec.holder, c->req.identity);
    rec.lease_duration_s = c->req.lease_duration_s;
    rec.acquire_time_us = rec.renew_time_us = engine_wall_us(ls->e);
    engine_podlabel_format(ls, &c->req.label, rec.pod_label, sizeof rec.pod_label);
    set_value(&rec, &c->req);
    if (!ls->exists) {
        acquire_absent(ls, c, &rec, now);
        return;
    }
    if (!engine_record_expired(ls, now)) {
        engine_schedule_expiry(ls);
        return;
    }
    /* The previous term's Pod label comes off before anyone else is
     * elected (docs/design.md, rule 9); called again once it has. */
    if (!engine_podlabel_clear(ls))
        return;
    /* Every new term gets a larger epoch (docs/design.md, rule 4), even for
     * the same identity. */
    rec.transitions = ls->record.transitions + 1;
    engine_copy_str(rec.resource_version, sizeof rec.resource_version, ls->record.resource_version);
    write_for(ls, c, false, &rec, WRITE_ACQUIRE);
}

void engine_acquire_transfer(lease_state *ls, candidate *c, const char *rv, int64_t epoch)
{
    store_lease rec = {0};
    engine_copy_str(rec.ns, sizeof rec.ns, ls->ns);
    engine_copy_str(rec.name, sizeof rec.name, ls->name);
    engine_copy_str(rec.holder, sizeof rec.holder, c->req.identity);
    engine_copy_str(rec.resource_version, sizeof rec.resource_version, rv);
    rec.lease_duration_s = c->req.lease_duration_s;
    rec.acquire_time_us = rec.renew_time_us = engine_wall_us(ls->e);
    rec.transitions = epoch; /* larger than the term handed off (rule 4) */
    /* The Pod label of the term handed off is off its Pod by now
     * (engine_lease_next clears it first); the new term's is recorded as
     * any acquisition's (rule 9). */
    engine_podlabel_format(ls, &c->req.label, rec.pod_label, sizeof rec.pod_label);
    set_value(&rec, &c->req);
    write_for(ls, c, false, &rec, WRITE_ACQUIRE);
}

/* The transfer to a standby of another replica landed (or not): nothing
 * starts here; that replica claims the term (claim_handed_to). A transfer
 * that failed leaves the Lease to expire, as a failed handoff does. */
static void remote_transfer_done(void *ctx, const store_result *r)
{
    lease_state *ls = ctx;
    engine_write_end(ls);
    log_event(r->status == STORE_OK ? LOG_INFO : LOG_WARN, "handoff_transferred",
              "ns=%s lease=%s to=%s epoch=%lld status=%s msg=%s", ls->ns, ls->name,
              r->status == STORE_OK ? log_q(r->lease.holder) : "-", (long long)ls->acq.epoch,
              store_status_name(r->status), log_q(r->message));
    if (r->status == STORE_OK &&
        (!ls->exists || engine_rv_newer(r->lease.resource_version, ls->record.resource_version)))
        engine_adopt_record(ls, &r->lease, engine_now_ms(ls->e));
    engine_notify_watchers(ls, false);
    engine_notify_standbys(ls);
    engine_schedule_expiry(ls);
    engine_lease_next(ls);
}

int engine_acquire_transfer_remote(lease_state *ls, const char *identity, const char *rv,
                                   int64_t epoch, int32_t lease_s, int timeout_ms)
{
    store_lease rec = {0};
    if (engine_token_nonce(rec.term_nonce) != 0)
        return -1;
    engine_copy_str(rec.ns, sizeof rec.ns, ls->ns);
    engine_copy_str(rec.name, sizeof rec.name, ls->name);
    engine_copy_str(rec.holder, sizeof rec.holder, identity);
    engine_copy_str(rec.resource_version, sizeof rec.resource_version, rv);
    rec.lease_duration_s = lease_s;
    rec.acquire_time_us = rec.renew_time_us = engine_wall_us(ls->e);
    rec.transitions = epoch; /* larger than the term handed off (rule 4) */
    rec.handed_to = epoch;   /* for the standby's replica to claim */
    /* No Pod label: the standby's replica records its own when it claims
     * (engine_podlabel_apply, as after a resume). */
    ls->acq.epoch = epoch;
    engine_copy_str(ls->acq.nonce, sizeof ls->acq.nonce, rec.term_nonce);
    engine_copy_str(ls->acq.base_rv, sizeof ls->acq.base_rv, rv);
    engine_write_begin(ls, WRITE_HAND, 0, &rec);
    ls->e->store->ops->update(ls->e->store, &rec, timeout_ms, remote_transfer_done, ls);
    return 0;
}

/* A resume of a live term with a token that is not the term's: whoever
 * asks, nothing changes (docs/design.md, rule 8). */
static void refuse_resume(lease_state *ls, candidate *c)
{
    engine_token_refused(ls, "resume", c->req.identity, c->req.resume_epoch);
    engine_candidate_refuse(c, ENGINE_PERMISSION_DENIED,
                            "term_token is not the token of the term to resume: only its holder "
                            "may resume it (it got the token in Elected)");
}

/* A candidate asks to resume its term at epoch: reattach to our term, or
 * take over a term another replica of the service was renewing (checking
 * the token from the Lease's record: holder, epoch and nonce). */
void engine_try_resume(lease_state *ls, candidate *c)
{
    int64_t now = engine_now_ms(ls->e);
    term *t = ls->term;
    if (t && !engine_term_over(t) && strcmp(t->identity, c->req.identity) == 0 &&
        t->epoch == c->req.resume_epoch && engine_term_valid_for(ls->e, t, now) > 0) {
        if (engine_token_equal(t->token, c->req.term_token))
            engine_term_reattach(ls, c);
        else
            refuse_resume(ls, c);
        return;
    }
    if (!t && ls->exists && strcmp(ls->record.holder, c->req.identity) == 0 &&
        ls->record.transitions == c->req.resume_epoch && !engine_record_expired(ls, now) &&
        !engine_lease_writing(ls)) {
        if (!engine_token_matches_record(ls, c->req.term_token)) {
            refuse_resume(ls, c);
            return;
        }
        /* Renew the record as ours; the CAS fails if anyone wrote since.
         * Its renewTime is always later than the record's, so that the
         * replica it leaves sees a takeover (term.c, engine_term_follow). */
        store_lease rec = ls->record;
        int64_t wall = engine_wall_us(ls->e);
        rec.renew_time_us = wall > rec.renew_time_us ? wall : rec.renew_time_us + 1;
        rec.lease_duration_s = c->req.lease_duration_s;
        set_value(&rec, &c->req); /* the holder's current one */
        engine_campaign_set(c, CAMPAIGN_STANDBY);
        write_for(ls, c, false, &rec, WRITE_RESUME);
        return;
    }
    if (!t && engine_lease_writing(ls))
        return; /* decided when the write in flight ends (engine_lease_next) */
    engine_candidate_end(
        c, ENGINE_LOST_RESUME_FAILED, c->req.resume_epoch,
        "the term to resume is over (the Lease has another holder or epoch, or expired)");
}

void engine_process_resumes(lease_state *ls)
{
    KL__LIST_FOREACH_SAFE (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (c->state == CAMPAIGN_RESUMING)
            engine_try_resume(ls, c);
    }
}
