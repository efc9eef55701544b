/* The simulator's world: simulated time and its event queue, the engines on
 * their skewed loops, the network between clients and engines, the nemesis
 * and the checkers. The store is sim_store.c, the clients sim_client.c.
 * Single-threaded: everything runs from sim_run's loop, and the only
 * randomness is the seed's generator (the engines' term nonces are random
 * bytes, but they are never traced and decide nothing but equality). */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "sim_internal.h"

sim_world W;

/* ---------- randomness ---------- */

uint64_t sim_rand(void)
{
    /* splitmix64 */
    uint64_t z = (W.rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

int64_t sim_between(int64_t lo, int64_t hi)
{
    if (hi <= lo)
        return lo;
    return lo + (int64_t)(sim_rand() % (uint64_t)(hi - lo + 1));
}

bool sim_chance(double p)
{
    return (double)(sim_rand() >> 11) / 9007199254740992.0 < p;
}

/* ---------- trace ---------- */

void sim_trace(const char *fmt, ...)
{
    char line[600];
    int n = snprintf(line, sizeof line, "%10.3f ", (double)W.now / 1000.0);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    for (const char *p = line; *p; p++) {
        W.res->trace_hash ^= (uint8_t)*p;
        W.res->trace_hash *= 0x100000001b3ULL;
    }
    W.res->trace_hash ^= '\n';
    W.res->trace_hash *= 0x100000001b3ULL;
    W.res->trace_lines++;
    if (W.opts.trace)
        fprintf(W.opts.trace, "%s\n", line);
    snprintf(W.tail[W.tail_next++ % SIM_TAIL], sizeof W.tail[0], "%s", line);
}

/* The Lease a message names ("lease-N"), or -1. */
static int lease_named(const char *s)
{
    for (const char *p = strstr(s, "lease-"); p; p = strstr(p + 1, "lease-"))
        if (p[6] >= '0' && p[6] <= '9')
            return atoi(p + 6);
    return -1;
}

/* Whether a trace line concerns lease l: it names l, or one of l's
 * clients (c<id>, pod-c<id>), or neither a Lease nor a client (an engine,
 * the store, the network as a whole, a phase). */
static bool concerns(const char *line, int l)
{
    int named = lease_named(line);
    if (named >= 0)
        return named == l;
    bool any = false;
    for (const char *p = line; (p = strchr(p, 'c')); p++) {
        if ((p != line && p[-1] != ' ' && p[-1] != '-') || p[1] < '0' || p[1] > '9')
            continue;
        char *end;
        long id = strtol(p + 1, &end, 10);
        if ((*end >= 'a' && *end <= 'z') || (*end >= '0' && *end <= '9'))
            continue; /* a word, not a client */
        if (id < W.opts.clients && W.clients[id].lease == l)
            return true;
        any = true;
    }
    return !any;
}

/* The trace before a violation: the last n lines that concern the Lease it
 * names (every line if it names none), from the SIM_TAIL kept. */
static void print_tail(int n, int l)
{
    uint64_t from = W.tail_next > SIM_TAIL ? W.tail_next - SIM_TAIL : 0, first = W.tail_next;
    for (int k = 0; first > from && k < n;)
        k += l < 0 || concerns(W.tail[--first % SIM_TAIL], l);
    if (l < 0)
        fprintf(stderr, "seed %" PRIu64 ": the last %d trace lines:\n", W.opts.seed, n);
    else
        fprintf(stderr,
                "seed %" PRIu64 ": the last %d trace lines of lease-%d (its clients, the engines, "
                "the store):\n",
                W.opts.seed, n, l);
    for (uint64_t i = first; i < W.tail_next; i++)
        if (l < 0 || concerns(W.tail[i % SIM_TAIL], l))
            fprintf(stderr, "  %s\n", W.tail[i % SIM_TAIL]);
}

void sim_violation(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sim_trace("VIOLATION %s", msg);
    if (W.res->violations++ == 0) {
        snprintf(W.res->first_violation, sizeof W.res->first_violation, "%s", msg);
        W.res->violation_at_ms = W.now;
        int n = W.opts.tail_lines;
        if (n > SIM_TAIL)
            n = SIM_TAIL;
        if (n > 0 && !W.opts.trace)
            print_tail(n, lease_named(msg));
    }
    if (W.opts.stop_at_fail)
        W.stop = true;
}

/* ---------- clocks ---------- */

int64_t sim_local(const sim_clock *c, int64_t t)
{
    return c->base + t + t * c->ppm / 1000000;
}

int64_t sim_global(const sim_clock *c, int64_t local)
{
    /* The first simulated time at which c reads local (or more). */
    int64_t t = (local - c->base) * 1000000 / (1000000 + c->ppm);
    if (t < 0)
        t = 0;
    while (t > 0 && sim_local(c, t - 1) >= local)
        t--;
    while (sim_local(c, t) < local)
        t++;
    return t;
}

void sim_clock_init(sim_clock *c)
{
    c->ppm = sim_between(-SIM_SKEW_PPM, SIM_SKEW_PPM);
    c->base = sim_between(1000000, 9000000);
}

/* ---------- the event queue: a binary heap on (time, seq) ---------- */

static bool ev_less(const sim_event *a, const sim_event *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void ev_push(int64_t t, sim_fn fn, void *arg, uint64_t a, uint64_t b, bool owned)
{
    if (t < W.now)
        t = W.now;
    if (W.n_ev == W.cap_ev) {
        W.cap_ev = W.cap_ev ? W.cap_ev * 2 : 1024;
        W.ev = realloc(W.ev, W.cap_ev * sizeof *W.ev);
        if (!W.ev)
            abort();
    }
    size_t i = W.n_ev++;
    sim_event e = {
        .t = t, .seq = W.next_seq++, .fn = fn, .arg = arg, .a = a, .b = b, .owned = owned};
    while (i > 0 && ev_less(&e, &W.ev[(i - 1) / 2])) {
        W.ev[i] = W.ev[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    W.ev[i] = e;
}

void sim_at(int64_t t, sim_fn fn, void *arg, uint64_t a, uint64_t b)
{
    ev_push(t, fn, arg, a, b, false);
}

void sim_at_owned(int64_t t, sim_fn fn, void *arg, uint64_t a, uint64_t b)
{
    ev_push(t, fn, arg, a, b, true);
}

static sim_event ev_pop(void)
{
    sim_event top = W.ev[0];
    sim_event last = W.ev[--W.n_ev];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const sim_event *best = &last;
        if (l < W.n_ev && ev_less(&W.ev[l], best)) {
            m = l;
            best = &W.ev[l];
        }
        if (r < W.n_ev && ev_less(&W.ev[r], best))
            m = r;
        if (m == i)
            break;
        W.ev[i] = W.ev[m];
        i = m;
    }
    if (W.n_ev)
        W.ev[i] = last;
    return top;
}

/* ---------- engines ---------- */

static const uint8_t sim_term_key[] = "kubelease sim term key: not a secret, 32+ bytes";

static int64_t engine_clock(void *ctx)
{
    return sim_local(&((sim_engine *)ctx)->clock, W.now);
}

static int64_t engine_wall(void *ctx)
{
    sim_engine *e = ctx;
    return SIM_WALL_START_US + (e->wall_offset_ms + W.now) * 1000;
}

void sim_engine_boot(sim_engine *e)
{
    e->gen++;
    e->up = true;
    e->paused_until = 0;
    e->loop = loop_new();
    loop_set_clock(e->loop, engine_clock, e);
    e->store = sim_store_view(e);
    char name[16];
    snprintf(name, sizeof name, "e%d", e->id);
    static const char *const label_keys[] = {SIM_LABEL_KEY, NULL};
    engine_config cfg = {.pod_label_keys = label_keys,
                         .loop = e->loop,
                         .store = e->store,
                         .wall_clock = engine_wall,
                         .wall_clock_ctx = e,
                         .term_key = sim_term_key,
                         .term_key_len = sizeof sim_term_key - 1,
                         .replica_name = name};
    e->engine = engine_new(&cfg);
    if (!e->engine)
        abort();
    sim_trace("e%d boots (gen %u)", e->id, e->gen);
}

/* A crash: the process and its memory are gone; what it sent is in flight
 * still, what was sent to it is lost. Its connections break. */
void sim_engine_crash(sim_engine *e)
{
    if (!e->up)
        return;
    sim_trace("e%d crashes", e->id);
    e->up = false;
    sim_net_engine_gone(e);
    engine_free(e->engine);
    e->engine = NULL;
    sim_store_view_dead(e->store);
    e->store = NULL;
    loop_free(e->loop);
    e->loop = NULL;
}

bool sim_engine_runs(const sim_engine *e)
{
    return e->up && W.now >= e->paused_until;
}

void sim_debug_engine(const sim_engine *e)
{
    static int on = -1;
    if (on < 0)
        on = getenv("KL_SIM_DEBUG") != NULL;
    if (on)
        fprintf(stderr, "-- %.3f e%d\n", (double)W.now / 1000.0, e->id);
}

static unsigned settle_engines(void)
{
    unsigned total = 0, k;
    do {
        k = 0;
        for (int i = 0; i < W.opts.engines; i++) {
            sim_engine *e = &W.engines[i];
            if (!sim_engine_runs(e))
                continue;
            sim_debug_engine(e);
            for (int passes = 0; passes < 100000; passes++) {
                unsigned n = loop_drain(e->loop);
                if (!n)
                    break;
                k += n;
            }
        }
        total += k;
    } while (k);
    return total;
}

static int64_t next_engine_due(void)
{
    int64_t next = INT64_MAX;
    for (int i = 0; i < W.opts.engines; i++) {
        sim_engine *e = &W.engines[i];
        if (!e->up)
            continue;
        if (W.now < e->paused_until) {
            if (e->paused_until < next)
                next = e->paused_until;
            continue;
        }
        int64_t due = loop_next_due(e->loop);
        if (due < 0)
            continue;
        int64_t t = sim_global(&e->clock, due);
        if (t < next)
            next = t;
    }
    return next;
}

/* ---------- the nemesis ---------- */

static void restart_engine(void *arg, uint64_t gen, uint64_t b)
{
    (void)b;
    sim_engine *e = arg;
    if (!e->up && e->gen == gen)
        sim_engine_boot(e);
}

static void heal(void *arg, uint64_t a, uint64_t b)
{
    (void)arg;
    (void)a;
    (void)b;
    sim_trace("quiet: faults off");
    sim_store_faults(0);
    for (int i = 0; i < W.opts.engines; i++) {
        sim_engine *e = &W.engines[i];
        if (!e->up)
            sim_engine_boot(e);
        e->paused_until = 0;
    }
    for (int i = 0; i < W.opts.clients; i++)
        sim_client_heal(&W.clients[i]);
    sim_net_heal();
}

static void nemesis(void *arg, uint64_t a, uint64_t b)
{
    (void)arg;
    (void)a;
    (void)b;
    int64_t phase = W.now % SIM_PHASE_MS;
    if (phase >= SIM_FAULT_MS) {
        /* quiet part of the phase: the next fault comes with the next phase */
        sim_at(W.now - phase + SIM_PHASE_MS, nemesis, NULL, 0, 0);
        return;
    }
    W.res->faults++;
    int kind = (int)sim_between(0, 12);
    sim_engine *e = &W.engines[sim_between(0, W.opts.engines - 1)];
    sim_client *c = &W.clients[sim_between(0, W.opts.clients - 1)];
    int64_t d = sim_between(100, 8000);
    /* Every fault is over when the quiet part begins: heal() ends them on
     * paper, but what a paused engine or client was sent meanwhile is
     * queued for the pause's end (sim_net.c, sim_store.c), which would
     * keep it paused into the quiet part that the liveness check counts. */
    if (d > SIM_FAULT_MS - phase)
        d = SIM_FAULT_MS - phase;
    switch (kind) {
    case 0:
        if (e->up) {
            sim_engine_crash(e);
            sim_at(W.now + d, restart_engine, e, e->gen, 0);
        }
        break;
    case 1:
        if (e->up && W.now >= e->paused_until) {
            e->paused_until = W.now + d;
            sim_trace("e%d pauses for %" PRId64 " ms", e->id, d);
        }
        break;
    case 2:
        sim_client_crash(c, d);
        break;
    case 3:
        sim_client_pause(c, d);
        break;
    case 4:
    case 5:
        sim_net_partition(c, e, (int)sim_between(0, 2), d);
        break;
    case 6:
        sim_net_reset_random();
        break;
    case 7:
    case 8:
        sim_store_faults((int)sim_between(1, 6));
        sim_at(W.now + d, (sim_fn)sim_store_faults_off, NULL, 0, 0);
        break;
    case 9:
        sim_store_restart_watches();
        break;
    case 10:
        sim_client_forge(c);
        break;
    case 11:
        sim_client_operator_handoff(c);
        break;
    case 12:
        if (sim_chance(0.6)) {
            char who[16];
            snprintf(who, sizeof who, "c%d", c->id);
            sim_store_set_preferred(c->lease, who);
        } else {
            sim_store_set_preferred(c->lease, "");
        }
        break;
    }
    sim_at(W.now + sim_between(50, 2000), nemesis, NULL, 0, 0);
}

/* ---------- checkers ---------- */

/* Rule 1 in simulated (real) time: c believes it leads lease l at W.now
 * (it starts, or its deadline moves: a deadline that had passed unnoticed
 * and is extended starts a new interval), until its deadline (its own
 * clock). Any other client still believing — its deadline, read on its
 * clock, not yet passed, whether or not it has noticed — overlaps. */
void sim_check_overlap(sim_client *c, int lease, int64_t epoch)
{
    for (int i = 0; i < W.opts.clients; i++) {
        sim_client *o = &W.clients[i];
        if (o == c || o->lease != lease)
            continue;
        int64_t until = sim_client_believes_until(o);
        if (until > W.now)
            sim_violation("rule 1: c%d leads lease-%d at epoch %" PRId64
                          " while c%d still believes it leads at epoch %" PRId64 " for %" PRId64
                          " ms more",
                          c->id, lease, epoch, o->id, sim_client_epoch(o), until - W.now);
    }
}

void sim_check_leading(sim_client *c, int lease, int64_t epoch)
{
    W.res->leader_changes++;
    sim_lease_check *lc = &W.lease_checks[lease];
    sim_check_overlap(c, lease, epoch);
    /* Epochs: a new term's epoch is larger than every earlier term's, and
     * never another holder's. */
    for (int k = 0; k < lc->n; k++)
        if (lc->terms[k].epoch == epoch && lc->terms[k].client != c->id)
            sim_violation("epoch %" PRId64 " of lease-%d reused: c%d led it, now c%d", epoch, lease,
                          lc->terms[k].client, c->id);
    bool known = false;
    for (int k = 0; k < lc->n; k++)
        known |= lc->terms[k].epoch == epoch && lc->terms[k].client == c->id;
    if (!known) {
        if (epoch <= lc->max_epoch)
            sim_violation("epoch %" PRId64 " of lease-%d (c%d) is not above %" PRId64
                          ", an earlier term's",
                          epoch, lease, c->id, lc->max_epoch);
        if (epoch > lc->max_epoch)
            lc->max_epoch = epoch;
        lc->terms[lc->n % SIM_TERMS_KEPT] = (sim_term_seen){.epoch = epoch, .client = c->id};
        if (lc->n < SIM_TERMS_KEPT)
            lc->n++;
    }
    lc->last_leader_ms = W.now;
}

/* The store's record of every write: epochs never go back, and an epoch
 * names one holder only. */
void sim_check_write(int lease, const store_lease *l)
{
    const char *holder = l->holder, *nonce = l->term_nonce;
    int64_t transitions = l->transitions;
    sim_lease_check *lc = &W.lease_checks[lease];
    /* Rule 10: a term's writes carry its own holder's leader value (the
     * clients' values are "c<id>:<n>"), never another's. */
    size_t hl = strlen(holder);
    if (holder[0] && l->value_len &&
        (l->value_len <= hl || memcmp(l->value, holder, hl) != 0 || l->value[hl] != ':'))
        sim_violation("rule 10: lease-%d written for %s at epoch %" PRId64 " with the value %.*s",
                      lease, holder, transitions, (int)l->value_len, (const char *)l->value);
    if (transitions < lc->store_epoch)
        sim_violation("lease-%d: leaseTransitions went back from %" PRId64 " to %" PRId64, lease,
                      lc->store_epoch, transitions);
    if (transitions == lc->store_epoch && holder[0] && lc->store_holder[0] &&
        strcmp(holder, lc->store_holder) != 0 && strcmp(nonce, lc->store_nonce) == 0)
        sim_violation("lease-%d: epoch %" PRId64 " written for %s and for %s", lease, transitions,
                      lc->store_holder, holder);
    if (holder[0]) {
        if (transitions > lc->store_epoch || strcmp(holder, lc->store_holder) != 0) {
            if (transitions == lc->store_epoch && strcmp(nonce, lc->store_nonce) != 0 &&
                lc->store_holder[0])
                sim_violation("lease-%d: epoch %" PRId64 " started twice (%s, then %s)", lease,
                              transitions, lc->store_holder, holder);
        }
        snprintf(lc->store_holder, sizeof lc->store_holder, "%s", holder);
        snprintf(lc->store_nonce, sizeof lc->store_nonce, "%s", nonce);
    }
    if (transitions > lc->store_epoch) {
        int i = lc->n_epoch_at++ % SIM_TERMS_KEPT;
        lc->epoch_at_epoch[i] = transitions;
        lc->epoch_at_ms[i] = W.now;
    }
    lc->store_epoch = transitions;
}

/* When the store first recorded an epoch above epoch; INT64_MAX: not yet
 * (or forgotten). */
static int64_t superseded_at(const sim_lease_check *lc, int64_t epoch)
{
    int64_t at = INT64_MAX;
    for (int i = 0; i < SIM_TERMS_KEPT && i < lc->n_epoch_at; i++)
        if (lc->epoch_at_epoch[i] > epoch && lc->epoch_at_ms[i] < at)
            at = lc->epoch_at_ms[i];
    return at;
}

/* CheckEpoch answered current for epoch: never for an epoch never
 * written, never for one the store had superseded more than
 * SIM_CHECK_LAG_MS before the question reached the replica (its cache lags
 * the store: docs/design.md, rule 4), and with KL_SIM_STRICT_CHECK never
 * for one older than what the same replica (incarnation) had answered
 * before the question reached it. */
void sim_check_epoch_answer(sim_engine *e, unsigned gen, int lease, int64_t asked_at, int64_t epoch,
                            bool current, int64_t answer_epoch)
{
    sim_lease_check *lc = &W.lease_checks[lease];
    if (gen >= SIM_GENS || e->id >= 8)
        return;
    int64_t *seen = &lc->engine_seen[e->id][gen];
    int64_t *seen_at = &lc->engine_seen_at[e->id][gen];
    if (current && W.strict_check && epoch < *seen && *seen_at < asked_at)
        sim_violation("CheckEpoch on e%d called epoch %" PRId64
                      " of lease-%d current (asked at %.3f s) after it answered epoch %" PRId64
                      " (at %.3f s)",
                      e->id, epoch, lease, (double)asked_at / 1000, *seen, (double)*seen_at / 1000);
    int64_t sup = superseded_at(lc, epoch);
    if (current && sup != INT64_MAX && sup + SIM_CHECK_LAG_MS < asked_at)
        sim_violation("CheckEpoch on e%d called epoch %" PRId64
                      " of lease-%d current (asked at %.3f s), superseded in the store at %.3f s",
                      e->id, epoch, lease, (double)asked_at / 1000, (double)sup / 1000);
    if (current && epoch > lc->store_epoch)
        sim_violation("CheckEpoch on e%d called epoch %" PRId64
                      " of lease-%d current, never written (store at %" PRId64 ")",
                      e->id, epoch, lease, lc->store_epoch);
    if (answer_epoch > *seen) {
        *seen = answer_epoch;
        *seen_at = W.now;
    }
}

/* Liveness: once faults are off for SIM_LIVE_BOUND_MS, every Lease with a
 * live candidate has had a leader. */
static void check_live(void *arg, uint64_t since, uint64_t b)
{
    (void)arg;
    (void)b;
    if (W.quiet_since != (int64_t)since)
        return;
    for (int l = 0; l < W.opts.leases; l++) {
        sim_lease_check *lc = &W.lease_checks[l];
        bool believed = false;
        for (int i = 0; i < W.opts.clients; i++)
            if (W.clients[i].lease == l && sim_client_believes_until(&W.clients[i]) > W.now)
                believed = true;
        if (!believed && lc->last_leader_ms < (int64_t)since)
            sim_violation("liveness: lease-%d had no leader in the %d ms since faults stopped", l,
                          SIM_LIVE_BOUND_MS);
    }
}

static void phase_quiet(void *arg, uint64_t a, uint64_t b)
{
    (void)arg;
    (void)a;
    (void)b;
    heal(NULL, 0, 0);
    W.quiet_since = W.now;
    sim_at(W.now + SIM_LIVE_BOUND_MS, check_live, NULL, (uint64_t)W.now, 0);
    sim_at(W.now + (SIM_PHASE_MS - SIM_FAULT_MS), phase_faults, NULL, 0, 0);
}

void phase_faults(void *arg, uint64_t a, uint64_t b)
{
    (void)arg;
    (void)a;
    (void)b;
    sim_trace("faults on");
    W.quiet_since = -1;
    sim_at(W.now + SIM_FAULT_MS, phase_quiet, NULL, 0, 0);
}

/* ---------- the run ---------- */

static void world_free(void)
{
    for (int i = 0; i < W.opts.engines; i++)
        sim_engine_crash(&W.engines[i]);
    /* What was still scheduled never fires: the messages, store requests
     * and watch events it carries are freed (the crashes above scheduled
     * more of them). */
    for (size_t i = 0; i < W.n_ev; i++)
        if (W.ev[i].owned)
            free(W.ev[i].arg);
    W.n_ev = 0;
    sim_clients_free();
    sim_net_free();
    sim_store_free();
    free(W.engines);
    free(W.lease_checks);
    free(W.ev);
}

int sim_run(const sim_opts *o, sim_result *r)
{
    memset(&W, 0, sizeof W);
    memset(r, 0, sizeof *r);
    W.opts = *o;
    W.res = r;
    W.rng = o->seed * 0x2545f4914f6cdd1dULL + 1;
    r->trace_hash = 0xcbf29ce484222325ULL;
    W.quiet_since = -1;
    log_set_level(getenv("KL_SIM_DEBUG") ? LOG_DEBUG : LOG_ERROR + 1);
    W.late_pod_patches =
        getenv("KL_SIM_LATE_POD_PATCHES") && atoi(getenv("KL_SIM_LATE_POD_PATCHES"));
    W.strict_check = getenv("KL_SIM_STRICT_CHECK") && atoi(getenv("KL_SIM_STRICT_CHECK"));

    W.lease_checks = calloc((size_t)o->leases, sizeof *W.lease_checks);
    W.engines = calloc((size_t)o->engines, sizeof *W.engines);
    sim_store_init();
    sim_net_init();
    for (int i = 0; i < o->engines; i++) {
        sim_engine *e = &W.engines[i];
        e->id = i;
        sim_clock_init(&e->clock);
        e->wall_offset_ms = sim_between(-5000, 5000);
        sim_engine_boot(e);
    }
    sim_clients_init();
    sim_at(0, phase_faults, NULL, 0, 0);
    sim_at(sim_between(100, 1000), nemesis, NULL, 0, 0);

    int64_t end = o->seconds * 1000;
    while (!W.stop) {
        settle_engines();
        if (W.stop)
            break;
        int64_t next = W.n_ev ? W.ev[0].t : INT64_MAX;
        int64_t due = next_engine_due();
        if (due < next)
            next = due;
        if (next == INT64_MAX || next > end)
            break;
        if (next > W.now) {
            W.now = next;
            W.steps_now = 0;
        } else if (++W.steps_now > 1000000) {
            sim_violation("livelock: a million steps at the same simulated time");
            break;
        }
        while (W.n_ev && W.ev[0].t <= W.now && !W.stop) {
            sim_event ev = ev_pop();
            ev.fn(ev.arg, ev.a, ev.b);
            if (++W.steps_now > 1000000) {
                sim_violation("livelock: a million steps at the same simulated time");
                break;
            }
        }
    }
    r->store_writes = W.store_writes;
    world_free();
    return r->violations ? 1 : 0;
}
