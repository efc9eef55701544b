/* Test support: runs an engine and records the events of its streams so
 * tests can wait for them. Two ways to run it:
 *   fixture_start         the engine on its own thread, as kubeleased runs
 *                         it, in real time (integration tests);
 *   fixture_start_manual  the engine's loop on the test thread, over the
 *                         memory store, with a manual clock: every wait
 *                         below runs the loop and moves the clock to the
 *                         next timer instead of sleeping, so a test takes
 *                         the time its callbacks take, not the time it
 *                         models (unit tests).
 * The waits, harness_now_ms and harness_sleep_ms work in both. Header-only
 * (static functions) so that each test binary takes what it uses. */
#ifndef KL_TESTS_ENGINE_HARNESS_H
#define KL_TESTS_ENGINE_HARNESS_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/log.h"
#include "core/loop.h"
#include "engine/engine.h"
#include "store/memory.h"
#include "support/manual_clock.h"

#define MAX_EVENTS 256

typedef struct fixture {
    loop *loop;
    store *store;
    engine *engine;
    pthread_t thread;
    bool threaded;      /* the engine runs on its own thread, in real time */
    bool stopped;       /* the engine's run is over (fixture_join) */
    const char *ns;     /* namespace of confirm/resign/get_holder */
    manual_clock clock; /* not threaded: the loop's clock */
} fixture;

/* The term key every engine of a test shares, as replicas of the service
 * share --term-key-file (docs/design.md, rule 8). */
static const uint8_t harness_term_key[] = "kubelease test term key: not a secret, 32+ bytes";

/* The fixture whose loop the waits run (manual time); NULL in real time. */
static fixture *harness_manual;

/* Wall time (µs) at the manual clock's start: a fixed day, so that the
 * Lease timestamps tests see do not depend on when they run. */
#define HARNESS_WALL_START_US ((int64_t)1767225600 * 1000000) /* 2026-01-01 */

static inline int64_t harness_now_ms(void)
{
    return harness_manual ? harness_manual->clock.now_ms : mono_ms();
}

static inline int64_t harness_wall_us(void)
{
    if (!harness_manual)
        return wall_us();
    return HARNESS_WALL_START_US + (harness_manual->clock.now_ms - MANUAL_CLOCK_START_MS) * 1000;
}

static inline int64_t harness_wall_clock(void *ctx)
{
    (void)ctx;
    return harness_wall_us();
}

/* Lets ms pass: the manual clock moves (running what falls due), or the
 * thread sleeps. */
