/* The leader value (docs/design.md, rule 10): Proclaim, the holder's change
 * of the value its term writes, and the answer once it is written. The
 * value itself goes into the Lease with every renewal of the term
 * (term.c, renew_fire), which answers the Proclaim when the renewal
 * carrying it lands. Engine thread only. */
#include <string.h>

#include "core/log.h"
#include "engine/internal.h"

void engine_term_answer_proclaim(lease_state *ls, engine_code code, const char *msg)
{
    term *t = ls->term;
    if (!t || !t->proclaim_done)
        return;
    engine_done done = t->proclaim_done;
    void *ctx = t->proclaim_ctx;
    t->proclaim_done = NULL;
    t->proclaim_ctx = NULL;
    engine_reply r = {.code = code, .epoch = t->epoch};
    engine_copy_str(r.message, sizeof r.message, msg);
    done(ctx, &r);
}

/* Only the holder changes its value; the next renewal (at once) writes it,
 * compare-and-swap on the term's last write like every renewal, and the
 * Proclaim is answered when it has landed. */
void engine_term_proclaim(cmd *k)
{
    lease_state *ls = engine_lease_find(k->e, k->req.ns, k->req.name);
    term *t = engine_term_of(ls, k->req.identity);
    engine_reply r = {.code = ENGINE_FAILED_PRECONDITION};
    if (!t || !t->owner) {
        engine_copy_str(r.message, sizeof r.message,
                        t ? "the campaign stream is gone; resume it first"
                          : "no live term of this identity here: Proclaim goes to the replica "
                            "holding the leader's campaign");
        k->done(k->ctx, &r);
        return;
    }
    if (!engine_token_equal(t->token, k->req.term_token)) {
        engine_token_refused(ls, "proclaim", k->req.identity, t->epoch);
        r.code = ENGINE_PERMISSION_DENIED;
        engine_copy_str(r.message, sizeof r.message,
                        "term_token is not the token of this term: only its holder may proclaim "
                        "(it got the token in Elected)");
        k->done(k->ctx, &r);
        return;
    }
    engine_term_answer_proclaim(ls, ENGINE_FAILED_PRECONDITION,
                                "replaced by a later Proclaim before its value was written");
    t->value_len = k->req.value_len;
    memcpy(t->value, k->req.value, k->req.value_len);
    t->owner->req.value_len = k->req.value_len; /* and a campaign resumed here keeps it */
    memcpy(t->owner->req.value, k->req.value, k->req.value_len);
    t->value_gen++;
    t->proclaim_done = k->done;
    t->proclaim_ctx = k->ctx;
    log_event(LOG_INFO, "proclaimed", "ns=%s lease=%s identity=%s epoch=%lld value_bytes=%u",
              ls->ns, ls->name, log_q(t->identity), (long long)t->epoch, (unsigned)t->value_len);
    engine_term_renew_now(ls); /* a renewal in flight: the next one, when it lands */
}
