/* kl_replica: a demo replica that campaigns for a Lease through kubeleased,
 * the way a real replica's supervisor does: read the holder, campaign, lead
 * until leadership is lost, stand by, and again. Every transition is printed
 * on one line with a timestamp and the fencing epoch.
 *
 *   kl_replica --endpoint http://127.0.0.1:8080 --namespace default \
 *              --lease demo --identity replica-a
 *
 * SIGINT/SIGTERM resign the Lease (a standby takes over at once) and exit 0;
 * SIGUSR1 makes a leader hand over (resign) and stand again.
 *
 * Health-gated leadership (--health-deadline MS): the replica's work thread
 * reports health (kl_health_ok) every MS/4; SIGUSR2 wedges it (and a second
 * SIGUSR2 unwedges it), as a hung application would be, and the library
 * then gives the leadership up within MS and a standby takes over.
 *
 * --serve PORT: answers every TCP connection on PORT with one line,
 * "IDENTITY EPOCH\n" (EPOCH 0 when it does not act as leader), and closes
 * it: what a Service routing to the leader's Pod reaches, so that a client
 * can tell which replica answered and for which term. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "kubelease.h"

struct config {
    const char *endpoint;
    const char *ns;
    const char *lease;
    const char *identity;
    int lease_duration;
    int renew_deadline;
    int retry_period;
    int resign_after; /* seconds of leadership before resigning; 0 = never */
    const char *intervals;
    int track_deadline; /* poll the deadline while leading; log it at the end */
    const char *pod;    /* --pod-label: the Pod kubeleased labels while this replica leads */
    const char *label_key, *label_value;
    int health_deadline_ms; /* 0: leadership not gated on health */
    const char *value;      /* --value: the leader value; NULL: none */
    int grant_ms;           /* --grant-ms: 0 for the service's */
    int serve_port;         /* --serve: 0 for none */
};

static struct config cfg = {NULL, "default", NULL, NULL, 15, 10,   2, 0, NULL,
                            0,    NULL,      NULL, NULL, 0,  NULL, 0, 0};
static atomic_int wedged; /* SIGUSR2: the work thread stops reporting health */
static kl_client *client;
static atomic_int stopping;
static int intervals_fd = -1;
static int exit_code;
/* The epoch this process acts as leader for (0: none); guarded by lead_mu so
 * that a signal's resignation and the main loop record each interval once. */
static pthread_mutex_t lead_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t leading_epoch;
/* With --track-deadline: the latest leadership deadline seen while leading
 * (CLOCK_MONOTONIC ns), 0 when none. A lower bound of the library's own:
 * kl_is_leader reads the clock after we do and counts whole milliseconds.
 * The main thread writes it; the signal thread may read it. */
static _Atomic int64_t seen_deadline;

static void say(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const char *what, const char *fmt, ...)
{
    struct timeval tv;
    struct tm tm;
    char detail[512];
    va_list ap;

    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    printf("%02d:%02d:%02d.%03d %-10s %-9s %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
           (int)(tv.tv_usec / 1000), cfg.identity, what, detail);
}

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Appends one line to the intervals file (one write, O_APPEND: lines of
 * several replicas never interleave). */
static void record(const char *kind, int64_t epoch, const char *why)
{
    char line[512], deadline[32] = "";
    if (intervals_fd < 0)
        return;
    if (cfg.track_deadline && strcmp(kind, "end") == 0)
        snprintf(deadline, sizeof(deadline), " %" PRId64, atomic_load(&seen_deadline));
    int n = snprintf(line, sizeof(line), "%s %s %d %" PRId64 " %" PRId64 " %s%s\n", kind,
                     cfg.identity, (int)getpid(), epoch, monotonic_ns(), why, deadline);
    if (n > 0 && write(intervals_fd, line, (size_t)n) != n)
        perror("write intervals");
}

/* Leadership intervals as this process acts on them: it starts acting after
 * kl_wait_elected returned (start recorded before acting), and stops acting
 * before it resigns (end recorded before kl_cancel_election) or when
 * kl_wait_lost returned (end recorded after). */
