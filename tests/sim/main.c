/* kl_sim: runs the simulator (sim.h).
 *   kl_sim                     the CI run: fixed seeds, a few fresh ones, and one
 *                              seed twice (the traces must be identical)
 *   kl_sim --replay SEED       one seed, its whole trace on stdout
 *   kl_sim --find BREAK...     (kl_sim_break) seeds until a checker catches the
 *                              broken rule: prints the seed and the trace before it;
 *                              --find again for more than one
 *   kl_sim --find-all          every break in turn
 * KL_SIM_SEEDS (how many seeds) and KL_SIM_SECONDS (simulated seconds each)
 * make long runs; --seconds, --engines, --clients, --leases too; with
 * --cpu-seconds S (KL_SIM_CPU_SECONDS) seeds from --seed on run until S
 * CPU seconds are spent (an hour of one core: --cpu-seconds 3600). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

/* The engine's rule breaks read this (engine/internal.h, KL_SIM_BREAKS). */
int kl_sim_break;

static const char *const break_names[SIM_BREAK_COUNT] = {
    [SIM_BREAK_NONE] = "none",
    [SIM_BREAK_GRANT_PAST_RENEW] = "grant-past-renew-deadline",
    [SIM_BREAK_DEADLINE_FROM_ARRIVAL] = "deadline-from-arrival",
    [SIM_BREAK_RELEASE_EARLY] = "release-before-last-grant",
    [SIM_BREAK_CONFLICT_WINS] = "conflict-is-a-win",
    [SIM_BREAK_SKIP_TOKEN] = "skip-term-token-check",
    [SIM_BREAK_RELABEL_EARLY] = "relabel-before-removal",
};

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A non-negative decimal number, or exit 2 naming what is wrong. */
static int64_t number(const char *what, const char *v)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < 0) {
        fprintf(stderr, "kl_sim: %s must be a non-negative number, not \"%s\"\n", what, v);
        exit(2);
    }
    return n;
}

static int64_t env_int(const char *name, int64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? number(name, v) : dflt;
}

static sim_opts base_opts;

static int run_one(uint64_t seed, sim_result *r, bool quiet)
{
    sim_opts o = base_opts;
    o.seed = seed;
    o.tail_lines = quiet ? 0 : 60;
    kl_sim_break = o.brk;
    return sim_run(&o, r);
}

static void print_result(uint64_t seed, const sim_result *r)
{
    printf("seed %" PRIu64 ": %" PRId64 " leadership changes, %" PRId64 " store writes, %" PRId64
           " faults, %" PRId64 " trace lines, trace %016" PRIx64 "%s%s\n",
           seed, r->leader_changes, r->store_writes, r->faults, r->trace_lines, r->trace_hash,
           r->violations ? ", VIOLATION: " : "", r->violations ? r->first_violation : "");
}

static int replay(uint64_t seed)
{
    sim_result r;
    base_opts.trace = stdout;
    int rc = run_one(seed, &r, false);
    base_opts.trace = NULL;
    print_result(seed, &r);
    return rc;
}

/* Seeds from first until a violation; returns the seed or 0. */
static uint64_t find(int brk, uint64_t first, int max_seeds)
{
    base_opts.brk = brk;
    base_opts.stop_at_fail = true;
    for (int i = 0; i < max_seeds; i++) {
        sim_result r;
        uint64_t seed = first + (uint64_t)i;
        if (run_one(seed, &r, true) != 0) {
            printf("break %s: found by seed %" PRIu64 " at %.3f s: %s\n", break_names[brk], seed,
                   (double)r.violation_at_ms / 1000, r.first_violation);
            /* the minimal trace: the same seed again, showing what led there */
            run_one(seed, &r, false);
            printf("replay: kl_sim_break --break %s --replay %" PRIu64 "\n", break_names[brk],
                   seed);
            return seed;
        }
    }
    printf("break %s: NOT found in %d seeds\n", break_names[brk], max_seeds);
    return 0;
}

static int break_of(const char *name)
{
    for (int b = 0; b < SIM_BREAK_COUNT; b++)
        if (strcmp(break_names[b], name) == 0)
            return b;
    fprintf(stderr, "kl_sim: unknown break %s\n", name);
    exit(2);
}

