/* The state behind a namespace watch: the Leases of the namespace as last
 * seen (entries, by name), and the consumers they are reported to. A named
 * consumer hears of its Lease only (a DELETE when it does not exist); a
 * consumer of the whole namespace hears of every Lease. Each consumer gets
 * what store.h promises a watch of its own: the current state, then
 * SYNCED; every change; BROKEN, then the state again and SYNCED after a
 * break. Loop thread only; see kube_watch.h for the lifetimes. */
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "store/kube_map.h"
#include "store/kube_watch.h"

#define BUCKETS_MIN 16

static size_t bucket(const ns_watch *nw, const char *name)
{
    return hash_fnv1a_str(HASH_FNV1A_INIT, name) & (nw->n_buckets - 1);
}

/* The entry of name, or NULL. */
static ns_entry *find(ns_watch *nw, const char *name)
{
    if (!nw->n_buckets)
        return NULL;
    for (ns_entry *e = nw->buckets[bucket(nw, name)]; e; e = e->hnext)
        if (strcmp(e->lease.name, name) == 0)
            return e;
    return NULL;
}

/* Doubles the table; on failure the chains just grow longer. */
static void grow(ns_watch *nw)
{
    size_t n = nw->n_buckets ? nw->n_buckets * 2 : BUCKETS_MIN;
    ns_entry **b = calloc(n, sizeof *b);
    if (!b)
        return;
    free(nw->buckets);
    nw->buckets = b;
    nw->n_buckets = n;
    KL__LIST_FOREACH (node, &nw->entries) {
        ns_entry *e = KL__LIST_ENTRY(node, ns_entry, link);
        size_t i = bucket(nw, e->lease.name);
        e->hnext = b[i];
        b[i] = e;
    }
}

ns_entry *store_kube_cache_get(ns_watch *nw, const char *name)
{
    ns_entry *e = find(nw, name);
    if (e)
        return e;
    if (nw->n_entries >= nw->n_buckets)
        grow(nw);
    if (!nw->n_buckets || !(e = calloc(1, sizeof *e)))
        return NULL;
    /* Until it exists, the entry's lease holds only its names (what a
     * DELETE for an absent Lease carries). */
    store_lease_absent(&e->lease, nw->ns, name);
    size_t i = bucket(nw, name);
    e->hnext = nw->buckets[i];
    nw->buckets[i] = e;
    kl__list_insert_tail(&nw->entries, &e->link);
    nw->n_entries++;
    return e;
}

static void entry_free(ns_watch *nw, ns_entry *e)
{
    for (ns_entry **p = &nw->buckets[bucket(nw, e->lease.name)]; *p; p = &(*p)->hnext) {
        if (*p == e) {
            *p = e->hnext;
            break;
        }
    }
    kl__list_remove(&e->link);
    nw->n_entries--;
    free(e);
}

static void emit(store_watch *w, store_event_type type, const store_lease *l)
{
    if (w->ready && !w->closed)
        w->cb(w->ctx, type, l);
}

/* Reports an event about entry e's Lease to its consumers and to those of
 * the whole namespace. Consumers that join meanwhile are linked last and
 * are not ready; those that leave are only marked (kube_watch.h). */
static void deliver(ns_watch *nw, ns_entry *e, store_event_type type, const store_lease *l)
{
    if (e)
        KL__LIST_FOREACH (node, &e->subs)
            emit(KL__LIST_ENTRY(node, store_watch, link), type, l);
    KL__LIST_FOREACH (node, &nw->all_subs)
        emit(KL__LIST_ENTRY(node, store_watch, link), type, l);
}

/* Calls fn(w, type) for every consumer of the namespace. */
static void each_sub(ns_watch *nw, void (*fn)(store_watch *w, store_event_type type),
                     store_event_type type)
{
    KL__LIST_FOREACH (node, &nw->entries) {
        ns_entry *e = KL__LIST_ENTRY(node, ns_entry, link);
        KL__LIST_FOREACH (s, &e->subs)
            fn(KL__LIST_ENTRY(s, store_watch, link), type);
    }
    KL__LIST_FOREACH (node, &nw->all_subs)
        fn(KL__LIST_ENTRY(node, store_watch, link), type);
}

/* SYNCED or BROKEN, which carry no Lease. */
static void emit_bare(store_watch *w, store_event_type type)
{
    emit(w, type, NULL);
}

/* From now on, w hears every report (its first report is due). */
static void make_ready(store_watch *w, store_event_type unused)
{
    (void)unused;
    w->ready = true;
    loop_timer_stop(&w->timer);
}

/* Entry e's state: PUT when the Lease exists; DELETE to its own consumers
 * when it is known not to (a namespace consumer hears nothing of a Lease
 * that never was). */
static void report_entry(ns_watch *nw, ns_entry *e)
{
    if (e->exists) {
        deliver(nw, e, STORE_EVENT_PUT, &e->lease);
    } else if (!e->undecodable) {
        KL__LIST_FOREACH (node, &e->subs)
            emit(KL__LIST_ENTRY(node, store_watch, link), STORE_EVENT_DELETE, &e->lease);
    }
}

int store_kube_cache_put(ns_watch *nw, const store_lease *l)
{
    ns_entry *e = store_kube_cache_get(nw, l->name);
    if (!e)
        return -1;
    e->lease = *l;
    e->exists = true;
    e->undecodable = false;
    deliver(nw, e, STORE_EVENT_PUT, &e->lease);
    return 0;
}