static int begin_leading(int64_t epoch)
{
    int ok;
    pthread_mutex_lock(&lead_mu);
    ok = !atomic_load(&stopping);
    if (ok) {
        leading_epoch = epoch;
        atomic_store(&seen_deadline, 0);
        record("start", epoch, "elected");
    }
    pthread_mutex_unlock(&lead_mu);
    return ok;
}

static void stop_leading(const char *why)
{
    pthread_mutex_lock(&lead_mu);
    if (leading_epoch)
        record("end", leading_epoch, why);
    leading_epoch = 0;
    pthread_mutex_unlock(&lead_mu);
}

static void pause_ms(int ms);

/* The application's work, reduced to proving it makes progress: reports
 * health every quarter of the deadline unless wedged (SIGUSR2). */
static void *work_thread(void *arg)
{
    (void)arg;
    while (!atomic_load(&stopping)) {
        if (!atomic_load(&wedged))
            kl_health_ok(client);
        pause_ms(cfg.health_deadline_ms / 4 > 0 ? cfg.health_deadline_ms / 4 : 1);
    }
    return NULL;
}

/* --serve: each connection gets "IDENTITY EPOCH\n", the epoch this process
 * acts as leader for at that moment (0: none), and is closed. One
 * connection at a time: an answer is one write of a few bytes. */
static void *serve_thread(void *arg)
{
    int fd = *(int *)arg;
    for (;;) {
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            say("ERROR", "--serve: accept: %s", strerror(errno));
            pause_ms(100);
            continue;
        }
        pthread_mutex_lock(&lead_mu);
        int64_t epoch = leading_epoch;
        pthread_mutex_unlock(&lead_mu);
        char line[320];
        int n = snprintf(line, sizeof(line), "%s %" PRId64 "\n", cfg.identity, epoch);
        if (n > 0 && (size_t)n < sizeof(line))
            (void)send(c, line, (size_t)n, MSG_NOSIGNAL);
        close(c);
    }
    return NULL;
}

/* Listens on PORT (every IPv4 address) for --serve; exits 1 if it cannot. */
static int serve_listen(int port)
{
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = {htonl(INADDR_ANY)}};
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0) {
        fprintf(stderr, "kl_replica: --serve %d: %s\n", port, strerror(errno));
        exit(1);
    }
    return fd;
}

/* SIGINT, SIGTERM and SIGUSR1 are blocked in every thread and taken here,
 * where calling the library is allowed (it is not from a signal handler).
 * SIGUSR1 ends a leadership in progress ("handoff"); the main loop then
 * stands again. */
static void *signal_thread(void *arg)
{
    sigset_t *set = arg;
    int sig = 0;
    for (;;) {
        sigwait(set, &sig);
        if (sig == SIGUSR2) {
            int w = !atomic_load(&wedged);
            atomic_store(&wedged, w);
            say("HEALTH", "%s", w ? "wedged: no more kl_health_ok" : "healthy again");
            continue;
        }
        if (sig != SIGUSR1)
            break;
        pthread_mutex_lock(&lead_mu);
        int leading = leading_epoch != 0 && !atomic_load(&stopping);
        pthread_mutex_unlock(&lead_mu);
        if (leading) {
            stop_leading("handoff");
            kl_cancel_election(client, cfg.ns, cfg.lease, NULL);
        }
    }
    pthread_mutex_lock(&lead_mu);
    atomic_store(&stopping, 1);
    pthread_mutex_unlock(&lead_mu);
    stop_leading("resigned");
    kl_cancel_election(client, cfg.ns, cfg.lease, NULL);
    return NULL;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: kl_replica --lease NAME --identity ID [options]\n"
            "Campaigns for a Lease through kubeleased and prints each leadership change.\n\n"
            "  --endpoint URL        kubeleased address (default $KUBELEASE_ENDPOINT, else\n"
            "                        http://127.0.0.1:8080)\n"
            "  --namespace NS        namespace of the Lease (default \"default\")\n"
            "  --lease NAME          name of the Lease (required)\n"
            "  --identity ID         this replica's identity (required)\n"
            "  --lease-duration S    lease duration in seconds (default 15)\n"
            "  --renew-deadline S    renew deadline in seconds (default 10)\n"
            "  --retry-period S      retry period in seconds (default 2)\n"
            "  --resign-after S      resign after leading S seconds, then stand again\n"
            "  --intervals FILE      append leadership intervals (CLOCK_MONOTONIC ns) to FILE\n"
            "  --value TEXT          the leader value: what kubeleased tells the observers\n"
            "  --grant-ms MS         the validity of each confirmation (default: the service's)\n"
            "  --health-deadline MS  lead only while the work thread reported health within\n"
            "                        MS ms (kl_health_ok); SIGUSR2 wedges/unwedges it\n"
            "  --track-deadline      while leading, poll the leadership deadline every 2 ms and\n"
            "                        append the last one seen to each \"end\" line of FILE\n"
            "  --pod-label POD/KEY=VALUE  while leading, kubeleased puts label KEY=VALUE on\n"
            "                        Pod POD (this replica's own) and takes it off before the\n"
            "                        next leader is elected\n"
            "  --serve PORT          answer each TCP connection on PORT with \"IDENTITY EPOCH\"\n"
            "                        (EPOCH 0 when not leading) and close it\n"
            "  --print-monotonic     print CLOCK_MONOTONIC in ns and exit (for test scripts)\n"
            "  --help                this text\n");
}

