/* The deterministic simulator (tests/sim; docs/design.md, section 9,
 * "The simulator"): one thread runs N real engines, each on its own loop
 * whose clock is a skewed view of one simulated time, over one simulated
 * Lease store, with M simulated clients reaching them through a simulated
 * network. A seed decides every latency, fault and choice, so one seed
 * always gives the same trace. */
#ifndef KL_TESTS_SIM_H
#define KL_TESTS_SIM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The rules a sim_break build can break on purpose, one at a time
 * (kl_sim_break; 0 none). The engine's are compiled in only with
 * KL_SIM_BREAKS (engine/internal.h). */
enum {
    SIM_BREAK_NONE = 0,
    SIM_BREAK_GRANT_PAST_RENEW = 1,      /* engine: grants ignore the renew deadline */
    SIM_BREAK_DEADLINE_FROM_ARRIVAL = 2, /* client: deadline from the answer's arrival */
    SIM_BREAK_RELEASE_EARLY = 3,         /* engine: a lost term is released at once */
    SIM_BREAK_CONFLICT_WINS = 4,         /* engine: an acquisition's conflict counts as won */
    SIM_BREAK_SKIP_TOKEN = 5,            /* engine: any term token is accepted */
    SIM_BREAK_RELABEL_EARLY = 6,         /* engine: a new term before the old label is off */
    SIM_BREAK_COUNT
};

typedef struct sim_opts {
    uint64_t seed;
    int64_t seconds;   /* simulated seconds to run */
    int engines;       /* N */
    int clients;       /* M */
    int leases;        /* Leases the clients campaign on */
    int brk;           /* SIM_BREAK_* */
    FILE *trace;       /* every trace line goes here (NULL: none) */
    int tail_lines;    /* on a violation, print this many trace lines before it */
    bool stop_at_fail; /* end the run at the first violation */
} sim_opts;

typedef struct sim_result {
    uint64_t trace_hash; /* FNV-1a of every trace line */
    int64_t trace_lines;
    int64_t leader_changes; /* leadership starts (a new believer of a Lease) */
    int64_t violations;
    char first_violation[512];
    int64_t violation_at_ms;
    int64_t store_writes;
    int64_t faults;
} sim_result;

/* Runs one seed. Returns 0 when no checker found anything. */
int sim_run(const sim_opts *o, sim_result *r);

#endif
