/* ListCandidates: the campaigns for one Lease, in line order — the leader,
 * then the standbys in the order next_in_line (acquire.c) would elect them,
 * the Lease's preferred holder first, then arrival order — each with how
 * long it has campaigned and the replica holding it. A replica knows only
 * its own campaigns; a live holder
 * campaigning through another replica (or another writer) is shown from the
 * Lease, its replica unknown. Reads only what is followed: a Lease not
 * followed here answers an empty list and is not read, so listing made-up
 * names costs nothing. Engine thread only. */
#include <stdlib.h>
#include <string.h>

#include "engine/internal.h"

static void fill(engine_candidate_status *row, const char *identity, int64_t for_ms, bool leader,
                 const char *replica)
{
    engine_copy_str(row->identity, sizeof row->identity, identity);
    row->campaigning_for_ms = for_ms > 0 ? for_ms : 0;
    row->leader = leader;
    engine_copy_str(row->replica, sizeof row->replica, replica);
}

void engine_candidates_list(cmd *k)
{
    engine *e = k->e;
    lease_state *ls = engine_lease_find(e, k->req.ns, k->req.name);
    engine_reply r = {.code = ENGINE_OK};
    engine_copy_str(r.replica, sizeof r.replica, e->replica);
    size_t n = 1; /* room for a holder campaigning elsewhere */
    if (ls)
        KL__LIST_FOREACH (link, &ls->candidates)
            n++;
    engine_candidate_status *rows = calloc(n, sizeof *rows);
    if (!rows) {
        engine_reply oom = {.code = ENGINE_INTERNAL, .message = "out of memory"};
        k->done(k->ctx, &oom);
        return;
    }
    size_t i = 0;
    if (ls && ls->synced) {
        int64_t now = engine_now_ms(e);
        const char *holder = engine_live_holder(ls, now);
        term *t = ls->term && !engine_term_over(ls->term) ? ls->term : NULL;
        r.epoch = ls->record.transitions;
        /* The leader first: its campaign here, or the Lease's holder. */
        if (t && t->owner)
            fill(&rows[i++], t->identity, now - t->owner->since_ms, true, e->replica);
        else if (holder[0])
            fill(&rows[i++], holder, ls->transition_ms ? now - ls->transition_ms : 0, true,
                 t ? e->replica : "");
        /* Two passes: the preferred standby, then the others. */
        for (int pass = 0; pass < 2; pass++)
            KL__LIST_FOREACH (link, &ls->candidates) {
                candidate *c = engine_candidate_of(link);
                bool first = c->state == CAMPAIGN_STANDBY && engine_preferred(ls, c->req.identity);
                if (c->state != CAMPAIGN_LEADING && first == (pass == 0))
                    fill(&rows[i++], c->req.identity, now - c->since_ms, false, e->replica);
            }
    }
    r.n_candidates = i;
    r.candidates = rows;
    k->done(k->ctx, &r);
    free(rows);
}
