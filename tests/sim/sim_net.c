/* The simulated network between clients and engines: connections that
 * keep their order in each direction, with latency, partitions (either
 * way, or both), and resets that each side learns of at its own time.
 * What a client sends reaches the engine as the RPC layer would hand it
 * over (engine_campaign, engine_confirm, ...: server/rpc/lease_service.c);
 * what the engine answers travels back the same way. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sim_net.h"

#define MAX_SIDES 64

static struct {
    /* Connections not yet seen closed; the scans below move closed ones to
     * `closed` (messages and events may still point at them: every one is
     * freed with the network). */
    sim_conn *conns;
    sim_conn *closed;
    uint64_t next_id;
    /* blocked[c][e][0]: client to engine, [1]: back; simulated time */
    int64_t blocked[MAX_SIDES][8][2];
} N;

void sim_net_init(void)
{
    memset(&N, 0, sizeof N);
}

static void free_list(sim_conn *k)
{
    for (sim_conn *n; k; k = n) {
        n = k->next;
        free(k);
    }
}

void sim_net_free(void)
{
    free_list(N.conns);
    free_list(N.closed);
    memset(&N, 0, sizeof N);
}

/* The next open connection from *pp on (pp is where the scan is), moving
 * the closed ones it passes to N.closed; NULL at the end. */
static sim_conn *next_open(sim_conn **pp)
{
    while (*pp && !(*pp)->open) {
        sim_conn *k = *pp;
        *pp = k->next;
        k->next = N.closed;
        N.closed = k;
    }
    return *pp;
}

void sim_net_heal(void)
{
    memset(N.blocked, 0, sizeof N.blocked);
}

void sim_net_partition(sim_client *c, sim_engine *e, int way, int64_t ms)
{
    if (c->id >= MAX_SIDES || e->id >= 8)
        return;
    static const char *const ways[] = {"both ways", "client to engine", "engine to client"};
    sim_trace("net: c%d and e%d partitioned (%s) for %lld ms", c->id, e->id, ways[way],
              (long long)ms);
    if (way != 2)
        N.blocked[c->id][e->id][0] = W.now + ms;
    if (way != 1)
        N.blocked[c->id][e->id][1] = W.now + ms;
}

static int64_t hop(sim_conn *k, int dir)
{
    int64_t at = W.now + sim_between(1, W.quiet_since >= 0 ? 5 : 40);
    if (W.quiet_since < 0 && sim_chance(0.05))
        at += sim_between(50, 1500); /* retransmissions */
    int64_t b = N.blocked[k->c->id][k->e->id][dir];
    if (b > W.now)
        at = b + sim_between(1, 40);
    int64_t *last = dir ? &k->last_down : &k->last_up;
    if (at < *last)
        at = *last;
    *last = at;
    return at;
}

sim_msg *sim_msg_alloc(void)
{
    sim_msg *m = malloc(sizeof *m);
    if (m)
        memset(m, 0, offsetof(sim_msg, ev));
    return m;
}

sim_conn *sim_conn_open(sim_client *c, sim_engine *e, bool stream)
{
    sim_conn *k = calloc(1, sizeof *k);
    if (!k)
        abort();
    k->id = ++N.next_id;
    k->c = c;
    k->cgen = c->gen;
    k->e = e;
    k->egen = e->gen;
    k->open = true;
    k->stream = stream;
    k->next = N.conns;
    N.conns = k;
    return k;
}

/* ---------- client to engine ---------- */

static void up_arrive(void *arg, uint64_t a, uint64_t b);

void sim_conn_send_up(sim_conn *k, sim_msg *m)
{
    m->k = k;
    sim_at_owned(hop(k, 0), up_arrive, m, 0, 0);
}

