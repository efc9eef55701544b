/* Terms: a lease held by one of this engine's candidates. A term starts from
 * the record its acquisition wrote, is renewed every third of its lease
 * duration (sooner when the renew deadline needs it, never more often than
 * every retry period: renew_interval_ms), grants validity to its holder on
 * each Confirm (never beyond the last renewal's send time plus the renew
 * deadline), and ends when its holder resigns, its
 * validity runs out unconfirmed, a renewal cannot land in time, or another
 * writer takes the Lease. A term that ends is released only once nobody can
 * still believe in it (docs/design.md, rule 3). Its token, derived from the
 * nonce its acquisition wrote, is its holder's alone (docs/design.md, rule
 * 8). Its life is one state (term_state), changed only in term_set. Engine
 * thread only. */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/metrics.h"
#include "engine/internal.h"

static void term_schedule_guard(lease_state *ls);

static const char *term_state_name(term_state s)
{
    static const char *const names[] = {"leading", "ending"};
    return names[s];
}

static void term_set(lease_state *ls, term *t, term_state state)
{
    if (t->state == state)
        return;
    log_event(LOG_DEBUG, "term_state", "ns=%s lease=%s epoch=%lld from=%s to=%s", ls->ns, ls->name,
              (long long)t->epoch, term_state_name(t->state), term_state_name(state));
    t->state = state;
}

static term *term_new(lease_state *ls)
{
    term *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    loop_timer_init(ls->e->loop, &t->renew_timer);
    loop_timer_init(ls->e->loop, &t->guard_timer);
    return t;
}

/* ---------- grants ---------- */

int64_t engine_grant_ms(const engine *e, int32_t retry_s)
{
    return e->max_grant_ms > 0 ? e->max_grant_ms : (int64_t)retry_s * 1000;
}

int64_t engine_term_grant_of(const engine *e, const engine_campaign_req *req)
{
    int64_t def = engine_grant_ms(e, req->retry_period_s);
    return req->grant_ms > 0 && req->grant_ms < def ? req->grant_ms : def;
}

int64_t engine_term_valid_for(const engine *e, const term *t, int64_t now)
{
    int64_t until = t->renewed_sent_ms + (int64_t)t->renew_s * 1000;
    int64_t v = until - now;
    int64_t g = t->grant_ms > 0 ? t->grant_ms : engine_grant_ms(e, t->retry_s);
    if (KL_SIM_BROKEN(1)) /* the simulator's break: grants past the renew deadline */
        v = g = (int64_t)t->renew_s * 1000;
    if (v > g)
        v = g;
    return v > 0 ? v : 0;
}

/* How much later than ours a grant of v may end on its holder's clock. The
 * holder's deadline is its own send time plus v read on its own clock,
 * which may run slower than this replica's: rule 1 holds for rates within
 * 5% of each other (real clocks drift by 10^-5 to 10^-4, NTP slews by at
 * most 5 * 10^-4), so a release waits 5% of the grant past granted_until.
 * docs/design.md, rule 3. */
int64_t engine_rate_allowance_ms(int64_t v)
{
    return (v + 19) / 20;
}

int64_t engine_term_grant(lease_state *ls, int64_t now)
{
    term *t = ls->term;
    int64_t v = t->verifying ? 0 : engine_term_valid_for(ls->e, t, now);
    if (v <= 0)
        return 0;
    t->confirmed_ms = now;
    int64_t believed = now + v + engine_rate_allowance_ms(v);
    if (believed > t->believed_until_ms)
        t->believed_until_ms = believed;
    if (now + v > t->granted_until_ms) {
        t->granted_until_ms = now + v;
        term_schedule_guard(ls);
    }
    return v;
}

term *engine_term_of(lease_state *ls, const char *identity)
{
    if (!ls || !ls->term || engine_term_over(ls->term) || strcmp(ls->term->identity, identity) != 0)
        return NULL;
    return ls->term;
}

