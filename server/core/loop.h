/* The engine's event loop: one thread runs timers, tasks posted from other
 * threads, and every libcurl transfer (through one curl multi handle).
 *
 * Only loop_post() and loop_stop() may be called from other threads; every
 * other function, and every callback, runs on the loop thread. */
#ifndef KL_CORE_LOOP_H
#define KL_CORE_LOOP_H

#include <stdbool.h>
#include <stdint.h>
#include <curl/curl.h>

typedef struct loop loop;
typedef struct loop_timer loop_timer;
typedef void (*loop_fn)(void *arg);
/* Called on the loop thread when a transfer added with loop_curl_add ends
 * (successfully or not); the easy handle is already removed from the multi
 * handle and belongs to the caller again. */
typedef void (*loop_curl_done)(void *arg, CURL *easy, CURLcode result);

/* Monotonic clock, never affected by wall-clock changes. */
int64_t mono_ms(void);
int64_t mono_us(void);
/* Wall clock in microseconds since the Unix epoch (for Lease timestamps only). */
int64_t wall_us(void);

/* Returns NULL on allocation failure. */
loop *loop_new(void);
/* Frees the loop; pending timers and tasks are dropped without running.
 * Transfers still added are removed and their easy handles cleaned up. */
void loop_free(loop *l);

/* Runs until loop_stop(). */
void loop_run(loop *l);
/* Thread-safe: makes loop_run return after the current iteration. */
void loop_stop(loop *l);
/* Runs the tasks posted so far and the timers already due, without waiting
 * (after loop_run has returned: shutdown, tests). */
void loop_drain(loop *l);

/* Thread-safe: runs fn(arg) on the loop thread, in posting order.
 * Returns 0, or -1 when out of memory (fn is then not run). */
int loop_post(loop *l, loop_fn fn, void *arg);

/* Runs fn(arg) once, at mono_ms() >= due_ms. The timer is freed after it
 * fires or when cancelled. Returns NULL when out of memory. */
loop_timer *loop_timer_at(loop *l, int64_t due_ms, loop_fn fn, void *arg);
/* Cancels a pending timer; NULL is a no-op. Must not be called for a timer
 * that has already fired. */
void loop_timer_cancel(loop *l, loop_timer *t);

/* Starts a transfer; done() runs when it ends. Returns 0 or -1. The loop
 * uses the handle's CURLOPT_PRIVATE; callers must not set it. */
int loop_curl_add(loop *l, CURL *easy, loop_curl_done done, void *arg);
/* Aborts a transfer started with loop_curl_add without calling done(); the
 * easy handle belongs to the caller again. */
void loop_curl_remove(loop *l, CURL *easy);

#endif