static void up_arrive(void *arg, uint64_t a, uint64_t b)
{
    (void)a;
    (void)b;
    sim_msg *m = arg;
    sim_conn *k = m->k;
    sim_engine *e = k->e;
    if (!k->open || !e->up || e->gen != k->egen) {
        /* nobody listens: refused (the client hears it as a reset) */
        if (k->open && (!e->up || e->gen != k->egen))
            sim_conn_reset(k, "connection refused");
        free(m);
        return;
    }
    if (!sim_engine_runs(e)) {
        sim_at_owned(e->paused_until, up_arrive, m, 0, 0); /* the kernel queues it */
        return;
    }
    loop_update_time(e->loop);
    sim_debug_engine(e);
    sim_engine_serve(k, m);
    free(m);
}

/* ---------- engine to client ---------- */

static void down_arrive(void *arg, uint64_t a, uint64_t b)
{
    (void)a;
    (void)b;
    sim_msg *m = arg;
    sim_conn *k = m->k;
    sim_client *c = k->c;
    if (!c->up || c->gen != k->cgen || (!k->open && m->kind != SM_RESET)) {
        free(m);
        return;
    }
    if (W.now < c->paused_until) {
        sim_at_owned(c->paused_until, down_arrive, m, 0, 0);
        return;
    }
    sim_client_receive(c, k, m);
    free(m);
}

void sim_conn_send_down(sim_conn *k, sim_msg *m)
{
    m->k = k;
    if (!k->open) {
        free(m);
        return;
    }
    sim_at_owned(hop(k, 1), down_arrive, m, 0, 0);
}

/* ---------- resets ---------- */

static void engine_learns_reset(void *arg, uint64_t a, uint64_t b)
{
    (void)a;
    (void)b;
    sim_conn *k = arg;
    sim_engine *e = k->e;
    if (!e->up || e->gen != k->egen)
        return;
    if (k->stream && k->engine_id && !k->engine_closed)
        engine_campaign_detach(e->engine, k->engine_id);
}

/* The connection is gone: the client hears of it soon (a RST), the engine
 * when it next writes or its keepalive notices. */
void sim_conn_reset(sim_conn *k, const char *why)
{
    if (!k->open)
        return;
    k->open = false;
    if (k->stream)
        sim_trace("net: c%d's stream to e%d reset (%s)", k->c->id, k->e->id, why);
    sim_msg *m = sim_msg_alloc();
    if (!m)
        abort();
    m->kind = SM_RESET;
    m->k = k;
    sim_at_owned(W.now + sim_between(1, 200), down_arrive, m, 0, 0);
    sim_at(W.now + sim_between(1, W.quiet_since >= 0 ? 200 : 5000), engine_learns_reset, k, 0, 0);
}

/* The client closed it on purpose (it dropped the stream). */
void sim_conn_close(sim_conn *k)
{
    if (!k->open)
        return;
    k->open = false;
    sim_at(W.now + sim_between(1, 50), engine_learns_reset, k, 0, 0);
}

void sim_net_reset_random(void)
{
    int n = 0;
    for (sim_conn **pp = &N.conns, *k; (k = next_open(pp)); pp = &k->next)
        n += k->stream;
    if (!n)
        return;
    int pick = (int)sim_between(0, n - 1);
    for (sim_conn **pp = &N.conns, *k; (k = next_open(pp)); pp = &k->next)
        if (k->stream && pick-- == 0) {
            sim_conn_reset(k, "nemesis");
            return;
        }
}

/* An engine crashed: its connections break (the kernel resets them). */
void sim_net_engine_gone(sim_engine *e)
{
    for (sim_conn **pp = &N.conns, *k; (k = next_open(pp)); pp = &k->next)
        if (k->e == e && k->egen == e->gen) {
            k->engine_closed = true;
            sim_conn_reset(k, "engine crashed");
        }
}

/* A client crashed: the engines see its connections break, in time. */
void sim_net_client_gone(sim_client *c)
{
    for (sim_conn **pp = &N.conns, *k; (k = next_open(pp)); pp = &k->next)
        if (k->c == c) {
            k->open = false;
            sim_at(W.now + sim_between(1, W.quiet_since >= 0 ? 200 : 5000), engine_learns_reset, k,
                   0, 0);
        }
}
