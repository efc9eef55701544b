/* The lease-store interface: everything the engine does with Lease objects.
 * Two implementations the engine cannot tell apart: `kube` (the Kubernetes
 * coordination.k8s.io/v1 Lease API) and `memory` (in-process; --dev mode and
 * the unit-test substrate).
 *
 * All operations are asynchronous and run on the engine's loop thread: they
 * return at once and call their callback later, on the loop thread, never
 * from inside the call that started them. */
#ifndef KL_STORE_STORE_H
#define KL_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"

#define STORE_NS_MAX     64  /* DNS-1123 label: 63 bytes + NUL */
#define STORE_NAME_MAX   254 /* DNS-1123 subdomain: 253 bytes + NUL */
#define STORE_HOLDER_MAX 256 /* identities are at most 253 printable bytes */
#define STORE_RV_MAX     64
/* A term's Pod label as the Lease records it:
 * "<pod-namespace>/<pod> <key>=<value> <mac>" (docs/design.md, rule 9):
 * 63 + 1 + 253 + 1 + 317 + 1 + 63 + 1 + 43 bytes at most, and the NUL. */
#define STORE_POD_LABEL_MAX 768
#define STORE_LABEL_KEY_MAX 320 /* [prefix (DNS subdomain, 253) '/'] name (63) */
#define STORE_LABEL_VAL_MAX 64  /* at most 63 bytes */
#define STORE_IP_MAX        64
#define STORE_POD_IPS_MAX   128  /* a Pod's addresses, space-separated (dual-stack) */
#define STORE_NONCE_MAX     64   /* a term nonce: base64url text */
#define STORE_UID_MAX       64   /* metadata.uid: a UUID, 36 bytes */
#define STORE_STRATEGY_MAX  320  /* spec.strategy: a qualified name */
#define STORE_VALUE_MAX     1024 /* a leader value: bytes (docs/design.md, rule 10) */

/* A Lease as the engine sees it. Plain value: copy it with '='. */
typedef struct store_lease {
    char ns[STORE_NS_MAX];
    char name[STORE_NAME_MAX];
    char holder[STORE_HOLDER_MAX]; /* "" when nobody holds it */
    int32_t lease_duration_s;      /* 0 when unset */
    int64_t transitions;           /* leaseTransitions */
    int64_t acquire_time_us;       /* wall clock, µs since the epoch; 0 when unset */
    int64_t renew_time_us;         /* wall clock, µs since the epoch; 0 when unset */
    char resource_version[STORE_RV_MAX];
    /* metadata.uid, set by the store when it creates the Lease ("" when not
     * known); read only, for references to the Lease (Events). */
    char uid[STORE_UID_MAX];
    /* The Pod label of the term (the Lease's kubelease.io/pod-label
     * annotation); "" when none. Written by create and update like the spec. */
    char pod_label[STORE_POD_LABEL_MAX];
    /* The random value of the term kubelease started on this Lease, from
     * which the term's token derives (docs/design.md, rule 8); "" when none.
     * Not a secret: it lives in the Lease beside the holder. */
    char term_nonce[STORE_NONCE_MAX];
    /* spec.preferredHolder and spec.strategy (Kubernetes' coordinated leader
     * election): whom the cluster wants to lead, and by which strategy it
     * chose; "" when unset. Written by whoever may write the Lease, never
     * by kubelease: create writes them as given (kubelease gives none),
     * update keeps the Lease's whatever lease says (docs/design.md, rule 3). */
    char preferred_holder[STORE_HOLDER_MAX];
    char strategy[STORE_STRATEGY_MAX];
    /* A planned handoff across replicas (docs/design.md, rule 3):
     * handoff_to (annotation kubelease.io/handoff-to) asks the replica
     * serving the term to hand it to that identity, a standby of another
     * replica; handed_to (kubelease.io/handed-to) marks a transfer written
     * for such a standby, at that epoch, for its replica to claim. ""/0:
     * unset. kubelease writes them with every create and update, as the
     * rest of the record (an update that leaves them unset removes them). */
    char handoff_to[STORE_HOLDER_MAX];
    int64_t handed_to;
    /* The leader value of the term (the Lease's kubelease.io/value
     * annotation; docs/design.md, rule 10): value_len bytes, 0 for none.
     * Written by create and update like the spec. */
    uint16_t value_len;
    uint8_t value[STORE_VALUE_MAX];
    /* The mark of the write that last changed the Lease (the annotation
     * kubelease.io/write-id; 0: unset): the engine stamps every write with
     * one of its own that no other write carries (engine_write_begin), so
     * that a writer whose answer was lost can tell its write from another
     * replica's that looks the same (docs/design.md, rule 3). Written by
     * create and update like the spec (unset: removed). */
    uint64_t write_id;
} store_lease;

/* The outcome of an operation, X(name, text): the enum gets STORE_<name>
 * (STORE_OK is 0) and store_status_name() the text, for logs and metrics. */
#define STORE_STATUS_MAP(X)                                                                        \
    X(OK, "ok")                                                                                    \
    X(NOT_FOUND, "not_found")     /* get, update, delete: no such Lease */                         \
    X(EXISTS, "exists")           /* create: a Lease of that name exists */                        \
    X(CONFLICT, "conflict")       /* update, delete: resourceVersion is stale */                   \
    X(UNAVAILABLE, "unavailable") /* transport error, timeout, 5xx, 429 */                         \
    X(FORBIDDEN, "forbidden")     /* 401/403 */                                                    \
    X(INVALID, "invalid")         /* 400/422: the store refused the object */                      \
    X(INTERNAL, "internal")       /* anything else (bad response, out of memory) */

