/* Elections and holder reads of libk8s_lease_wrapper: the Go wrapper's
 * K8sLeaseRunElection, K8sLeaseWaitElected, K8sLeaseWaitLost,
 * K8sLeaseCancelElection and K8sLeaseGetHolder on the process's kl_client.
 *
 * Each maps onto libkubelease calls and translates the result into the Go
 * wrapper's conventions; libkubelease keeps the election state (one election
 * per ns/lease per client). One thing is kept here: the identity each
 * election campaigned as, until a K8sLeaseWaitLost after its cancellation
 * has seen the Lease released (see wait_released). That list is guarded by
 * started_mu, never held during a call to libkubelease. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* How long K8sLeaseWaitLost waits for a resignation to land: libkubelease's
 * default resign timeout (2 s) and a margin. */
#define KW_RELEASE_WAIT_MS 3000

struct started {
    struct started *next;
    char *ns;
    char *lease;
    char *identity;
};

static pthread_mutex_t started_mu = PTHREAD_MUTEX_INITIALIZER;
static struct started *started; /* under started_mu */

static void started_free(struct started *st)
{
    if (st) {
        free(st->ns);
        free(st->lease);
        free(st->identity);
        free(st);
    }
}

/* Removes the record of ns/lease and returns it (NULL if none). */
static struct started *started_take(const char *ns, const char *lease)
{
    struct started **p, *st;

    pthread_mutex_lock(&started_mu);
    for (p = &started; *p; p = &(*p)->next)
        if (strcmp((*p)->ns, ns) == 0 && strcmp((*p)->lease, lease) == 0)
            break;
    st = *p;
    if (st)
        *p = st->next;
    pthread_mutex_unlock(&started_mu);
    return st;
}

/* Remembers the identity of the election just started for ns/lease. Out of
 * memory only loses the wait for its release. */
static void started_add(const char *ns, const char *lease, const char *identity)
{
    struct started *st = calloc(1, sizeof(*st));

    started_free(started_take(ns, lease));
    if (!st || !(st->ns = strdup(ns)) || !(st->lease = strdup(lease)) ||
        !(st->identity = strdup(identity))) {
        started_free(st);
        return;
    }
    pthread_mutex_lock(&started_mu);
    st->next = started;
    started = st;
    pthread_mutex_unlock(&started_mu);
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* After a cancelled election: waits until the service no longer names its
 * identity as the holder, i.e. the resignation libkubelease sends in the
 * background has landed, at most KW_RELEASE_WAIT_MS and not past an error.
 * The Go wrapper released the Lease before its K8sLeaseWaitLost returned, so
 * a process that cancels, waits and exits hands over at once. */
static void wait_released(kl_client *c, const char *ns, const char *lease)
{
    struct started *st = started_take(ns, lease);
    int64_t until = now_ms() + KW_RELEASE_WAIT_MS;

    while (st) {
        char *holder = NULL;
        int rc = kl_get_holder(c, ns, lease, &holder, NULL, NULL);
        int mine = rc == KL_OK && holder && strcmp(holder, st->identity) == 0;
        kl_free(holder);
        if (!mine || now_ms() >= until)
            break;
        struct timespec pause = {0, 10 * 1000000};
        nanosleep(&pause, NULL);
    }
    started_free(st);
}

KW_EXPORT int K8sLeaseRunElection(char *ns, char *leaseName, char *identity, int leaseDurationSec,
                                  int renewDeadlineSec, int retryPeriodSec, char **errMsg)
{
    kl_error err;
    kl_client *c = kw_client(errMsg);

    if (!c)
        return -1;
    if (kl_run_election(c, ns, leaseName, identity, leaseDurationSec, renewDeadlineSec,
                        retryPeriodSec, &err) != KL_OK)
        return kw_fail(errMsg, "%s", err.message);
    started_add(ns, leaseName, identity);
    return 0;
}

static int no_election(char **errMsg, const char *ns, const char *lease)
{
    return kw_fail(errMsg, "no election running for %s/%s: call K8sLeaseRunElection first",
                   kw_str(ns), kw_str(lease));
}

KW_EXPORT int K8sLeaseWaitElected(char *ns, char *leaseName, int timeoutSec,
                                  long long *leaseTransitions, char **errMsg)
{
    kl_error err;
    int64_t epoch = 0;
    kl_client *c = kw_client_if_any();
    int rc;

    if (!c)
        return no_election(errMsg, ns, leaseName);
    /* The Go wrapper's timeout of 0 or less expired at once; libkubelease
     * reads a negative timeout as no limit. */
    rc = kl_wait_elected(c, ns, leaseName, timeoutSec > 0 ? timeoutSec : 0, &epoch, &err);
    if (rc == KL_ERR_NO_ELECTION)
        return no_election(errMsg, ns, leaseName);
    if (rc != KL_OK)
        return kw_fail(errMsg, "%s", err.message);
    if (leaseTransitions)
        *leaseTransitions = (long long)epoch;
    return 0;
}

KW_EXPORT int K8sLeaseWaitLost(char *ns, char *leaseName, char **errMsg)
{
    kl_client *c = kw_client_if_any();

    /* Every way an election ends means "not leader any more" to the caller,
     * and an election that ended (or never started) has nothing to wait
     * for: the Go wrapper returned 0 in all these cases. */
    (void)errMsg;
    if (c && kl_wait_lost(c, ns, leaseName, NULL) == KL_OK)
        wait_released(c, ns, leaseName); /* cancelled: a resignation is on its way */
    return 0;
}

KW_EXPORT int K8sLeaseCancelElection(char *ns, char *leaseName, char **errMsg)
{
    kl_client *c = kw_client_if_any();

    /* Idempotent: no client or invalid names mean no election to cancel. */
    (void)errMsg;
    if (c)
        kl_cancel_election(c, ns, leaseName, NULL);
    return 0;
}

KW_EXPORT int K8sLeaseGetHolder(char *ns, char *leaseName, char **holderIdentity,
                                long long *leaseTransitions, char **errMsg)
{
    kl_error err;
    char *holder = NULL;
    int64_t epoch = 0;
    kl_client *c;
    int rc;

    if (!holderIdentity)
        return kw_fail(errMsg, "K8sLeaseGetHolder: holderIdentity must not be NULL");
    *holderIdentity = NULL;
    if (!(c = kw_client(errMsg)))
        return -1;
    rc = kl_get_holder(c, ns, leaseName, &holder, &epoch, &err);
    if (rc < 0)
        return kw_fail(errMsg, "%s", err.message);
    /* The caller frees the identity with free(), as C.CString's copy was;
     * kl_free need not be free. */
    if (holder) {
        *holderIdentity = strdup(holder);
        kl_free(holder);
        if (!*holderIdentity)
            return kw_fail(errMsg, "out of memory copying the holder of %s/%s", kw_str(ns),
                           kw_str(leaseName));
    }
    if (leaseTransitions)
        *leaseTransitions = (long long)epoch;
    return rc == KL_NOT_FOUND ? 1 : 0;
}
