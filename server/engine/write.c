/* Each Lease's one write in flight.
 *
 * A Lease has at most one store write in flight, whatever writes it: an
 * acquisition, a resume, a claim or a hand-over of a term (acquire.c), the
 * term's renewal or release (term.c), the clearing of a stale Pod label
 * (podlabel.c) or a handoff request (handoff.c). The write slot
 * (lease_state.write) says which and for whom; engine_lease_writing is the
 * one answer to "is this Lease busy?". Every write is compare-and-swap on
 * a version its writer saw, so two of them in flight would make one fail
 * for nothing; one at a time, each starts from what the last one wrote.
 * Engine thread only. */
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

void engine_write_begin(lease_state *ls, lease_write what, uint64_t by)
{
    if (engine_lease_writing(ls))
        log_event(LOG_ERROR, "write_overlap", "ns=%s lease=%s writing=%s new=%s", ls->ns, ls->name,
                  engine_write_name(ls->write.what), engine_write_name(what));
    log_event(LOG_DEBUG, "write_begin", "ns=%s lease=%s what=%s by=%llu", ls->ns, ls->name,
              engine_write_name(what), (unsigned long long)by);
    ls->write.what = what;
    ls->write.by = by;
    ls->write.sent_ms = engine_now_ms(ls->e);
}

lease_write_slot engine_write_end(lease_state *ls)
{
    lease_write_slot w = ls->write;
    log_event(LOG_DEBUG, "write_end", "ns=%s lease=%s what=%s by=%llu", ls->ns, ls->name,
              engine_write_name(w.what), (unsigned long long)w.by);
    ls->write = (lease_write_slot){0};
    return w;
}