typedef enum store_status {
#define STORE_STATUS_ENUM(name, text) STORE_##name,
    STORE_STATUS_MAP(STORE_STATUS_ENUM)
#undef STORE_STATUS_ENUM
} store_status;

/* "ok", "not_found", ... ("unknown" for a value outside the enum). Static. */
const char *store_status_name(store_status s);

typedef struct store_result {
    store_status status;
    int http_code;     /* 0 for the memory store or transport errors */
    char message[256]; /* why it failed, for logs; "" on success */
    store_lease lease; /* the object after the operation, when status == STORE_OK */
    /* pod_get, pod_label: the Pod's addresses, status.podIP first, then the
     * rest of status.podIPs, space-separated ("" none) */
    char pod_ip[STORE_POD_IPS_MAX];
} store_result;

/* A Kubernetes Event about a Lease (record_event): what happened to whom,
 * said by whom. Plain value. */
#define STORE_EVENT_REASON_MAX   64
#define STORE_EVENT_MESSAGE_MAX  512
#define STORE_EVENT_REPORTER_MAX 128 /* reportingInstance: at most 128 bytes */
typedef struct store_lease_event {
    /* The Lease the Event is about (its involvedObject): ns and name, and
     * uid and resource_version when known ("" else). */
    store_lease lease;
    bool warning;                             /* type Warning, else Normal */
    char reason[STORE_EVENT_REASON_MAX];      /* CamelCase, e.g. "LeaderElection" */
    char message[STORE_EVENT_MESSAGE_MAX];    /* for people */
    char component[STORE_EVENT_REPORTER_MAX]; /* reportingComponent, source.component */
    char instance[STORE_EVENT_REPORTER_MAX];  /* reportingInstance: this replica */
    int64_t time_us;                          /* wall clock, µs since the epoch */
} store_lease_event;

/* Completion of one operation; res is valid only during the call. */
typedef void (*store_cb)(void *ctx, const store_result *res);

typedef enum store_event_type {
    STORE_EVENT_PUT,    /* the Lease exists in this state (added or modified) */
    STORE_EVENT_DELETE, /* the Lease does not exist (lease has ns and name) */
    STORE_EVENT_SYNCED, /* every current Lease has been reported (after the
                           first list, and after every relist); lease NULL */
    STORE_EVENT_BROKEN, /* the watch is disconnected and retrying; lease NULL */
} store_event_type;

/* A watch event. After a reconnection the store reports the current state
 * again (PUT or DELETE per Lease, then SYNCED), so a consumer that keeps the
 * last resourceVersion per Lease never misses a final state. */
typedef void (*store_watch_cb)(void *ctx, store_event_type type, const store_lease *lease);

typedef struct store store;
typedef struct store_watch store_watch;

typedef struct store_ops {
    void (*get)(store *s, const char *ns, const char *name, int timeout_ms, store_cb cb, void *ctx);
    /* Creates the Lease; resource_version is ignored. */
    void (*create)(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx);
    /* Writes lease's spec (holder, duration, times, transitions), its Pod
     * label and handoff annotations (unset: removed) and, when set, its term
     * nonce, if the Lease's resourceVersion still equals
     * lease->resource_version (else CONFLICT); what else the object carries
     * (labels, other annotations, spec.preferredHolder and spec.strategy) is
     * kept. */
    void (*update)(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx);
    /* Deletes the Lease (unconditionally when resource_version is NULL or ""). */
    void (*remove)(store *s, const char *ns, const char *name, const char *resource_version,
                   int timeout_ms, store_cb cb, void *ctx);
    /* Watches one Lease (name != NULL) or every Lease of a namespace (name == NULL).
     * Returns NULL when out of memory. */
    store_watch *(*watch)(store *s, const char *ns, const char *name, store_watch_cb cb, void *ctx);
    /* Stops a watch; no callback runs for it after this returns. */
    void (*unwatch)(store *s, store_watch *w);
    /* Sets label key of Pod ns/pod to value, or removes it when value is
     * NULL, with a merge patch of that one label: the Pod's other labels
     * are kept. NOT_FOUND when the Pod does not exist. res->lease has only
     * ns and name (the Pod's); res->pod_ip is set on success. */
    void (*pod_label)(store *s, const char *ns, const char *pod, const char *key, const char *value,
                      int timeout_ms, store_cb cb, void *ctx);
    /* Reads Pod ns/pod: res->pod_ip on success, NOT_FOUND when absent. */
    void (*pod_get)(store *s, const char *ns, const char *pod, int timeout_ms, store_cb cb,
                    void *ctx);
    /* Records ev as a new Event in the Lease's namespace. res->lease has
     * only ns and name (the Lease's). Nothing retries it. */
    void (*record_event)(store *s, const store_lease_event *ev, int timeout_ms, store_cb cb,
                         void *ctx);
    /* True while the store is reachable (the last request or watch worked). */
    bool (*reachable)(store *s);
    void (*destroy)(store *s);
} store_ops;

struct store {
    const store_ops *ops;
    const char *kind; /* "kube" or "memory" */
};

/* Sets *l to a Lease that does not exist: only ns and name (for DELETE
 * events about a named Lease that is absent). */
void store_lease_absent(store_lease *l, const char *ns, const char *name);

static inline void store_free(store *s)
{
    if (s)
        s->ops->destroy(s);
}

/* The in-process store (store/memory.c). */
store *store_memory_new(loop *l);

#endif
