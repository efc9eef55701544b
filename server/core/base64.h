/* Base64 (RFC 4648) for the service: the encoder proto3 JSON writes bytes
 * fields with, and one decoder for the two dialects the service reads,
 * chosen by flags:
 *
 *   proto3 JSON bytes   BASE64_URL_SAFE: either alphabet, any trailing '='
 *                       (padding optional), no white space;
 *   kubeconfig *-data   BASE64_SKIP_SPACE | BASE64_CANONICAL: the standard
 *                       alphabet, white space ignored, padding optional but
 *                       complete when present, unused bits zero.
 *
 * Pure functions, any thread; the results are malloc'd and the caller's. */
#ifndef KL_CORE_BASE64_H
#define KL_CORE_BASE64_H

#include <stddef.h>
#include <stdint.h>

enum {
    BASE64_URL_SAFE = 1 << 0,   /* also '-' for '+' and '_' for '/' */
    BASE64_SKIP_SPACE = 1 << 1, /* ' ', '\t', '\r' and '\n' anywhere are skipped */
    BASE64_CANONICAL = 1 << 2,  /* '=' only as 1-2 bytes of padding that complete the last
                                   quantum, no lone last character, unused bits zero */
};

enum {
    BASE64_INVALID = -1,
    BASE64_NO_MEMORY = -2,
};

/* The standard alphabet with '=' padding, NUL-terminated and malloc'd (the
 * caller frees it); NULL when out of memory. */
char *base64_encode(const uint8_t *data, size_t len);
/* Decodes the len bytes at in by the rules flags choose. Returns 0 with *out
 * malloc'd (the caller frees it; never NULL, NUL-terminated after its *out_len
 * bytes), or BASE64_INVALID or BASE64_NO_MEMORY with *out NULL. */
int base64_decode(const char *in, size_t len, unsigned flags, uint8_t **out, size_t *out_len);

#endif
