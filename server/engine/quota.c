/* Quotas on followed Leases (docs/design.md, section 6): each followed
 * Lease is on the account of one caller — the last to campaign on it or
 * watch it, or the one whose read made the engine follow it — and counts
 * in its namespace. A caller (the authenticated user, or the peer address
 * without authentication) may have at most max_leases_per_caller Leases on
 * its account, a namespace at most max_leases_per_namespace followed.
 *
 * At a quota, room is made by forgetting the least recently used Lease of
 * that caller (namespace) that nothing depends on (engine_lease_idle: no
 * campaign, watch, term or write), as the idle sweep would later; only
 * when every one is in use is the request refused, naming the flag. So
 * reads of Leases that exist cost a caller no slot it can hoard, throw-away
 * campaigns cannot pile up Leases past the quota for the idle period, and a
 * Lease someone campaigns on or watches stays. Reads of a Lease already
 * followed are free; a campaign or a watch takes it onto its caller's
 * account. Engine thread only. */
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "engine/internal.h"

struct engine_tally {
    engine_tally *next;
    int count;
    char key[];
};

static unsigned tally_bucket(const char *key)
{
    return hash_fnv1a_str(HASH_FNV1A_INIT, key) % ENGINE_BUCKETS;
}

static engine_tally **tally_slot(engine_tally **table, const char *key)
{
    engine_tally **p = &table[tally_bucket(key)];
    while (*p && strcmp((*p)->key, key) != 0)
        p = &(*p)->next;
    return p;
}

static int tally_count(engine_tally **table, const char *key)
{
    engine_tally *t = *tally_slot(table, key);
    return t ? t->count : 0;
}

/* Adds delta to key's count; an entry that reaches 0 is freed. Returns 0,
 * or -1 when out of memory (nothing changed). */
static int tally_add(engine_tally **table, const char *key, int delta)
{
    engine_tally **p = tally_slot(table, key);
    if (!*p) {
        size_t n = strlen(key) + 1;
        engine_tally *t = calloc(1, sizeof *t + n);
        if (!t)
            return -1;
        memcpy(t->key, key, n);
        *p = t;
    }
    engine_tally *t = *p;
    t->count += delta;
    if (t->count <= 0) {
        *p = t->next;
        free(t);
    }
    return 0;
}

void engine_quota_free(engine *e)
{
    engine_tally **tables[] = {e->callers, e->namespaces};
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
        for (unsigned b = 0; b < ENGINE_BUCKETS; b++)
            while (tables[i][b]) {
                engine_tally *t = tables[i][b];
                tables[i][b] = t->next;
                free(t);
            }
}

/* Forgets the least recently used idle Lease that matches (ns, or owner),
 * never keep; true when one was forgotten. */
static bool evict_one(engine *e, const char *ns, const char *owner, const lease_state *keep)
{
    lease_state *oldest = NULL;
    for (unsigned b = 0; b < ENGINE_BUCKETS; b++)
        for (lease_state *ls = e->leases[b]; ls; ls = ls->hash_next) {
            if (ls == keep || (ns && strcmp(ls->ns, ns) != 0) ||
                (owner && strcmp(ls->owner, owner) != 0) || !engine_lease_idle(ls))
                continue;
            if (!oldest || ls->used_ms < oldest->used_ms)
                oldest = ls;
        }
    if (!oldest)
        return false;
    log_event(LOG_DEBUG, "lease_evicted", "ns=%s lease=%s owner=%s for=%s", oldest->ns,
              oldest->name, log_q(oldest->owner), ns ? "namespace" : "caller");
    engine_lease_forget(oldest);
    return true;
}

bool engine_quota_refused(engine *e, const char *ns, const char *name, const char *caller,
                          bool take, char *msg, size_t msg_len)
{
    lease_state *ls = engine_lease_find(e, ns, name);
    bool charged = caller && caller[0] && (!ls || (take && strcmp(ls->owner, caller) != 0));
    /* The caller's own Leases go first: forgetting one makes room in its
     * namespace and overall too. */
    while (charged && tally_count(e->callers, caller) >= e->max_per_caller)
        if (!evict_one(e, NULL, caller, ls)) {
            snprintf(msg, msg_len,
                     "caller %.200s has %d leases followed here, its --max-leases-per-caller, "
                     "each campaigned on or watched: end some, or raise the limit",
                     caller, tally_count(e->callers, caller));
            return true;
        }
    if (ls)
        return false; /* followed already */
    while (tally_count(e->namespaces, ns) >= e->max_per_namespace)
        if (!evict_one(e, ns, NULL, NULL)) {
            snprintf(msg, msg_len,
                     "namespace %.63s has %d leases followed here, its "
                     "--max-leases-per-namespace, each campaigned on or watched: end some, or "
                     "raise the limit",
                     ns, tally_count(e->namespaces, ns));
            return true;
        }
    while (e->n_leases >= e->max_leases)
        if (!evict_one(e, NULL, NULL, NULL)) {
            snprintf(msg, msg_len,
                     "kubeleased follows %d leases, its --max-leases, each campaigned on or "
                     "watched: retry later or on another replica, or raise the limit",
                     e->n_leases);
            return true;
        }
    return false;
}

void engine_quota_take(lease_state *ls, const char *caller)
{
    engine *e = ls->e;
    ls->used_ms = engine_now_ms(e);
    if (!caller || !caller[0] || strcmp(ls->owner, caller) == 0)
        return;
    if (tally_add(e->callers, caller, 1) != 0)
        return; /* out of memory: it stays on its account */
    if (ls->owner[0])
        tally_add(e->callers, ls->owner, -1);
    engine_copy_str(ls->owner, sizeof ls->owner, caller);
}

int engine_quota_follow(lease_state *ls, const char *caller)
{
    if (tally_add(ls->e->namespaces, ls->ns, 1) != 0)
        return -1;
    engine_quota_take(ls, caller);
    return 0;
}

void engine_quota_forget(lease_state *ls)
{
    tally_add(ls->e->namespaces, ls->ns, -1);
    if (ls->owner[0])
        tally_add(ls->e->callers, ls->owner, -1);
    ls->owner[0] = '\0';
}
