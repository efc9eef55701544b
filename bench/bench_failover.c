/* Crash failover against the grant a leader chooses (docs/design.md,
 * rules 2, 6 and 10), through libkubelease, against a kubeleased it starts
 * (--dev, or the apiserver of $KL_BENCH_KUBECONFIG in $KL_BENCH_NAMESPACE
 * with --auth none, as bench_leadership). Per run, on a fresh Lease: a
 * kl_replica process leads with --grant-ms G (durations 15/10/2 s), a
 * standby of this process campaigns; the leader leads for HOLD_MS, then
 * is SIGKILLed; the figure is the time from the kill to the standby's
 * kl_wait_elected returning (its term confirmed). A leader that lost its
 * term before the kill (a spurious loss: nothing but time was wrong) is
 * counted. For each grant of the list (default 2000 1000 500 250).
 * Usage: bench_failover [KUBELEASED [KL_REPLICA [RUNS [HOLD_MS [GRANT...]]]]]
 * Figures, not assertions. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kubelease.h"

static pid_t server_pid;
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
    fprintf(stderr, "bench_failover: %s%s%s\n", what, err ? ": " : "", err ? err->message : "");
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

/* kubeleased on a port of the kernel's, read back from the log. */
static void server_start(const char *bin)
{
    snprintf(server_log, sizeof server_log, "/tmp/kl-bench-failover-%d.log", (int)getpid());
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
    int port = 0;
    for (int i = 0; i < 500 && !port; i++) {
        usleep(20000); /* polling a log file for the port: a benchmark, not a test */
        FILE *f = fopen(server_log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            char *p = strstr(line, "event=started");
            char *q = p ? strstr(p, " port=") : NULL;
            if (q)
                port = atoi(q + 6);
        }
        if (f)
            fclose(f);
    }
    if (!port)
        die("kubeleased did not start (is it built? pass its path)", NULL);
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", port);
}

/* A kl_replica leading lease with the grant; its output in log. */
static pid_t replica_start(const char *bin, const char *lease, int grant_ms, const char *log)
{
    char grant[16];
    snprintf(grant, sizeof grant, "%d", grant_ms);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(bin, bin, "--endpoint", endpoint, "--namespace", ns, "--lease", lease,
              "--identity", "bench-crasher", "--grant-ms", grant, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int cmp64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void report(int grant_ms, int64_t *us, int n, int spurious)
{
    qsort(us, (size_t)n, sizeof us[0], cmp64);
    int p99 = (int)((n * 99 + 99) / 100) - 1;
    printf("grant %4d ms: crash failover n=%-3d p50=%7.1f ms  p99=%7.1f ms  max=%7.1f ms  "
           "spurious losses %d\n",
           grant_ms, n, (double)us[n / 2] / 1000, (double)us[p99 < 0 ? 0 : p99] / 1000,
           (double)us[n - 1] / 1000, spurious);
    fflush(stdout);
}

/* Whether the replica's log says it lost a term (before the kill). */
static int lost_in(const char *log)
{
    FILE *f = fopen(log, "r");
    char line[1024];
    int lost = 0;
    while (f && fgets(line, sizeof line, f))
        lost |= strstr(line, " LOST ") != NULL;
    if (f)
        fclose(f);
    return lost;
}

static void one_grant(const char *replica, int grant_ms, int runs, int hold_ms, int64_t *us)
{
    kl_error err;
    int spurious = 0;
    char log[160];
    snprintf(log, sizeof log, "/tmp/kl-bench-failover-%d.replica", (int)getpid());
    for (int i = 0; i < runs; i++) {
        char lease[64];
        snprintf(lease, sizeof lease, "bench-failover-%d-%d", grant_ms, i);
        kl_client *obs = kl_client_new(endpoint, &err), *b = kl_client_new(endpoint, &err);
        if (!obs || !b)
            die("kl_client_new", &err);
        pid_t leader = replica_start(replica, lease, grant_ms, log);
        for (int64_t until = now_us() + 30000000;; usleep(5000)) {
            char *holder = NULL;
            int rc = kl_get_holder(obs, ns, lease, &holder, NULL, &err);
            int led = rc == KL_OK && holder && strcmp(holder, "bench-crasher") == 0;
            kl_free(holder);
            if (led)
                break;
            if (now_us() > until)
                die("the replica did not lead", &err);
        }
        if (kl_run_election(b, ns, lease, "bench-standby", 15, 10, 2, &err) != KL_OK)
            die("kl_run_election", &err);
        usleep((useconds_t)hold_ms * 1000);
        spurious += lost_in(log);
        int64_t t0 = now_us();
        kill(leader, SIGKILL);
        waitpid(leader, NULL, 0);
        if (kl_wait_elected(b, ns, lease, 30, NULL, &err) != KL_OK)
            die("kl_wait_elected", &err);
        us[i] = now_us() - t0;
        kl_client_free(b);
        kl_client_free(obs);
    }
    unlink(log);
    report(grant_ms, us, runs, spurious);
}

int main(int argc, char **argv)
{
    const char *bin = argc > 1 && argv[1][0] ? argv[1] : getenv("KUBELEASED");
    const char *replica = argc > 2 && argv[2][0] ? argv[2] : getenv("KL_REPLICA");
    int runs = argc > 3 ? atoi(argv[3]) : 30;
    int hold_ms = argc > 4 ? atoi(argv[4]) : 3000;
    if (!bin)
        bin = KUBELEASED_PATH;
    if (!replica)
        replica = KL_REPLICA_PATH;
    if (runs < 1)
        runs = 1;
    if (getenv("KL_BENCH_KUBECONFIG") && getenv("KL_BENCH_NAMESPACE"))
        ns = getenv("KL_BENCH_NAMESPACE");
    server_start(bin);
    usleep(2500000); /* --dev holds the first acquisitions back for a grant after its start */
    int64_t *us = calloc((size_t)runs, sizeof *us);
    static const int defaults[] = {2000, 1000, 500, 250};
    int n = argc > 5 ? argc - 5 : 4;
    for (int k = 0; k < n; k++)
        one_grant(replica, argc > 5 ? atoi(argv[5 + k]) : defaults[k], runs, hold_ms, us);
    free(us);
    return 0;
}
