/* Each Lease's one write in flight and what the Lease does when it ends.
 *
 * A Lease has at most one store write in flight, whatever writes it: an
 * acquisition, a resume, a claim or a hand-over of a term (acquire.c), the
 * term's renewal or release (term.c), the clearing of a stale Pod label
 * (podlabel.c) or a handoff request (handoff.c). The write slot
 * (lease_state.write) says which and for whom; engine_lease_writing is the
 * one answer to "is this Lease busy?". Every write is compare-and-swap on
 * a version its writer saw, so two of them in flight would make one fail
 * for nothing; one at a time, each starts from what the last one wrote.
 *
 * When a write ends, its writer acts on the answer (a term starts, a
 * renewal is adopted, a Handoff is answered) and then engine_lease_next
 * decides what comes next, here and nowhere else, in the order the safety
 * rules ask (docs/design.md, rules 3 and 9). Engine thread only. */
#include "core/log.h"
#include "engine/internal.h"

const char *engine_write_name(lease_write w)
{
    static const char *const names[] = {
        [WRITE_NONE] = "none",
        [WRITE_ACQUIRE] = "acquire",
        [WRITE_RESUME] = "resume",
        [WRITE_REREAD] = "reread",
        [WRITE_CLAIM] = "claim",
        [WRITE_HAND] = "hand",
        [WRITE_RENEW] = "renew",
        [WRITE_RELEASE] = "release",
        [WRITE_LABEL_STALE] = "label_stale",
        [WRITE_HANDOFF_REQ] = "handoff_request",
    };
    return names[w];
}

uint64_t engine_write_begin(lease_state *ls, lease_write what, uint64_t by, store_lease *rec)
{
    if (engine_lease_writing(ls))
        log_event(LOG_ERROR, "write_overlap", "ns=%s lease=%s writing=%s new=%s", ls->ns, ls->name,
                  engine_write_name(ls->write.what), engine_write_name(what));
    log_event(LOG_DEBUG, "write_begin", "ns=%s lease=%s what=%s by=%llu", ls->ns, ls->name,
              engine_write_name(what), (unsigned long long)by);
    ls->write.what = what;
    ls->write.by = by;
    ls->write.sent_ms = engine_now_ms(ls->e);
    if (!rec)
        return 0;
    if (++ls->e->next_write_id == 0) /* 0 is "unset" */
        ls->e->next_write_id = 1;
    rec->write_id = ls->e->next_write_id;
    return rec->write_id;
}

lease_write_slot engine_write_end(lease_state *ls)
{
    lease_write_slot w = ls->write;
    log_event(LOG_DEBUG, "write_end", "ns=%s lease=%s what=%s by=%llu", ls->ns, ls->name,
              engine_write_name(w.what), (unsigned long long)w.by);
    ls->write = (lease_write_slot){0};
    return w;
}

/* A term that is over: once due, its recorded label comes off its Pod
 * before the Lease changes hands (rule 9; podlabel.c calls
 * engine_lease_next again when the removal has landed), then a handoff
 * writes the standby's term in one compare-and-swap on the term's last
 * write (rule 3), or else the Lease is released. A term whose Lease is no
 * longer its own (superseded, deleted, resumed elsewhere) is forgotten:
 * nothing is written, and the Lease goes on as one without a term (false:
 * the caller goes on); true when nothing more is to do now (the term waits,
 * or a write has started). */
static bool finish_term(lease_state *ls)
{
    if (!engine_term_finish_due(ls))
        return true; /* a timer calls engine_lease_next */
    if (!engine_term_releasable(ls)) {
        engine_term_forget(ls);
        return false;
    }
    if (!engine_podlabel_clear(ls))
        return true;
    if (engine_handoff_transfer(ls))
        return true; /* the term is gone; the transfer's end calls this again */
    engine_term_release(ls);
    return true;
}

void engine_lease_next(lease_state *ls)
{
    term *t = ls->term;
    if (t && !engine_term_over(t)) {
        /* A live term: its label (a Pod request, not a Lease write, so a
         * renewal in flight does not hold it back). */
        engine_podlabel_step(ls);
        return;
    }
    if (engine_lease_writing(ls))
        return; /* its end calls this again */
    if (t && finish_term(ls))
        return;
    if (!ls->synced || atomic_load(&ls->e->stopping))
        return;
    engine_process_resumes(ls);
    engine_try_acquire(ls);
}
