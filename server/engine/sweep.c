/* Forgetting idle leases: a lease nobody here campaigns on, watches or
 * reads for idle_forget_ms is forgotten (its state freed, its store watch
 * stopped, its metric series removed), so that memory and apiserver watches
 * follow the leases in use rather than every name ever asked about. The
 * sweep runs every eighth of the idle period while any lease is followed,
 * so an idle lease goes between one and one and an eighth idle periods
 * after its last use. Engine thread only. */
#include "engine/internal.h"

/* Its cached record only serves GetHolder, and a fresh watch rebuilds it
 * (observed time restarts then, which only delays an expiry judgement: the
 * safe side). */
bool engine_lease_idle(const lease_state *ls)
{
    if (!kl__list_empty(&ls->candidates) || !kl__list_empty(&ls->watchers) || ls->term ||
        engine_lease_writing(ls) || ls->label.busy || ls->label.verifying ||
        loop_timer_active(&ls->label.retry_timer))
        return false;
    KL__LIST_FOREACH (link, &ls->e->gets)
        if (engine_get_of(link)->ls == ls)
            return false;
    return true;
}

static void sweep_fire(void *arg)
{
    engine *e = arg;
    int64_t now = engine_now_ms(e);
    for (unsigned b = 0; b < ENGINE_BUCKETS; b++) {
        for (lease_state *ls = e->leases[b], *next; ls; ls = next) {
            next = ls->hash_next;
            if (!engine_lease_idle(ls))
                ls->idle_since_ms = 0;
            else if (!ls->idle_since_ms)
                ls->idle_since_ms = now;
            else if (now - ls->idle_since_ms >= e->idle_forget_ms)
                engine_lease_forget(ls);
        }
    }
    engine_sweep_ensure(e);
}

void engine_sweep_ensure(engine *e)
{
    if (!loop_timer_active(&e->sweep_timer) && e->n_leases > 0 && !atomic_load(&e->stopping))
        loop_timer_start(&e->sweep_timer, engine_now_ms(e) + (e->idle_forget_ms + 7) / 8,
                         sweep_fire, e);
}
