/* The client object and its I/O thread: one curl multi handle driving every
 * stream and background request, plus the timers of the elections. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

#define KL_STR_(x) #x
#define KL_STR(x)  KL_STR_(x)

const char *kl_version(void)
{
    return KL_STR(KL_VERSION_MAJOR) "." KL_STR(KL_VERSION_MINOR) "." KL_STR(KL_VERSION_PATCH);
}

void kl_free(void *p)
{
    free(p);
}

void kl_client_options_init(kl_client_options *opts)
{
    if (opts)
        memset(opts, 0, sizeof(*opts));
}

void kl__client_wake(struct kl_client *c)
{
    curl_multi_wakeup(c->multi);
}

int kl__client_on_io_thread(struct kl_client *c)
{
    return pthread_equal(pthread_self(), c->thread);
}

void kl__client_wait_until(struct kl_client *c, int64_t abs_ms)
{
    if (abs_ms < 0) {
        pthread_cond_wait(&c->cv, &c->mu);
        return;
    }
    struct timespec ts;
    ts.tv_sec = abs_ms / 1000;
    ts.tv_nsec = (abs_ms % 1000) * 1000000;
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
}

/* Hands finished transfers to their owners. c->mu held. */
static void collect_done(struct kl_client *c)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct kl__xfer *x = NULL;
        CURLcode rc = m->data.result;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        curl_multi_remove_handle(c->multi, m->easy_handle);
        if (x->kind == KL__XFER_WATCH)
            kl__watch_xfer_done(c, x, rc);
        else
            kl__election_xfer_done(c, x, rc);
    }
}

static void *io_thread(void *arg)
{
    struct kl_client *c = arg;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        int64_t now = kl__now_ms();
        int64_t next = kl__elections_process(c, now);
        int64_t wnext = kl__watches_process(c, now);
        if (wnext < next)
            next = wnext;
        if (c->stopping && kl__elections_idle(c) && kl__watches_idle(c))
            break;
        pthread_mutex_unlock(&c->mu);

        int running = 0;
        curl_multi_perform(c->multi, &running); /* runs the write callbacks */
        pthread_mutex_lock(&c->mu);
        collect_done(c);
        now = kl__now_ms();
        /* Transfers that just finished may have scheduled work: look again
         * at once rather than sleeping. */
        next = kl__elections_process(c, now);
        wnext = kl__watches_process(c, now);
        if (wnext < next)
            next = wnext;
        if (c->stopping && kl__elections_idle(c) && kl__watches_idle(c))
            break;
        pthread_mutex_unlock(&c->mu);

        int64_t wait = next == INT64_MAX ? 1000 : next - kl__now_ms();
        if (wait > 1000)
            wait = 1000;
        if (wait < 0)
            wait = 0;
        curl_multi_poll(c->multi, NULL, 0, (int)wait, NULL);
        pthread_mutex_lock(&c->mu);
    }
    int self_free = c->free_on_exit;
    pthread_mutex_unlock(&c->mu);
    if (self_free) {
        pthread_detach(pthread_self());
        kl__elections_free_all(c);
        kl__watches_free_all(c);
        curl_multi_cleanup(c->multi);
        pthread_cond_destroy(&c->cv);
        pthread_mutex_destroy(&c->mu);
        free(c->endpoint);
        free(c);
    }
    return NULL;
}

kl_client *kl_client_new(const char *endpoint, kl_error *err)
{
    return kl_client_new_opts(endpoint, NULL, err);
}

kl_client *kl_client_new_opts(const char *endpoint, const kl_client_options *opts, kl_error *err)
{
    struct kl_client *c = NULL;
    pthread_condattr_t ca;
    int have_mu = 0, have_cv = 0;

    kl__clearerr(err);
    if (!endpoint) {
        endpoint = getenv("KUBELEASE_ENDPOINT");
        if (!endpoint || !*endpoint)
            endpoint = KL__DEFAULT_ENDPOINT;
    }
    if (kl__check_endpoint(endpoint, err) != KL_OK)
        return NULL;
    if (opts && (opts->connect_timeout_ms < 0 || opts->request_timeout_ms < 0 ||
                 opts->resign_timeout_ms < 0 || opts->max_backoff_ms < 0)) {
        kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                   "opts: timeouts must be >= 0 milliseconds (0 = default)");
        return NULL;
    }
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK) {
        kl__seterr(err, KL_ERR_INTERNAL, "curl_global_init failed: %s",
                   curl_easy_strerror(curl_init_rc));
        return NULL;
    }
    c = calloc(1, sizeof(*c));
    if (!c)
        goto nomem;
    if (opts)
        c->opts = *opts;
    if (c->opts.connect_timeout_ms == 0)
        c->opts.connect_timeout_ms = 2000;
    if (c->opts.request_timeout_ms == 0)
        c->opts.request_timeout_ms = 5000;
    if (c->opts.resign_timeout_ms == 0)
        c->opts.resign_timeout_ms = 2000;
    if (c->opts.max_backoff_ms == 0)
        c->opts.max_backoff_ms = 2000;
    c->endpoint = strdup(endpoint);
    if (!c->endpoint)
        goto nomem;
    size_t n = strlen(c->endpoint);
    while (n > 0 && c->endpoint[n - 1] == '/')
        c->endpoint[--n] = 0;
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        goto nomem;
    have_mu = 1;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int cvrc = pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (cvrc != 0)
        goto nomem;
    have_cv = 1;
    c->multi = curl_multi_init();
    if (!c->multi)
        goto nomem;
    curl_multi_setopt(c->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);

    /* The I/O thread starts with every signal blocked, so the host's signal
     * handlers (and SIGPIPE) never run on it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int trc = pthread_create(&c->thread, NULL, io_thread, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (trc != 0) {
        kl__seterr(err, KL_ERR_INTERNAL, "cannot start the kubelease I/O thread: %s",
                   strerror(trc));
        goto fail;
    }
    return c;
nomem:
    kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory creating the kubelease client");
fail:
    if (c) {
        if (c->multi)
            curl_multi_cleanup(c->multi);
        if (have_cv)
            pthread_cond_destroy(&c->cv);
        if (have_mu)
            pthread_mutex_destroy(&c->mu);
        free(c->endpoint);
        free(c);
    }
    return NULL;
}

void kl_client_free(kl_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    kl__elections_cancel_all(c);
    kl__watches_cancel_all(c);
    if (kl__client_on_io_thread(c)) {
        /* From a callback: the I/O thread frees the client when it is done. */
        c->free_on_exit = 1;
        pthread_mutex_unlock(&c->mu);
        return;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    kl__client_wake(c);
    pthread_join(c->thread, NULL);
    kl__elections_free_all(c);
    kl__watches_free_all(c);
    curl_multi_cleanup(c->multi);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c->endpoint);
    free(c);
}
