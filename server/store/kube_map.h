/* The Kubernetes store's one translation from the Kubernetes API's
 * vocabulary (kube/api.h) to the store's (store/store.h): apiserver answers
 * to store statuses, through one table, and Leases both ways. Pure; any
 * thread. Used by store/kube*.c only. */
#ifndef KL_STORE_KUBE_MAP_H
#define KL_STORE_KUBE_MAP_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/api.h"
#include "kube/client.h"
#include "store/store.h"

/* Maps an HTTP status (0: transport error) and an optional decoded Status to
 * a store_status: 2xx OK; 404 NOT_FOUND; 409 AlreadyExists EXISTS, 409
 * Conflict CONFLICT, a bare 409 EXISTS for a create and CONFLICT otherwise;
 * 401/403 FORBIDDEN; 400/422 INVALID; 0/429/5xx UNAVAILABLE; anything else
 * INTERNAL. */
store_status store_kube_map_status(long http_code, const kube_status *st, kube_verb verb);

/* Whether an answer with this HTTP status (0: none) shows the apiserver
 * reachable: it answered, and not with 429 or a server error. */
bool store_kube_reachable_after(long http_code);

/* Describes a response that failed: "apiserver: <transport error>" when no
 * HTTP response came, else kube_status_message() of its Status. Fills *st and
 * returns true when the body was a Status. */
bool store_kube_describe(const kube_response *r, kube_status *st, char *out, size_t out_len);

/* The Lease as the store sees it. */
void store_lease_from_kube(const kube_lease *in, store_lease *out);
/* The Lease as Kubernetes types it. Returns false when a value does not fit
 * (leaseTransitions is an int32); strings are copied whole, so that one
 * without its NUL stays so and the codec refuses it. */
bool store_lease_to_kube(const store_lease *in, kube_lease *out);
/* The Event as Kubernetes types it (strings copied whole, as above). */
void store_event_to_kube(const store_lease_event *in, kube_event *out);

#endif