/* ---------- the guard: the renew deadline and granted_until ---------- */

static void guard_fire(void *arg)
{
    lease_state *ls = arg;
    term *t = ls->term;
    int64_t now = engine_now_ms(ls->e);
    int64_t renew_deadline = t->renewed_sent_ms + (int64_t)t->renew_s * 1000;
    /* Either way the holder may still believe it leads, on its slower
     * clock, until believed_until: the release waits for it. */
    if (now >= renew_deadline) {
        t->finish_at_ms = t->believed_until_ms;
        engine_term_end(ls, ENGINE_LOST_RENEW_FAILED,
                        "the Lease could not be renewed within the renew deadline", true);
    } else if (now >= t->granted_until_ms) {
        t->finish_at_ms = t->believed_until_ms;
        engine_term_end(
            ls, ENGINE_LOST_EXPIRED,
            t->owner ? "the term was not confirmed in time" : "the holder's stream is gone", true);
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

/* ---------- renewals ---------- */

static void renew_fire(void *arg);

/* How long after a renewal's send time the next one is due. The other
 * observers of the Lease (the other replicas, client-go candidates) judge it
 * expired a whole lease duration after the last change they saw, so a third
 * of it keeps the Lease fresh for them with room for two failed attempts.
 * The holder's grants never reach beyond the last renewal's send time plus
 * the renew deadline (rule 2), so the next renewal must land a full grant,
 * and half a retry period for its own latency, before that deadline, or the
 * grants shrink. Never more often than every retry period (client-go's
 * cadence). docs/design.md, rule 6. */
static int64_t renew_interval_ms(const lease_state *ls, const term *t)
{
    int64_t third = (int64_t)t->lease_s * 1000 / 3;
    int64_t grant = t->grant_ms > 0 ? t->grant_ms : engine_grant_ms(ls->e, t->retry_s);
    int64_t room = (int64_t)t->renew_s * 1000 - grant - (int64_t)t->retry_s * 500;
    int64_t every = third < room ? third : room;
    int64_t floor = (int64_t)t->retry_s * 1000;
    return every > floor ? every : floor;
}

static void schedule_renew(lease_state *ls, int64_t due)
{
    loop_timer_start(&ls->term->renew_timer, due, renew_fire, ls);
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
    int64_t left = t->granted_until_ms - engine_now_ms(ls->e);
    engine_event ev = {.kind = ENGINE_EVENT_HEARTBEAT, .epoch = t->epoch};
    ev.valid_for_ms = left > 0 ? left : 0;
    engine_send_event(&t->owner->listener, &ev);
}

/* A renewal that landed after the term ended: the release (if wanted) is
 * compare-and-swap on what it wrote; a conflict means the Lease is no
 * longer ours to release. */
static void renew_done_ending(lease_state *ls, const store_result *r, int64_t now)
{
    term *t = ls->term;
    if (r->status == STORE_OK) {
        engine_copy_str(t->rv, sizeof t->rv, r->lease.resource_version);
        engine_adopt_record(ls, &r->lease, now);
    } else if (r->status == STORE_CONFLICT || r->status == STORE_NOT_FOUND) {
        t->release_wanted = false;
    }
    engine_term_finish_when_due(ls);
}

/* ---------- renewals whose answer was lost ---------- */

/* Whether rec is the term's renewal whose answer was lost: the write id
 * that renewal carried, and the term's holder, epoch and nonce. A resume of
 * the term on another replica of the service keeps holder, epoch and nonce,
 * and may even carry the same renewTime (clocks differ by as much as the
 * time between the two writes), but never the same write id. */
static bool is_unanswered_renewal(const term *t, const store_lease *rec)
{
    return t->unanswered_id && rec->write_id == t->unanswered_id && rec->transitions == t->epoch &&
           strcmp(rec->holder, t->identity) == 0 && strcmp(rec->term_nonce, t->nonce) == 0;
}

/* A write of the term conflicted after a renewal whose answer was lost:
 * most likely that renewal landed after all (an apiserver or etcd that
 * paused with it, an answer cut off). The Lease is read back to know. */
static void reread_after_conflict(lease_state *ls, store_cb done)
{
    log_event(LOG_INFO, "term_reread", "ns=%s lease=%s epoch=%lld", ls->ns, ls->name,
              (long long)ls->term->epoch);
    ls->e->store->ops->get(ls->e->store, ls->ns, ls->name,
                           engine_request_timeout_ms(ls->term->renew_s), done, ls);
}

/* The read back as the answer the write should have had: the record, if
 * it shows the unanswered renewal (its rv is then the term's), else the
 * conflict. */
static void as_renewal_answer(lease_state *ls, const store_result *read, store_result *out)
{
    term *t = ls->term;
    bool ours = read->status == STORE_OK && is_unanswered_renewal(t, &read->lease);
    log_event(ours ? LOG_INFO : LOG_WARN, "term_reread_done",
              "ns=%s lease=%s epoch=%lld status=%s own_renewal=%d", ls->ns, ls->name,
              (long long)t->epoch, store_status_name(read->status), (int)ours);
    memset(out, 0, sizeof *out);
    if (ours) {
        out->status = STORE_OK;
        out->lease = read->lease;
    } else {
        out->status = STORE_CONFLICT;
        snprintf(out->message, sizeof out->message, "another writer changed the Lease");
    }
    t->unanswered_id = 0;
}

static void renew_done(void *ctx, const store_result *r);

static void renew_reread_done(void *ctx, const store_result *read)
{
    lease_state *ls = ctx;
    term *t = ls->term;
    int64_t sent = t->unanswered_sent_ms;
    store_result answer;
    as_renewal_answer(ls, read, &answer);
    if (answer.status == STORE_OK)
        ls->write.sent_ms = sent; /* the term goes on from the renewal that landed */
    renew_done(ls, &answer);
}

static void renew_done(void *ctx, const store_result *r)
{
    lease_state *ls = ctx;
    term *t = ls->term;
    if (r->status == STORE_CONFLICT && t->unanswered_id) {
        reread_after_conflict(ls, renew_reread_done); /* the slot stays the renewal's */
        return;
    }
    int64_t sent = engine_write_end(ls).sent_ms;
    if (r->status == STORE_OK) {
        t->unanswered_id = 0;
    } else if (r->status == STORE_UNAVAILABLE || r->status == STORE_INTERNAL) {
        t->unanswered_id = t->writing_id;
        t->unanswered_sent_ms = sent;
    }
    int64_t now = engine_now_ms(ls->e);
    /* A term is never freed while its renewal is in flight (engine_term_end
     * leaves it to this). */
    if (t->state == TERM_ENDING) {
        renew_done_ending(ls, r, now);
        return;
    }
    if (r->status == STORE_OK) {
        t->verifying = false; /* this copy is the term's current one */
        metrics_add("kubelease_renewals_total", "", 1);
        engine_history_renewed(ls, r->lease.renew_time_us);
        engine_copy_str(t->rv, sizeof t->rv, r->lease.resource_version);
        t->renewed_sent_ms = sent;
        engine_adopt_record(ls, &r->lease, now);
        term_schedule_guard(ls);
        /* A value proclaimed while this renewal was in flight is written
         * at once. */
        bool value_written = t->writing_value_gen == t->value_gen;
        schedule_renew(ls, value_written ? sent + renew_interval_ms(ls, t) : now);
        heartbeat(ls);
        if (value_written)
            engine_term_answer_proclaim(ls, ENGINE_OK, NULL);
        engine_notify_watchers(ls, false); /* a new leader value */
        engine_podlabel_apply(ls);
        return;
    }
    if (r->status == STORE_CONFLICT && engine_handoff_requested(ls))
        return; /* the conflict was a handoff request (handoff-to), seen meanwhile */
    if (r->status == STORE_CONFLICT || r->status == STORE_NOT_FOUND) {
        /* Someone else wrote the Lease, most likely: the term is over. The
         * release is still tried after a conflict, once the holder's grant
         * has run out (rule 2) and compare-and-swap on the term's last write
         * (rule 3): if nobody wrote (the conflict came from elsewhere), the
         * next leader need not wait a lease duration. */
        if (r->status == STORE_CONFLICT)
            t->finish_at_ms = t->believed_until_ms;
        engine_term_end(ls,
                        r->status == STORE_CONFLICT ? ENGINE_LOST_SUPERSEDED : ENGINE_LOST_DELETED,
                        r->message, r->status == STORE_CONFLICT);
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
    /* A term whose stream is gone is not renewed: it ends at granted_until
     * (and is released at believed_until). */
    if (t->state != TERM_LEADING || !t->owner)
        return;
    if (engine_lease_writing(ls)) {
        /* Only the term writes a Lease it holds, one write at a time; should
         * another write be in flight, the renewal follows it. */
        schedule_renew(ls, engine_now_ms(ls->e) + 200);
        return;
    }
    store_lease rec = ls->record;
    engine_copy_str(rec.resource_version, sizeof rec.resource_version, t->rv);
    engine_copy_str(rec.holder, sizeof rec.holder, t->identity);
    engine_copy_str(rec.term_nonce, sizeof rec.term_nonce, t->nonce);
    rec.transitions = t->epoch;
    rec.renew_time_us = engine_wall_us(ls->e);
    rec.lease_duration_s = t->lease_s;
    engine_copy_str(rec.pod_label, sizeof rec.pod_label, engine_podlabel_for_write(ls));
    rec.value_len = t->value_len;
    memcpy(rec.value, t->value, t->value_len);
    t->writing_value_gen = t->value_gen;
    /* A live term has acted on every handoff request its Lease showed
     * (engine_handoff_requested; one naming the holder asks nothing), and
     * the renewal is compare-and-swap on that version: a request written
     * since makes it conflict, never disappear. */
    rec.handoff_to[0] = '\0';
    rec.handed_to = 0;
    t->writing_id = engine_write_begin(ls, WRITE_RENEW, t->owner->id, &rec);
    ls->e->store->ops->update(ls->e->store, &rec, engine_request_timeout_ms(t->renew_s), renew_done,
                              ls);
}

/* ---------- start ---------- */

/* The metrics and log of a term that starts (or resumes from the store). */
static void term_started(lease_state *ls, int64_t valid_for_ms, bool resumed, int64_t now)
{
    term *t = ls->term;
    log_event(LOG_INFO, resumed ? "term_resumed" : "term_started",
              "ns=%s lease=%s identity=%s epoch=%lld valid_for_ms=%lld", ls->ns, ls->name,
              log_q(t->identity), (long long)t->epoch, (long long)valid_for_ms);
    char labels[ENGINE_LABELS_MAX];
    engine_lease_labels(ls, labels, sizeof labels);
    metrics_add("kubelease_terms_started_total", labels, 1);
    metrics_set("kubelease_leader", labels, 1);
    if (ls->vacant_ms && !resumed)
        metrics_observe("kubelease_failover_seconds", "", (double)(now - ls->vacant_ms) / 1000.0);
    ls->vacant_ms = 0;
    t->started = true;
    engine_history_term_started(ls, t);
    engine_history_renewed(ls, ls->record.renew_time_us);
    if (!resumed) /* a resume goes on with a term already announced */
        engine_events_term_started(ls, t);
}

void engine_term_start(lease_state *ls, candidate *c, const store_lease *rec, int64_t sent_ms,
                       bool resumed, int64_t granted_elsewhere_until_ms)
{
    term *t = term_new(ls);
    if (!t) {
        engine_candidate_end(c, ENGINE_LOST_RENEW_FAILED, 0, "out of memory");
        return;
    }
    /* A resumed term's holder may still hold grants of the replica it
     * comes from, whose copy has not seen the resume yet (rule 3). */
    t->believed_until_ms = granted_elsewhere_until_ms;
    t->owner = c;
    engine_copy_str(t->identity, sizeof t->identity, c->req.identity);
    t->epoch = rec->transitions;
    engine_copy_str(t->nonce, sizeof t->nonce, rec->term_nonce);
    engine_token_of(ls->e, ls->ns, ls->name, t->identity, t->epoch, t->nonce, t->token);
    t->lease_s = c->req.lease_duration_s;
    t->renew_s = c->req.renew_deadline_s;
    t->retry_s = c->req.retry_period_s;
    t->renewed_sent_ms = sent_ms;
    t->grant_ms = engine_term_grant_of(ls->e, &c->req);
    t->value_len = rec->value_len; /* what the write that starts it recorded */
    memcpy(t->value, rec->value, rec->value_len);
    engine_copy_str(t->rv, sizeof t->rv, rec->resource_version);
    /* The label the campaign asks for: what the acquisition recorded, or,
     * for a resume, perhaps another one (engine_podlabel_apply moves it). */
    engine_podlabel_format(ls, &c->req.label, t->label, sizeof t->label);
    ls->term = t;
    engine_campaign_set(c, CAMPAIGN_LEADING);
    int64_t now = engine_now_ms(ls->e);
    engine_adopt_record(ls, rec, now);
    engine_event ev = {.kind = ENGINE_EVENT_ELECTED, .epoch = t->epoch, .resumed = resumed};
    engine_copy_str(ev.term_token, sizeof ev.term_token, t->token);
    ev.value_len = t->value_len;
    memcpy(ev.value, t->value, t->value_len);
    ev.valid_for_ms = engine_term_grant(ls, now);
    if (ev.valid_for_ms <= 0) {
        engine_term_end(ls, ENGINE_LOST_RENEW_FAILED,
                        "the acquisition took longer than the renew deadline", true);
        return;
    }
    engine_send_event(&c->listener, &ev);
    term_started(ls, ev.valid_for_ms, resumed, now);
    schedule_renew(ls, sent_ms + renew_interval_ms(ls, t));
    engine_notify_standbys(ls);
    engine_notify_watchers(ls, false);
    engine_podlabel_apply(ls);    /* after the term has started (docs/design.md, rule 9) */
    engine_handoff_requested(ls); /* a resume keeps a request the Lease carries */
}

void engine_term_reattach(lease_state *ls, candidate *c)
{
    term *t = ls->term;
    if (t->owner && t->owner != c)
        engine_candidate_end(t->owner, ENGINE_LOST_EXPIRED, t->epoch,
                             "replaced by a resumed campaign");
    t->owner = c;
    /* the holder may change it */
    engine_podlabel_format(ls, &c->req.label, t->label, sizeof t->label);
    t->grant_ms = engine_term_grant_of(ls->e, &c->req);
    bool revalue =
        t->value_len != c->req.value_len || memcmp(t->value, c->req.value, c->req.value_len) != 0;
    if (revalue) { /* the holder's current value: written by the next renewal, at once */
        t->value_len = c->req.value_len;
        memcpy(t->value, c->req.value, c->req.value_len);
        t->value_gen++;
    }
    engine_campaign_set(c, CAMPAIGN_LEADING);
    /* No grant before a renewal lands (verifying): the holder's stream
     * left this replica, and its term may have been resumed on another
     * since, unseen here yet. Its Confirms wait for the renewal, written at
     * once (rules 3 and 5). */
    t->verifying = true;
    engine_event ev = {.kind = ENGINE_EVENT_ELECTED, .epoch = t->epoch, .resumed = true};
    engine_copy_str(ev.term_token, sizeof ev.term_token, t->token);
    ev.value_len = t->value_len;
    memcpy(ev.value, t->value, t->value_len);
    log_event(LOG_INFO, "term_resumed", "ns=%s lease=%s identity=%s epoch=%lld", ls->ns, ls->name,
              log_q(t->identity), (long long)t->epoch);
    engine_send_event(&c->listener, &ev);
    /* Renewals stop while the term has no stream (renew_fire): they start
     * again with its holder, at once (a write in flight delays it). */
    if (t->state == TERM_LEADING)
        schedule_renew(ls, engine_now_ms(ls->e));
    engine_podlabel_apply(ls);
}

void engine_term_renew_now(lease_state *ls)
{
    term *t = ls->term;
    if (t && t->state == TERM_LEADING && t->owner && !engine_lease_writing(ls))
        schedule_renew(ls, engine_now_ms(ls->e));
}

/* The fields a term writes, equal in a and b. */
static bool same_term_fields(const store_lease *a, const store_lease *b)
{
    return strcmp(a->holder, b->holder) == 0 && a->transitions == b->transitions &&
           strcmp(a->term_nonce, b->term_nonce) == 0 && a->renew_time_us == b->renew_time_us &&
           a->acquire_time_us == b->acquire_time_us && a->lease_duration_s == b->lease_duration_s &&
           strcmp(a->pod_label, b->pod_label) == 0 && a->value_len == b->value_len &&
           memcmp(a->value, b->value, a->value_len) == 0;
}

/* Renewals, the release and a handoff's transfer are compare-and-swap on
 * the term's last write (t->rv), so that a takeover by another replica
 * makes them fail. A write that changed none of the fields the term wrote
 * is no takeover (a resume on another replica always writes a later
 * renewTime, acquire.c): it set something of others' (spec.preferredHolder,
 * a label), and the term goes on from it, or its next write would fail and
 * end it for nothing. */
void engine_term_follow(lease_state *ls, const store_lease *next)
{
    term *t = ls->term;
    if (!t || !ls->exists || strcmp(ls->record.resource_version, t->rv) != 0 ||
        !same_term_fields(&ls->record, next))
        return;
    log_event(LOG_DEBUG, "term_follow", "ns=%s lease=%s epoch=%lld from_rv=%s rv=%s", ls->ns,
              ls->name, (long long)t->epoch, t->rv, next->resource_version);
    engine_copy_str(t->rv, sizeof t->rv, next->resource_version);
}

/* ---------- end and release ---------- */

void engine_term_answer_resign(lease_state *ls, bool released)
{
    term *t = ls->term;
    if (!t || !t->resign_done)
        return;
    engine_done done = t->resign_done;
    t->resign_done = NULL;
    engine_reply r = {.code = ENGINE_OK, .released = released, .epoch = t->epoch};
    done(t->resign_ctx, &r);
}

void engine_term_free(lease_state *ls)
{
    term *t = ls->term;
    if (!t)
        return;
    loop_timer_stop(&t->renew_timer);
    loop_timer_stop(&t->guard_timer);
    engine_podlabel_answer(ls, ENGINE_UNAVAILABLE, "the term is gone");
    engine_term_answer_proclaim(ls, ENGINE_UNAVAILABLE, "the term is gone");
    ls->term = NULL;
    OPENSSL_cleanse(t->token, sizeof t->token);
    free(t);
}

void engine_term_end(lease_state *ls, engine_lost_reason reason, const char *msg, bool release)
{
    term *t = ls->term;
    if (!t || engine_term_over(t))
        return;
    log_event(reason == ENGINE_LOST_RESIGNED ? LOG_INFO : LOG_WARN, "term_lost",
              "ns=%s lease=%s identity=%s epoch=%lld reason=%s released=%d msg=%s", ls->ns,
              ls->name, log_q(t->identity), (long long)t->epoch, engine_lost_reason_name(reason),
              (int)release, log_q(msg));
    char labels[ENGINE_LABELS_MAX], with_reason[ENGINE_REASON_LABELS_MAX];
    engine_lease_labels(ls, labels, sizeof labels);
    engine_lost_labels(labels, reason, with_reason, sizeof with_reason);
    metrics_add("kubelease_terms_lost_total", with_reason, 1);
    metrics_set("kubelease_leader", labels, 0);
    engine_history_term_ended(ls, t, reason);
    engine_events_term_ended(ls, t, reason);
    engine_term_answer_proclaim(ls, ENGINE_FAILED_PRECONDITION,
                                "the term ended before its value was written");
    engine_podlabel_answer(ls, ENGINE_FAILED_PRECONDITION,
                           "the term ended before its label was set");
    /* A resignation is the holder's last word; otherwise (it died, froze or
     * lost its connection) its last confirmation was its last sign of life. */
    ls->vacant_ms =
        reason == ENGINE_LOST_RESIGNED || !t->confirmed_ms ? engine_now_ms(ls->e) : t->confirmed_ms;
    if (t->owner)
        engine_candidate_end(t->owner, reason, t->epoch, msg);
    loop_timer_stop(&t->renew_timer);
    loop_timer_stop(&t->guard_timer);
    term_set(ls, t, TERM_ENDING);
    t->release_wanted = release;
    if (!engine_lease_writing(ls)) /* else the renewal's end finishes it */
        engine_term_finish_when_due(ls);
}

static void finish_fire(void *arg)
{
    lease_state *ls = arg;
    ls->term->finish_pending = false;
    engine_lease_next(ls);
}

void engine_term_finish_when_due(lease_state *ls)
{
    term *t = ls->term;
    if (KL_SIM_BROKEN(3)) /* the simulator's break: release before the last grant ran out */
        t->finish_at_ms = 0;
    if (t->finish_at_ms > engine_now_ms(ls->e)) {
        t->finish_pending = true;
        loop_timer_start(&t->guard_timer, t->finish_at_ms, finish_fire, ls);
        return;
    }
    t->finish_pending = false;
    loop_timer_stop(&t->guard_timer);
    engine_lease_next(ls);
}

bool engine_term_finish_due(const lease_state *ls)
{
    const term *t = ls->term;
    return !t->finish_pending && !loop_timer_active(&t->renew_timer);
}

static void release_retry_fire(void *arg)
{
    engine_lease_next(arg);
}

/* A release the apiserver did not take (timeout, reset, 429, 5xx, or 403
 * while its RBAC caches sync after a restart) is tried again while the Lease
 * still shows the term and nobody yet judges it expired by observed time:
 * otherwise the next leader waits a whole lease duration for a Lease nobody
 * holds (docs/design.md, rule 6). Each attempt is compare-and-swap on the
 * term's last write, as the first was (rule 3). */
static bool release_retry(lease_state *ls, const store_result *r, int64_t now)
{
    term *t = ls->term;
    int64_t retry = (int64_t)t->retry_s * 1000 / 2;
    if (retry < 200)
        retry = 200;
    if ((r->status != STORE_UNAVAILABLE && r->status != STORE_FORBIDDEN) ||
        atomic_load(&ls->e->stopping) ||
        now + retry - ls->observed_ms > (int64_t)ls->record.lease_duration_s * 1000)
        return false;
    loop_timer_start(&t->renew_timer, now + retry, release_retry_fire, ls);
    return true;
}

static void release_done(void *ctx, const store_result *r);

/* A release that conflicted with the term's own late renewal is written
 * again, compare-and-swap on that renewal (rule 3 holds: nobody else wrote
 * since). */
static void release_reread_done(void *ctx, const store_result *read)
{
    lease_state *ls = ctx;
    term *t = ls->term;
    store_result answer;
    as_renewal_answer(ls, read, &answer);
    if (answer.status != STORE_OK) {
        release_done(ls, &answer);
        return;
    }
    engine_write_end(ls);
    engine_copy_str(t->rv, sizeof t->rv, answer.lease.resource_version);
    if (engine_rv_newer(answer.lease.resource_version, ls->record.resource_version))
        engine_adopt_record(ls, &answer.lease, engine_now_ms(ls->e));
    engine_lease_next(ls); /* the release again, on that renewal */
}

static void release_done(void *ctx, const store_result *r)
{
    lease_state *ls = ctx;
    if (r->status == STORE_CONFLICT && ls->term->unanswered_id) {
        reread_after_conflict(ls, release_reread_done); /* the slot stays the release's */
        return;
    }
    engine_write_end(ls);
    int64_t now = engine_now_ms(ls->e);
    if (r->status == STORE_OK) {
        engine_adopt_record(ls, &r->lease, now);
        engine_events_term_released(ls, ls->term);
    } else {
        log_event(LOG_WARN, "release_failed", "ns=%s lease=%s status=%s msg=%s", ls->ns, ls->name,
                  store_status_name(r->status), log_q(r->message));
    }
    engine_term_answer_resign(ls, r->status == STORE_OK);
    if (r->status != STORE_OK && release_retry(ls, r, now))
        return;
    engine_term_free(ls);
    engine_history_observe(ls);
    engine_notify_watchers(ls, false);
    engine_notify_standbys(ls);
    engine_lease_next(ls);
}

bool engine_term_releasable(const lease_state *ls)
{
    const term *t = ls->term;
    return t->release_wanted && ls->exists && strcmp(ls->record.holder, t->identity) == 0 &&
           ls->record.transitions == t->epoch;
}

void engine_term_forget(lease_state *ls)
{
    engine_handoff_drop(ls); /* a handoff of this term, if any, goes with it */
    engine_term_answer_resign(ls, false);
    engine_term_free(ls);
    engine_history_observe(ls);
}

/* The release, once the term's label is off its Pod and no handoff takes
 * its place (engine_lease_next). */
void engine_term_release(lease_state *ls)
{
    term *t = ls->term;
    /* Release as client-go does: empty holder, leaseDurationSeconds 1. */
    store_lease rel = ls->record;
    engine_copy_str(rel.resource_version, sizeof rel.resource_version, t->rv);
    rel.transitions = t->epoch;
    rel.holder[0] = '\0';
    rel.lease_duration_s = 1;
    rel.pod_label[0] = '\0';  /* off its Pod (engine_podlabel_clear) */
    rel.handoff_to[0] = '\0'; /* asked of this term: it ends (engine_handoff_transfer) */
    rel.handed_to = 0;
    rel.acquire_time_us = rel.renew_time_us = engine_wall_us(ls->e);
    engine_write_begin(ls, WRITE_RELEASE, t->owner ? t->owner->id : 0, &rel);
    ls->e->store->ops->update(ls->e->store, &rel, engine_request_timeout_ms(t->renew_s),
                              release_done, ls);
}

/* An acquisition whose candidate left while it was being written: nobody
 * was told it was elected, so the Lease is given back, through the same
 * release path as a term's, at not_before_ms (0: at once). A resume's holder
 * was told, by the replica it came from: that one's grants may still run,
 * so its caller passes when they are over. */
void engine_term_release_unclaimed(lease_state *ls, const store_lease *rec, int64_t not_before_ms)
{
    engine_adopt_record(ls, rec, engine_now_ms(ls->e));
    term *t = ls->term ? NULL : term_new(ls);
    if (!t)
        return; /* out of memory (or a term exists): the Lease expires by itself */
    engine_copy_str(t->identity, sizeof t->identity, rec->holder);
    engine_copy_str(t->rv, sizeof t->rv, rec->resource_version);
    t->epoch = rec->transitions;
    t->renew_s = t->retry_s = t->lease_s = 2;
    engine_copy_str(t->label, sizeof t->label, rec->pod_label);
    t->state = TERM_ENDING; /* born over */
    t->release_wanted = true;
    t->finish_at_ms = not_before_ms;
    ls->term = t;
    engine_term_finish_when_due(ls);
}
