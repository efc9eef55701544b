/* The caches of authentication and authorization answers: fixed-capacity
 * maps from a SHA-256 digest to a value with an expiry, least recently used
 * first out, and the lookups of tokens and access questions in them
 * (counted in kubelease_auth_cache_hits_total). A hit is a mutex and a
 * bucket walk, so callers' threads answer cached callers without a hop to
 * another thread.
 *
 * An answer is due for refreshing once three quarters of its life have
 * passed: the lookup that finds it so says so (to one caller a second), and
 * that caller has it asked again in the background (auth.c), so that a
 * caller that keeps calling — a leader confirming — never waits for a
 * review, while no answer is used past its expiry.
 *
 * Threads: every function is thread-safe (one mutex per cache); values are
 * copied out under it by the caller's copy function, so no value is used
 * after it may have been evicted. */
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/list.h"
#include "core/loop.h"
#include "core/metrics.h"
#include "auth/internal.h"

typedef struct entry {
    uint8_t key[AUTH_DIGEST_LEN];
    void *value;
    int64_t expires_ms;
    int64_t refresh_ms;   /* from then on, a lookup asks for a refresh */
    struct entry *chain;  /* the bucket's next */
    struct kl__list link; /* in recency: first is the most recent */
} entry;

struct auth_cache {
    pthread_mutex_t mu;
    void (*free_value)(void *value);
    size_t capacity, count, n_buckets;
    entry **buckets;
    struct kl__list recency; /* entry.link, most recent first */
};

/* ---- SHA-256 -------------------------------------------------------------- */

static pthread_once_t md_once = PTHREAD_ONCE_INIT;
static EVP_MD *md_sha256;

static void md_init(void)
{
    md_sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
}

int auth_digest(const void *data, size_t len, uint8_t out[AUTH_DIGEST_LEN])
{
    pthread_once(&md_once, md_init);
    unsigned n = 0;
    if (!md_sha256 || EVP_Digest(data, len, out, &n, md_sha256, NULL) != 1 || n != AUTH_DIGEST_LEN)
        return -1;
    return 0;
}

/* ---- the map -------------------------------------------------------------- */

