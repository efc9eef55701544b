/* The client's I/O thread and its synchronisation (see loop.h). */
#include "loop.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "status.h"
#include "util.h"

int kl__loop_init(struct kl__loop *l, const char *endpoint, const kl_client_options *opts)
{
    pthread_condattr_t ca;
    int rc;

    memset(l, 0, sizeof(*l));
    l->opts = *opts;
    l->health_ok_ms = kl__now_ms(); /* the health deadline runs from the start */
    if (pthread_mutex_init(&l->mu, NULL) != 0)
        return KL_ERR_NO_MEMORY;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    rc = pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0)
        goto fail_cv;
    if (kl__transport_init(&l->tr, endpoint, l->opts.connect_timeout_ms, l->opts.token_file,
                           l->opts.ca_file) != KL_OK)
        goto fail_tr;
    l->opts.token_file = l->tr.token.path; /* the caller's string need not outlive this */
    l->opts.ca_file = l->tr.ca_file;       /* the transport's copy: nor need the caller's */
    return KL_OK;
fail_tr:
    pthread_cond_destroy(&l->cv);
fail_cv:
    pthread_mutex_destroy(&l->mu);
    return KL_ERR_NO_MEMORY;
}

void kl__loop_destroy(struct kl__loop *l)
{
    kl__transport_cleanup(&l->tr);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
}

static void *loop_main(void *arg)
{
    struct kl__loop *l = arg;
    int64_t next;

    pthread_mutex_lock(&l->mu);
    for (;;) {
        if (l->run(l->ctx, kl__now_ms()) == KL__LOOP_STOP)
            break;
        pthread_mutex_unlock(&l->mu);
        kl__transport_perform(&l->tr); /* runs the stream callbacks */
        pthread_mutex_lock(&l->mu);
        kl__transport_collect(&l->tr);
        /* Transfers that just finished may have scheduled work: look again
         * at once rather than sleeping. */
        next = l->run(l->ctx, kl__now_ms());
        if (next == KL__LOOP_STOP)
            break;
        pthread_mutex_unlock(&l->mu);

        int64_t wait = next == INT64_MAX ? 1000 : next - kl__now_ms();
        if (wait > 1000)
            wait = 1000;
        if (wait < 0)
            wait = 0;
        kl__transport_poll(&l->tr, (int)wait);
        pthread_mutex_lock(&l->mu);
    }
    pthread_mutex_unlock(&l->mu);
    l->on_exit(l->ctx);
    return NULL;
}

int kl__loop_start(struct kl__loop *l, kl__loop_run_fn run, kl__loop_exit_fn on_exit, void *ctx,
                   kl_error *err)
{
    sigset_t all, old;
    int rc;

    l->run = run;
    l->on_exit = on_exit;
    l->ctx = ctx;
    /* The I/O thread starts with every signal blocked, so the host's signal
     * handlers (and SIGPIPE) never run on it. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&l->thread, NULL, loop_main, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return kl__seterr(err, KL_ERR_INTERNAL, "cannot start the kubelease I/O thread: %s",
                          strerror(rc));
    return KL_OK;
}

void kl__loop_wake(struct kl__loop *l)
{
    kl__transport_wake(&l->tr);
}

void kl__loop_changed(struct kl__loop *l)
{
    pthread_cond_broadcast(&l->cv);
}

int kl__loop_on_thread(struct kl__loop *l)
{
    return pthread_equal(pthread_self(), l->thread);
}

void kl__loop_wait_until(struct kl__loop *l, int64_t abs_ms)
{
    if (abs_ms < 0) {
        pthread_cond_wait(&l->cv, &l->mu);
        return;
    }
    struct timespec ts;
    ts.tv_sec = abs_ms / 1000;
    ts.tv_nsec = (abs_ms % 1000) * 1000000;
    pthread_cond_timedwait(&l->cv, &l->mu, &ts);
}

void kl__log(struct kl__loop *l, int level, const char *fmt, ...)
{
    if (!l->opts.log)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    l->opts.log(l->opts.log_ctx, level, msg);
}
