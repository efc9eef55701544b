/* Test harness of the libk8s_lease_wrapper tests (on top of
 * client_harness.h, which starts kubeleased). The library has one client per
 * process, so a second candidate is a second process: the test program runs
 * itself with `--candidate` (w_candidate_main), which campaigns through the
 * wrapper and reports on stdout. Every process reaches the service through
 * $KUBELEASE_ENDPOINT, set by w_server_start. Header-only: each test program
 * includes it once. */
#ifndef KL_WRAPPER_HARNESS_H
#define KL_WRAPPER_HARNESS_H

#include "client_harness.h"
#include "libk8s_lease_wrapper.h"

/* Durations of the Go wrapper's tests. */
#define W_LD 5
#define W_RD 4
#define W_RP 1

/* Starts kubeleased and points $KUBELEASE_ENDPOINT at it. */
static inline void w_server_start(struct server *s)
{
    h_server_start(s, 0);
    setenv("KUBELEASE_ENDPOINT", s->endpoint, 1);
}

/* Candidate mode: `PROGRAM --candidate NS LEASE IDENTITY TIMEOUT_S` runs one
 * election through the wrapper. Prints "elected EPOCH" once elected and then
 * leads until SIGTERM, which cancels the election (a resignation) and exits 0;
 * prints "not-elected MESSAGE" and exits 3 when K8sLeaseWaitElected fails.
 * Returns (does nothing) without --candidate. */
static inline void w_candidate_main(int argc, char **argv)
{
    sigset_t set;
    char *msg = NULL;
    long long epoch = 0;
    int sig;

    if (argc != 6 || strcmp(argv[1], "--candidate") != 0)
        return;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (K8sLeaseRunElection(argv[2], argv[3], argv[4], W_LD, W_RD, W_RP, &msg) != 0 ||
        K8sLeaseWaitElected(argv[2], argv[3], atoi(argv[5]), &epoch, &msg) != 0) {
        printf("not-elected %s\n", msg ? msg : "(no message)");
        free(msg);
        exit(3);
    }
    printf("elected %lld\n", epoch);
    sigwait(&set, &sig);
    K8sLeaseCancelElection(argv[2], argv[3], NULL);
    K8sLeaseWaitLost(argv[2], argv[3], NULL);
    exit(0);
}

struct candidate {
    pid_t pid;
    char log[256];
};

/* Starts this program as a candidate for lease (output in c->log). */
static inline void w_candidate_start(struct candidate *c, const char *lease, const char *id,
                                     int timeout_s)
{
    char self[512], timeout[16];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "readlink /proc/self/exe: %s\n", strerror(errno));
        exit(1);
    }
    self[n] = 0;
    snprintf(timeout, sizeof(timeout), "%d", timeout_s);
    snprintf(c->log, sizeof(c->log), "%s/kl-test-wrapper-%d-%s.log",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(), id);
    unlink(c->log);
    char *argv[] = {self, (char *)"--candidate", (char *)h_ns, (char *)lease, (char *)id, timeout,
                    NULL};
    c->pid = h_spawn(argv, c->log);
}

/* The candidate's report: 1 and *epoch once it printed "elected EPOCH", -1
 * once it printed "not-elected", else 0. */
static inline int w_candidate_state(const struct candidate *c, long long *epoch)
{
    char line[512];
    int state = 0;
    FILE *f = fopen(c->log, "r");
    if (!f)
        return 0;
    while (state == 0 && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "elected %lld", epoch) == 1)
            state = 1;
        else if (strncmp(line, "not-elected", 11) == 0)
            state = -1;
    }
    fclose(f);
    return state;
}

/* Waits (timeout_ms at most) until the candidate reported; returns its state. */
static inline int w_candidate_wait(const struct candidate *c, long long *epoch, int timeout_ms)
{
    int64_t until = h_now_ms() + timeout_ms;
    int state;
    while ((state = w_candidate_state(c, epoch)) == 0 && h_now_ms() < until)
        h_sleep_ms(20);
    return state;
}

/* Sends sig to the candidate and reaps it; returns its wait status. */
static inline int w_candidate_stop(struct candidate *c, int sig)
{
    int st = 0;
    if (c->pid <= 0)
        return 0;
    kill(c->pid, sig);
    waitpid(c->pid, &st, 0);
    c->pid = 0;
    if (!getenv("KL_KEEP_LOGS"))
        unlink(c->log);
    return st;
}

/* One K8sLeaseGetHolder: its return value, the holder ("" for NULL) and the
 * epoch. Fails the test on -1. */
static inline int w_holder(const char *lease, char *out, size_t n, long long *epoch)
{
    char *holder = NULL, *msg = NULL;
    long long e = -1;
    int rc = K8sLeaseGetHolder((char *)h_ns, (char *)lease, &holder, &e, &msg);
    if (rc < 0)
        fail_msg("K8sLeaseGetHolder(%s): %s", lease, msg ? msg : "(no message)");
    snprintf(out, n, "%s", holder ? holder : "");
    if (epoch)
        *epoch = e;
    free(holder);
    return rc;
}

/* Waits until lease's holder is want ("" for nobody) and returns the time it
 * took in ms, or -1 after timeout_ms. */
static inline int64_t w_wait_holder(const char *lease, const char *want, int timeout_ms)
{
    char holder[300];
    int64_t t0 = h_now_ms();
    for (;;) {
        w_holder(lease, holder, sizeof(holder), NULL);
        if (strcmp(holder, want) == 0)
            return h_now_ms() - t0;
        if (h_now_ms() - t0 > timeout_ms)
            return -1;
        h_sleep_ms(20);
    }
}

/* Fails unless lease's holder is want now; stores its epoch. */
static inline void w_holder_is(const char *lease, const char *want, long long *epoch)
{
    char holder[300];
    assert_int_equal(w_holder(lease, holder, sizeof(holder), epoch), 0);
    if (strcmp(holder, want) != 0)
        fail_msg("holder of %s is \"%s\", want \"%s\"", lease, holder, want);
}

/* Runs an election in this process and waits (15 s) until it is elected. */
static inline long long w_win(const char *lease, const char *id)
{
    char *msg = NULL;
    long long epoch = 0;
    if (K8sLeaseRunElection((char *)h_ns, (char *)lease, (char *)id, W_LD, W_RD, W_RP, &msg) != 0 ||
        K8sLeaseWaitElected((char *)h_ns, (char *)lease, 15, &epoch, &msg) != 0)
        fail_msg("%s could not win %s: %s", id, lease, msg ? msg : "(no message)");
    return epoch;
}

/* Cancels this process's election for lease and waits until it ended. */
static inline void w_resign(const char *lease)
{
    assert_int_equal(K8sLeaseCancelElection((char *)h_ns, (char *)lease, NULL), 0);
    assert_int_equal(K8sLeaseWaitLost((char *)h_ns, (char *)lease, NULL), 0);
}

#endif
