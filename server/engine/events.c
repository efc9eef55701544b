/* Kubernetes Events on the Lease (--events), as client-go's leader election
 * records them: "<identity> became leader" when a term starts and
 * "<identity> stopped leading" when it ends, reason LeaderElection, so that
 * `kubectl describe lease` and `kubectl get events` tell an election's
 * story. Here with the epoch and, at the end, why (docs/design.md,
 * "Events").
 *
 * Events must never cost leadership anything: each is one store write
 * started and forgotten (nothing waits for it, nothing retries it), and
 * none is started beyond three bounds, so that a flapping election cannot
 * flood the apiserver — a token bucket per Lease (client-go's spam filter:
 * 25, then one per 5 minutes), one shared by all Leases (100, then one a
 * second), and at most EVENTS_IN_FLIGHT writes at once. What is dropped is
 * counted. Engine thread only. */
#include <stdio.h>

#include "core/log.h"
#include "core/metrics.h"
#include "engine/internal.h"

#define EVENTS_LEASE_BURST     25
#define EVENTS_LEASE_REFILL_MS (5 * 60 * 1000)
#define EVENTS_ALL_BURST       100
#define EVENTS_ALL_REFILL_MS   1000
#define EVENTS_IN_FLIGHT       16
#define EVENTS_TIMEOUT_MS      5000

#define EVENTS_REASON    "LeaderElection"
#define EVENTS_COMPONENT "kubeleased"

/* Adds the tokens due since the last refill, up to burst. */
static void bucket_refill(engine_bucket *b, int burst, int64_t refill_ms, int64_t now)
{
    if (!b->refilled_ms) {
        b->tokens = burst;
        b->refilled_ms = now;
        return;
    }
    int64_t due = (now - b->refilled_ms) / refill_ms;
    if (due <= 0)
        return;
    if (due >= burst - b->tokens) {
        b->tokens = burst;
        b->refilled_ms = now;
    } else {
        b->tokens += (int)due;
        b->refilled_ms += due * refill_ms;
    }
}

static void dropped(const lease_state *ls, const char *why)
{
    char labels[64];
    snprintf(labels, sizeof labels, "reason=\"%s\"", why);
    metrics_add("kubelease_events_dropped_total", labels, 1);
    log_event(LOG_DEBUG, "event_dropped", "ns=%s lease=%s reason=%s", ls->ns, ls->name, why);
}

/* Takes a token from the Lease's bucket and the shared one, or says why not. */
static const char *admit(lease_state *ls)
{
    engine *e = ls->e;
    int64_t now = engine_now_ms(e);
    if (e->events_in_flight >= EVENTS_IN_FLIGHT)
        return "busy";
    bucket_refill(&ls->events, EVENTS_LEASE_BURST, EVENTS_LEASE_REFILL_MS, now);
    bucket_refill(&e->events_all, EVENTS_ALL_BURST, EVENTS_ALL_REFILL_MS, now);
    if (ls->events.tokens <= 0 || e->events_all.tokens <= 0)
        return "rate_limited";
    ls->events.tokens--;
    e->events_all.tokens--;
    return NULL;
}

/* The write's answer. ctx is the engine, which outlives the store's
 * callbacks; the Lease's state may be gone by now. */
static void event_done(void *ctx, const store_result *r)
{
    engine *e = ctx;
    e->events_in_flight--;
    if (r->status == STORE_OK) {
        metrics_add("kubelease_events_total", "", 1);
        return;
    }
    metrics_add("kubelease_events_dropped_total", "reason=\"failed\"", 1);
    log_event(LOG_DEBUG, "event_failed", "ns=%s lease=%s status=%s msg=%s", r->lease.ns,
              r->lease.name, store_status_name(r->status), log_q(r->message));
}

static void record(lease_state *ls, bool warning, const char *message)
{
    engine *e = ls->e;
    const char *why = admit(ls);
    if (why) {
        dropped(ls, why);
        return;
    }
    store_lease_event ev = {.lease = ls->record, .warning = warning};
    engine_copy_str(ev.lease.ns, sizeof ev.lease.ns, ls->ns);
    engine_copy_str(ev.lease.name, sizeof ev.lease.name, ls->name);
    engine_copy_str(ev.reason, sizeof ev.reason, EVENTS_REASON);
    engine_copy_str(ev.message, sizeof ev.message, message);
    engine_copy_str(ev.component, sizeof ev.component, EVENTS_COMPONENT);
    engine_copy_str(ev.instance, sizeof ev.instance, e->replica);
    ev.time_us = engine_wall_us(e);
    e->events_in_flight++;
    e->store->ops->record_event(e->store, &ev, EVENTS_TIMEOUT_MS, event_done, e);
}

void engine_events_term_started(lease_state *ls, const term *t)
{
    if (!ls->e->events)
        return;
    char msg[STORE_EVENT_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "%s became leader (epoch %lld)", t->identity, (long long)t->epoch);
    record(ls, false, msg);
}

void engine_events_epoch_exhausted(lease_state *ls, const char *message)
{
    if (ls->e->events)
        record(ls, true, message);
}

/* Ends the holder chose (resigned, handed off) are Normal; the others —
 * renewals failed, unconfirmed, superseded, deleted — are worth a look. */
static bool warning_for(engine_lost_reason reason)
{
    return reason != ENGINE_LOST_RESIGNED && reason != ENGINE_LOST_HANDED_OFF &&
           reason != ENGINE_LOST_SHUTDOWN;
}

static void record_end(lease_state *ls, const term *t, engine_lost_reason reason)
{
    char msg[STORE_EVENT_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "%s stopped leading (epoch %lld): %s", t->identity,
             (long long)t->epoch, engine_lost_reason_name(reason));
    record(ls, warning_for(reason), msg);
}

void engine_events_term_ended(lease_state *ls, term *t, engine_lost_reason reason)
{
    if (!ls->e->events || !t->started)
        return;
    /* A term whose stream is gone may live on: its holder may have resumed
     * it on another replica (docs/design.md, rule 5), whose writes make our
     * release fail. Only a release that lands says it is over here. */
    if (!t->owner && (reason == ENGINE_LOST_EXPIRED || reason == ENGINE_LOST_RENEW_FAILED))
        t->end_event = reason;
    else
        record_end(ls, t, reason);
}

void engine_events_term_released(lease_state *ls, term *t)
{
    if (t->end_event != ENGINE_LOST_UNSPECIFIED)
        record_end(ls, t, t->end_event);
    t->end_event = ENGINE_LOST_UNSPECIFIED;
}
