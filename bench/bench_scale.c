/* Scale probe through libkubelease's public API, against a running
 * kubeleased (bench/scale.sh starts one with --dev and samples its memory
 * and CPU while this holds still):
 *   1. E elections, one candidate each, spread over C clients: the time
 *      from the first kl_run_election to the last kl_wait_elected (terms
 *      confirmed; the library confirms them from then on), and the
 *      elections that failed or were lost before that;
 *   2. W holder watches (kl_watch_holder) of those Leases, spread over WC
 *      clients (one watch per Lease per client, so W <= WC x E), all at
 *      once or RATE a second: the time to the first callback of every
 *      watch, the elections still running;
 *   3. the leaders still leading once every watch had its first callback;
 *   4. "phase=steady" on stdout, then everything is held until HOLD
 *      seconds after the last election, when the leaders still leading are
 *      counted (kl_wait_lost_timeout with 0 ms: a loss is final, and its
 *      reason is counted).
 * The Leases are NAMESPACE/PREFIX-0 .. PREFIX-(E-1) (default: default/scale);
 * on a real apiserver, give each run a prefix of its own, since a stopped
 * kubeleased keeps its terms (docs/design.md, rule 5).
 * Usage: bench_scale [-e E] [-w W] [-c C] [-W WC] [-d L/R/P[@G]] [-H HOLD] [-r RATE]
 *                    [-n NAMESPACE] [-p PREFIX] ENDPOINT
 * Prints key=value lines; figures, not assertions. */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "kubelease.h"

#define MAX_REASONS 8
/* Reasons are told apart by their first REASON_LEN characters, every run
 * of digits read as "N": the library cuts its message to kl_error's size, so
 * the end of one reason varies with the length of the Lease's name before
 * it, and the validity left ("(23 ms)") varies from one loss to the next. */
#define REASON_LEN 160

struct config {
    const char *endpoint;
    const char *ns, *prefix; /* the Leases: NS/PREFIX-i */
    int elections, watchers, clients, watch_clients, hold_s;
    int watch_rate; /* watches started per second; 0: all at once */
    int lease_s, renew_s, retry_s;
    int grant_ms; /* -d L/R/P@G: each leader's grant_ms; 0: the service's */
};

