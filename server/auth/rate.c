/* How many reviews a second kubeleased asks of the apiserver for callers it
 * does not know (docs/design.md, rule 7): token buckets, one for all callers
 * (--review-rate) and one per peer address (--review-rate-per-ip), each
 * holding at most two seconds' worth of reviews. A review takes one from
 * the peer's bucket and one from the overall bucket, or from neither: a
 * peer refused by the overall limit keeps what it had.
 *
 * An IPv6 peer is counted by its /64, the least a site is given, so that
 * a client cannot take a fresh bucket with each address of its prefix.
 *
 * Buckets count thousandths of a review, so that refilling at N a second
 * is N per elapsed millisecond, exactly. The peers' buckets live in a
 * fixed-capacity table, least recently used first out: a peer forgotten
 * starts again with a full bucket, which the overall bucket still bounds.
 *
 * Time comes from the caller (now_ms, monotonic), so tests drive it by
 * hand. Threads: not thread-safe; the authorizer uses it on the loop
 * thread only. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/list.h"
#include "auth/internal.h"

#define BURST_S 2 /* a bucket holds this many seconds' worth */

typedef struct bucket {
    int64_t milli; /* thousandths of a review left */
    int64_t at_ms; /* when milli was last brought up to date */
} bucket;

typedef struct peer {
    char addr[AUTH_PEER_LEN];
    bucket b;
    struct peer *chain;   /* the hash bucket's next */
    struct kl__list link; /* in recency, most recent first */
} peer;

struct auth_rate {
    unsigned rate, per_peer; /* a second; 0: no limit */
    bucket all;
    size_t max_peers, n_peers, n_slots;
    peer **slots;
    struct kl__list recency;
};

auth_rate *auth_rate_new(unsigned rate, unsigned per_peer, size_t max_peers, int64_t now_ms)
{
    auth_rate *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->rate = rate;
    r->per_peer = per_peer;
    r->all = (bucket){(int64_t)rate * 1000 * BURST_S, now_ms};
    r->max_peers = max_peers ? max_peers : 1;
    r->n_slots = 64;
    while (r->n_slots < r->max_peers)
        r->n_slots *= 2;
    r->slots = calloc(r->n_slots, sizeof *r->slots);
    if (!r->slots) {
        free(r);
        return NULL;
    }
    return r;
}

static size_t slot_of(const auth_rate *r, const char *addr)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)addr; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return (size_t)h & (r->n_slots - 1);
}

static void peer_remove(auth_rate *r, peer *p)
{
    peer **pp = &r->slots[slot_of(r, p->addr)];
    while (*pp != p)
        pp = &(*pp)->chain;
    *pp = p->chain;
    kl__list_remove(&p->link);
    r->n_peers--;
    free(p);
}

void auth_rate_free(auth_rate *r)
{
    if (!r)
        return;
    while (!kl__list_empty(&r->recency))
        peer_remove(r, KL__LIST_ENTRY(kl__list_first(&r->recency), peer, link));
    free(r->slots);
    free(r);
}

/* Brings b up to now at rate a second: at most BURST_S seconds' worth. */
static void refill(bucket *b, unsigned rate, int64_t now_ms)
{
    int64_t cap = (int64_t)rate * 1000 * BURST_S;
    if (now_ms > b->at_ms) {
        int64_t elapsed = now_ms - b->at_ms;
        b->milli = elapsed >= BURST_S * 1000 ? cap : b->milli + elapsed * rate;
        if (b->milli > cap)
            b->milli = cap;
        b->at_ms = now_ms;
    }
}

/* How long until b holds a whole review, at rate a second (at least 1 ms). */
static int64_t wait_ms(const bucket *b, unsigned rate)
{
    int64_t missing = 1000 - b->milli;
    int64_t ms = (missing + rate - 1) / rate;
    return ms > 0 ? ms : 1;
}

/* The peer's bucket, made (full) when it has none; NULL when out of memory. */
static peer *peer_of(auth_rate *r, const char *addr, int64_t now_ms)
{
    size_t s = slot_of(r, addr);
    for (peer *p = r->slots[s]; p; p = p->chain) {
        if (strcmp(p->addr, addr) == 0) {
            kl__list_remove(&p->link);
            kl__list_insert_head(&r->recency, &p->link);
            return p;
        }
    }
    if (r->n_peers >= r->max_peers)
        peer_remove(r, KL__LIST_ENTRY(kl__list_last(&r->recency), peer, link));
    peer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    size_t n = strnlen(addr, AUTH_PEER_LEN - 1);
    memcpy(p->addr, addr, n);
    p->b = (bucket){(int64_t)r->per_peer * 1000 * BURST_S, now_ms};
    p->chain = r->slots[s];
    r->slots[s] = p;
    kl__list_insert_head(&r->recency, &p->link);
    r->n_peers++;
    return p;
}

/* The key of addr's bucket into key: an IPv6 address's /64, else addr. */
static void peer_key(const char *addr, char key[AUTH_PEER_LEN])
{
    struct in6_addr a6;
    if (strchr(addr, ':') && inet_pton(AF_INET6, addr, &a6) == 1) {
        memset(a6.s6_addr + 8, 0, 8);
        char text[INET6_ADDRSTRLEN];
        inet_ntop(AF_INET6, &a6, text, sizeof text);
        snprintf(key, AUTH_PEER_LEN, "%s/64", text);
        return;
    }
    snprintf(key, AUTH_PEER_LEN, "%s", addr);
}

auth_rate_verdict auth_rate_take(auth_rate *r, const char *addr, int64_t now_ms, int64_t *retry_ms)
{
    *retry_ms = 0;
    peer *p = NULL;
    if (r->per_peer && addr && addr[0]) {
        char key[AUTH_PEER_LEN];
        peer_key(addr, key);
        p = peer_of(r, key, now_ms);
        if (!p) {
            *retry_ms = 1000;
            return AUTH_RATE_PEER; /* out of memory: refuse, as an empty bucket would */
        }
        refill(&p->b, r->per_peer, now_ms);
        if (p->b.milli < 1000) {
            *retry_ms = wait_ms(&p->b, r->per_peer);
            return AUTH_RATE_PEER;
        }
    }
    if (r->rate) {
        refill(&r->all, r->rate, now_ms);
        if (r->all.milli < 1000) {
            *retry_ms = wait_ms(&r->all, r->rate);
            return AUTH_RATE_ALL;
        }
        r->all.milli -= 1000;
    }
    if (p)
        p->b.milli -= 1000;
    return AUTH_RATE_OK;
}

size_t auth_rate_peers(const auth_rate *r)
{
    return r->n_peers;
}
