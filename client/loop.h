/* The client's I/O loop: one thread driving the transport, plus the lock and
 * condition variable that every election and watch of the client shares.
 * The loop knows nothing of elections or watches: each iteration it calls
 * its owner's run function (with the lock held), runs the transfers (without
 * the lock, so stream callbacks may take it) and sleeps until the next due
 * time, a wake-up or network activity.
 *
 * Threads. mu protects the owner's state (the loop itself only reads its
 * fields after init); cv is broadcast on every state change users may wait
 * for. kl__loop_wake, _changed, _on_thread and _wait_until may be called from
 * any thread (_wait_until and _changed with mu held). */
#ifndef KL_LOOP_H
#define KL_LOOP_H

#include <pthread.h>
#include <stdint.h>

#include "kubelease.h"
#include "transport.h"

#define KL__LOOP_STOP (-1)

/* The owner's work, with mu held: returns the next time (monotonic ms) it
 * needs to run, INT64_MAX for none, or KL__LOOP_STOP to end the thread. */
typedef int64_t (*kl__loop_run_fn)(void *ctx, int64_t now);
/* Called last on the I/O thread, without mu, after the loop ended. It may
 * free the loop (kl__loop_destroy after pthread_detach). */
typedef void (*kl__loop_exit_fn)(void *ctx);

struct kl__loop {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* on CLOCK_MONOTONIC */
    pthread_t thread;
    kl_client_options opts; /* with the defaults filled in */
    int64_t health_ok_ms;   /* the last kl_health_ok (monotonic), under mu */
    struct kl__transport tr;
    kl__loop_run_fn run;
    kl__loop_exit_fn on_exit;
    void *ctx;
};

/* Initialises *l (mutex, condition variable, transport). Returns KL_OK or
 * KL_ERR_NO_MEMORY; on failure nothing is left to release. */
int kl__loop_init(struct kl__loop *l, const char *endpoint, const kl_client_options *opts);
/* Starts the I/O thread with every signal blocked. Returns KL_OK, or
 * KL_ERR_INTERNAL with err filled. */
int kl__loop_start(struct kl__loop *l, kl__loop_run_fn run, kl__loop_exit_fn on_exit, void *ctx,
                   kl_error *err);
/* Releases what kl__loop_init created; the thread has ended (or never ran). */
void kl__loop_destroy(struct kl__loop *l);

/* Makes the I/O thread run its owner's work again soon. */
void kl__loop_wake(struct kl__loop *l);
/* State changed (mu held): wakes the threads waiting on cv. */
void kl__loop_changed(struct kl__loop *l);
/* 1 on the I/O thread (inside a callback), else 0. */
int kl__loop_on_thread(struct kl__loop *l);
/* Waits on cv until abs_ms (monotonic; < 0 = no limit) or a change; mu held. */
void kl__loop_wait_until(struct kl__loop *l, int64_t abs_ms);
/* Hands a message to the application's log hook (kl_client_options.log),
 * if any; any thread, mu held or not. */
void kl__log(struct kl__loop *l, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
