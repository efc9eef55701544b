/* Term tokens: a term belongs to its holder (docs/design.md, rule 8). Each
 * term the engine starts gets a random nonce, written in the Lease beside the
 * holder; its token is
 *   HMAC-SHA256(key, "kubelease-term-v1" NUL ns NUL name NUL identity NUL
 *               epoch NUL nonce)
 * in base64url, under a key every replica of the service shares. The holder
 * learns the token from Elected and presents it with Confirm, Resign and a
 * resume; any replica can check it from the Lease alone, and nobody without
 * the key can make one, even knowing the identity, the epoch and the nonce.
 * Comparisons take the same time whatever the bytes compared. The same key
 * signs the leader label a term records in its Lease (podlabel.c), under a
 * context of its own ("kubelease-pod-label-v1"), so that neither can pass
 * for the other.
 *
 * Thread safety: the key is set by engine_new and read-only afterwards, so
 * every function here may run on any thread; the engine calls them on its
 * own. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "engine/internal.h"

#define TOKEN_CONTEXT    "kubelease-term-v1"
#define NONCE_BYTES      16 /* 128 random bits per term */
#define RANDOM_KEY_BYTES 32

/* base64url without padding of n bytes into out (4 * ceil(n / 3) + 1 bytes). */
static void base64url(const unsigned char *in, size_t n, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        if (i + 1 < n)
            v |= (unsigned)in[i + 1] << 8;
        if (i + 2 < n)
            v |= in[i + 2];
        out[o++] = abc[(v >> 18) & 63];
        out[o++] = abc[(v >> 12) & 63];
        if (i + 1 < n)
            out[o++] = abc[(v >> 6) & 63];
        if (i + 2 < n)
            out[o++] = abc[v & 63];
    }
    out[o] = '\0';
}

int engine_token_key_set(engine *e, const uint8_t *key, size_t len)
{
    size_t n = key && len ? len : RANDOM_KEY_BYTES;
    e->term_key = malloc(n);
    if (!e->term_key)
        return -1;
    if (key && len) {
        memcpy(e->term_key, key, len);
    } else if (RAND_bytes(e->term_key, (int)n) != 1) {
        free(e->term_key);
        e->term_key = NULL;
        return -1;
    }
    e->term_key_len = n;
    return 0;
}

void engine_token_key_clear(engine *e)
{
    if (e->term_key)
        OPENSSL_cleanse(e->term_key, e->term_key_len);
    free(e->term_key);
    e->term_key = NULL;
    e->term_key_len = 0;
}

int engine_token_nonce(char out[STORE_NONCE_MAX])
{
    unsigned char raw[NONCE_BYTES];
    _Static_assert(4 * ((NONCE_BYTES + 2) / 3) < STORE_NONCE_MAX, "nonce text too long");
    if (RAND_bytes(raw, sizeof raw) != 1) {
        out[0] = '\0';
        return -1;
    }
    base64url(raw, sizeof raw, out);
    return 0;
}

int engine_token_mac(const engine *e, const char *const *parts, size_t n,
                     char out[ENGINE_TOKEN_MAX])
{
    out[0] = '\0';
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += strlen(parts[i]) + 1;
    unsigned char *msg = malloc(len ? len : 1), mac[EVP_MAX_MD_SIZE];
    unsigned mac_len = 0;
    if (!msg)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        size_t m = strlen(parts[i]) + 1; /* NUL-separated: no part contains a NUL */
        memcpy(msg + o, parts[i], m);
        o += m;
    }
    bool ok =
        HMAC(EVP_sha256(), e->term_key, (int)e->term_key_len, msg, len, mac, &mac_len) != NULL &&
        mac_len == 32;
    free(msg);
    if (!ok)
        return -1;
    _Static_assert(4 * ((32 + 2) / 3) < ENGINE_TOKEN_MAX, "token text too long");
    base64url(mac, mac_len, out);
    OPENSSL_cleanse(mac, sizeof mac);
    return 0;
}

int engine_token_of(const engine *e, const char *ns, const char *name, const char *identity,
                    int64_t epoch, const char *nonce, char out[ENGINE_TOKEN_MAX])
{
    out[0] = '\0';
    if (!nonce || !nonce[0])
        return -1; /* a term without a nonce has no token: nothing matches it */
    char epoch_text[24];
    snprintf(epoch_text, sizeof epoch_text, "%lld", (long long)epoch);
    const char *parts[] = {TOKEN_CONTEXT, ns, name, identity, epoch_text, nonce};
    return engine_token_mac(e, parts, sizeof parts / sizeof parts[0], out);
}

bool engine_token_equal(const char *want, const char *given)
{
    /* Both padded to the same size, so that neither the bytes nor the length
     * of what was presented changes the time the comparison takes. */
    char a[ENGINE_TOKEN_MAX] = {0}, b[ENGINE_TOKEN_MAX] = {0};
    size_t na = strnlen(want, sizeof a - 1), nb = strnlen(given, sizeof b - 1);
    memcpy(a, want, na);
    memcpy(b, given, nb);
    bool same = CRYPTO_memcmp(a, b, sizeof a) == 0;
    if (KL_SIM_BROKEN(5)) /* the simulator's break: any token will do */
        same = true;
    OPENSSL_cleanse(a, sizeof a);
    OPENSSL_cleanse(b, sizeof b);
    return same && na > 0;
}

bool engine_token_matches_record(const lease_state *ls, const char *token)
{
    char want[ENGINE_TOKEN_MAX];
    if (engine_token_of(ls->e, ls->ns, ls->name, ls->record.holder, ls->record.transitions,
                        ls->record.term_nonce, want) != 0)
        return false;
    bool same = engine_token_equal(want, token);
    OPENSSL_cleanse(want, sizeof want);
    return same;
}

void engine_token_refused(const lease_state *ls, const char *what, const char *identity,
                          int64_t epoch)
{
    log_event(LOG_WARN, "term_token_refused", "ns=%s lease=%s identity=%s epoch=%lld op=%s", ls->ns,
              ls->name, log_q(identity), (long long)epoch, what);
}
