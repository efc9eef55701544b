/* libk8s_lease_wrapper: the C API of the Go leader-election wrapper
 * (libk8s_lease_wrapper.so built with cgo from client-go), provided by
 * libkubelease. Programs written against the Go wrapper switch by linking
 * this library instead (-lk8s_lease_wrapper, `pkg-config k8s_lease_wrapper`,
 * or CMake's k8s_lease_wrapper::k8s_lease_wrapper); their source does not
 * change and no Go toolchain is needed.
 *
 * The functions and their C types are those of the header cgo generated for
 * the Go wrapper: `char *` for Go's *C.char, `int` for C.int, `long long *`
 * for *C.longlong. Like that header, this one includes <stddef.h>,
 * <stdint.h>, <stdlib.h> and <string.h>, and declares the functions
 * extern "C" for C++.
 *
 * The service. Every process has one kubelease client, created by
 * K8sLeaseInit (or by the first call that needs it) for the kubelease service
 * at $KUBELEASE_ENDPOINT ("http://host:port"; default
 * http://127.0.0.1:8080). KUBECONFIG and the in-cluster configuration are
 * not used: kubeleased does every Kubernetes call, so the replicas need no
 * RBAC. The client lives until the process exits.
 *
 * Conventions (those of the Go wrapper). Every function returns 0 on success
 * and -1 on error; on error, when errMsg is not NULL, *errMsg is set to a
 * NUL-terminated message allocated with malloc, which the caller releases
 * with free (it may be NULL if even that allocation failed). On success
 * *errMsg is not touched. K8sLeaseGetHolder also returns 1 (no such Lease).
 * ns and leaseName name the Lease (a namespace and a Lease name); the library
 * copies what it keeps and never writes to the strings passed in.
 *
 * Elections. One election per ns/leaseName in the process. It starts with
 * K8sLeaseRunElection and ends when it is cancelled (K8sLeaseCancelElection,
 * or K8sLeaseWaitElected's timeout) or when leadership is lost; after it
 * ended, K8sLeaseRunElection may start another. An election leads for one
 * term at most.
 *
 * Leadership. Act as leader only between K8sLeaseWaitElected returning 0 and
 * K8sLeaseWaitLost returning. K8sLeaseWaitLost returns at the local
 * leadership deadline at the latest, even when the service cannot be
 * reached, so no two processes act as leader at once (see docs/design.md,
 * rules 1 and 2). The fencing epoch is kubelease's: it is strictly larger for
 * every new term, also when the same identity is elected again.
 *
 * Threads. Every function may be called from any thread, concurrently.
 * K8sLeaseWaitElected and K8sLeaseWaitLost block the calling thread;
 * K8sLeaseGetHolder makes one request to the service on the calling thread
 * (5 s at most); the others return promptly (K8sLeaseCancelWatch may wait
 * for a running callback of that watch to return). Each watch has its own
 * thread, which runs its callbacks; all signals are blocked on it. Call no
 * function of this library from a signal handler.
 *
 * Differences from the Go wrapper, all in what the service decides: a Lease
 * whose holder stopped renewing reads as free once the validity granted to
 * that holder has passed (the retry period, by default), not after the lease
 * duration measured with the wall clock; watches report changes of the live
 * holder only, not every renewal. */
#ifndef LIBK8S_LEASE_WRAPPER_H
#define LIBK8S_LEASE_WRAPPER_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(KW_BUILDING_LIBRARY)
#define KW_EXPORT __attribute__((visibility("default")))
#else
#define KW_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Watch callback: holder is the identity of the live holder (holderSize
 * bytes, also NUL-terminated, valid only during the call) or NULL with
 * holderSize 0 when nobody holds the Lease (free, expired, or no Lease);
 * leaseTransitions is the Lease's fencing epoch (0 when there is no Lease). */
typedef void (*holder_change_cb_t)(void *ctx, const char *holder, size_t holderSize,
                                   int64_t leaseTransitions);

/* Creates the process's kubelease client for $KUBELEASE_ENDPOINT. Idempotent
 * and thread-safe: later calls return 0 at once. Does not contact the
 * service. Every other function creates the client itself when needed, so
 * calling this first only reports a bad endpoint early. Errors: -1 when the
 * endpoint is not a URL like http://host:port, or out of memory (then a later
 * call tries again, reading $KUBELEASE_ENDPOINT again). */
KW_EXPORT int K8sLeaseInit(char **errMsg);

/* Starts campaigning for ns/leaseName as identity, with client-go's
 * durations in seconds (leaseDurationSec > renewDeadlineSec > 1.2 x
 * retryPeriodSec >= 1). Returns 0 at once; the campaign goes on in the
 * background (also while the service is unreachable) until the election
 * ends. Errors: -1 for invalid arguments (the message names the argument)
 * and when an election for ns/leaseName is already running in this process.
 * When the previous election for ns/leaseName is still resigning, waits for
 * that first (3 s at most). $KUBELEASE_GRANT_MS, when set, is the validity
 * of each confirmation (kl_election_options.grant_ms: 200 to the retry
 * period in ms; what a crash of the leader costs in failover); a value that
 * is not such a number is an error naming it. */
KW_EXPORT int K8sLeaseRunElection(char *ns, char *leaseName, char *identity, int leaseDurationSec,
                                  int renewDeadlineSec, int retryPeriodSec, char **errMsg);

/* Blocks until this process's election for ns/leaseName is elected, then
 * returns 0 with *leaseTransitions (may be NULL) = the term's fencing epoch.
 * Waits at most timeoutSec seconds (0 or negative: does not wait); on timeout
 * the election is cancelled, as by K8sLeaseCancelElection, and -1 is
 * returned. Also -1 when no election for ns/leaseName was started, or when it
 * ended before being elected (cancelled, refused by the service). Returns 0
 * again, with the same epoch, while the term lasts. */
