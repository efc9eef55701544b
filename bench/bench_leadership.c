/* Leadership benchmark through libkubelease's public API, against a
 * kubeleased it starts (--dev, or the apiserver of $KL_BENCH_KUBECONFIG in
 * $KL_BENCH_NAMESPACE with --auth none, as bench_rpc):
 *   1. planned handoff by the leader: from kl_handoff on the leader to the
 *      chosen standby's kl_wait_elected returning (its term confirmed);
 *   2. handoff by an operator (another client, no token): from kl_handoff
 *      to the next leader's kl_wait_elected (the old leader's library
 *      acknowledges in between);
 *   3. health-gated failover: from the leader application's last
 *      kl_health_ok (then it "hangs") to the standby's kl_wait_elected.
 * Each figure over RUNS runs (default 50; at least 20), durations 15/10/2 s.
 * Usage: bench_leadership [KUBELEASED] [RUNS] [HEALTH_DEADLINE_MS]
 * Figures, not assertions. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kubelease.h"

static pid_t server_pid;
static int server_port;
static char server_log[128];
static char endpoint[64];
static const char *ns = "default";

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void die(const char *what, const kl_error *err)
{
    fprintf(stderr, "bench_leadership: %s%s%s\n", what, err ? ": " : "", err ? err->message : "");
    exit(1);
}

static void server_stop(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
        unlink(server_log);
    }
}

static void server_start(const char *bin)
{
    snprintf(server_log, sizeof server_log, "/tmp/kl-bench-lead-%d.log", (int)getpid());
    const char *kc = getenv("KL_BENCH_KUBECONFIG");
    server_pid = fork();
    if (server_pid == 0) {
        int fd = open(server_log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        if (kc && *kc)
            execl(bin, bin, "--listen", "127.0.0.1:0", "--kubeconfig", kc, "--auth", "none",
                  (char *)NULL);
        else
            execl(bin, bin, "--listen", "127.0.0.1:0", "--dev", (char *)NULL);
        _exit(127);
    }
    atexit(server_stop);
    for (int i = 0; i < 500 && !server_port; i++) {
        usleep(20000); /* polling a log file for the port: a benchmark, not a test */
        FILE *f = fopen(server_log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            char *p = strstr(line, "event=started");
            char *q = p ? strstr(p, " port=") : NULL;
            if (q)
                server_port = atoi(q + 6);
        }
        if (f)
            fclose(f);
    }
    if (!server_port)
        die("kubeleased did not start (is it built? pass its path)", NULL);
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", server_port);
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, int64_t *us, int n)
{
    qsort(us, (size_t)n, sizeof us[0], cmp64);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (double)us[i];
    int p99 = (int)((n * 99 + 99) / 100) - 1;
    printf("%-40s n=%-4d p50=%8.2f ms  p99=%8.2f ms  max=%8.2f ms  mean=%8.2f ms\n", what, n,
           (double)us[n / 2] / 1000, (double)us[p99 < 0 ? 0 : p99] / 1000, (double)us[n - 1] / 1000,
           sum / n / 1000);
}

static kl_client *client(int health_deadline_ms)
{
    kl_error err;
    kl_client_options o;
    kl_client_options_init(&o);
    o.health_deadline_ms = health_deadline_ms;
    kl_client *c = kl_client_new_opts(endpoint, &o, &err);
    if (!c)
        die("kl_client_new_opts", &err);
    return c;
}

static void campaign(kl_client *c, const char *lease, const char *id)
{
    kl_error err;
    if (kl_run_election(c, ns, lease, id, 15, 10, 2, &err) != KL_OK)
        die("kl_run_election", &err);
}

static void elected(kl_client *c, const char *lease)
{
    kl_error err;
    if (kl_wait_elected(c, ns, lease, 30, NULL, &err) != KL_OK)
        die("kl_wait_elected", &err);
}

/* Waits until c's election of lease has ended, then campaigns again. */
static void stand_again(kl_client *c, const char *lease, const char *id)
{
    kl_error err;
    if (kl_wait_ended(c, ns, lease, 10000, &err) != KL_OK)
        die("kl_wait_ended", &err);
    campaign(c, lease, id);
}

/* Waits until the service lists n candidates for lease (the standby is
 * registered before the handoff names it). */