void store_kube_cache_delete(ns_watch *nw, const store_lease *l)
{
    ns_entry *e = find(nw, l->name);
    if (e) {
        e->exists = e->undecodable = false;
        store_lease_absent(&e->lease, nw->ns, l->name);
        nw->garbage = true;
    }
    deliver(nw, e, STORE_EVENT_DELETE, l);
}

int store_kube_cache_apply_list(ns_watch *nw, const kube_lease_list *list)
{
    /* Every entry the list needs, first, so that running out of memory
     * reports nothing. */
    unsigned gen = ++nw->list_gen;
    for (size_t j = 0; j < list->n + list->n_bad_names; j++) {
        const char *name = j < list->n ? list->items[j].name : list->bad_names[j - list->n];
        ns_entry *e = store_kube_cache_get(nw, name);
        if (!e)
            return -1;
        e->list_gen = gen;
        if (j >= list->n) {
            e->exists = false;
            e->undecodable = true;
        }
    }
    each_sub(nw, make_ready, 0);
    /* What is gone, then what does not exist, then what does. */
    KL__LIST_FOREACH (node, &nw->entries) {
        ns_entry *e = KL__LIST_ENTRY(node, ns_entry, link);
        if (e->list_gen == gen)
            continue;
        if (e->exists) {
            store_lease gone = e->lease;
            e->exists = false;
            store_lease_absent(&e->lease, nw->ns, gone.name);
            deliver(nw, e, STORE_EVENT_DELETE, &gone);
        } else {
            e->undecodable = false;
            report_entry(nw, e);
        }
    }
    for (size_t j = 0; j < list->n; j++) {
        store_lease l;
        store_lease_from_kube(&list->items[j], &l);
        store_kube_cache_put(nw, &l); /* the entry exists: cannot fail */
    }
    nw->garbage = true;
    nw->synced = true;
    nw->broken = false;
    each_sub(nw, emit_bare, STORE_EVENT_SYNCED);
    return 0;
}

void store_kube_cache_report(ns_watch *nw)
{
    KL__LIST_FOREACH (node, &nw->entries)
        report_entry(nw, KL__LIST_ENTRY(node, ns_entry, link));
    nw->broken = false;
    each_sub(nw, emit_bare, STORE_EVENT_SYNCED);
}

void store_kube_cache_broken(ns_watch *nw)
{
    if (nw->broken)
        return;
    nw->broken = true;
    each_sub(nw, make_ready, 0);
    each_sub(nw, emit_bare, STORE_EVENT_BROKEN);
}

/* The first report of a consumer that joined a namespace already watched. */
static void join_fire(void *arg)
{
    store_watch *w = arg;
    ns_watch *nw = w->nw;
    store_kube_nsw_enter(nw);
    if (!w->ready && !w->closed) {
        w->ready = true;
        if (nw->broken) {
            emit(w, STORE_EVENT_BROKEN, NULL);
        } else if (w->entry) {
            if (w->entry->exists)
                emit(w, STORE_EVENT_PUT, &w->entry->lease);
            else if (!w->entry->undecodable)
                emit(w, STORE_EVENT_DELETE, &w->entry->lease);
            emit(w, STORE_EVENT_SYNCED, NULL);
        } else {
            KL__LIST_FOREACH (node, &nw->entries) {
                ns_entry *e = KL__LIST_ENTRY(node, ns_entry, link);
                if (e->exists)
                    emit(w, STORE_EVENT_PUT, &e->lease);
            }
            emit(w, STORE_EVENT_SYNCED, NULL);
        }
    }
    store_kube_nsw_leave(nw);
}

void store_kube_cache_join(store_watch *w)
{
    ns_watch *nw = w->nw;
    if (nw->synced || nw->broken)
        loop_timer_start(&w->timer, loop_now(nw->ks->l), join_fire, w);
}

static void sub_free(store_watch *w)
{
    loop_timer_stop(&w->timer);
    kl__list_remove(&w->link);
    free(w);
}

static void subs_sweep(struct kl__list *subs)
{
    KL__LIST_FOREACH_SAFE (node, subs) {
        store_watch *w = KL__LIST_ENTRY(node, store_watch, link);
        if (w->closed)
            sub_free(w);
    }
}

void store_kube_cache_sweep(ns_watch *nw)
{
    if (!nw->garbage)
        return;
    nw->garbage = false;
    subs_sweep(&nw->all_subs);
    KL__LIST_FOREACH_SAFE (node, &nw->entries) {
        ns_entry *e = KL__LIST_ENTRY(node, ns_entry, link);
        subs_sweep(&e->subs);
        if (!e->exists && !e->undecodable && kl__list_empty(&e->subs))
            entry_free(nw, e);
    }
}

void store_kube_cache_free(ns_watch *nw)
{
    KL__LIST_FOREACH_SAFE (node, &nw->all_subs)
        sub_free(KL__LIST_ENTRY(node, store_watch, link));
    KL__LIST_FOREACH_SAFE (node, &nw->entries) {
        ns_entry *e = KL__LIST_ENTRY(node, ns_entry, link);
        KL__LIST_FOREACH_SAFE (s, &e->subs)
            sub_free(KL__LIST_ENTRY(s, store_watch, link));
        entry_free(nw, e);
    }
    free(nw->buckets);
    nw->buckets = NULL;
    nw->n_buckets = 0;
}
