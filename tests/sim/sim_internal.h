/* The simulator's shared state (one world, one thread). */
#ifndef KL_TESTS_SIM_INTERNAL_H
#define KL_TESTS_SIM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/loop.h"
#include "engine/engine.h"
#include "sim.h"
#include "store/store.h"

/* Clock rates differ by at most this (parts per million) from simulated
 * time: two clocks by at most 1.02/0.98 (4.1%), inside the 5% rule 1
 * allows between a holder and its replica (docs/design.md, rule 3) and
 * well inside the ratio leaseDuration/renewDeadline for the rest. */
#define SIM_SKEW_PPM      20000
#define SIM_WALL_START_US ((int64_t)1767225600 * 1000000) /* 2026-01-01 */

/* Faults come for SIM_FAULT_MS of every SIM_PHASE_MS; in the quiet rest a
 * leader must be elected within SIM_LIVE_BOUND_MS. */
#define SIM_PHASE_MS      60000
#define SIM_FAULT_MS      40000
#define SIM_QUIET_MS      (SIM_PHASE_MS - SIM_FAULT_MS)
#define SIM_LIVE_BOUND_MS 15000

/* The campaigns' timings (seconds), shorter than a deployment's so that
 * terms change often. */
#define SIM_LEASE_S 4
#define SIM_RENEW_S 3
#define SIM_RETRY_S 1

/* The leader label every campaign asks for (rule 9): this key, the Lease's
 * name as its value, on the client's Pod pod-c<id>. */
#define SIM_LABEL_KEY "sim.kubelease.io/leader"

#define SIM_TAIL       400 /* trace lines kept for the report of a violation */
#define SIM_TERMS_KEPT 64
#define SIM_GENS       4096
/* How stale CheckEpoch may be (rule 4: it answers from a cache that lags
 * the store); KL_SIM_STRICT_CHECK=1 checks every replica's answers never go
 * back instead. */
#define SIM_CHECK_LAG_MS 10000

typedef void (*sim_fn)(void *arg, uint64_t a, uint64_t b);

typedef struct sim_event {
    int64_t t;
    uint64_t seq;
    sim_fn fn;
    void *arg;
    uint64_t a, b;
    bool owned; /* arg is malloc'd and the event's: freed if the run ends first */
} sim_event;

typedef struct sim_clock {
    int64_t base; /* local reading at simulated time 0 */
    int64_t ppm;  /* rate: local advances (1e6 + ppm)/1e6 ms per ms */
} sim_clock;

typedef struct sim_engine {
    int id;
    unsigned gen; /* incarnation: every boot is a new one */
    bool up;
    int64_t paused_until; /* simulated time; the process runs nothing before */
    sim_clock clock;
    int64_t wall_offset_ms;
    loop *loop;
    store *store;
    engine *engine;
} sim_engine;

typedef struct sim_client sim_client;

typedef struct sim_term_seen {
    int64_t epoch;
    int client;
} sim_term_seen;

typedef struct sim_lease_check {
    int64_t max_epoch; /* largest epoch a client led */
    sim_term_seen terms[SIM_TERMS_KEPT];
    int n;
    int64_t last_leader_ms;
    /* the store's view */
    int64_t store_epoch;
    char store_holder[STORE_HOLDER_MAX];
    char store_nonce[STORE_NONCE_MAX];
    /* CheckEpoch: the largest epoch each engine incarnation answered */
    int64_t engine_seen[8][SIM_GENS];
    int64_t engine_seen_at[8][SIM_GENS]; /* when it first answered that epoch */
    /* when the store first recorded each epoch (the last SIM_TERMS_KEPT) */
    int64_t epoch_at_epoch[SIM_TERMS_KEPT], epoch_at_ms[SIM_TERMS_KEPT];
    int n_epoch_at;
} sim_lease_check;