static inline void harness_sleep_ms(int ms)
{
    if (harness_manual) {
        manual_clock_advance(&harness_manual->clock, ms);
        return;
    }
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Manual time: runs the loop until done(arg) or timeout_ms have passed on
 * the clock. Returns done(arg). */
static inline bool harness_run_until(bool (*done)(void *arg), void *arg, int timeout_ms)
{
    manual_clock *c = &harness_manual->clock;
    int64_t deadline = c->now_ms + timeout_ms;
    for (;;) {
        manual_clock_settle(c);
        if (done(arg))
            return true;
        if (!manual_clock_step(c, deadline))
            return done(arg);
    }
}

/* The term tokens holders were given (docs/design.md, rule 8), as a client
 * library keeps them: campaign() notes the token of every ELECTED its sink
 * receives, and confirm(), resign() and campaign() with a resume_epoch
 * present it, so that tests of other rules speak as the holder does. Tests
 * of rule 8 pass tokens (or none) to the engine_* calls themselves. */
#define HARNESS_TOKENS 256

typedef struct harness_token {
    char key[STORE_NS_MAX + STORE_NAME_MAX + STORE_HOLDER_MAX + 2]; /* ns/lease/identity */
    int64_t epoch;
    char token[ENGINE_TOKEN_MAX];
} harness_token;

static harness_token harness_tokens[HARNESS_TOKENS];
static unsigned harness_n_tokens;
static pthread_mutex_t harness_tokens_mu = PTHREAD_MUTEX_INITIALIZER;

static inline void harness_token_key(char *out, size_t n, const char *ns, const char *lease,
                                     const char *identity)
{
    snprintf(out, n, "%s/%s/%s", ns, lease, identity);
}

static inline void harness_token_note(const engine_campaign_req *r, int64_t epoch,
                                      const char *token)
{
    pthread_mutex_lock(&harness_tokens_mu);
    harness_token *t = &harness_tokens[harness_n_tokens++ % HARNESS_TOKENS];
    harness_token_key(t->key, sizeof t->key, r->ns, r->name, r->identity);
    t->epoch = epoch;
    snprintf(t->token, sizeof t->token, "%s", token);
    pthread_mutex_unlock(&harness_tokens_mu);
}

/* The token last given to identity for ns/lease, at epoch (0: any); "" when
 * it was given none. */
static inline void harness_token_get(char out[ENGINE_TOKEN_MAX], const char *ns, const char *lease,
                                     const char *identity, int64_t epoch)
{
    char key[sizeof harness_tokens[0].key];
    harness_token_key(key, sizeof key, ns, lease, identity);
    out[0] = '\0';
    pthread_mutex_lock(&harness_tokens_mu);
    unsigned n = harness_n_tokens < HARNESS_TOKENS ? harness_n_tokens : HARNESS_TOKENS;
    for (unsigned k = 0; k < n; k++) {
        const harness_token *t = &harness_tokens[(harness_n_tokens - 1 - k) % HARNESS_TOKENS];
        if (strcmp(t->key, key) == 0 && (epoch == 0 || t->epoch == epoch)) {
            snprintf(out, ENGINE_TOKEN_MAX, "%s", t->token);
            break;
        }
    }
    pthread_mutex_unlock(&harness_tokens_mu);
}

/* A stream as the RPC layer would hold it: events recorded in order. */
typedef struct sink {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    engine_event events[MAX_EVENTS];
    int64_t at_ms[MAX_EVENTS];
    int n;
    int read; /* next event next_event() returns */
    bool closed;
    pthread_t closed_by; /* the thread on_close ran on */
    uint64_t id;
    bool has_req; /* req is the campaign's (campaign()): its tokens are noted */
    engine_campaign_req req;
} sink;

static inline void sink_on_event(void *ctx, const engine_event *ev)
{
    sink *s = ctx;
    if (ev->kind == ENGINE_EVENT_ELECTED && s->has_req)
        harness_token_note(&s->req, ev->epoch, ev->term_token);
    pthread_mutex_lock(&s->mu);
    if (s->n < MAX_EVENTS) {
        s->at_ms[s->n] = harness_now_ms();
        s->events[s->n++] = *ev;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static inline void sink_on_close(void *ctx)
{
    sink *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    s->closed_by = pthread_self();
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static inline sink *sink_new(void)
{
    sink *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    return s;
}

static inline void sink_free(sink *s)
{
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

static inline engine_listener listener_of(sink *s)
{
    return (engine_listener){.on_event = sink_on_event, .on_close = sink_on_close, .ctx = s};
}

static inline void deadline_in(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000;
    if (ts->tv_nsec >= 1000000000) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000;
    }
}

/* The next unread event of kind in s (reading past others), or -1; the
 * caller holds s->mu. */
static inline int take_kind_locked(sink *s, engine_event_kind kind)
{
    while (s->read < s->n) {
        int i = s->read++;
        if (s->events[i].kind == kind)
            return i;
    }
    return -1;
}

/* The same, under the sink's lock: with the engine on its own thread,
 * events arrive while the test reads. */
static inline int take_kind(sink *s, engine_event_kind kind)
{
    pthread_mutex_lock(&s->mu);
    int found = take_kind_locked(s, kind);
    pthread_mutex_unlock(&s->mu);
    return found;
}

typedef struct kind_wait {
    sink *s;
    engine_event_kind kind;
    int found;
} kind_wait;

static inline bool kind_seen(void *arg)
{
    kind_wait *w = arg;
    if (w->found < 0)
        w->found = take_kind(w->s, w->kind);
    return w->found >= 0;
}

/* Waits up to timeout_ms for the next event of the given kind, skipping
 * others (CANDIDATE keep-alives, HEARTBEATs). Returns its index or -1. */
static inline int wait_kind(sink *s, engine_event_kind kind, int timeout_ms)
{
    if (harness_manual) {
        kind_wait w = {s, kind, -1};
        harness_run_until(kind_seen, &w, timeout_ms);
        return w.found;
    }
    struct timespec ts;
    deadline_in(&ts, timeout_ms);
    int found = -1;
    pthread_mutex_lock(&s->mu);
    while ((found = take_kind_locked(s, kind)) < 0 &&
           pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
        ;
    pthread_mutex_unlock(&s->mu);
    return found;
}

static inline bool sink_closed(void *arg)
{
    return ((sink *)arg)->closed;
}

static inline bool wait_closed(sink *s, int timeout_ms)
{
    if (harness_manual)
        return harness_run_until(sink_closed, s, timeout_ms);
    struct timespec ts;
    deadline_in(&ts, timeout_ms);
    pthread_mutex_lock(&s->mu);
    while (!s->closed && pthread_cond_timedwait(&s->cv, &s->mu, &ts) == 0)
        ;
    bool closed = s->closed;
    pthread_mutex_unlock(&s->mu);
    return closed;
}

/* A unary reply, waited for from the test thread. */
typedef struct reply_box {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    engine_reply r;
} reply_box;

static inline void box_done(void *ctx, const engine_reply *r)
{
    reply_box *b = ctx;
    pthread_mutex_lock(&b->mu);
    b->r = *r;
    b->r.leases = NULL;
    b->done = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static inline bool box_done_yet(void *arg)
{
    return ((reply_box *)arg)->done;
}

static inline void box_wait(reply_box *b)
{
    if (harness_manual) {
        assert_true(harness_run_until(box_done_yet, b, 5000));
        return;
    }
    struct timespec ts;
    deadline_in(&ts, 5000);
    pthread_mutex_lock(&b->mu);
    while (!b->done && pthread_cond_timedwait(&b->cv, &b->mu, &ts) == 0)
        ;
    assert_true(b->done);
    pthread_mutex_unlock(&b->mu);
}

#define BOX_INIT                                                                                   \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false,                                \
        {                                                                                          \
            0                                                                                      \
        }                                                                                          \
    }

static inline void *engine_thread(void *arg)
{
    engine_run(arg);
    return NULL;
}

static inline void harness_log_level(void)
{
    log_level level;
    const char *want = getenv("KL_LOG_LEVEL");
    if (want && log_parse_level(want, &level) == 0)
        log_set_level(level);
}

/* Starts an engine on its own thread over store s (which it takes). */
static inline fixture *fixture_start(loop *l, store *s)
{
    harness_log_level();
    fixture *f = calloc(1, sizeof *f);
    f->loop = l;
    f->store = s;
    f->ns = "default";
    f->threaded = true;
    engine_config cfg = {.loop = f->loop, .store = f->store};
    cfg.term_key = harness_term_key;
    cfg.term_key_len = sizeof harness_term_key - 1;
    f->engine = engine_new(&cfg);
    pthread_create(&f->thread, NULL, engine_thread, f->engine);
    return f;
}

/* cfg with the fixture's loop, store and, unless cfg has them, (manual)
 * wall clock and the harness's term key filled in. */
static inline engine_config fixture_engine_config(const fixture *f, engine_config cfg)
{
    cfg.loop = f->loop;
    cfg.store = f->store;
    if (!cfg.term_key_len) {
        cfg.term_key = harness_term_key;
        cfg.term_key_len = sizeof harness_term_key - 1;
    }
    if (!f->threaded && !cfg.wall_clock)
        cfg.wall_clock = harness_wall_clock;
    return cfg;
}

/* Starts an engine configured as cfg (its loop and store are made here)
 * over a memory store, on a loop the test thread runs with a manual clock.
 * One at a time. */
static inline fixture *fixture_start_manual(engine_config cfg)
{
    harness_log_level();
    fixture *f = calloc(1, sizeof *f);
    f->loop = loop_new();
    manual_clock_attach(&f->clock, f->loop);
    f->store = store_memory_new(f->loop);
    f->ns = "default";
    harness_manual = f;
    cfg = fixture_engine_config(f, cfg);
    f->engine = engine_new(&cfg);
    return f;
}

/* After engine_stop(): waits until the engine's run is over (joins its
 * thread, or runs the loop until nothing is left to run). */
static inline void fixture_join(fixture *f)
{
    if (f->threaded)
        pthread_join(f->thread, NULL);
    else
        manual_clock_settle(&f->clock);
    f->stopped = true;
}

static inline void fixture_stop(fixture *f)
{
    if (!f->stopped) {
        engine_stop(f->engine);
        fixture_join(f);
    }
    loop_drain(f->loop);
    engine_free(f->engine);
    store_free(f->store);
    loop_free(f->loop);
    if (harness_manual == f)
        harness_manual = NULL;
    free(f);
}

/* A second replica of the service: its own engine on the fixture's loop,
 * store and term key. */
static inline engine *fixture_replica_new(fixture *f)
{
    engine_config cfg = fixture_engine_config(f, (engine_config){0});
    engine *e = engine_new(&cfg);
    assert_non_null(e);
    return e;
}

/* Stops and frees the second replica e2 and stops the fixture's engine (e2
 * first: its stop stops the shared loop); fixture_stop frees the rest. */
static inline void fixture_replica_free(fixture *f, engine *e2)
{
    engine_stop(e2);
    fixture_join(f);
    engine_stop(f->engine);
    loop_drain(f->loop);
    engine_free(e2);
}

/* Runs fn on the engine thread and waits for it (store access from tests). */
typedef struct on_loop {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    void (*fn)(fixture *f, void *arg);
    fixture *f;
    void *arg;
} on_loop;

static inline void on_loop_run(void *p)
{
    on_loop *o = p;
    o->fn(o->f, o->arg);
    pthread_mutex_lock(&o->mu);
    o->done = true;
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

static inline void run_on_loop(fixture *f, void (*fn)(fixture *, void *), void *arg)
{
    on_loop o = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, fn, f, arg};
    loop_post(f->loop, on_loop_run, &o);
    if (!f->threaded) {
        manual_clock_settle(&f->clock);
        assert_true(o.done);
        return;
    }
    pthread_mutex_lock(&o.mu);
    while (!o.done)
        pthread_cond_wait(&o.cv, &o.mu);
    pthread_mutex_unlock(&o.mu);
}

static inline void harness_noop(fixture *f, void *arg)
{
    (void)f;
    (void)arg;
}

/* A store write made behind the engine's back, as another client would. */
typedef struct harness_put {
    store_lease lease;
    store_result res;
    atomic_bool done;
} harness_put;

static inline void harness_put_cb(void *ctx, const store_result *r)
{
    harness_put *p = ctx;
    p->res = *r;
    atomic_store(&p->done, true);
}

static inline void harness_create_on_loop(fixture *f, void *arg)
{
    harness_put *p = arg;
    f->store->ops->create(f->store, &p->lease, 1000, harness_put_cb, p);
}

/* Runs the store write fn(f, p) on the loop and waits until it succeeded. */
static inline void harness_put_run(fixture *f, void (*fn)(fixture *, void *), harness_put *p)
{
    run_on_loop(f, fn, p);
    for (int spins = 0; !atomic_load(&p->done) && spins < 100; spins++)
        run_on_loop(f, harness_noop, NULL);
    assert_int_equal(p->res.status, STORE_OK);
}

/* Creates lease in the store, as another client would, and waits for it. */
static inline void harness_create(fixture *f, const store_lease *lease)
{
    harness_put p = {.lease = *lease};
    harness_put_run(f, harness_create_on_loop, &p);
}

static inline void harness_remove_on_loop(fixture *f, void *arg)
{
    harness_put *p = arg;
    f->store->ops->remove(f->store, p->lease.ns, p->lease.name, NULL, 1000, harness_put_cb, p);
}

/* Deletes the Lease ns/name from the store, as another client would, and
 * waits for it. */
static inline void harness_remove(fixture *f, const char *ns, const char *name)
{
    harness_put p = {0};
    snprintf(p.lease.ns, sizeof p.lease.ns, "%s", ns);
    snprintf(p.lease.name, sizeof p.lease.name, "%s", name);
    harness_put_run(f, harness_remove_on_loop, &p);
}

static inline engine_campaign_req req_for_ns(const char *ns, const char *lease,
                                             const char *identity)
{
    engine_campaign_req r = {.lease_duration_s = 15, .renew_deadline_s = 10, .retry_period_s = 2};
    snprintf(r.ns, sizeof r.ns, "%s", ns);
    snprintf(r.name, sizeof r.name, "%s", lease);
    snprintf(r.identity, sizeof r.identity, "%s", identity);
    return r;
}

static inline uint64_t campaign(fixture *f, sink *s, engine_campaign_req r)
{
    if (r.resume_epoch && !r.term_token[0])
        harness_token_get(r.term_token, r.ns, r.name, r.identity, r.resume_epoch);
    s->req = r;
    s->has_req = true;
    s->id = engine_campaign(f->engine, &r, listener_of(s));
    assert_true(s->id > 0);
    return s->id;
}

/* Campaigns s for r and waits (5 s at most) until it is elected; returns
 * the index of its ELECTED event in s. */
static inline int harness_elect(fixture *f, sink *s, engine_campaign_req r)
{
    campaign(f, s, r);
    int i = wait_kind(s, ENGINE_EVENT_ELECTED, 5000);
    assert_true(i >= 0);
    return i;
}

/* The prologue of many engine tests: leader campaigns for rl and is
 * elected, then standby campaigns for rs and stands by behind it (its first
 * CANDIDATE read; *standby_at, when not NULL, gets that event's index).
 * Returns the index of the leader's ELECTED event. */
static inline int harness_leader_and_standby(fixture *f, sink *leader, engine_campaign_req rl,
                                             sink *standby, engine_campaign_req rs, int *standby_at)
{
    int i = harness_elect(f, leader, rl);
    campaign(f, standby, rs);
    int j = wait_kind(standby, ENGINE_EVENT_CANDIDATE, 5000);
    assert_true(j >= 0);
    if (standby_at)
        *standby_at = j;
    return i;
}

/* A Confirm of identity's term at epoch with token, sent to replica e (in
 * the fixture's namespace), and its answer. */
static inline engine_reply confirm_on(const fixture *f, engine *e, const char *lease,
                                      const char *identity, int64_t epoch, const char *token)
{
    reply_box b = BOX_INIT;
    assert_int_equal(engine_confirm(e, f->ns, lease, identity, epoch, token, box_done, &b), 0);
    box_wait(&b);
    return b.r;
}

/* The same to the fixture's engine, with the token the holder was given. */
static inline engine_reply confirm(fixture *f, const char *lease, const char *identity,
                                   int64_t epoch)
{
    char token[ENGINE_TOKEN_MAX];
    harness_token_get(token, f->ns, lease, identity, epoch);
    return confirm_on(f, f->engine, lease, identity, epoch, token);
}

static inline void harness_read_writes(fixture *f, void *arg)
{
    *(int64_t *)arg = store_memory_writes(f->store);
}

/* Confirms as a live holder does until the store has applied one more
 * write (the term's next renewal), for at most 10 s; true when it has and
 * every confirmation was granted. */
/* (The memory store.) */
static inline bool confirm_through_a_renewal(fixture *f, const char *lease, const char *identity,
                                             int64_t epoch)
{
    int64_t before = 0;
    run_on_loop(f, harness_read_writes, &before);
    int64_t now = before;
    for (int waited = 0; waited < 10000 && now == before; waited += 200) {
        if (confirm(f, lease, identity, epoch).code != ENGINE_OK)
            return false;
        harness_sleep_ms(200);
        run_on_loop(f, harness_read_writes, &now);
    }
    return now > before;
}

static inline engine_reply resign(fixture *f, const char *lease, const char *identity)
{
    reply_box b = BOX_INIT;
    char token[ENGINE_TOKEN_MAX];
    harness_token_get(token, f->ns, lease, identity, 0);
    assert_int_equal(engine_resign(f->engine, f->ns, lease, identity, token, box_done, &b), 0);
    box_wait(&b);
    return b.r;
}

static inline engine_reply get_holder(fixture *f, const char *lease, bool consistent)
{
    reply_box b = BOX_INIT;
    assert_int_equal(engine_get_holder(f->engine, f->ns, lease, NULL, consistent, box_done, &b), 0);
    box_wait(&b);
    return b.r;
}

#endif
