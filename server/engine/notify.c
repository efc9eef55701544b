/* What the streams are told besides a term's own events: standbys (the
 * candidates that do not lead) learn the holder and epoch, holder watchers
 * every change of holder, epoch, existence or the live holder's leader
 * value (docs/design.md, rule 10), and standbys get a keep-alive
 * every retry period so that a stream nobody writes to is seen to live.
 * Engine thread only. */
#include <string.h>

#include "engine/internal.h"

void engine_notify_candidate(candidate *c)
{
    lease_state *ls = c->ls;
    engine_event ev = {.kind = ENGINE_EVENT_CANDIDATE};
    engine_copy_str(ev.holder, sizeof ev.holder, engine_live_holder(ls, engine_now_ms(ls->e)));
    ev.epoch = ls->exists ? ls->record.transitions : 0;
    engine_send_event(&c->listener, &ev);
}

void engine_notify_standbys(lease_state *ls)
{
    KL__LIST_FOREACH (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (c->state != CAMPAIGN_LEADING && c->state != CAMPAIGN_VERIFYING)
            engine_notify_candidate(c);
    }
}

void engine_notify_watchers(lease_state *ls, bool force)
{
    if (!ls->synced)
        return;
    const char *holder = engine_live_holder(ls, engine_now_ms(ls->e));
    int64_t epoch = ls->exists ? ls->record.transitions : 0;
    if (ls->view.exists != ls->exists || ls->view.epoch != epoch ||
        strcmp(ls->view.holder, holder) != 0 ||
        (holder[0] && ls->view.value_gen != ls->value_gen)) {
        ls->view.gen++;
        ls->view.exists = ls->exists;
        ls->view.epoch = epoch;
        ls->view.value_gen = ls->value_gen;
        engine_copy_str(ls->view.holder, sizeof ls->view.holder, holder);
    }
    KL__LIST_FOREACH (link, &ls->watchers) {
        watcher *w = engine_watcher_of(link);
        if (!force && w->sent && w->sent_gen == ls->view.gen)
            continue;
        w->sent = true;
        w->sent_gen = ls->view.gen;
        engine_event ev = {.kind = ENGINE_EVENT_HOLDER, .exists = ls->exists, .epoch = epoch};
        engine_copy_str(ev.holder, sizeof ev.holder, holder);
        if (holder[0]) { /* the live holder's value (docs/design.md, rule 10) */
            ev.value_len = ls->record.value_len;
            memcpy(ev.value, ls->record.value, ev.value_len);
        }
        engine_send_event(&w->listener, &ev);
    }
}

/* The keep-alive: every standby hears the current state, then again after
 * the shortest retry period among them; it stops when none stands by. */
static void tick_fire(void *arg)
{
    lease_state *ls = arg;
    int32_t period = 0;
    KL__LIST_FOREACH (link, &ls->candidates) {
        candidate *c = engine_candidate_of(link);
        if (c->state == CAMPAIGN_LEADING || c->state == CAMPAIGN_VERIFYING)
            continue;
        engine_notify_candidate(c);
        if (!period || c->req.retry_period_s < period)
            period = c->req.retry_period_s;
    }
    if (period)
        loop_timer_start(&ls->tick_timer, engine_now_ms(ls->e) + (int64_t)period * 1000, tick_fire,
                         ls);
}

void engine_tick_ensure(lease_state *ls, int32_t period_s)
{
    if (!loop_timer_active(&ls->tick_timer))
        loop_timer_start(&ls->tick_timer, engine_now_ms(ls->e) + (int64_t)period_s * 1000,
                         tick_fire, ls);
}