KW_EXPORT int K8sLeaseWaitElected(char *ns, char *leaseName, int timeoutSec,
                                  long long *leaseTransitions, char **errMsg);

/* Blocks until this process's election for ns/leaseName ends: leadership
 * lost (the deadline passed without a fresh confirmation, the service ended
 * the term), or the election cancelled, also before it was elected. After a
 * cancellation it also waits until the service released the Lease (usually
 * milliseconds; 3 s at most, less when the service cannot be reached), as
 * the Go wrapper did, so a process that cancels, waits and exits hands over
 * at once. Returns 0 however the election ended, and at once when it already
 * ended or none was started, as the Go wrapper does. */
KW_EXPORT int K8sLeaseWaitLost(char *ns, char *leaseName, char **errMsg);

/* Ends this process's election for ns/leaseName: leadership ends at once (a
 * K8sLeaseWaitLost in another thread returns), then the library resigns in
 * the background, so the service releases the Lease and a waiting candidate
 * takes over within milliseconds. Returns 0 without waiting for the service;
 * also 0 when no election runs (idempotent). */
KW_EXPORT int K8sLeaseCancelElection(char *ns, char *leaseName, char **errMsg);

/* Reads who holds ns/leaseName, with one request to the service. Returns 0
 * with *holderIdentity = a malloc'ed NUL-terminated identity the caller
 * frees with free, or NULL when nobody holds the Lease (it was released, or
 * its holder stopped renewing and the validity granted to it has passed),
 * and *leaseTransitions (may be NULL) = the Lease's fencing epoch. Returns 1
 * when the Lease does not exist (*holderIdentity NULL, *leaseTransitions 0),
 * without a message. -1 on error (*holderIdentity NULL): the service is
 * unreachable or did not answer within 5 s, invalid names.
 * holderIdentity must not be NULL. */
KW_EXPORT int K8sLeaseGetHolder(char *ns, char *leaseName, char **holderIdentity,
                                long long *leaseTransitions, char **errMsg);

/* Watches who holds ns/leaseName: callbackFunc(callbackCtx, ...) runs first
 * with the current state, then after every change of holder or epoch
 * (consecutive identical states are not repeated), on a thread of this
 * watch, one call at a time and in order. The callback may block and may
 * call any function of this library; while it runs, this watch's later
 * changes wait for it (the newest 256 are kept). The watch keeps going while
 * the service is unreachable, until K8sLeaseCancelWatch. Errors: -1 when
 * callbackFunc is NULL, the names are invalid, a watch of ns/leaseName is
 * already running in this process, or its thread cannot be started. */
KW_EXPORT int K8sLeaseWatchHolder(char *ns, char *leaseName, void *callbackCtx,
                                  holder_change_cb_t callbackFunc, char **errMsg);

/* Stops the watch of ns/leaseName. When it returns, no callback of that
 * watch runs or will run, so callbackCtx may be freed: it waits for a
 * running callback to return (do not call it holding a lock that callback
 * takes). From that watch's own callback it returns at once, and the running
 * callback is the last. Returns 0, also when no watch runs (idempotent). */
KW_EXPORT int K8sLeaseCancelWatch(char *ns, char *leaseName, char **errMsg);

/* The leader label: Pod ns/pod (this process's own Pod; ns is the Pod's
 * namespace, as in the Go wrapper, whatever the elections' namespaces)
 * carries key=value while an election of this process leads, so that a
 * Service selecting it routes to the leader. Unlike the Go wrapper, the
 * process does not patch the Pod: kubeleased does, and takes the label off
 * before the next leader is elected, also when this process crashed, so no
 * two Pods carry it at once (docs/design.md, rule 9; the service must allow
 * key with --pod-label-keys, the Pod must be the caller's, and kubeleased
 * needs RBAC on pods in ns). A label, refused or failing, never costs an
 * election its term. Exactly:
 *   - K8sPatchPodLabel records ns/pod key=value for this process, replacing
 *     any. Every later K8sLeaseRunElection campaigns with it. Every election
 *     of this process that is running gets it too, and the call waits (5 s
 *     at most, as the Go wrapper's patch) for its outcome: it returns 0
 *     once the label is on the Pod (an election that leads) or accepted for
 *     the coming term (one that does not lead yet), or when no election
 *     runs; -1 with a message naming the cause otherwise — a key the
 *     service does not allow, a Pod not the caller's, the apiserver's error
 *     (a 403 when kubeleased lacks RBAC on pods), no answer in time. The
 *     leadership is untouched either way, so a caller retrying while it
 *     fails, as the Go wrapper's users do, retries the patch. -1 also for a
 *     NULL or empty ns, pod or key, names too long (63, 253, 317, 63 bytes)
 *     or holding '/'.
 *   - K8sRemovePodLabel forgets the label recorded (when it names ns, pod
 *     and key; another one stays) and asks running elections to drop it,
 *     waiting the same way until it is off the Pod. After leadership was
 *     lost there is nothing left to do (the service removed the label when
 *     the term ended) and it returns 0: the Go wrapper's usage,
 *     K8sRemovePodLabel after K8sLeaseWaitLost, is harmless.
 * With $KUBELEASE_LOG set (debug, info, warn or error), the library's log —
 * refusals, lost terms and why, reconnections — goes to stderr. */
KW_EXPORT int K8sPatchPodLabel(char *ns, char *pod, char *key, char *value, char **errMsg);
KW_EXPORT int K8sRemovePodLabel(char *ns, char *pod, char *key, char **errMsg);

#ifdef __cplusplus
}
#endif
#endif
