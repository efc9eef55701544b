/* The engine's event loop: one thread runs timers, tasks posted from other
 * threads, and every libcurl transfer (through one curl multi handle).
 *
 * Only loop_post() and loop_stop() may be called from other threads; every
 * other function, and every callback, runs on the loop thread (or on any one
 * thread while no loop_run() is running: set-up, shutdown, tests). */
#ifndef KL_CORE_LOOP_H
#define KL_CORE_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <curl/curl.h>

#include "common/list.h"
#include "core/heap.h"

typedef struct loop loop;
typedef void (*loop_fn)(void *arg);
/* Called on the loop thread when a transfer added with loop_curl_add ends
 * (successfully or not); the easy handle is already removed from the multi
 * handle and belongs to the caller again. */
typedef void (*loop_curl_done)(void *arg, CURL *easy, CURLcode result);
/* A monotonic clock in ms (the loop's time source). */
typedef int64_t (*loop_clock_fn)(void *ctx);

/* Monotonic clock, never affected by wall-clock changes. */
int64_t mono_ms(void);
int64_t mono_us(void);
/* Wall clock in microseconds since the Unix epoch (for Lease timestamps only). */
int64_t wall_us(void);

/* Returns NULL on allocation failure. The loop's clock is mono_ms(). */
loop *loop_new(void);
/* Frees the loop; pending tasks are dropped without running. Transfers still
 * added are removed and their easy handles cleaned up. Timers belong to their
 * owners, who must have stopped them (or never touch them again). */
void loop_free(loop *l);

/* Replaces the loop's clock (NULL fn: mono_ms again) and reads it at once.
 * Tests use it to drive time by hand. Not while loop_run() runs. */
void loop_set_clock(loop *l, loop_clock_fn fn, void *ctx);
/* The loop's time in ms: its clock as read at the start of the current
 * phase of the current iteration (tasks, transfers, timers), like uv_now().
 * A task therefore never sees a time earlier than when it was posted. Any
 * thread may read it (the time the loop last read). */
int64_t loop_now(const loop *l);
/* The loop's clock read now, not the time of the current phase: for
 * threads that must not see a time older than the present (a cached
 * answer's expiry checked on an MHD thread while the loop sleeps). Any
 * thread (the clock function must allow it; mono_ms and the tests' do). */
int64_t loop_clock(const loop *l);
/* Reads the clock again (after a long computation, or before the loop runs). */
void loop_update_time(loop *l);

/* Runs until loop_stop(). */
void loop_run(loop *l);
/* Thread-safe: makes loop_run return after the current iteration. */
void loop_stop(loop *l);
/* One pass without waiting: the tasks posted so far, finished transfers and
 * the timers due at the loop's time, each phase reading the clock first.
 * Returns the number of callbacks run (0: nothing was ready). For shutdown
 * and tests: `while (loop_drain(l)) ;` runs until nothing is ready now. */
unsigned loop_drain(loop *l);
/* The due time of the earliest active timer, or -1 when there is none. */
int64_t loop_next_due(const loop *l);

/* Thread-safe: runs fn(arg) on the loop thread, in posting order.
 * Returns 0, or -1 when out of memory (fn is then not run). */
int loop_post(loop *l, loop_fn fn, void *arg);
/* As loop_post, ahead of the ordinary tasks: the urgent ones posted before
 * a task of loop_post's starts run before it, in posting order among
 * themselves (a leader's Confirm must not wait behind a storm of stream
 * setups). */
int loop_post_urgent(loop *l, loop_fn fn, void *arg);
/* Thread-safe: removes the posted tasks not yet run that would call fn
 * (either queue) and for which drop(arg, ctx) returns true; drop has then
 * taken arg (freed it), and the task never runs. drop runs under the
 * loop's lock: it must not call the loop. For owners that go away while
 * their tasks are still posted (loop_free() drops tasks without their
 * args). Returns how many were removed. */
unsigned loop_drop(loop *l, loop_fn fn, bool (*drop)(void *arg, void *ctx), void *ctx);

/* A one-shot timer, embedded in its owner (libuv's uv_timer_t): starting and
 * stopping never allocate and never fail, and a timer that fired is simply
 * inactive again, so its owner never tracks whether it did. The fields are
 * private. */
typedef struct loop_timer {
    loop *l;
    heap_node node;        /* in the loop's heap while pending */
    struct kl__list ready; /* in the loop's ready list, in the pass running it */
    int state;
    int64_t due_ms;
    uint64_t seq; /* ties broken by start order */
    loop_fn fn;
    void *arg;
} loop_timer;

/* Makes t an inactive timer of l. Call once before any other loop_timer_*. */
void loop_timer_init(loop *l, loop_timer *t);
/* Runs fn(arg) once, on the first pass whose loop_now() >= due_ms; a due time
 * in the past means the next pass. Starting an active timer reschedules it.
 * Timers due at the same time run in the order they were started. */
void loop_timer_start(loop_timer *t, int64_t due_ms, loop_fn fn, void *arg);
/* Makes t inactive: fn will not run. Always safe: on a timer that fired, was
 * stopped already, or was never started (but initialised). */
void loop_timer_stop(loop_timer *t);
/* True from loop_timer_start() until the callback starts or the timer is
 * stopped. */
bool loop_timer_active(const loop_timer *t);

/* Starts a transfer; done() runs when it ends. Returns 0 or -1. The loop
 * uses the handle's CURLOPT_PRIVATE; callers must not set it. */
int loop_curl_add(loop *l, CURL *easy, loop_curl_done done, void *arg);
/* Aborts a transfer started with loop_curl_add without calling done(); the
 * easy handle belongs to the caller again. */
void loop_curl_remove(loop *l, CURL *easy);

#endif
