/* FNV-1a, 32 bits: the hash of the service's in-memory tables (the engine's
 * leases by namespace and name, HTTP peers by address). Fast and spread
 * enough for bucket selection; not for anything an attacker must not steer.
 *
 * Chain the calls to hash several pieces as one:
 *   hash_fnv1a_str(hash_fnv1a(hash_fnv1a_str(HASH_FNV1A_INIT, ns), "/", 1), name)
 *
 * Header-only (static inline), pure, any thread. */
#ifndef KL_CORE_HASH_H
#define KL_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HASH_FNV1A_INIT  2166136261u /* the offset basis */
#define HASH_FNV1A_PRIME 16777619u

/* Continues hash h over the len bytes at data. */
static inline uint32_t hash_fnv1a(uint32_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * HASH_FNV1A_PRIME;
    return h;
}

/* Continues hash h over the bytes of the string s (not its NUL). */
static inline uint32_t hash_fnv1a_str(uint32_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * HASH_FNV1A_PRIME;
    return h;
}

#endif
