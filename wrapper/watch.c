/* Holder watches of libk8s_lease_wrapper: K8sLeaseWatchHolder and
 * K8sLeaseCancelWatch.
 *
 * libkubelease runs watch callbacks on its client's I/O thread, the thread
 * that also keeps this process's elections confirmed, and asks them to
 * return quickly. The callbacks here were written for the Go wrapper, where
 * each watch ran on its own thread and could block or call the waiting
 * functions. So each watch gets a dispatcher thread: the libkubelease
 * callback only queues the change, and the dispatcher calls the user's
 * callback with the changes in order, one at a time.
 *
 * Locking. ops_mu serialises starting and stopping watches and guards the
 * list of watches; it is held while libkubelease starts or cancels a watch
 * (kl_cancel_watch waits only for on_change, which never takes ops_mu), never
 * while a user's callback runs. Each watch's mu guards its queue and flags;
 * the dispatcher releases it while the user's callback runs. A watch is freed
 * by the thread that joins its dispatcher, or by the dispatcher itself when
 * the watch was cancelled from its own callback. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Changes a lagging callback may have waiting; beyond it the oldest go. */
#define KW_MAX_QUEUED 256

struct change {
    struct change *next;
    int64_t epoch;
    size_t len;
    int held;      /* holder is an identity (else NULL for the callback) */
    char holder[]; /* len bytes and a NUL */
};

struct watch {
    struct watch *next; /* in watches, under ops_mu */
    char *ns;
    char *lease;
    holder_change_cb_t cb;
    void *ctx;
    pthread_t thread;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct change *head, *tail; /* queued changes, under mu */
    size_t queued;
    int stop;   /* under mu: the dispatcher drops the queue and exits */
    int detach; /* under mu: cancelled from its own callback: the dispatcher frees it */
};

static pthread_mutex_t ops_mu = PTHREAD_MUTEX_INITIALIZER;
static struct watch *watches; /* under ops_mu */
/* The watch whose dispatcher runs on this thread, if any. */
static _Thread_local struct watch *current;

static void watch_free(struct watch *w)
{
    struct change *ch, *next;

    for (ch = w->head; ch; ch = next) {
        next = ch->next;
        free(ch);
    }
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w->ns);
    free(w->lease);
    free(w);
}

static struct watch *watch_new(const char *ns, const char *lease, holder_change_cb_t cb, void *ctx)
{
    struct watch *w = calloc(1, sizeof(*w));

    if (!w)
        return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->cb = cb;
    w->ctx = ctx;
    if (!(w->ns = strdup(ns)) || !(w->lease = strdup(lease))) {
        watch_free(w);
        return NULL;
    }
    return w;
}

/* The link to the watch of ns/lease in the list: *link is that watch, or
 * NULL at the end of the list. Called with ops_mu held. */
static struct watch **watch_link(const char *ns, const char *lease)
{
    struct watch **p = &watches;

    while (*p && (strcmp((*p)->ns, ns) != 0 || strcmp((*p)->lease, lease) != 0))
        p = &(*p)->next;
    return p;
}

/* The libkubelease callback, on its I/O thread: queue the change. Out of
 * memory loses this change (a later one still arrives). */
static void on_change(void *arg, const char *holder, size_t len, int64_t epoch)
{
    struct watch *w = arg;
    struct change *ch = malloc(sizeof(*ch) + (holder ? len : 0) + 1);

    if (!ch)
        return;
    ch->next = NULL;
    ch->epoch = epoch;
    ch->held = holder != NULL;
    ch->len = holder ? len : 0;
    if (holder)
        memcpy(ch->holder, holder, len);
    ch->holder[ch->len] = 0;

    pthread_mutex_lock(&w->mu);
    if (w->queued == KW_MAX_QUEUED) {
        struct change *old = w->head;
        w->head = old->next;
        w->queued--;
        free(old);
    }
    if (w->head)
        w->tail->next = ch;
    else
        w->head = ch;
    w->tail = ch;
    w->queued++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void *dispatch(void *arg)
{
    struct watch *w = arg;
    int detach;

    current = w;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stop)
            pthread_cond_wait(&w->cv, &w->mu);
        if (w->stop)
            break;
        struct change *ch = w->head;
        w->head = ch->next;
        w->queued--;
        pthread_mutex_unlock(&w->mu);
        w->cb(w->ctx, ch->held ? ch->holder : NULL, ch->len, ch->epoch);
        free(ch);
        pthread_mutex_lock(&w->mu);
    }
    detach = w->detach;
    pthread_mutex_unlock(&w->mu);
    current = NULL;
    if (detach) {
        pthread_detach(pthread_self());
        watch_free(w);
    }
    return NULL;
}

/* Starts w's dispatcher with every signal blocked, so that the host's signal
 * handlers run on the host's threads. Returns 0 or an errno value. */
static int dispatcher_start(struct watch *w)
{
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&w->thread, NULL, dispatch, w);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Stops w's dispatcher: at once when called from w's own callback (the
 * dispatcher then frees w), else after the running callback returned, and
 * frees w. w must be out of the list and its libkubelease watch cancelled. */
static void dispatcher_stop(struct watch *w)
{
    int self = current == w;

    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    w->detach = self;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (self)
        return;
    pthread_join(w->thread, NULL);
    watch_free(w);
}

KW_EXPORT int K8sLeaseWatchHolder(char *ns, char *leaseName, void *callbackCtx,
                                  holder_change_cb_t callbackFunc, char **errMsg)
{
    kl_error err;
    struct watch *w = NULL;
    kl_client *c;
    int rc;

    if (!callbackFunc)
        return kw_fail(errMsg, "K8sLeaseWatchHolder: callbackFunc must not be NULL");
    if (!(c = kw_client(errMsg)))
        return -1;
    pthread_mutex_lock(&ops_mu);
    if (*watch_link(kw_str(ns), kw_str(leaseName))) {
        rc = kw_fail(errMsg, "a watch of %s/%s is already running", kw_str(ns), kw_str(leaseName));
        goto out;
    }
    if (!(w = watch_new(kw_str(ns), kw_str(leaseName), callbackFunc, callbackCtx))) {
        rc = kw_fail(errMsg, "out of memory starting the watch of %s/%s", kw_str(ns),
                     kw_str(leaseName));
        goto out;
    }
    if ((rc = dispatcher_start(w)) != 0) {
        rc = kw_fail(errMsg, "cannot start the thread of the watch of %s/%s: %s", w->ns, w->lease,
                     strerror(rc));
        goto out;
    }
    if (kl_watch_holder(c, ns, leaseName, on_change, w, &err) != KL_OK) {
        rc = kw_fail(errMsg, "%s", err.message);
        dispatcher_stop(w);
        w = NULL;
        goto out;
    }
    *watch_link(w->ns, w->lease) = w;
    w = NULL;
    rc = 0;
out:
    pthread_mutex_unlock(&ops_mu);
    if (w)
        watch_free(w);
    return rc;
}

KW_EXPORT int K8sLeaseCancelWatch(char *ns, char *leaseName, char **errMsg)
{
    struct watch **link, *w;

    (void)errMsg;
    pthread_mutex_lock(&ops_mu);
    link = watch_link(kw_str(ns), kw_str(leaseName));
    if ((w = *link) != NULL)
        *link = w->next;
    /* A listed watch was started on the client, so it exists; afterwards
     * on_change is not running and will not run for w. */
    if (w)
        kl_cancel_watch(kw_client_if_any(), w->ns, w->lease, NULL);
    pthread_mutex_unlock(&ops_mu);
    if (w)
        dispatcher_stop(w);
    return 0;
}
