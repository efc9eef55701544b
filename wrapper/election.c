/* Elections and holder reads of libk8s_lease_wrapper: the Go wrapper's
 * K8sLeaseRunElection, K8sLeaseWaitElected, K8sLeaseWaitLost,
 * K8sLeaseCancelElection and K8sLeaseGetHolder on the process's kl_client.
 *
 * Each maps onto libkubelease calls and translates the result into the Go
 * wrapper's conventions; libkubelease keeps all election state (one election
 * per ns/lease per client), so nothing here needs a lock. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* How long K8sLeaseWaitLost waits for a resignation to land: libkubelease's
 * default resign timeout (2 s) and a margin. */
#define KW_RELEASE_WAIT_MS 3000

/* After a cancelled election: waits until libkubelease has finished its
 * resignation (the service released the Lease), at most KW_RELEASE_WAIT_MS.
 * The Go wrapper released the Lease before its K8sLeaseWaitLost returned, so
 * a process that cancels, waits and exits hands over at once. */
static void wait_released(kl_client *c, const char *ns, const char *lease)
{
    kl_wait_ended(c, ns, lease, KW_RELEASE_WAIT_MS, NULL);
}

KW_EXPORT int K8sLeaseRunElection(char *ns, char *leaseName, char *identity, int leaseDurationSec,
                                  int renewDeadlineSec, int retryPeriodSec, char **errMsg)
{
    kl_error err;
    kl_client *c = kw_client(errMsg);

    if (!c)
        return -1;
    kl_election_options o;
    kl_election_options_init(&o);
    o.lease_duration_s = leaseDurationSec;
    o.renew_deadline_s = renewDeadlineSec;
    o.retry_period_s = retryPeriodSec;
    /* $KUBELEASE_GRANT_MS: the validity of each confirmation (what a crash
     * costs in failover), which the Go wrapper's API cannot pass. */
    const char *grant = getenv("KUBELEASE_GRANT_MS");
    if (grant && grant[0]) {
        char *end = NULL;
        long g = strtol(grant, &end, 10);
        if (!end || *end || g <= 0 || g > 86400000)
            return kw_fail(errMsg, "$KUBELEASE_GRANT_MS is \"%s\": a number of milliseconds",
                           grant);
        o.grant_ms = (int)g;
    }
    /* The process's leader label (K8sPatchPodLabel), copied by
     * kl_run_election_opts under the lock. */
    kw_label_lock();
    kw_label_options(&o);
    int rc = kl_run_election_opts(c, ns, leaseName, identity, &o, &err);
    if (rc == KL_OK)
        kw_label_election_started(ns, leaseName);
    kw_label_unlock();
    if (rc != KL_OK)
        return kw_fail(errMsg, "%s", err.message);
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
