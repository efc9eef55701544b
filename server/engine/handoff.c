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
 * latest, until the last validity granted to it has passed
 * (term->finish_at_ms).
 *
 * The Lease's spec.preferredHolder (Kubernetes' coordinated leader
 * election) asks the same: when it names a standby campaigning here and
 * not the holder, the holder's next Confirm hands the term off to it as an
 * operator's Handoff would, and without a named standby a Handoff prefers
 * it to the first in line. Whoever may write the Lease may set it, so it
 * is taken as the cluster's intent (docs/design.md, rules 3 and 7).
 * Engine thread only. */
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
 * if it stands by here, else the first in line other than the holder. */
static candidate *handoff_target(lease_state *ls, const term *t, const char *to)
{
    candidate *first = NULL;
    KL__LIST_FOREACH (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (c->state != CAMPAIGN_STANDBY || strcmp(c->req.identity, t->identity) == 0)
            continue;
        if (to[0] ? strcmp(c->req.identity, to) == 0 : engine_preferred(ls, c->req.identity))
            return c;
        if (!first)
            first = c;
    }
    return to[0] ? NULL : first;
}

/* Ends t, handed off to c: at once when its holder asked (by_holder), else
 * once it acknowledges or its grant has run out. */
static void handoff_start(lease_state *ls, term *t, candidate *c, bool by_holder, const char *why)
{
    int64_t now = engine_now_ms(ls->e);
    char msg[512];
    ls->handoff_id = c->id;
    t->finish_at_ms = by_holder ? 0 : t->granted_until_ms;
    log_event(LOG_INFO, "handoff",
              "ns=%s lease=%s identity=%s epoch=%lld to=%s by_holder=%d why=%s wait_ms=%lld",
              ls->ns, ls->name, log_q(t->identity), (long long)t->epoch, log_q(c->req.identity),
              (int)by_holder, why, (long long)(t->finish_at_ms > now ? t->finish_at_ms - now : 0));
    snprintf(msg, sizeof msg, "handed off to %s%s", c->req.identity,
             strcmp(why, "preferred_holder") == 0 ? ", the Lease's preferredHolder" : "");
    engine_term_end(ls, ENGINE_LOST_HANDED_OFF, msg, true);
}

void engine_handoff_run(cmd *k)
{
    lease_state *ls = engine_lease_find(k->e, k->req.ns, k->req.name);
    term *t = ls && ls->term && !engine_term_over(ls->term) ? ls->term : NULL;
    char msg[512];
    if (!t) {
        const char *holder = ls && ls->synced ? engine_live_holder(ls, engine_now_ms(k->e)) : "";
        if (holder[0])
            snprintf(msg, sizeof msg,
                     "%.200s does not hold the Lease through this kubeleased replica: call "
                     "Handoff on the replica it campaigns through",
                     holder);
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
    candidate *c = handoff_target(ls, t, k->to);
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
    handoff_start(ls, t, c, by_holder, "handoff");
}

bool engine_handoff_preferred(lease_state *ls)
{
    term *t = ls->term;
    if (!t || engine_term_over(t) || !ls->record.preferred_holder[0] ||
        strcmp(ls->record.preferred_holder, t->identity) == 0)
        return false;
    candidate *c = handoff_target(ls, t, ls->record.preferred_holder);
    if (!c)
        return false; /* not campaigning here: nothing (docs/design.md, rule 3) */
    handoff_start(ls, t, c, false, "preferred_holder");
    return true;
}

bool engine_handoff_acknowledged(lease_state *ls, cmd *k)
{
    term *t = ls->term;
    if (!t || t->state != TERM_ENDING || !t->finish_at_ms || !ls->handoff_id ||
        strcmp(t->identity, k->req.identity) != 0 ||
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

bool engine_handoff_transfer(lease_state *ls)
{
    uint64_t id = ls->handoff_id;
    ls->handoff_id = 0;
    if (!id)
        return false;
    candidate *c = *engine_campaign_slot(ls->e, id);
    term *t = ls->term;
    if (!c || c->ls != ls || c->state != CAMPAIGN_STANDBY || ls->acq.state != ACQ_IDLE)
        return false; /* gone, or busy: release as usual; the next in line follows */
    char rv[STORE_RV_MAX];
    engine_copy_str(rv, sizeof rv, t->rv);
    int64_t epoch = t->epoch + 1;
    engine_term_answer_resign(ls, true);
    engine_term_free(ls);
    engine_acquire_transfer(ls, c, rv, epoch);
    return true;
}
