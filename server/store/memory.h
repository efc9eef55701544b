/* The in-process store (--dev mode and the unit-test substrate): the same
 * semantics as the Kubernetes store — monotonic resourceVersions,
 * compare-and-swap updates, ordered watch events — without a cluster. */
#ifndef KL_STORE_MEMORY_H
#define KL_STORE_MEMORY_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

/* Fault injection for tests: while unavailable, every operation fails with
 * STORE_UNAVAILABLE and watches are reported BROKEN; when it becomes
 * available again, watches re-report the current state and SYNCED, as the
 * Kubernetes store does after a reconnection. Loop thread only. */
void store_memory_set_available(store *s, bool available);

/* Makes the next count creates, updates and removes (-1: every later one)
 * fail with status, changing nothing (STORE_OK: back to normal); reads and
 * watches go on. Models an apiserver that refuses writes for a while, e.g.
 * 403 until its RBAC caches have synced after a restart, or a 409 nobody's
 * write explains. Loop thread only. */
void store_memory_set_writes_fail(store *s, store_status status, int count);

/* While on, every create, update and remove is applied (and its watch event
 * sent) but answered STORE_UNAVAILABLE, as when an apiserver times out
 * after etcd committed the write, or the connection breaks before the
 * answer. Loop thread only. */
void store_memory_set_answers_lost(store *s, bool lost);

/* Delays the completion of every later operation by ms (0: none), to model
 * a slow apiserver. Loop thread only. */
void store_memory_set_latency(store *s, int ms);

/* Delays the delivery of later watch events by ms (0: none), keeping their
 * order, to model a watch that lags behind write responses. Loop thread only. */
void store_memory_set_watch_delay(store *s, int ms);

/* Pods (store.h, pod_get and pod_label). store_memory_pod_put adds Pod
 * ns/pod with status.podIP ip (or sets its address); returns 0, or -1 when
 * out of memory. With auto_pods on (--dev, where no Pods exist), a Pod read
 * or labelled for the first time is added without an address. Loop thread
 * only. */
int store_memory_pod_put(store *s, const char *ns, const char *pod, const char *ip);
void store_memory_set_auto_pods(store *s, bool on);
/* Makes every later Pod label request (set or remove) fail with status,
 * changing nothing (STORE_OK: back to normal), as when kubeleased lacks
 * RBAC on pods (STORE_FORBIDDEN). Loop thread only. */
void store_memory_set_pod_labels_fail(store *s, store_status status);
/* Label key of Pod ns/pod; NULL when the Pod or the label is absent. Valid
 * until the next operation. Loop thread only. */
const char *store_memory_pod_label(store *s, const char *ns, const char *pod, const char *key);

/* Events (store.h, record_event): how many were recorded, and the i-th
 * of them (from 0, oldest first); only the last 64 are kept, NULL for
 * others. Valid until the next operation. Loop thread only. */
int64_t store_memory_event_count(store *s);
const store_lease_event *store_memory_event(store *s, int64_t i);

/* Sets spec.preferredHolder and spec.strategy of Lease ns/name ("" or NULL:
 * unset) as a writer other than kubelease would (kubectl, the coordinated
 * leader election controller): a new resourceVersion and a watch event, the
 * rest of the Lease as it was. Returns 0, or -1 when the Lease does not
 * exist. Loop thread only. */
int store_memory_set_preferred_holder(store *s, const char *ns, const char *name,
                                      const char *holder, const char *strategy);

/* How many Lease writes (create, update, remove) were applied. Loop thread
 * only. */
int64_t store_memory_writes(store *s);

/* How many watches are open (not yet stopped). Loop thread only. */
int store_memory_watch_count(store *s);

#endif
