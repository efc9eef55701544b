/* The engine's public API (engine.h). Requests from other threads are
 * copied into commands and posted to the engine's loop, where request.c runs
 * them; nothing here touches lease state. Also the engine's life: new, run,
 * stop, free, and readiness, which any thread may ask. */
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/internal.h"

static cmd *cmd_new(engine *e, cmd_kind kind, const char *ns, const char *name,
                    const char *identity)
{
    cmd *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    k->e = e;
    k->kind = kind;
    engine_copy_str(k->req.ns, sizeof k->req.ns, ns);
    engine_copy_str(k->req.name, sizeof k->req.name, name);
    engine_copy_str(k->req.identity, sizeof k->req.identity, identity);
    return k;
}

static int cmd_post(cmd *k)
{
    if (loop_post(k->e->loop, engine_cmd_run, k) != 0) {
        free(k);
        return -1;
    }
    return 0;
}

/* A Confirm goes ahead of the other commands (docs/design.md, section 2):
 * commands from different connections have no order between them, and a
 * connection sends its next request only once the last was answered. Not
 * ahead of engine_stop's, once it was called: what comes after is refused. */
static int cmd_post_urgent(cmd *k)
{
    if (atomic_load(&k->e->stop_posted))
        return cmd_post(k);
    if (loop_post_urgent(k->e->loop, engine_cmd_run, k) != 0) {
        free(k);
        return -1;
    }
    return 0;
}

/* Posts a stream command (campaign, watch) and returns its id, 0 on failure. */
static uint64_t post_stream(engine *e, cmd *k, engine_listener listener)
{
    if (!k)
        return 0;
    k->listener = listener;
    k->id = atomic_fetch_add(&e->next_id, 1);
    uint64_t id = k->id;
    return cmd_post(k) == 0 ? id : 0;
}

/* Posts a command that names a stream by its id (detach, unwatch). */
static void post_id(engine *e, cmd_kind kind, uint64_t id)
{
    cmd *k = cmd_new(e, kind, "", "", "");
    if (!k)
        return;
    k->id = id;
    cmd_post(k);
}

/* A unary command, not yet posted; NULL when out of memory. */
static cmd *unary_cmd(engine *e, cmd_kind kind, const char *ns, const char *name,
                      const char *identity, engine_done done, void *ctx)
{
    cmd *k = cmd_new(e, kind, ns, name, identity);
    if (k) {
        k->done = done;
        k->ctx = ctx;
    }
    return k;
}

/* ---------- life ---------- */

static void free_keys(engine *e)
{
    for (char **k = e->pod_label_keys; k && *k; k++)
        free(*k);
    free(e->pod_label_keys);
    e->pod_label_keys = NULL;
}

/* Copies the NULL-terminated --pod-label-keys (NULL or empty: none). */
static int copy_keys(engine *e, const char *const *keys)
{
    size_t n = 0;
    while (keys && keys[n])
        n++;
    if (!n)
        return 0;
    e->pod_label_keys = calloc(n + 1, sizeof *e->pod_label_keys);
    if (!e->pod_label_keys)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!(e->pod_label_keys[i] = strdup(keys[i])))
            return -1;
    return 0;
}

