/* Planned handoff: the term held through this replica ends with
 * ENGINE_LOST_HANDED_OFF and a chosen standby (or the next in line) gets
 * the next term in one compare-and-swap write over the term's last write,
 * so that no other candidate, here or on another replica, can take the
 * Lease in between.
 *
 * Safety (docs/design.md, rules 2 and 3): the next term starts only once
 * the holder has stopped leading. When the holder asks (its identity and
 * token, rule 8), its library has already stopped reporting leadership, as
 * for a resignation: the transfer is written at once. When someone else
 * asks, the holder's stream gets Lost HANDED_OFF and its Confirms are
 * refused (the term is over), but the transfer waits until the holder
 * acknowledges with a Resign carrying its token (its library sends one on
 * Lost HANDED_OFF after it stopped reporting leadership) or, at the
 * latest, until the last validity granted to it has passed, with rule 3's
 * allowance for clock rates (term->finish_at_ms: believed_until).
 *
 * The Lease's spec.preferredHolder (Kubernetes' coordinated leader
 * election) asks the same: when it names a standby campaigning here and
 * not the holder, the holder's next Confirm hands the term off to it as an
 * operator's Handoff would, and without a named standby a Handoff prefers
 * it to the first in line. Whoever may write the Lease may set it, so it
 * is taken as the cluster's intent (docs/design.md, rules 3 and 7).
 *
 * Across replicas, the Lease carries the request: a replica asked to hand
 * off a term it does not serve, to a standby campaigning through it,
 * writes the annotation kubelease.io/handoff-to (nothing else, so the
 * serving replica follows the edit); the serving replica hands the term
 * off as for an operator (same wait), and writes the transfer marked
 * kubelease.io/handed-to for the standby's replica, which claims it
 * (acquire.c, claim_handed_to) and starts the term there. The annotation
 * is trusted as spec.preferredHolder is: whoever can write it can write
 * the Lease. Engine thread only. */
#include <string.h>

#include "core/log.h"
#include "engine/internal.h"

static void reply_error(cmd *k, engine_code code, const char *msg)
{
    engine_reply r = {.code = code};
    engine_copy_str(r.message, sizeof r.message, msg);
    k->done(k->ctx, &r);
}

/* The standby to hand off to: to, or (to "") the Lease's preferred holder
 * if it stands by here, else the first in line other than holder. */
static candidate *handoff_target(lease_state *ls, const char *holder, const char *to)
{
    candidate *first = NULL;
    KL__LIST_FOREACH (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (c->state != CAMPAIGN_STANDBY || strcmp(c->req.identity, holder) == 0)
            continue;
        if (to[0] ? strcmp(c->req.identity, to) == 0 : engine_preferred(ls, c->req.identity))
            return c;
        if (!first)
            first = c;
    }
    return to[0] ? NULL : first;
}

/* Ends t, handed off to `to` (the standby c here; NULL: a standby of
 * another replica): at once when its holder asked (by_holder), else once
 * it acknowledges or its grant has run out. */
static void handoff_start(lease_state *ls, term *t, candidate *c, const char *to, bool by_holder,
                          const char *why)
{
    int64_t now = engine_now_ms(ls->e);
    char msg[512];
    ls->handoff_id = c ? c->id : 0;
    engine_copy_str(ls->handoff_remote, sizeof ls->handoff_remote, c ? "" : to);
    t->finish_at_ms = by_holder ? 0 : t->believed_until_ms;
    log_event(LOG_INFO, "handoff",
              "ns=%s lease=%s identity=%s epoch=%lld to=%s remote=%d by_holder=%d why=%s "
              "wait_ms=%lld",
              ls->ns, ls->name, log_q(t->identity), (long long)t->epoch, log_q(to), (int)!c,
              (int)by_holder, why, (long long)(t->finish_at_ms > now ? t->finish_at_ms - now : 0));
    snprintf(msg, sizeof msg, "handed off to %s%s", to,
             strcmp(why, "preferred_holder") == 0 ? ", the Lease's preferredHolder" : "");
    engine_term_end(ls, ENGINE_LOST_HANDED_OFF, msg, true);
}

void engine_handoff_answer_pending(lease_state *ls, engine_code code, const char *msg)
{
    engine_done done = ls->handoff_req.done;
    if (!done)
        return;
    ls->handoff_req.done = NULL;
    engine_reply r = {.code = code};
    if (code == ENGINE_OK) {
        r.epoch = ls->exists ? ls->record.transitions : 0;
        engine_copy_str(r.holder, sizeof r.holder, ls->handoff_req.to);
    }
    engine_copy_str(r.message, sizeof r.message, msg);
    done(ls->handoff_req.ctx, &r);
}

/* The request written (or not): the Handoff is answered; the serving
 * replica completes it asynchronously (engine_handoff_requested). */