static void wait_candidates(kl_client *c, const char *lease, size_t n)
{
    for (int i = 0; i < 5000; i++) {
        kl_candidate_info *rows = NULL;
        size_t got = 0;
        kl_error err;
        if (kl_list_candidates(c, ns, lease, &rows, &got, &err) != KL_OK)
            die("kl_list_candidates", &err);
        kl_free(rows);
        if (got == n)
            return;
        usleep(1000);
    }
    die("the standby never registered", NULL);
}

/* 1 and 2: two replicas hand the term back and forth; by_operator: a third
 * client asks. */
static void bench_handoff(int runs, int by_operator, int64_t *us)
{
    const char *lease = by_operator ? "bench-handoff-op" : "bench-handoff";
    const char *ids[2] = {"bench-a", "bench-b"};
    kl_client *c[2] = {client(0), client(0)}, *op = client(0);
    kl_error err;
    campaign(c[0], lease, ids[0]);
    elected(c[0], lease);
    campaign(c[1], lease, ids[1]);
    for (int i = 0; i < runs; i++) {
        int l = i % 2, s = 1 - l;
        wait_candidates(op, lease, 2);
        int64_t t0 = now_us();
        if (kl_handoff(by_operator ? op : c[l], ns, lease, ids[s], &err) != KL_OK)
            die("kl_handoff", &err);
        elected(c[s], lease);
        us[i] = now_us() - t0;
        if (by_operator && kl_wait_lost(c[l], ns, lease, &err) != KL_ERR_LOST)
            die("the old leader did not lose", &err);
        stand_again(c[l], lease, ids[l]);
    }
    for (int i = 0; i < 2; i++)
        kl_client_free(c[i]);
    kl_client_free(op);
}

struct beat {
    kl_client *c;
    atomic_int stop;
    _Atomic int64_t last_us;
};

static void *beat_thread(void *arg)
{
    struct beat *b = arg;
    while (!atomic_load(&b->stop)) {
        kl_health_ok(b->c);
        atomic_store(&b->last_us, now_us());
        usleep(10000); /* the application's own pace */
    }
    return NULL;
}

/* 3: per run, a gated leader and a standby on a fresh Lease; the leader's
 * application hangs. */
static void bench_health(int runs, int deadline_ms, int64_t *us)
{
    for (int i = 0; i < runs; i++) {
        char lease[64];
        snprintf(lease, sizeof lease, "bench-health-%d", i);
        kl_client *a = client(deadline_ms), *b = client(0);
        struct beat beat = {.c = a};
        pthread_t t;
        kl_health_ok(a);
        atomic_store(&beat.last_us, now_us());
        pthread_create(&t, NULL, beat_thread, &beat);
        campaign(a, lease, "bench-gated");
        elected(a, lease);
        campaign(b, lease, "bench-standby");
        wait_candidates(b, lease, 2);
        atomic_store(&beat.stop, 1);
        pthread_join(t, NULL);
        int64_t hang = atomic_load(&beat.last_us);
        elected(b, lease);
        us[i] = now_us() - hang;
        kl_client_free(a);
        kl_client_free(b);
    }
}

int main(int argc, char **argv)
{
    const char *bin = argc > 1 && argv[1][0] ? argv[1] : getenv("KUBELEASED");
    int runs = argc > 2 ? atoi(argv[2]) : 50;
    int deadline = argc > 3 ? atoi(argv[3]) : 500;
    if (!bin)
        bin = KUBELEASED_PATH;
    if (runs < 20)
        runs = 20;
    if (getenv("KL_BENCH_KUBECONFIG") && getenv("KL_BENCH_NAMESPACE"))
        ns = getenv("KL_BENCH_NAMESPACE");
    server_start(bin);
    int64_t *us = calloc((size_t)runs, sizeof *us);
    /* --dev holds first acquisitions for one grant after start: the first
     * election of each bench waits for that; the runs after do not. */
    bench_handoff(runs, 0, us);
    report("handoff by the leader (kl_handoff)", us, runs);
    bench_handoff(runs, 1, us);
    report("handoff by an operator (no token)", us, runs);
    bench_health(runs, deadline, us);
    char what[80];
    snprintf(what, sizeof what, "health-gated failover (deadline %d ms)", deadline);
    report(what, us, runs);
    free(us);
    return 0;
}
