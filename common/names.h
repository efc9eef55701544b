/* The names a lease is known by, checked by apimachinery's rules so that the
 * client, the service's request validation and its stores agree on them:
 *
 *   namespace  a DNS-1123 label: 1-63 of [a-z0-9-], starting and ending with
 *              [a-z0-9] (IsDNS1123Label);
 *   Lease name a DNS-1123 subdomain: 1-253 bytes of dot-separated labels of
 *              the same alphabet (IsDNS1123Subdomain), each label also at
 *              most 63 bytes as kubelease has always required;
 *   identity   the holder identity written into the Lease: 1-253 printable
 *              ASCII bytes (0x20-0x7e).
 *
 * Each check says what is wrong, not where: the caller writes the message,
 * naming its own field. Pure functions, any thread; NULL is accepted and
 * reported as empty. */
#ifndef KL_COMMON_NAMES_H
#define KL_COMMON_NAMES_H

#include <stddef.h>

#define KL__NAME_NAMESPACE_MAX 63
#define KL__NAME_LEASE_MAX     253
#define KL__NAME_IDENTITY_MAX  253

typedef enum kl__name_verdict {
    KL__NAME_OK = 0,
    KL__NAME_EMPTY,    /* NULL or "" */
    KL__NAME_TOO_LONG, /* over the rule's maximum length */
    KL__NAME_INVALID,  /* a byte, or a label, the rule does not allow */
} kl__name_verdict;

kl__name_verdict kl__name_check_namespace(const char *ns);
kl__name_verdict kl__name_check_lease(const char *name);
/* On KL__NAME_INVALID, *bad (when not NULL) is the index of the first byte
 * that is not printable ASCII. */
kl__name_verdict kl__name_check_identity(const char *identity, size_t *bad);

#endif
