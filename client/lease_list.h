/* The service's Lease listings (ListLeases answers) decoded into the public
 * kl_lease_info rows: parsing apart from I/O, so it is tested without a
 * service. Pure functions with no shared state: safe from any thread. */
#ifndef KL_LEASE_LIST_H
#define KL_LEASE_LIST_H

#include <stddef.h>
#include <stdint.h>

#include "kubelease.h"

/* Decodes a ListLeasesResponse (len bytes at data), keeping the rows of
 * namespace ns (NULL: every row), sorted by namespace then name. Strings too
 * long for their field (kubeleased never sends any) are truncated.
 * Returns KL_OK with *out = a malloc'd array of *n rows (NULL when *n is 0);
 * KL_ERR_PROTOCOL when the bytes are not a ListLeasesResponse, or
 * KL_ERR_NO_MEMORY; on error *out is NULL and *n 0. */
int kl__lease_list_decode(const uint8_t *data, size_t len, const char *ns, kl_lease_info **out,
                          size_t *n);

/* The row of ns/name in a sorted array (kl__lease_list_decode), or NULL. */
const kl_lease_info *kl__lease_list_find(const kl_lease_info *rows, size_t n, const char *ns,
                                         const char *name);

#endif