static int parse_int(const char *name, const char *s, int min)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end || v < min || v > 86400) {
        fprintf(stderr, "kl_replica: %s must be an integer >= %d, not \"%s\"\n", name, min, s);
        exit(2);
    }
    return (int)v;
}

/* POD/KEY=VALUE: the Pod is up to the first '/', the key up to the last
 * '=' (a key may have a prefix: POD/example.com/role=leader). */
static void parse_pod_label(char *arg)
{
    char *slash = strchr(arg, '/'), *eq = strrchr(arg, '=');
    if (!slash || !eq || eq < slash || slash == arg || eq == slash + 1) {
        fprintf(stderr, "kl_replica: --pod-label must be POD/KEY=VALUE, not \"%s\"\n", arg);
        exit(2);
    }
    *slash = *eq = '\0';
    cfg.pod = arg;
    cfg.label_key = slash + 1;
    cfg.label_value = eq + 1;
}

static void parse_args(int argc, char **argv)
{
    static const struct option opts[] = {
        {"endpoint", required_argument, NULL, 'e'},
        {"namespace", required_argument, NULL, 'n'},
        {"lease", required_argument, NULL, 'l'},
        {"identity", required_argument, NULL, 'i'},
        {"lease-duration", required_argument, NULL, 'D'},
        {"renew-deadline", required_argument, NULL, 'R'},
        {"retry-period", required_argument, NULL, 'P'},
        {"resign-after", required_argument, NULL, 'r'},
        {"intervals", required_argument, NULL, 'I'},
        {"track-deadline", no_argument, NULL, 'T'},
        {"health-deadline", required_argument, NULL, 'H'},
        {"print-monotonic", no_argument, NULL, 'M'},
        {"pod-label", required_argument, NULL, 'L'},
        {"value", required_argument, NULL, 'V'},
        {"grant-ms", required_argument, NULL, 'G'},
        {"serve", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'e':
            cfg.endpoint = optarg;
            break;
        case 'n':
            cfg.ns = optarg;
            break;
        case 'l':
            cfg.lease = optarg;
            break;
        case 'i':
            cfg.identity = optarg;
            break;
        case 'D':
            cfg.lease_duration = parse_int("--lease-duration", optarg, 1);
            break;
        case 'R':
            cfg.renew_deadline = parse_int("--renew-deadline", optarg, 1);
            break;
        case 'P':
            cfg.retry_period = parse_int("--retry-period", optarg, 1);
            break;
        case 'r':
            cfg.resign_after = parse_int("--resign-after", optarg, 1);
            break;
        case 'I':
            cfg.intervals = optarg;
            break;
        case 'T':
            cfg.track_deadline = 1;
            break;
        case 'L':
            parse_pod_label(optarg);
            break;
        case 'V':
            cfg.value = optarg;
            break;
        case 'G':
            cfg.grant_ms = parse_int("--grant-ms", optarg, 1);
            break;
        case 'S':
            cfg.serve_port = parse_int("--serve", optarg, 1);
            if (cfg.serve_port > 65535) {
                fprintf(stderr, "kl_replica: --serve must be a port (1-65535), not \"%s\"\n",
                        optarg);
                exit(2);
            }
            break;
        case 'H':
            cfg.health_deadline_ms = parse_int("--health-deadline", optarg, 1);
            break;
        case 'M':
            printf("%" PRId64 "\n", monotonic_ns());
            exit(0);
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (optind < argc || !cfg.lease || !cfg.identity) {
        fprintf(stderr, "kl_replica: %s\n",
                optind < argc ? "unexpected argument" : "--lease and --identity are required");
        usage(stderr);
        exit(2);
    }
}

/* Pauses about ms milliseconds unless stopping (used only between retries
 * after errors, where the service gave no event to wait for). */
static void pause_ms(int ms)
{
    for (int waited = 0; waited < ms && !atomic_load(&stopping); waited += 50) {
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
    }
}

/* Waits as kl_wait_lost_timeout (timeout_ms < 0: as kl_wait_lost). With
 * --track-deadline it waits in 2 ms slices and notes the deadline after
 * each, so that the intervals file can tell until when this process was
 * leader if it was paused (SIGSTOP) across its deadline. */
static int wait_lost(int timeout_ms, kl_error *err)
{
    if (!cfg.track_deadline)
        return timeout_ms < 0 ? kl_wait_lost(client, cfg.ns, cfg.lease, err)
                              : kl_wait_lost_timeout(client, cfg.ns, cfg.lease, timeout_ms, err);
    int64_t until = timeout_ms < 0 ? INT64_MAX : monotonic_ns() + (int64_t)timeout_ms * 1000000;
    for (;;) {
        int64_t now = monotonic_ns(), valid = 0;
        /* The library leads while its clock, in whole ms, is below its
         * deadline: one ms less keeps this a lower bound. */
        if (kl_is_leader(client, cfg.ns, cfg.lease, &valid, NULL) == 1 &&
            now + (valid - 1) * 1000000 > atomic_load(&seen_deadline))
            atomic_store(&seen_deadline, now + (valid - 1) * 1000000);
        int slice = now >= until ? 0 : (until - now > 2000000 ? 2 : 1);
        int rc = kl_wait_lost_timeout(client, cfg.ns, cfg.lease, slice, err);
        if (rc != KL_ERR_TIMEOUT || monotonic_ns() >= until)
            return rc;
    }
}

/* The library's log, from KL_LOG_INFO up: what it decided or learnt (a
 * refused leader label, a lost term and why, a broken stream). It runs with
 * the library's lock held: it only prints. */
static void library_log(void *ctx, int level, const char *message)
{
    (void)ctx;
    if (level >= KL_LOG_INFO)
        say("LOG", "%s: %s", level >= KL_LOG_WARN ? "warn" : "info", message);
}

/* One round: stand, lead until lost. Returns 0 to go on, 1 to stop. */
static int one_term(void)
{
    kl_error err;
    char *holder = NULL;
    int64_t epoch = 0, valid = 0;

    int rc = kl_get_holder(client, cfg.ns, cfg.lease, &holder, &epoch, &err);
    if (rc < 0)
        say("STANDBY", "holder unknown: %s", err.message);
    else
        say("STANDBY", "holder=%s epoch=%" PRId64 "%s", holder ? holder : "(none)", epoch,
            rc == KL_NOT_FOUND ? " (no Lease yet)" : "");
    kl_free(holder);

    kl_election_options eo;
    kl_election_options_init(&eo);
    eo.lease_duration_s = cfg.lease_duration;
    eo.renew_deadline_s = cfg.renew_deadline;
    eo.retry_period_s = cfg.retry_period;
    eo.pod_name = cfg.pod;
    eo.pod_label_key = cfg.label_key;
    eo.pod_label_value = cfg.label_value;
    eo.value = cfg.value;
    eo.value_len = cfg.value ? strlen(cfg.value) : 0;
    eo.grant_ms = cfg.grant_ms;
    rc = kl_run_election_opts(client, cfg.ns, cfg.lease, cfg.identity, &eo, &err);
    if (rc != KL_OK) {
        say("ERROR", "%s", err.message);
        if (rc == KL_ERR_INVALID_ARGUMENT) {
            exit_code = 2;
            return 1;
        }
        pause_ms(1000);
        return 0;
    }
    if (atomic_load(&stopping)) /* a signal raced with kl_run_election */
        kl_cancel_election(client, cfg.ns, cfg.lease, NULL);
    rc = kl_wait_elected(client, cfg.ns, cfg.lease, -1, &epoch, &err);
    if (rc != KL_OK) {
        if (atomic_load(&stopping))
            return 1;
        say("NOT-ELECTED", "%s", err.message);
        pause_ms(1000);
        return 0;
    }
    if (!begin_leading(epoch)) {
        kl_cancel_election(client, cfg.ns, cfg.lease, NULL);
        return 1;
    }
    int64_t now = monotonic_ns();
    if (kl_is_leader(client, cfg.ns, cfg.lease, &valid, NULL) == 1)
        atomic_store(&seen_deadline, now + (valid - 1) * 1000000);
    say("LEADER", "epoch=%" PRId64 " (valid for %" PRId64 " ms)", epoch, valid);

    if (cfg.resign_after > 0) {
        rc = wait_lost(cfg.resign_after * 1000, &err);
        if (rc == KL_ERR_TIMEOUT) {
            stop_leading("resigned");
            kl_cancel_election(client, cfg.ns, cfg.lease, NULL);
            say("RESIGNED", "epoch=%" PRId64 " after %d s as leader", epoch, cfg.resign_after);
            return 0;
        }
    } else {
        rc = wait_lost(-1, &err);
    }
    if (rc == KL_OK) {
        stop_leading("resigned");
        say("RESIGNED", "epoch=%" PRId64, epoch);
        return atomic_load(&stopping) ? 1 : 0;
    }
    stop_leading("lost");
    say("LOST", "epoch=%" PRId64 ": %s", epoch, err.message);
    return atomic_load(&stopping) ? 1 : 0;
}

int main(int argc, char **argv)
{
    kl_error err;
    sigset_t set;
    pthread_t sig_thread;

    setvbuf(stdout, NULL, _IOLBF, 0);
    parse_args(argc, argv);
    if (cfg.intervals) {
        intervals_fd = open(cfg.intervals, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (intervals_fd < 0) {
            fprintf(stderr, "kl_replica: cannot open %s: %s\n", cfg.intervals, strerror(errno));
            return 1;
        }
    }
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    kl_client_options opts;
    kl_client_options_init(&opts);
    opts.health_deadline_ms = cfg.health_deadline_ms;
    opts.log = library_log;
    client = kl_client_new_opts(cfg.endpoint, &opts, &err);
    if (!client) {
        fprintf(stderr, "kl_replica: %s\n", err.message);
        return 1;
    }
    if (pthread_create(&sig_thread, NULL, signal_thread, &set) != 0) {
        fprintf(stderr, "kl_replica: cannot start the signal thread\n");
        kl_client_free(client);
        return 1;
    }
    static int serve_fd;
    pthread_t serve;
    if (cfg.serve_port) {
        serve_fd = serve_listen(cfg.serve_port);
        if (pthread_create(&serve, NULL, serve_thread, &serve_fd) != 0 ||
            pthread_detach(serve) != 0) {
            fprintf(stderr, "kl_replica: cannot start the --serve thread\n");
            return 1;
        }
    }
    pthread_t work;
    int working = cfg.health_deadline_ms > 0 && pthread_create(&work, NULL, work_thread, NULL) == 0;
    say("START", "lease %s/%s via %s (lease %d s, renew %d s, retry %d s)", cfg.ns, cfg.lease,
        cfg.endpoint ? cfg.endpoint : "the default endpoint", cfg.lease_duration,
        cfg.renew_deadline, cfg.retry_period);
    while (!atomic_load(&stopping))
        if (one_term())
            break;
    /* The signal thread may still be inside the library: let it finish (or
     * wake it) before freeing the client. */
    if (!atomic_load(&stopping))
        pthread_kill(sig_thread, SIGTERM);
    pthread_join(sig_thread, NULL);
    if (working)
        pthread_join(work, NULL); /* it stops once stopping is set */
    kl_client_free(client);
    say("EXIT", exit_code ? "stopped after an error" : "resigned and stopped");
    return exit_code;
}
