/* The JSON codec of the Kubernetes API's types (kube/api.h): Lease,
 * LeaseList, Status and MicroTime. Pure functions over buffers (cJSON): no
 * I/O, no global state, any thread. */
#ifndef KL_KUBE_LEASE_JSON_H
#define KL_KUBE_LEASE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube/api.h"

struct cJSON;

/* MicroTime text: "2006-01-02T15:04:05.000000Z" is 27 bytes + NUL. */
#define KUBE_MICROTIME_LEN 32

/* Formats wall-clock microseconds since the Unix epoch as a MicroTime: UTC,
 * always six fraction digits. Returns 0, or -1 when the year is outside
 * 0000-9999 (out is then ""). */
int kube_microtime_format(int64_t us, char out[KUBE_MICROTIME_LEN]);
/* Parses RFC 3339 with 0-9 fraction digits (truncated to microseconds) and a
 * "Z" or +hh:mm/-hh:mm offset. Returns 0, or -1 when s is not such a time. */
int kube_microtime_parse(const char *s, int64_t *us);

/* Decodes a Status (kube/api.h). Returns 0, or -1 when the body is not one (not
 * JSON, or no code/reason/message at all); *out is then zeroed. */
int kube_status_decode(const char *buf, size_t len, kube_status *out);
int kube_status_from_json(const struct cJSON *obj, kube_status *out);

/* Decodes one Lease. Unknown fields are ignored; a string too long for its
 * kube_lease field, a missing metadata.name/namespace or a field of the wrong
 * type is an error naming the field (nothing is truncated). The term-nonce
 * annotation is the exception: one that is not a base64url string of at most
 * KUBE_NONCE_MAX - 1 bytes is read as absent, so that a stray value written
 * by someone else cannot make the Lease unreadable; so are
 * spec.preferredHolder (read only when it is an identity: 1-253 printable
 * bytes) and spec.strategy (1-319 printable bytes, no spaces), and the
 * handoff annotations (an identity; an epoch in decimal, 1 to INT32_MAX).
 * Returns 0, or -1 with err filled. */
int kube_lease_decode(const char *buf, size_t len, kube_lease *out, char *err, size_t err_len);
int kube_lease_from_json(const struct cJSON *obj, kube_lease *out, char *err, size_t err_len);

/* Encodes a Lease for create (with_rv false) or update (with_rv true:
 * metadata.resourceVersion is included). Unset fields (duration 0, times 0,
 * no term nonce, no preferred holder or strategy) are omitted;
 * holderIdentity is always written. Returns a malloc'd
 * NUL-terminated JSON text (caller frees) with *len set, or NULL when a
 * value cannot be encoded or memory runs out. */
char *kube_lease_encode(const kube_lease *lease, bool with_rv, size_t *len);

/* Encodes the JSON merge patch (RFC 7386) that makes a Lease's spec equal
 * lease's, on the condition that its resourceVersion is still
 * lease->resource_version (the apiserver answers 409 Conflict otherwise):
 * {"metadata":{"resourceVersion":...,"annotations":{...}},"spec":{...}},
 * with unset fields written as null so that they are removed; the
 * annotations are the term nonce, when lease has one, the pod label and
 * the handoff annotations (null when unset: removed). Everything else in the object (labels, other
 * annotations, owner references, spec.preferredHolder and spec.strategy,
 * spec fields this version does not know) is left as other writers set
 * it. Returns a malloc'd NUL-terminated text with *len set, or NULL when
 * the resourceVersion is empty, a value cannot be encoded, or memory runs
 * out. */
char *kube_lease_merge_patch(const kube_lease *lease, size_t *len);

/* A decoded LeaseList. Items that cannot be decoded are counted in n_bad
 * (the first reason in bad_reason) and left out; the names of those whose
 * metadata.name could be read are in bad_names, so that a reader can tell
 * a Lease it cannot decode from one that does not exist. */
typedef struct kube_lease_list {
    kube_lease *items; /* malloc'd; free with kube_lease_list_clear */
    size_t n;
    size_t n_bad;
    char bad_reason[256];
    char (*bad_names)[KUBE_NAME_MAX]; /* malloc'd, n_bad_names of them */
    size_t n_bad_names;
    char resource_version[KUBE_RV_MAX];
} kube_lease_list;

int kube_lease_list_decode(const char *buf, size_t len, kube_lease_list *out, char *err,
                           size_t err_len);
void kube_lease_list_clear(kube_lease_list *l);

/* ---- Pods: one label, and the address ---- */

/* The JSON merge patch that sets metadata.labels[key] to value, or removes
 * it when value is NULL; no other label is touched. Returns a malloc'd text
 * with *len set, or NULL when out of memory. */
char *kube_pod_label_patch(const char *key, const char *value, size_t *len);
/* Decodes a Pod's addresses into ips: status.podIP, then the other entries
 * of status.podIPs (dual-stack), separated by spaces ("" when it has none;
 * entries that are not strings or do not fit are left out). Returns 0, or -1
 * with err filled when the body is not a Pod. */
int kube_pod_decode(const char *buf, size_t len, char ips[KUBE_POD_IPS_MAX], char *err,
                    size_t err_len);

#endif