/* One holder watch: the first callback's time. */
struct watch {
    int64_t first_us; /* 0: no callback yet */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int watches_started; /* watches that had their first callback */
static long watch_events;   /* every callback */

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_us(int64_t us)
{
    struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void die(const char *what, const kl_error *err)
{
    fprintf(stderr, "bench_scale: %s%s%s\n", what, err ? ": " : "", err ? err->message : "");
    exit(1);
}

static void usage(void)
{
    fprintf(stderr, "usage: bench_scale [-e ELECTIONS] [-w WATCHERS] [-c CLIENTS] "
                    "[-W WATCH_CLIENTS] [-d LEASE/RENEW/RETRY[@GRANT_MS]] [-H HOLD_S] [-r WATCHES_PER_S] "
                    "[-n NAMESPACE] [-p PREFIX] ENDPOINT\n");
    exit(2);
}

static void parse(int argc, char **argv, struct config *cfg)
{
    *cfg = (struct config){.ns = "default",
                           .prefix = "scale",
                           .elections = 1000,
                           .watchers = 10000,
                           .clients = 10,
                           .hold_s = 30,
                           .lease_s = 15,
                           .renew_s = 10,
                           .retry_s = 2};
    int o;
    while ((o = getopt(argc, argv, "e:w:c:W:d:H:r:n:p:")) != -1) {
        switch (o) {
        case 'e':
            cfg->elections = atoi(optarg);
            break;
        case 'w':
            cfg->watchers = atoi(optarg);
            break;
        case 'c':
            cfg->clients = atoi(optarg);
            break;
        case 'W':
            cfg->watch_clients = atoi(optarg);
            break;
        case 'H':
            cfg->hold_s = atoi(optarg);
            break;
        case 'r':
            cfg->watch_rate = atoi(optarg);
            break;
        case 'n':
            cfg->ns = optarg;
            break;
        case 'p':
            cfg->prefix = optarg;
            break;
        case 'd':
            if (sscanf(optarg, "%d/%d/%d@%d", &cfg->lease_s, &cfg->renew_s, &cfg->retry_s,
                       &cfg->grant_ms) < 3)
                usage();
            break;
        default:
            usage();
        }
    }
    if (optind != argc - 1 || cfg->elections < 1 || cfg->watchers < 0 || cfg->clients < 1)
        usage();
    cfg->endpoint = argv[optind];
    if (!cfg->watch_clients)
        cfg->watch_clients = cfg->clients;
    /* One watch per Lease per client. */
    int need = (cfg->watchers + cfg->elections - 1) / cfg->elections;
    if (cfg->watch_clients < need)
        cfg->watch_clients = need;
}

/* Every connection is a file descriptor of this process. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static kl_client **clients_new(const char *endpoint, int n)
{
    kl_client **c = calloc((size_t)n, sizeof *c);
    if (!c)
        die("out of memory", NULL);
    for (int i = 0; i < n; i++) {
        kl_error err;
        if (!(c[i] = kl_client_new(endpoint, &err)))
            die("kl_client_new", &err);
    }
    return c;
}

static void lease_name(const struct config *cfg, int i, char *out, size_t n)
{
    snprintf(out, n, "%s-%d", cfg->prefix, i);
}

/* 1: every election started, then waited for in turn; the time to the
 * last. Election i runs on client i % C. */
static int64_t elect_all(const struct config *cfg, kl_client **c)
{
    char lease[64], id[64];
    kl_error err;
    int64_t t0 = now_us();
    for (int i = 0; i < cfg->elections; i++) {
        lease_name(cfg, i, lease, sizeof lease);
        snprintf(id, sizeof id, "%s-leader-%d", cfg->prefix, i);
        kl_election_options o;
        kl_election_options_init(&o);
        o.lease_duration_s = cfg->lease_s;
        o.renew_deadline_s = cfg->renew_s;
        o.retry_period_s = cfg->retry_s;
        o.grant_ms = cfg->grant_ms;
        if (kl_run_election_opts(c[i % cfg->clients], cfg->ns, lease, id, &o, &err) != KL_OK)
            die("kl_run_election", &err);
    }
    /* A leader may lose its term before the last is elected (a short grant
     * on a busy apiserver): counted, and the first reason printed. */
    int failed = 0;
    for (int i = 0; i < cfg->elections; i++) {
        lease_name(cfg, i, lease, sizeof lease);
        if (kl_wait_elected(c[i % cfg->clients], cfg->ns, lease, 120, NULL, &err) != KL_OK &&
            failed++ == 0)
            printf("elect_first_failure=\"%s\"\n", err.message);
    }
    if (failed)
        printf("elect_failed=%d/%d\n", failed, cfg->elections);
    return now_us() - t0;
}

static void on_holder(void *ctx, const char *holder, size_t holder_len, int64_t transitions)
{
    struct watch *w = ctx;
    (void)holder;
    (void)holder_len;
    (void)transitions;
    pthread_mutex_lock(&mu);
    watch_events++;
    if (!w->first_us) {
        w->first_us = now_us();
        watches_started++;
    }
    pthread_mutex_unlock(&mu);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* 2: every watch started; the time to the first callback of all of them
 * (and its p50 and p99). Watch i is of Lease i / WC on client i % WC. */
static void watch_all(const struct config *cfg, kl_client **c, struct watch *w)
{
    char lease[64];
    kl_error err;
    int64_t t0 = now_us();
    for (int i = 0; i < cfg->watchers; i++) {
        if (cfg->watch_rate > 0 && i > 0 && i % 100 == 0) {
            int64_t due = t0 + (int64_t)i * 1000000 / cfg->watch_rate;
            if (due > now_us())
                sleep_us(due - now_us());
        }
        lease_name(cfg, i / cfg->watch_clients, lease, sizeof lease);
        if (kl_watch_holder(c[i % cfg->watch_clients], cfg->ns, lease, on_holder, &w[i], &err) !=
            KL_OK)
            die("kl_watch_holder", &err);
    }
    int64_t started_us = now_us() - t0;
    pthread_mutex_lock(&mu);
    while (watches_started < cfg->watchers && now_us() - t0 < 120 * 1000000LL) {
        pthread_mutex_unlock(&mu);
        sleep_us(1000); /* polling: the figure is in milliseconds */
        pthread_mutex_lock(&mu);
    }
    int got = watches_started;
    pthread_mutex_unlock(&mu);
    int64_t *us = calloc((size_t)cfg->watchers + 1, sizeof *us);
    if (!us)
        die("out of memory", NULL);
    int n = 0;
    pthread_mutex_lock(&mu);
    for (int i = 0; i < cfg->watchers; i++)
        if (w[i].first_us)
            us[n++] = w[i].first_us - t0;
    pthread_mutex_unlock(&mu);
    qsort(us, (size_t)n, sizeof us[0], cmp64);
    printf("watch_started_ms=%.1f\n", (double)started_us / 1000);
    printf("watch_first_event=%d/%d\n", got, cfg->watchers);
    if (n) {
        printf("watch_first_all_ms=%.1f\n", (double)us[n - 1] / 1000);
        printf("watch_first_p50_ms=%.1f\n", (double)us[n / 2] / 1000);
        printf("watch_first_p99_ms=%.1f\n", (double)us[(n * 99 + 99) / 100 - 1] / 1000);
    }
    free(us);
}

/* WHY with each run of digits replaced by "N", cut to REASON_LEN. */
static void reason_key(const char *why, char out[REASON_LEN + 1])
{
    size_t n = 0;
    for (const char *p = why; *p && n < REASON_LEN; p++) {
        if (*p >= '0' && *p <= '9') {
            if (p > why && p[-1] >= '0' && p[-1] <= '9')
                continue;
            out[n++] = 'N';
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

/* 3: the leaders still leading; the reasons of the others, counted. */
static void count_leaders(const struct config *cfg, kl_client **c, const char *label)
{
    char reasons[MAX_REASONS][REASON_LEN + 1];
    int counts[MAX_REASONS] = {0}, n_reasons = 0, valid = 0;
    char lease[64];
    for (int i = 0; i < cfg->elections; i++) {
        kl_error err;
        lease_name(cfg, i, lease, sizeof lease);
        int rc = kl_wait_lost_timeout(c[i % cfg->clients], cfg->ns, lease, 0, &err);
        if (rc == KL_ERR_TIMEOUT) {
            valid++;
            continue;
        }
        /* "leadership of NS/NAME (epoch N) lost: WHY": counted by WHY. */
        const char *why = strstr(err.message, " lost: ");
        char key[REASON_LEN + 1];
        reason_key(why ? why + 7 : err.message, key);
        int r = 0;
        while (r < n_reasons && strcmp(reasons[r], key) != 0)
            r++;
        if (r == n_reasons && n_reasons < MAX_REASONS)
            memcpy(reasons[n_reasons++], key, sizeof key);
        if (r < n_reasons)
            counts[r]++;
    }
    printf("%s=%d/%d\n", label, valid, cfg->elections);
    for (int r = 0; r < n_reasons; r++)
        printf("%s_lost=%d \"%s\"\n", label, counts[r], reasons[r]);
}

int main(int argc, char **argv)
{
    struct config cfg;
    parse(argc, argv, &cfg);
    raise_nofile();
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("elections=%d watchers=%d clients=%d watch_clients=%d durations=%d/%d/%d hold_s=%d "
           "watch_rate=%d leases=%s/%s-N\n",
           cfg.elections, cfg.watchers, cfg.clients, cfg.watch_clients, cfg.lease_s, cfg.renew_s,
           cfg.retry_s, cfg.hold_s, cfg.watch_rate, cfg.ns, cfg.prefix);
    kl_client **ec = clients_new(cfg.endpoint, cfg.clients);
    kl_client **wc = clients_new(cfg.endpoint, cfg.watch_clients);
    struct watch *w = calloc((size_t)cfg.watchers + 1, sizeof *w);
    if (!w)
        die("out of memory", NULL);

    int64_t elect_us = elect_all(&cfg, ec);
    int64_t elected_at = now_us();
    printf("elect_all_ms=%.1f\n", (double)elect_us / 1000);
    if (cfg.watchers) {
        watch_all(&cfg, wc, w);
        count_leaders(&cfg, ec, "leaders_valid_after_watches");
    }
    printf("phase=steady\n");

    int64_t left_us = elected_at + (int64_t)cfg.hold_s * 1000000 - now_us();
    if (left_us > 0)
        sleep_us(left_us);
    count_leaders(&cfg, ec, "leaders_valid");
    pthread_mutex_lock(&mu);
    printf("watch_events=%ld\n", watch_events);
    pthread_mutex_unlock(&mu);

    for (int i = 0; i < cfg.watch_clients; i++)
        kl_client_free(wc[i]);
    for (int i = 0; i < cfg.clients; i++)
        kl_client_free(ec[i]);
    free(wc);
    free(ec);
    free(w);
    printf("phase=done\n");
    return 0;
}