int main(int argc, char **argv)
{
    base_opts = (sim_opts){
        .seconds = env_int("KL_SIM_SECONDS", 120), .engines = 3, .clients = 8, .leases = 4};
    int64_t seeds = env_int("KL_SIM_SEEDS", 0);
    int64_t cpu_budget = env_int("KL_SIM_CPU_SECONDS", 0);
    int64_t replay_seed = -1, first = 1;
    unsigned find_mask = 0;
    int brk = -1, find_all = 0, max_seeds = (int)env_int("KL_SIM_MAX_SEEDS", 40);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--replay") && v)
            replay_seed = number("--replay", argv[++i]);
        else if (!strcmp(a, "--seed") && v)
            first = number("--seed", argv[++i]);
        else if (!strcmp(a, "--seeds") && v)
            seeds = number("--seeds", argv[++i]);
        else if (!strcmp(a, "--seconds") && v)
            base_opts.seconds = number("--seconds", argv[++i]);
        else if (!strcmp(a, "--engines") && v)
            base_opts.engines = (int)number("--engines", argv[++i]);
        else if (!strcmp(a, "--clients") && v)
            base_opts.clients = (int)number("--clients", argv[++i]);
        else if (!strcmp(a, "--leases") && v)
            base_opts.leases = (int)number("--leases", argv[++i]);
        else if (!strcmp(a, "--break") && v)
            brk = break_of(argv[++i]);
        else if (!strcmp(a, "--find") && v) {
            find_mask |= 1u << break_of(argv[++i]);
            find_all = -1;
        } else if (!strcmp(a, "--find-all"))
            find_all = 1;
        else if (!strcmp(a, "--cpu-seconds") && v)
            cpu_budget = number("--cpu-seconds", argv[++i]);
        else if (!strcmp(a, "--max-seeds") && v)
            max_seeds = (int)number("--max-seeds", argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--replay SEED] [--seed FIRST] [--seeds N] [--seconds S] "
                    "[--cpu-seconds S] [--break NAME | --find NAME | --find-all] [--max-seeds N]\n",
                    argv[0]);
            return 2;
        }
    }
    if (base_opts.engines < 1 || base_opts.engines > 8 || base_opts.clients < 1 ||
        base_opts.clients > 64 || base_opts.leases < 1 || base_opts.leases > 64) {
        fprintf(stderr, "kl_sim: 1-8 engines, 1-64 clients, 1-64 leases\n");
        return 2;
    }
    if (brk > 0)
        base_opts.brk = brk;
    if (replay_seed >= 0)
        return replay((uint64_t)replay_seed);
    if (find_all) {
        int missed = 0;
        for (int b = 1; b < SIM_BREAK_COUNT; b++)
            if (find_all == 1 || (find_mask & (1u << b)))
                missed += find(b, first, max_seeds) == 0;
        return missed ? 1 : 0;
    }

    /* The CI run: fixed seeds and fresh ones (printed: replayable); or a
     * long one, seeds from first on, KL_SIM_SEEDS of them or until the CPU
     * budget is spent. */
    static const uint64_t fixed[] = {1, 2, 3, 42, 1234};
    int64_t n_fixed = (int64_t)(sizeof fixed / sizeof fixed[0]);
    uint64_t fresh = (uint64_t)time(NULL) * 1000;
    bool long_run = seeds > 0 || cpu_budget > 0;
    int failed = 0;
    int64_t n = 0, changes = 0, sim_s = 0;
    uint64_t seed0 = long_run ? (uint64_t)first : fixed[0];
    double t0 = cpu_s();
    for (;; n++) {
        bool done = long_run ? (seeds > 0 && n >= seeds) ||
                                   (cpu_budget > 0 && cpu_s() - t0 >= (double)cpu_budget)
                             : n >= n_fixed + 3;
        if (done)
            break;
        uint64_t seed = long_run      ? (uint64_t)first + (uint64_t)n
                        : n < n_fixed ? fixed[n]
                                      : fresh + (uint64_t)(n - n_fixed);
        sim_result r;
        failed += run_one(seed, &r, false) != 0;
        print_result(seed, &r);
        changes += r.leader_changes;
        sim_s += base_opts.seconds;
        if (r.violations)
            printf("replay: kl_sim --replay %" PRIu64 "\n", seed);
        fflush(stdout);
    }
    double cpu = cpu_s() - t0;
    /* The same seed twice: the same trace, byte for byte. */
    sim_result a, b;
    run_one(seed0, &a, true);
    run_one(seed0, &b, true);
    if (a.trace_hash != b.trace_hash || a.trace_lines != b.trace_lines) {
        printf("NOT DETERMINISTIC: seed %" PRIu64 " gave traces %016" PRIx64 " and %016" PRIx64
               "\n",
               seed0, a.trace_hash, b.trace_hash);
        failed++;
    }
    printf("%" PRId64 " seeds, %" PRId64 " simulated s, %" PRId64
           " leadership changes in %.2f CPU s: %.0f changes per CPU second, %.0f simulated s per "
           "CPU second\n",
           n, sim_s, changes, cpu, cpu > 0 ? (double)changes / cpu : 0.0,
           cpu > 0 ? (double)sim_s / cpu : 0.0);
    return failed ? 1 : 0;
}