typedef struct sim_world {
    sim_opts opts;
    sim_result *res;
    uint64_t rng;
    int64_t now; /* simulated time, ms */
    bool stop;
    sim_event *ev;
    size_t n_ev, cap_ev;
    uint64_t next_seq;
    sim_engine *engines;
    sim_client *clients;
    sim_lease_check *lease_checks;
    int64_t quiet_since; /* -1 while faults are on */
    int64_t store_writes;
    bool strict_check;
    bool late_pod_patches; /* KL_SIM_LATE_POD_PATCHES */
    int64_t steps_now;     /* loop steps at this simulated time */
    char tail[SIM_TAIL][600];
    uint64_t tail_next;
} sim_world;

extern sim_world W;

/* With KL_SIM_DEBUG=1 (the engines' debug log on stderr), a line saying
 * which engine the log lines that follow come from. */
void sim_debug_engine(const sim_engine *e);

uint64_t sim_rand(void);
int64_t sim_between(int64_t lo, int64_t hi);
bool sim_chance(double p);
void sim_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sim_violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sim_at(int64_t t, sim_fn fn, void *arg, uint64_t a, uint64_t b);
/* As sim_at, for an arg that is malloc'd and owned by the event: fn frees
 * or reschedules it; if the run ends before it fires, the world frees it. */
void sim_at_owned(int64_t t, sim_fn fn, void *arg, uint64_t a, uint64_t b);

int64_t sim_local(const sim_clock *c, int64_t t);
int64_t sim_global(const sim_clock *c, int64_t local);
void sim_clock_init(sim_clock *c);

void sim_engine_boot(sim_engine *e);
void sim_engine_crash(sim_engine *e);
bool sim_engine_runs(const sim_engine *e);
void phase_faults(void *arg, uint64_t a, uint64_t b);

/* checkers */
void sim_check_leading(sim_client *c, int lease, int64_t epoch);
void sim_check_overlap(sim_client *c, int lease, int64_t epoch);
void sim_check_write(int lease, const store_lease *l);
void sim_check_epoch_answer(sim_engine *e, unsigned gen, int lease, int64_t asked_at, int64_t epoch,
                            bool current, int64_t answer_epoch);

/* sim_store.c */
void sim_store_init(void);
void sim_store_free(void);
store *sim_store_view(sim_engine *e);
void sim_store_view_dead(store *s);
void sim_store_faults(int level); /* 0: none; higher: more errors, lag and loss */
void sim_store_faults_off(void *arg, uint64_t a, uint64_t b);
void sim_store_restart_watches(void);
/* Another writer sets lease-i's spec.preferredHolder ("": clears it). */
void sim_store_set_preferred(int i, const char *holder);
int sim_lease_index(const char *name); /* "lease-3" -> 3; -1 */

/* sim_net.c: connections between clients and engines */
typedef struct sim_conn sim_conn;
void sim_net_init(void);
void sim_net_free(void);
void sim_net_heal(void);
void sim_net_engine_gone(sim_engine *e);
void sim_net_partition(sim_client *c, sim_engine *e, int way, int64_t ms);
void sim_net_reset_random(void);

/* sim_client.c */
struct sim_client {
    int id;
    int lease;
    bool up;
    unsigned gen;
    int64_t paused_until;
    sim_clock clock;
    void *impl; /* the election's state */
};
void sim_clients_init(void);
void sim_clients_free(void);
void sim_client_crash(sim_client *c, int64_t down_ms);
void sim_client_pause(sim_client *c, int64_t ms);
void sim_client_heal(sim_client *c);
/* Simulated time until which c believes it leads (its deadline on its
 * clock); 0 when it does not. */
int64_t sim_client_believes_until(const sim_client *c);
int64_t sim_client_epoch(const sim_client *c);
/* c sends a Confirm as the holder of a Lease, with a made-up token. */
void sim_client_forge(sim_client *c);
/* c sends an operator's Handoff (no identity, no token) of some Lease. */
void sim_client_operator_handoff(sim_client *c);

#endif