static void request_done(void *ctx, const store_result *r)
{
    lease_state *ls = ctx;
    engine_write_end(ls);
    log_event(r->status == STORE_OK ? LOG_INFO : LOG_WARN, "handoff_requested",
              "ns=%s lease=%s to=%s status=%s msg=%s", ls->ns, ls->name, log_q(ls->handoff_req.to),
              store_status_name(r->status), log_q(r->message));
    if (r->status == STORE_OK)
        engine_handoff_answer_pending(ls, ENGINE_OK, "");
    else if (r->status == STORE_CONFLICT)
        engine_handoff_answer_pending(ls, ENGINE_UNAVAILABLE,
                                      "the Lease changed while the handoff was asked for: "
                                      "try again");
    else
        engine_handoff_answer_pending(ls, ENGINE_UNAVAILABLE, r->message);
    engine_lease_next(ls);
}

/* A Handoff reaching a replica that does not serve the live term (held by
 * holder through another replica): when the standby to elect campaigns
 * here, the request goes to the serving replica through the Lease, as the
 * annotation handoff-to written with one compare-and-swap on the cached
 * record; the term's fields are untouched, so that replica follows the
 * edit. False: nothing written (the target is not a standby here: this
 * replica cannot know whether it campaigns anywhere). */
static bool request_through_lease(cmd *k, lease_state *ls, const char *holder)
{
    if (ls->term || engine_lease_writing(ls) || k->req.identity[0])
        return false;
    candidate *c = handoff_target(ls, holder, k->to);
    if (!c)
        return false;
    store_lease rec = ls->record;
    engine_copy_str(rec.handoff_to, sizeof rec.handoff_to, c->req.identity);
    engine_copy_str(ls->handoff_req.to, sizeof ls->handoff_req.to, c->req.identity);
    engine_write_begin(ls, WRITE_HANDOFF_REQ, c->id, &rec);
    ls->handoff_req.done = k->done;
    ls->handoff_req.ctx = k->ctx;
    log_event(LOG_INFO, "handoff_request", "ns=%s lease=%s holder=%s epoch=%lld to=%s", ls->ns,
              ls->name, log_q(holder), (long long)rec.transitions, log_q(c->req.identity));
    ls->e->store->ops->update(ls->e->store, &rec,
                              engine_request_timeout_ms(c->req.renew_deadline_s), request_done, ls);
    return true;
}

void engine_handoff_run(cmd *k)
{
    lease_state *ls = engine_lease_find(k->e, k->req.ns, k->req.name);
    term *t = ls && ls->term && !engine_term_over(ls->term) ? ls->term : NULL;
    char msg[512];
    if (!t) {
        const char *holder = ls && ls->synced ? engine_live_holder(ls, engine_now_ms(k->e)) : "";
        if (holder[0] && request_through_lease(k, ls, holder))
            return; /* answered once the request is written */
        if (holder[0])
            snprintf(msg, sizeof msg,
                     "%.200s does not hold the Lease through this kubeleased replica and "
                     "%.200s: call Handoff on the replica it campaigns through",
                     holder,
                     k->to[0] ? "to_identity is not a standby campaigning here"
                              : "no standby campaigns here");
        reply_error(k, ENGINE_FAILED_PRECONDITION, holder[0] ? msg : "nobody holds the Lease");
        return;
    }
    bool by_holder = k->req.identity[0] != '\0';
    if (by_holder && (strcmp(k->req.identity, t->identity) != 0 ||
                      !engine_token_equal(t->token, k->req.term_token))) {
        engine_token_refused(ls, "handoff", k->req.identity, t->epoch);
        reply_error(k, ENGINE_PERMISSION_DENIED,
                    "term_token is not the token of this term: only its holder may hand it "
                    "off (others need the verb handoff and no token)");
        return;
    }
    candidate *c = handoff_target(ls, t->identity, k->to);
    if (!c) {
        if (k->to[0])
            snprintf(msg, sizeof msg,
                     "to_identity: %.200s is not a standby campaigning through this "
                     "kubeleased replica",
                     k->to);
        reply_error(k, ENGINE_FAILED_PRECONDITION,
                    k->to[0] ? msg : "no standby campaigns through this kubeleased replica");
        return;
    }
    engine_reply r = {.code = ENGINE_OK, .epoch = t->epoch};
    engine_copy_str(r.holder, sizeof r.holder, c->req.identity);
    k->done(k->ctx, &r);
    handoff_start(ls, t, c, c->req.identity, by_holder, "handoff");
}

bool engine_handoff_preferred(lease_state *ls)
{
    term *t = ls->term;
    if (!t || engine_term_over(t) || !ls->record.preferred_holder[0] ||
        strcmp(ls->record.preferred_holder, t->identity) == 0)
        return false;
    candidate *c = handoff_target(ls, t->identity, ls->record.preferred_holder);
    if (!c)
        return false; /* not campaigning here: nothing (docs/design.md, rule 3) */
    handoff_start(ls, t, c, c->req.identity, false, "preferred_holder");
    return true;
}

