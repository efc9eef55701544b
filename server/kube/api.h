/* The Kubernetes API's own vocabulary, as kube-apiserver speaks it: the
 * coordination.k8s.io/v1 Lease, a Status (the body of an error response or
 * of a watch ERROR event) and the verbs. Plain values and pure functions: no
 * I/O, no global state, any thread. kube/ knows nothing of the store; the
 * Kubernetes store (store/kube_map.c) maps these types to its own. */
#ifndef KL_KUBE_API_H
#define KL_KUBE_API_H

#include <stddef.h>
#include <stdint.h>

/* Field sizes, NUL included: what apimachinery allows for names, and what
 * kubelease accepts for the rest (longer values are decoding errors). */
#define KUBE_NS_MAX     64  /* DNS-1123 label: 63 bytes + NUL */
#define KUBE_NAME_MAX   254 /* DNS-1123 subdomain: 253 bytes + NUL */
#define KUBE_HOLDER_MAX 256 /* identities are at most 253 printable bytes */
#define KUBE_RV_MAX     64
/* The annotation kubelease writes on a Lease whose term labels a Pod:
 * "<pod> <key>=<value>" (docs/design.md, rule 9). */
#define KUBE_POD_LABEL_ANNOTATION "kubelease.io/pod-label"
#define KUBE_POD_LABEL_MAX        768 /* ns/pod 317 + key 317 + value 63 + MAC 43 + separators */
#define KUBE_IP_MAX               64  /* one address */
#define KUBE_POD_IPS_MAX          128 /* a Pod's addresses (dual-stack: two), space-separated */
#define KUBE_NONCE_MAX            64
#define KUBE_UID_MAX              64 /* metadata.uid: a UUID, 36 bytes */
/* spec.strategy: a qualified name, [prefix (DNS subdomain, 253) '/'] name (63) */
#define KUBE_STRATEGY_MAX 320

/* The leader value of the term (docs/design.md, rule 10): at most
 * KUBE_VALUE_MAX bytes, base64 (standard alphabet, padded) in the
 * annotation. */
#define KUBE_VALUE_ANNOTATION "kubelease.io/value"
#define KUBE_VALUE_MAX        1024

/* The annotation holding the random value of the term kubelease started on a
 * Lease (never the term's token, which derives from it under a key only
 * kubeleased has). */
#define KUBE_TERM_NONCE_ANNOTATION "kubelease.io/term-nonce"

/* A planned handoff across kubeleased replicas (docs/design.md, rule 3):
 * the identity the term is asked to go to, and the epoch of a transfer
 * written for a standby of another replica (decimal). */
#define KUBE_HANDOFF_TO_ANNOTATION "kubelease.io/handoff-to"
#define KUBE_HANDED_TO_ANNOTATION  "kubelease.io/handed-to"

/* The mark of the write that last changed the Lease: 16 lowercase hex
 * digits, unique to that write, so that a writer whose answer was lost
 * knows its write in the Lease (docs/design.md, rule 3). */
#define KUBE_WRITE_ID_ANNOTATION "kubelease.io/write-id"

/* A coordination.k8s.io/v1 Lease: its metadata and spec fields. Plain value:
 * copy it with '='. */
