/* The timer thread: fails unary calls and ends streams at their
 * Connect-Timeout-Ms, looks at the suspended streams once a second for
 * peers that left, and shuts down connections whose request did not
 * arrive within the read timeout (call.c, stream.c and conn_limit.c do the
 * work; this file only decides when).
 *
 * Two clocks: Connect deadlines are read on the loop's clock (s->clock,
 * http_clock_ms), so that tests move it by hand and wake the thread
 * (http_server_clock_moved); the look for peers and the read deadlines are
 * about the sockets and read the monotonic clock. The thread waits for
 * whichever comes first, in real time.
 *
 * Locking: the thread holds s->mu except while it waits on s->wake, which
 * whoever sets a new deadline signals (http_timer_wake_locked), and
 * http_timer_stop to make it quit, and while conn_limit.c checks the read
 * deadlines under its own lock. */
#include <time.h>

#include "http/internal.h"

#define RESUME_EVERY_MS 1000 /* how often suspended streams are looked at */

int64_t http_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t http_clock_ms(const http_server *s)
{
    return s->clock ? loop_clock(s->clock) : http_now_ms();
}

int64_t http_deadline_ms(const http_server *s, int64_t timeout_ms)
{
    return http_clock_ms(s) + timeout_ms + 1;
}

/* Waits on s->wake (a CLOCK_MONOTONIC condition) for delay_ms at most. */
static void wait_for_locked(http_server *s, int64_t delay_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (delay_ms < 1)
        delay_ms = 1;
    ts.tv_sec += delay_ms / 1000;
    ts.tv_nsec += (delay_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&s->wake, &s->mu, &ts);
}

static void *timer_main(void *arg)
{
    http_server *s = arg;
    pthread_mutex_lock(&s->mu);
    int64_t next_resume = http_now_ms() + RESUME_EVERY_MS;
    int64_t reads = 0; /* when the read deadlines want a look next (monotonic) */
    while (!s->timer_quit) {
        /* Read deadlines under conn_limit.c's own lock, never with s->mu,
         * when one is due and at every resume tick (which covers the
         * connections opened since), not at every call's wake-up. A wake-up
         * signalled meanwhile is not lost: the calls' and streams'
         * deadlines are read below, under s->mu, before waiting again. */
        pthread_mutex_unlock(&s->mu);
        int64_t real = http_now_ms();
        if (real >= reads || real >= next_resume) {
            reads = http_limits_enforce(s->limits, real);
            int64_t ops_reads = http_limits_enforce(s->ops_limits, real);
            if (ops_reads < reads)
                reads = ops_reads;
        }
        pthread_mutex_lock(&s->mu);
        if (s->timer_quit)
            break;
        int64_t now = http_clock_ms(s);
        int64_t due = http_calls_expire_locked(s, now, INT64_MAX);
        due = http_streams_expire_locked(s, now, due);
        real = http_now_ms();
        if (real >= next_resume) {
            http_streams_poll_locked(s);
            next_resume = real + RESUME_EVERY_MS;
        }
        int64_t delay = next_resume - real;
        if (reads - real < delay)
            delay = reads - real;
        if (due != INT64_MAX && due - now < delay)
            delay = due - now;
        wait_for_locked(s, delay);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int http_timer_start(http_server *s)
{
    if (pthread_create(&s->timer, NULL, timer_main, s) != 0)
        return -1;
    s->timer_started = true;
    return 0;
}

void http_timer_stop(http_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->timer_quit = true;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    if (s->timer_started)
        pthread_join(s->timer, NULL);
    s->timer_started = false;
}

void http_timer_wake_locked(http_server *s)
{
    pthread_cond_signal(&s->wake);
}

void http_server_clock_moved(http_server *s)
{
    pthread_mutex_lock(&s->mu);
    http_timer_wake_locked(s);
    pthread_mutex_unlock(&s->mu);
}