auth_cache *auth_cache_new(size_t capacity, void (*free_value)(void *value))
{
    auth_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->capacity = capacity ? capacity : 1;
    c->n_buckets = 64;
    while (c->n_buckets < c->capacity)
        c->n_buckets *= 2;
    c->buckets = calloc(c->n_buckets, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    c->free_value = free_value;
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static size_t bucket_of(const auth_cache *c, const uint8_t key[AUTH_DIGEST_LEN])
{
    size_t h;
    memcpy(&h, key, sizeof h); /* a digest: its bytes are already uniform */
    return h & (c->n_buckets - 1);
}

static entry *entry_of(struct kl__list *link)
{
    return KL__LIST_ENTRY(link, entry, link);
}

static void remove_entry(auth_cache *c, entry *e)
{
    entry **p = &c->buckets[bucket_of(c, e->key)];
    while (*p != e)
        p = &(*p)->chain;
    *p = e->chain;
    kl__list_remove(&e->link);
    c->count--;
    if (c->free_value)
        c->free_value(e->value);
    free(e);
}

static entry *find(const auth_cache *c, const uint8_t key[AUTH_DIGEST_LEN])
{
    for (entry *e = c->buckets[bucket_of(c, key)]; e; e = e->chain)
        if (memcmp(e->key, key, AUTH_DIGEST_LEN) == 0)
            return e;
    return NULL;
}

bool auth_cache_get(auth_cache *c, const uint8_t key[AUTH_DIGEST_LEN], int64_t now_ms,
                    void (*copy)(const void *value, void *out), void *out, bool *refresh)
{
    bool hit = false;
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, key);
    if (e && e->expires_ms <= now_ms) {
        remove_entry(c, e);
    } else if (e) {
        kl__list_remove(&e->link);
        kl__list_insert_head(&c->recency, &e->link);
        copy(e->value, out);
        hit = true;
        if (refresh && e->refresh_ms <= now_ms) {
            *refresh = true;
            /* The next ask, if this one brings no answer, a second later. */
            e->refresh_ms = now_ms + AUTH_REFRESH_RETRY_MS;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

void auth_cache_put(auth_cache *c, const uint8_t key[AUTH_DIGEST_LEN], void *value, int64_t now_ms,
                    int64_t expires_ms)
{
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, key);
    if (e)
        remove_entry(c, e);
    while (c->count >= c->capacity && !kl__list_empty(&c->recency))
        remove_entry(c, entry_of(kl__list_last(&c->recency)));
    e = calloc(1, sizeof *e);
    if (!e) {
        pthread_mutex_unlock(&c->mu);
        if (c->free_value)
            c->free_value(value); /* not cached: asked again next time */
        return;
    }
    memcpy(e->key, key, AUTH_DIGEST_LEN);
    e->value = value;
    e->expires_ms = expires_ms;
    e->refresh_ms = now_ms + (expires_ms - now_ms) * 3 / 4;
    size_t b = bucket_of(c, key);
    e->chain = c->buckets[b];
    c->buckets[b] = e;
    kl__list_insert_head(&c->recency, &e->link);
    c->count++;
    pthread_mutex_unlock(&c->mu);
}

void auth_cache_remove(auth_cache *c, const uint8_t key[AUTH_DIGEST_LEN])
{
    pthread_mutex_lock(&c->mu);
    entry *e = find(c, key);
    if (e)
        remove_entry(c, e);
    pthread_mutex_unlock(&c->mu);
}

void auth_cache_free(auth_cache *c)
{
    if (!c)
        return;
    while (!kl__list_empty(&c->recency))
        remove_entry(c, entry_of(kl__list_first(&c->recency)));
    free(c->buckets);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ---- the lookups ----------------------------------------------------------- */

static void count_hit(const char *cache)
{
    char labels[48];
    snprintf(labels, sizeof labels, "cache=\"%s\"", cache);
    metrics_add("kubelease_auth_cache_hits_total", labels, 1);
}

static void copy_token_answer(const void *value, void *out)
{
    auth_token_answer *o = out;
    *o = *(const auth_token_answer *)value;
    auth_subject_ref(o->subject);
}

int auth_token_key(const char *token, size_t len, bool apiserver_audience,
                   uint8_t key[AUTH_DIGEST_LEN])
{
    if (auth_digest(token, len, key) != 0)
        return -1;
    if (!apiserver_audience)
        return 0;
    /* The apiserver's audience: a digest of the digest and a tag, another
     * key for the same token. */
    static const char tag[] = "\naudience=apiserver";
    uint8_t buf[AUTH_DIGEST_LEN + sizeof tag];
    memcpy(buf, key, AUTH_DIGEST_LEN);
    memcpy(buf + AUTH_DIGEST_LEN, tag, sizeof tag);
    return auth_digest(buf, sizeof buf, key);
}

bool auth_token_lookup(auth_ctx *a, const uint8_t digest[AUTH_DIGEST_LEN], auth_token_answer *out,
                       bool *refresh)
{
    int64_t now = auth_now(a);
    if (auth_cache_get(a->tokens, digest, now, copy_token_answer, out, refresh)) {
        count_hit("token");
        return true;
    }
    /* A refusal is never refreshed: it is asked again once it expires. */
    if (auth_cache_get(a->refused, digest, now, copy_token_answer, out, NULL)) {
        count_hit("refused");
        return true;
    }
    return false;
}

void auth_access_key(const auth_subject *s, const auth_access_question *q,
                     uint8_t key[AUTH_DIGEST_LEN])
{
    char buf[AUTH_DIGEST_LEN + 16 + 64 + 254 + 254 + 4];
    size_t n = 0;
    memcpy(buf, s->digest, AUTH_DIGEST_LEN);
    n += AUTH_DIGEST_LEN;
    const char *parts[] = {q->verb, q->ns, q->name, q->path ? q->path : ""};
    for (size_t i = 0; i < 4; i++) {
        size_t len = strnlen(parts[i], 253);
        memcpy(buf + n, parts[i], len);
        n += len;
        buf[n++] = 0; /* NUL-separated: no two questions share a key */
    }
    if (auth_digest(buf, n, key) != 0)
        memset(key, 0, AUTH_DIGEST_LEN); /* libcrypto failed: an all-zero key is never cached */
}

static void copy_access_answer(const void *value, void *out)
{
    *(auth_access_answer *)out = *(const auth_access_answer *)value;
}

bool auth_access_lookup(auth_ctx *a, const uint8_t key[AUTH_DIGEST_LEN], auth_access_answer *out,
                        bool *refresh)
{
    if (!auth_cache_get(a->access, key, auth_now(a), copy_access_answer, out, refresh))
        return false;
    count_hit("access");
    return true;
}