bool engine_handoff_acknowledged(lease_state *ls, cmd *k)
{
    term *t = ls->term;
    if (!t || t->state != TERM_ENDING || !t->finish_at_ms ||
        (!ls->handoff_id && !ls->handoff_remote[0]) || strcmp(t->identity, k->req.identity) != 0 ||
        !engine_token_equal(t->token, k->req.term_token))
        return false;
    log_event(LOG_INFO, "handoff_acknowledged", "ns=%s lease=%s identity=%s epoch=%lld", ls->ns,
              ls->name, log_q(t->identity), (long long)t->epoch);
    t->finish_at_ms = 0;
    t->resign_done = k->done; /* answered once the transfer (or release) is written */
    t->resign_ctx = k->ctx;
    if (t->finish_pending)
        engine_term_finish_when_due(ls);
    /* else a renewal is in flight: its end finishes the term. */
    return true;
}

bool engine_handoff_requested(lease_state *ls)
{
    term *t = ls->term;
    const char *to = ls->record.handoff_to;
    if (!t || t->state != TERM_LEADING || !ls->exists || !to[0] ||
        strcmp(ls->record.resource_version, t->rv) != 0 || strcmp(to, t->identity) == 0)
        return false;
    /* A standby here after all: the local transfer (a fresh record, so the
     * annotation goes with it). */
    candidate *c = handoff_target(ls, t->identity, to);
    handoff_start(ls, t, c, to, false, "handoff_request");
    return true;
}

void engine_handoff_drop(lease_state *ls)
{
    ls->handoff_id = 0;
    ls->handoff_remote[0] = '\0';
}

/* The term ends without a handoff of its own, but its Lease, as of the
 * term's last write, asks for one (a request that landed while a renewal
 * was in flight: the renewal conflicted): it is honoured now, the holder's
 * grant having run out or the holder having resigned. */
static void adopt_request(lease_state *ls, term *t)
{
    const char *to = ls->record.handoff_to;
    if (ls->handoff_id || ls->handoff_remote[0] || !to[0] ||
        strcmp(ls->record.resource_version, t->rv) != 0 || strcmp(to, t->identity) == 0)
        return;
    candidate *c = handoff_target(ls, t->identity, to);
    if (c)
        ls->handoff_id = c->id;
    else
        engine_copy_str(ls->handoff_remote, sizeof ls->handoff_remote, to);
    log_event(LOG_INFO, "handoff", "ns=%s lease=%s identity=%s epoch=%lld to=%s remote=%d why=%s",
              ls->ns, ls->name, log_q(t->identity), (long long)t->epoch, log_q(to), (int)!c,
              "handoff_request_at_release");
}

/* The transfer to a standby of another replica: a fresh term for it,
 * marked handed-to, that its replica claims; nothing starts here. */
static bool transfer_remote(lease_state *ls, term *t, const char *to)
{
    if (engine_lease_writing(ls))
        return false;
    char rv[STORE_RV_MAX], id[STORE_HOLDER_MAX];
    engine_copy_str(rv, sizeof rv, t->rv);
    engine_copy_str(id, sizeof id, to);
    int64_t epoch = t->epoch + 1;
    int32_t lease_s = t->lease_s;
    int timeout = engine_request_timeout_ms(t->renew_s);
    engine_term_answer_resign(ls, true);
    engine_term_free(ls);
    if (engine_acquire_transfer_remote(ls, id, rv, epoch, lease_s, timeout) != 0) {
        /* No randomness, no nonce: nothing written; the Lease expires. */
        log_event(LOG_ERROR, "handoff_transferred", "ns=%s lease=%s to=%s msg=%s", ls->ns, ls->name,
                  log_q(id), log_q("the random generator failed"));
        engine_schedule_expiry(ls);
    }
    return true;
}

bool engine_handoff_transfer(lease_state *ls)
{
    term *t = ls->term;
    adopt_request(ls, t);
    uint64_t id = ls->handoff_id;
    char remote[STORE_HOLDER_MAX];
    engine_copy_str(remote, sizeof remote, ls->handoff_remote);
    engine_handoff_drop(ls);
    if (remote[0])
        return transfer_remote(ls, t, remote);
    if (!id)
        return false;
    candidate *c = *engine_campaign_slot(ls->e, id);
    if (!c || c->ls != ls || c->state != CAMPAIGN_STANDBY || engine_lease_writing(ls))
        return false; /* gone, or busy: release as usual; the next in line follows */
    char rv[STORE_RV_MAX];
    engine_copy_str(rv, sizeof rv, t->rv);
    int64_t epoch = t->epoch + 1;
    engine_term_answer_resign(ls, true);
    engine_term_free(ls);
    engine_acquire_transfer(ls, c, rv, epoch);
    return true;
}
