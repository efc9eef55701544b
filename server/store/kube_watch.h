/* The Kubernetes store's watches, one apiserver watch per namespace in use
 * (docs/design.md, "Watches"): what kube_watch.c (the apiserver side: list,
 * watch, resume, relist) and kube_cache.c (the Leases last seen there and
 * the consumers they are reported to) share. Private to those files; loop
 * thread only.
 *
 * Lifetimes. A consumer (store_watch) belongs to its namespace watch, and
 * a namespace watch to the store. Every entry point of a namespace watch (a
 * timer, a request callback) runs between store_kube_nsw_enter() and
 * store_kube_nsw_leave(); while one runs (depth > 0) nothing is unlinked or
 * freed, so that a consumer may watch or unwatch from inside its callback:
 * an unwatched consumer is only marked closed, and the last leave frees it,
 * the Lease entries nobody needs any more, and the namespace watch itself
 * once its last consumer is gone. */
#ifndef KL_STORE_KUBE_WATCH_H
#define KL_STORE_KUBE_WATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/list.h"
#include "kube/lease_json.h"
#include "kube/watch_stream.h"
#include "store/kube_internal.h"

/* One Lease name of a namespace: its last state and its named consumers. */
typedef struct ns_entry {
    struct kl__list link;   /* in ns_watch.entries */
    struct ns_entry *hnext; /* ns_watch.buckets chain */
    store_lease lease;      /* the last state, when exists */
    bool exists;
    /* The last list carried it but it could not be decoded: it exists, in
     * a state we do not know, so it is reported neither present nor absent. */
    bool undecodable;
    unsigned list_gen;    /* the list that carried it, decodable or not */
    struct kl__list subs; /* store_watch: consumers of this name */
} ns_entry;

typedef struct ns_watch {
    struct kl__list link; /* in kube_store.namespaces */
    kube_store *ks;
    char ns[STORE_NS_MAX];
    /* The apiserver side (kube_watch.c). */
    kube_request *req;
    loop_timer timer;      /* the next attempt */
    char rv[STORE_RV_MAX]; /* resume point; "" means list first */
    bool need_relist;      /* 410 Gone seen on the current stream */
    bool stream_failed;    /* the current stream had a bad event or ERROR */
    int failures;          /* consecutive failures, for backoff */
    int gone_streak;       /* consecutive 410s without progress */
    kube_watch_parser parser;
    /* What consumers are told (kube_cache.c). */
    bool synced;             /* a list has been applied: the entries are the namespace's state */
    bool broken;             /* BROKEN reported and not yet SYNCED again */
    struct kl__list entries; /* ns_entry */
    ns_entry **buckets;      /* by name */
    size_t n_buckets, n_entries;
    unsigned list_gen;        /* lists applied */
    struct kl__list all_subs; /* store_watch: consumers of the whole namespace */
    size_t n_subs;            /* consumers not closed */
    int depth;                /* entry points running */
    bool garbage;             /* closed consumers or unneeded entries to free */
} ns_watch;

struct store_watch {
    struct kl__list link; /* in its entry's subs, ns_watch.all_subs, or kube_store.silent */
    ns_watch *nw;         /* NULL: a watch of an invalid name, which stays silent */
    ns_entry *entry;      /* NULL: the whole namespace */
    store_watch_cb cb;
    void *ctx;
    loop_timer timer; /* its first report, when it joins a namespace already watched */
    bool ready;       /* reported to: every later report reaches it */
    bool closed;      /* unwatched: freed by the last leave */
};

/* ---- kube_watch.c ------------------------------------------------------- */

void store_kube_nsw_enter(ns_watch *nw);
/* The last leave frees what was closed (store_kube_cache_sweep) and the
 * namespace watch when no consumer is left. */
void store_kube_nsw_leave(ns_watch *nw);

/* ---- kube_cache.c ------------------------------------------------------- */

/* The entry of name, made if there is none (NULL when out of memory). */
ns_entry *store_kube_cache_get(ns_watch *nw, const char *name);
/* A Lease was added or modified, or deleted: the entry takes its state and
 * its consumers hear of it. -1 when out of memory (nothing reported). */
int store_kube_cache_put(ns_watch *nw, const store_lease *l);
void store_kube_cache_delete(ns_watch *nw, const store_lease *l);
/* Applies a list: every consumer becomes ready, Leases no longer there are
 * reported deleted, named Leases that do not exist absent, the rest
 * present; then SYNCED. -1 when out of memory, before any report. */
int store_kube_cache_apply_list(ns_watch *nw, const kube_lease_list *list);
/* Re-reports the state to every ready consumer, then SYNCED (a stream is
 * back after a break). */
void store_kube_cache_report(ns_watch *nw);
/* Reports BROKEN to every consumer (each becomes ready: it hears the state
 * again when the watch is back). */
void store_kube_cache_broken(ns_watch *nw);
/* A new consumer: its first report comes from the loop, from the entries
 * when the namespace is synced (BROKEN while it is broken), else with the
 * first list. */
void store_kube_cache_join(store_watch *w);
/* At depth 0: frees closed consumers and entries that nobody needs. */
void store_kube_cache_sweep(ns_watch *nw);
/* Frees every consumer and entry, without callbacks. */
void store_kube_cache_free(ns_watch *nw);

#endif