engine *engine_new(const engine_config *cfg)
{
    engine *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->loop = cfg->loop;
    e->store = cfg->store;
    e->max_grant_ms = cfg->max_grant_ms;
    e->volatile_store = cfg->volatile_store;
    e->idle_forget_ms =
        cfg->idle_forget_ms > 0 ? cfg->idle_forget_ms : ENGINE_IDLE_FORGET_MS_DEFAULT;
    e->wall_clock = cfg->wall_clock;
    e->wall_clock_ctx = cfg->wall_clock_ctx;
    e->max_leases = cfg->max_leases > 0 ? cfg->max_leases : ENGINE_MAX_LEASES_DEFAULT;
    e->max_per_caller = cfg->max_leases_per_caller > 0 ? cfg->max_leases_per_caller
                                                       : ENGINE_MAX_LEASES_PER_CALLER_DEFAULT;
    e->max_per_namespace = cfg->max_leases_per_namespace > 0
                               ? cfg->max_leases_per_namespace
                               : ENGINE_MAX_LEASES_PER_NAMESPACE_DEFAULT;
    e->events = cfg->events;
    /* Write ids start at random (internal.h, next_write_id). */
    if (RAND_bytes((unsigned char *)&e->next_write_id, sizeof e->next_write_id) != 1 ||
        copy_keys(e, cfg->pod_label_keys) != 0 ||
        engine_token_key_set(e, cfg->term_key, cfg->term_key_len) != 0) {
        free_keys(e);
        free(e);
        return NULL;
    }
    if (cfg->replica_name)
        engine_copy_str(e->replica, sizeof e->replica, cfg->replica_name);
    else if (gethostname(e->replica, sizeof e->replica) != 0)
        e->replica[0] = '\0';
    e->replica[sizeof e->replica - 1] = '\0';
    loop_timer_init(e->loop, &e->sweep_timer);
    loop_timer_init(e->loop, &e->leaderless_timer);
    e->started_ms = engine_now_ms(e);
    atomic_init(&e->next_id, 1);
    atomic_init(&e->reachable, true);
    atomic_init(&e->unsynced, 0);
    atomic_init(&e->stopping, false);
    return e;
}

void engine_run(engine *e)
{
    loop_run(e->loop);
    /* Normally done by the stop command already; not if it could not be
     * posted, or if another engine stopped a loop they share. */
    engine_shutdown(e);
}

void engine_stop(engine *e)
{
    atomic_store(&e->stop_posted, true);
    cmd *k = cmd_new(e, CMD_STOP, "", "", "");
    if (!k || cmd_post(k) != 0) {
        atomic_store(&e->stopping, true);
        loop_stop(e->loop);
    }
}

/* loop_drop's: e's commands still posted (the engine's loop may be shared
 * with another engine's). */
static bool cmd_drop(void *arg, void *ctx)
{
    cmd *k = arg;
    if (k->e != ctx)
        return false;
    if (k->ctx_free)
        k->ctx_free(k->ctx);
    free(k);
    return true;
}

void engine_free(engine *e)
{
    if (!e)
        return;
    /* Commands posted too late to run (after the last pass of the loop, or
     * with the loop never run again) never will: they are freed unrun and
     * answer nobody (whoever posted them ends what it still waits for,
     * service.c). */
    loop_drop(e->loop, engine_cmd_run, cmd_drop, e);
    /* Reads the store will never complete (it is destroyed after us). */
    KL__LIST_FOREACH_SAFE (link, &e->gets) {
        pending_get *p = engine_get_of(link);
        if (p->done && p->ctx_free) /* unanswered (no shutdown): the engine's own ctx */
            p->ctx_free(p->ctx);
        free(p);
    }
    engine_podlabel_checks_free(e);
    loop_timer_stop(&e->sweep_timer);
    loop_timer_stop(&e->leaderless_timer);
    for (unsigned b = 0; b < ENGINE_BUCKETS; b++) {
        for (lease_state *ls = e->leases[b], *next; ls; ls = next) {
            next = ls->hash_next;
            engine_lease_drop_streams(ls);
            engine_term_free(ls);
            engine_lease_drop(ls);
        }
    }
    engine_quota_free(e);
    engine_token_key_clear(e);
    free_keys(e);
    free(e);
}

bool engine_ready(engine *e, char *why, size_t why_len)
{
    if (!atomic_load(&e->reachable)) {
        snprintf(why, why_len, "the lease store is unreachable");
        return false;
    }
    int unsynced = atomic_load(&e->unsynced);
    if (unsynced > 0) {
        snprintf(why, why_len, "%d lease watch(es) not synced yet", unsynced);
        return false;
    }
    if (atomic_load(&e->stopping)) {
        snprintf(why, why_len, "shutting down");
        return false;
    }
    snprintf(why, why_len, "ok");
    return true;
}

/* ---------- requests ---------- */

uint64_t engine_campaign(engine *e, const engine_campaign_req *req, engine_listener listener)
{
    cmd *k = cmd_new(e, CMD_CAMPAIGN, req->ns, req->name, req->identity);
    if (k)
        k->req = *req;
    return post_stream(e, k, listener);
}

