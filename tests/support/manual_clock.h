/* Test support: a clock that moves only when told, for a loop the test
 * thread runs itself (loop_set_clock). Advancing it stops at each timer's due
 * time on the way and runs what becomes due there, so callbacks see the time
 * they were due at, as if that much real time had passed, without sleeping.
 * Header-only (static functions). */
#ifndef KL_TESTS_MANUAL_CLOCK_H
#define KL_TESTS_MANUAL_CLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/loop.h"

/* Where manual clocks start: far from 0, which code may use for "unset". */
#define MANUAL_CLOCK_START_MS 1000000

typedef struct manual_clock {
    loop *l;
    int64_t now_ms;
} manual_clock;

static inline int64_t manual_clock_read(void *ctx)
{
    return ((const manual_clock *)ctx)->now_ms;
}

/* Makes c the clock of l, at MANUAL_CLOCK_START_MS. */
static inline void manual_clock_attach(manual_clock *c, loop *l)
{
    c->l = l;
    c->now_ms = MANUAL_CLOCK_START_MS;
    loop_set_clock(l, manual_clock_read, c);
}

/* Passes at one time after which settling gives up: something re-arms
 * itself at the same time forever (a livelock in real time too). */
#define MANUAL_CLOCK_MAX_PASSES 100000

/* Runs what is ready at the current time (posted tasks, what they post, due
 * timers) until nothing is. Returns the number of callbacks run. */
static inline unsigned manual_clock_settle(manual_clock *c)
{
    unsigned n = 0, k;
    for (int passes = 0; (k = loop_drain(c->l)) > 0; passes++) {
        if (passes == MANUAL_CLOCK_MAX_PASSES) {
            fprintf(stderr, "manual_clock: still busy after %d passes at %lld ms\n", passes,
                    (long long)c->now_ms);
            abort();
        }
        n += k;
    }
    return n;
}

/* One step towards t: settles, moves to the next timer's due time or to t,
 * whichever comes first, and settles there. Returns false when the clock
 * was at t already (nothing moved). */
static inline bool manual_clock_step(manual_clock *c, int64_t t)
{
    manual_clock_settle(c);
    if (c->now_ms >= t)
        return false;
    int64_t due = loop_next_due(c->l);
    c->now_ms = due >= 0 && due < t ? (due > c->now_ms ? due : c->now_ms) : t;
    manual_clock_settle(c);
    return true;
}

static inline void manual_clock_advance_to(manual_clock *c, int64_t t)
{
    while (manual_clock_step(c, t))
        ;
}

static inline void manual_clock_advance(manual_clock *c, int64_t ms)
{
    manual_clock_advance_to(c, c->now_ms + ms);
}

#endif