typedef struct kube_lease {
    char ns[KUBE_NS_MAX];                  /* metadata.namespace */
    char name[KUBE_NAME_MAX];              /* metadata.name */
    char resource_version[KUBE_RV_MAX];    /* metadata.resourceVersion; "" when unset */
    char uid[KUBE_UID_MAX];                /* metadata.uid; "" when unset (never written) */
    char holder_identity[KUBE_HOLDER_MAX]; /* spec.holderIdentity; "" when unset */
    int32_t lease_duration_seconds;        /* spec.leaseDurationSeconds; 0 when unset */
    int32_t lease_transitions;             /* spec.leaseTransitions; 0 when unset */
    int64_t acquire_time_us; /* spec.acquireTime: µs since the Unix epoch; 0 when unset */
    int64_t renew_time_us;   /* spec.renewTime: µs since the Unix epoch; 0 when unset */
    /* metadata.annotations["kubelease.io/pod-label"]; "" when unset */
    char pod_label[KUBE_POD_LABEL_MAX];
    /* metadata.annotations[KUBE_TERM_NONCE_ANNOTATION]; "" when unset (or not
     * a base64url string that fits: someone else's value is ignored) */
    char term_nonce[KUBE_NONCE_MAX];
    /* spec.preferredHolder and spec.strategy (Kubernetes' coordinated leader
     * election): others' fields, which kubelease reads and never patches; ""
     * when unset, or when not a value kubelease could act on (a preferred
     * holder that is not an identity, a strategy that is not a printable
     * token): such a value is ignored, not an error */
    char preferred_holder[KUBE_HOLDER_MAX];
    char strategy[KUBE_STRATEGY_MAX];
    /* metadata.annotations[KUBE_HANDOFF_TO_ANNOTATION] (an identity) and
     * [KUBE_HANDED_TO_ANNOTATION] (an epoch, 1 to INT32_MAX in decimal);
     * ""/0 when unset or not such a value (ignored, not an error) */
    char handoff_to[KUBE_HOLDER_MAX];
    int64_t handed_to;
    /* metadata.annotations[KUBE_VALUE_ANNOTATION], decoded: value_len bytes;
     * 0 when unset or not base64 of at most KUBE_VALUE_MAX bytes (ignored,
     * not an error) */
    uint16_t value_len;
    uint8_t value[KUBE_VALUE_MAX];
    /* metadata.annotations[KUBE_WRITE_ID_ANNOTATION]; 0 when unset or not
     * 16 lowercase hex digits (ignored, not an error) */
    uint64_t write_id;
} kube_lease;

/* A core/v1 Event about a Lease, as kubeleased records it: the Lease is
 * its involvedObject (coordination.k8s.io/v1, kind Lease, in the Event's
 * namespace). Plain value. */
#define KUBE_EVENT_REASON_MAX   64
#define KUBE_EVENT_MESSAGE_MAX  512
#define KUBE_EVENT_REPORTER_MAX 128
typedef struct kube_event {
    char ns[KUBE_NS_MAX];               /* the Lease's and the Event's namespace */
    char name[KUBE_NAME_MAX];           /* the Lease's name */
    char uid[KUBE_UID_MAX];             /* the Lease's uid; "" unknown */
    char resource_version[KUBE_RV_MAX]; /* the Lease's; "" unknown */
    const char *type;                   /* "Normal" or "Warning" */
    char reason[KUBE_EVENT_REASON_MAX]; /* e.g. "LeaderElection" */
    char message[KUBE_EVENT_MESSAGE_MAX];
    char component[KUBE_EVENT_REPORTER_MAX]; /* source.component, reportingComponent */
    char instance[KUBE_EVENT_REPORTER_MAX];  /* reportingInstance; "" none */
    int64_t time_us;                         /* first and last timestamp */
} kube_event;

/* A Kubernetes Status. message is cut to fit: it is for logs only. */
typedef struct kube_status {
    int code;        /* HTTP code it carries; 0 when absent */
    char reason[64]; /* "Conflict", "AlreadyExists", "NotFound", "Expired", ... */
    char message[256];
} kube_status;

/* The apiserver's verbs for the requests kubelease makes. */
typedef enum kube_verb {
    KUBE_VERB_GET,
    KUBE_VERB_CREATE,
    KUBE_VERB_PATCH, /* a conditional merge patch (kube_lease_merge_patch) */
    KUBE_VERB_DELETE,
    KUBE_VERB_LIST
} kube_verb;

/* "get", "create", "patch", "delete", "list" (static; "other" when v is none). */
const char *kube_verb_name(kube_verb v);

/* Writes "apiserver: 409 Conflict: <message>" (reason and message from st
 * when present, else the HTTP reason phrase). st may be NULL. */
void kube_status_message(long http_code, const kube_status *st, char *out, size_t out_len);

#endif