void engine_campaign_detach(engine *e, uint64_t campaign_id)
{
    post_id(e, CMD_DETACH, campaign_id);
}

int engine_confirm(engine *e, const char *ns, const char *name, const char *identity, int64_t epoch,
                   const char *term_token, engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_CONFIRM, ns, name, identity, done, ctx);
    if (!k)
        return -1;
    k->epoch = epoch;
    engine_copy_str(k->req.term_token, sizeof k->req.term_token, term_token);
    return cmd_post_urgent(k);
}

int engine_resign(engine *e, const char *ns, const char *name, const char *identity,
                  const char *term_token, engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_RESIGN, ns, name, identity, done, ctx);
    if (!k)
        return -1;
    engine_copy_str(k->req.term_token, sizeof k->req.term_token, term_token);
    return cmd_post(k);
}

int engine_get_holder(engine *e, const char *ns, const char *name, const char *caller,
                      bool consistent, engine_done done, void *ctx)
{
    return engine_get_holder_owned(e, ns, name, caller, consistent, done, ctx, NULL);
}

int engine_get_holder_owned(engine *e, const char *ns, const char *name, const char *caller,
                            bool consistent, engine_done done, void *ctx,
                            void (*ctx_free)(void *ctx))
{
    cmd *k = unary_cmd(e, CMD_GET, ns, name, "", done, ctx);
    if (!k)
        return -1;
    k->ctx_free = ctx_free;
    k->consistent = consistent;
    engine_copy_str(k->req.caller, sizeof k->req.caller, caller);
    return cmd_post(k);
}

int engine_list(engine *e, engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_LIST, "", "", "", done, ctx);
    return k ? cmd_post(k) : -1;
}

int engine_list_candidates(engine *e, const char *ns, const char *name, engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_CANDIDATES, ns, name, "", done, ctx);
    return k ? cmd_post(k) : -1;
}

int engine_list_terms(engine *e, const char *ns, const char *name, engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_TERMS, ns, name, "", done, ctx);
    return k ? cmd_post(k) : -1;
}

int engine_handoff(engine *e, const char *ns, const char *name, const char *identity,
                   const char *term_token, const char *to, engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_HANDOFF, ns, name, identity, done, ctx);
    if (!k)
        return -1;
    engine_copy_str(k->req.term_token, sizeof k->req.term_token, term_token);
    engine_copy_str(k->to, sizeof k->to, to);
    return cmd_post(k);
}

int engine_set_pod_label(engine *e, const char *ns, const char *name, const char *identity,
                         const char *term_token, const engine_pod_label *label, const char *peer_ip,
                         engine_done done, void *ctx)
{
    cmd *k = unary_cmd(e, CMD_SET_LABEL, ns, name, identity, done, ctx);
    if (!k)
        return -1;
    engine_copy_str(k->req.term_token, sizeof k->req.term_token, term_token);
    if (label && label->pod[0])
        k->req.label = *label;
    engine_copy_str(k->req.peer_ip, sizeof k->req.peer_ip, peer_ip);
    return cmd_post(k);
}

int engine_proclaim(engine *e, const char *ns, const char *name, const char *identity,
                    const char *term_token, const uint8_t *value, size_t value_len,
                    engine_done done, void *ctx)
{
    if (value_len > STORE_VALUE_MAX)
        return -1;
    cmd *k = unary_cmd(e, CMD_PROCLAIM, ns, name, identity, done, ctx);
    if (!k)
        return -1;
    engine_copy_str(k->req.term_token, sizeof k->req.term_token, term_token);
    k->req.value_len = (uint16_t)value_len;
    if (value_len)
        memcpy(k->req.value, value, value_len);
    return cmd_post(k);
}

uint64_t engine_watch(engine *e, const char *ns, const char *name, const char *caller,
                      engine_listener listener)
{
    cmd *k = cmd_new(e, CMD_WATCH, ns, name, "");
    if (k)
        engine_copy_str(k->req.caller, sizeof k->req.caller, caller);
    return post_stream(e, k, listener);
}

void engine_unwatch(engine *e, uint64_t watch_id)
{
    post_id(e, CMD_UNWATCH, watch_id);
}
