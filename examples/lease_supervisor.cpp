// k8s_lease_supervisor: the leader-election loop of a master process's
// supervisor, written against the Go wrapper's C API (libk8s_lease_wrapper.h)
// as its C++ users wrote it, and linked with kubelease's
// libk8s_lease_wrapper instead of the Go library. It uses nothing else of
// kubelease: the service is found through $KUBELEASE_ENDPOINT.
//
//   export KUBELEASE_ENDPOINT=http://127.0.0.1:8080
//   k8s_lease_supervisor --namespace default --lease kv-master --identity node-1:8080
//
// The loop: stand by, reading the holder every 200 ms while someone else
// leads; when nobody does, campaign and wait to be elected; lead until the
// leadership is lost; stand by again. A watch logs every change of holder.
// SIGINT and SIGTERM resign (a standby takes over at once) and exit 0.
//
// The leader label, in the users' call order: K8sLeaseRunElection,
// K8sLeaseWaitElected, a warm-up (--warm-up-ms), the loss monitor
// (K8sLeaseWaitLost on a thread of its own), then, while leading, a
// reconciler that keeps the label on this process's Pod through
// K8sPatchPodLabel, trying again every second while the call fails; at the
// end K8sRemovePodLabel, then K8sLeaseCancelElection. kubeleased sets the
// label, and takes it off before the next leader is elected, also if this
// process crashes. The Pod: $POD_NAME and $POD_NAMESPACE (the Downward API)
// with --leader-label KEY=VALUE, or --pod-label POD/KEY=VALUE (a Pod of
// --namespace, or of $POD_NAMESPACE when set).
// --serve PORT answers each TCP connection on PORT with "IDENTITY EPOCH\n",
// the epoch this process acts as leader for at that moment (0: none), as
// kl_replica --serve does (the Service client of the cluster bench).
// --elect-timeout S bounds each wait to be elected (default: the lease
// duration), after which the campaign is cancelled and the loop stands by
// again. client-go's elector trusts a record for a full lease duration from
// when it first saw it, so on the Go wrapper a campaign started when a dead
// holder's record expired needs longer than that.
// --intervals FILE appends "start|end ID PID EPOCH MONO_NS WHY" lines for the
// tests, which check that no two leaders overlap.
#include "libk8s_lease_wrapper.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

namespace
{

struct Config {
    std::string ns = "default";
    std::string lease;
    std::string identity;
    int lease_duration = 15;
    int renew_deadline = 10;
    int retry_period = 2;
    std::string intervals;
    std::string pod_ns, pod, label_key, label_value; // the leader label; pod "": none
    int warm_up_ms = 0;
    int serve_port = 0;    // --serve: 0 for none
    int elect_timeout = 0; // --elect-timeout: 0 for the lease duration
};

Config cfg;
int intervals_fd = -1;
// Shared by the main loop and the signal thread.
pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
bool stopping = false;
long long leading_epoch = 0; // the term this process acts as leader for (0: none)
bool lost = false;           // the loss monitor saw this term end

void say(const char *what, const std::string &detail)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, nullptr);
    localtime_r(&tv.tv_sec, &tm);
    std::printf("%02d:%02d:%02d.%03d %-12s %-11s %s\n", tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(tv.tv_usec / 1000), cfg.identity.c_str(), what, detail.c_str());
    std::fflush(stdout);
}

// The wrapper's errors: -1 with a malloc'ed message the caller frees.
std::string take(char *msg)
{
    std::string s = msg ? msg : "(no message)";
    std::free(msg);
    return s;
}

long long monotonic_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// Called with mu held: one line per interval boundary, in one write.
void record(const char *kind, long long epoch, const char *why)
{
    if (intervals_fd < 0)
        return;
    char line[512];
    int n = std::snprintf(line, sizeof(line), "%s %s %d %lld %lld %s\n", kind, cfg.identity.c_str(),
                          static_cast<int>(getpid()), epoch, monotonic_ns(), why);
    if (n > 0 && write(intervals_fd, line, static_cast<size_t>(n)) != n)
        std::perror("write intervals");
}

// Start acting as leader (false when stopping won the race).
bool begin_leading(long long epoch)
{
    pthread_mutex_lock(&mu);
    bool ok = !stopping;
    if (ok) {
        leading_epoch = epoch;
        record("start", epoch, "elected");
    }
    pthread_mutex_unlock(&mu);
    return ok;
}

void stop_leading(const char *why)
{
    pthread_mutex_lock(&mu);
    if (leading_epoch)
        record("end", leading_epoch, why);
    leading_epoch = 0;
    pthread_mutex_unlock(&mu);
}

bool is_stopping()
{
    pthread_mutex_lock(&mu);
    bool s = stopping;
    pthread_mutex_unlock(&mu);
    return s;
}

// Waits ms milliseconds, or less when stopping.
void pause_ms(int ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long long ns = until.tv_nsec + static_cast<long long>(ms) * 1000000LL;
    until.tv_sec += static_cast<time_t>(ns / 1000000000LL);
    until.tv_nsec = static_cast<long>(ns % 1000000000LL);
    pthread_mutex_lock(&mu);
    while (!stopping && pthread_cond_timedwait(&wake, &mu, &until) == 0)
        ;
    pthread_mutex_unlock(&mu);
}

// The wrapper's functions take char *, as cgo declared them; they do not
// write to the strings.
char *c_str(const std::string &s)
{
    return const_cast<char *>(s.c_str());
}

// SIGINT and SIGTERM are blocked everywhere and taken here: stop acting as
// leader first, then resign.
void *signal_thread(void *arg)
{
    sigset_t *set = static_cast<sigset_t *>(arg);
    int sig = 0;
    sigwait(set, &sig);
    pthread_mutex_lock(&mu);
    stopping = true;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    stop_leading("resigned");
    char *msg = nullptr;
    if (!cfg.pod.empty() &&
        K8sRemovePodLabel(c_str(cfg.pod_ns), c_str(cfg.pod), c_str(cfg.label_key), &msg) != 0)
        say("LABEL-ERROR", take(msg));
    K8sLeaseCancelElection(c_str(cfg.ns), c_str(cfg.lease), nullptr);
    return nullptr;
}

// The loss monitor: returns when the term ends (at its deadline at the
// latest), and the process stops acting as leader at once.
void *loss_monitor(void *)
{
    K8sLeaseWaitLost(c_str(cfg.ns), c_str(cfg.lease), nullptr);
    stop_leading("lost");
    pthread_mutex_lock(&mu);
    lost = true;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    return nullptr;
}

bool is_lost()
{
    pthread_mutex_lock(&mu);
    bool l = lost;
    pthread_mutex_unlock(&mu);
    return l;
}

// The reconciler: while leading, the label is on this process's Pod; a call
// that fails is tried again a second later, as the users' master does.
void keep_label()
{
    bool labelled = false;
    std::string what = cfg.pod_ns + "/" + cfg.pod + " " + cfg.label_key + "=" + cfg.label_value;
    while (!is_lost() && !is_stopping()) {
        if (!labelled) {
            char *msg = nullptr;
            long long t0 = monotonic_ns();
            if (K8sPatchPodLabel(c_str(cfg.pod_ns), c_str(cfg.pod), c_str(cfg.label_key),
                                 c_str(cfg.label_value), &msg) == 0) {
                labelled = true;
                say("LABELLED",
                    what + " (in " + std::to_string((monotonic_ns() - t0) / 1000000) + " ms)");
            } else {
                say("LABEL-ERROR", take(msg));
            }
        }
        pause_ms(1000);
    }
}

// Stands by while another replica holds a live Lease, reading the holder
// every 200 ms. Returns when nobody (or this identity, from an earlier life)
// holds it, or when stopping.
void stand_by()
{
    std::string last = "?";
    while (!is_stopping()) {
        char *holder = nullptr, *msg = nullptr;
        long long epoch = 0;
        int rc = K8sLeaseGetHolder(c_str(cfg.ns), c_str(cfg.lease), &holder, &epoch, &msg);
        std::string now = rc < 0 ? "error: " + take(msg) : holder ? holder : "";
        std::free(holder);
        if (rc == 1 || (rc == 0 && (now.empty() || now == cfg.identity))) {
            say("CAMPAIGN", rc == 1 ? "no Lease yet" : "nobody leads");
            return;
        }
        if (now != last)
            say("STANDBY", rc < 0 ? now : "holder=" + now + " epoch=" + std::to_string(epoch));
        last = now;
        pause_ms(200);
    }
}

// One round: stand by, campaign, lead until lost.
void one_round()
{
    char *msg = nullptr;
    long long epoch = 0;

    stand_by();
    if (is_stopping())
        return;
    if (K8sLeaseRunElection(c_str(cfg.ns), c_str(cfg.lease), c_str(cfg.identity),
                            cfg.lease_duration, cfg.renew_deadline, cfg.retry_period, &msg) != 0) {
        say("ERROR", take(msg));
        pause_ms(1000);
        return;
    }
    if (is_stopping()) // a signal raced with K8sLeaseRunElection
        K8sLeaseCancelElection(c_str(cfg.ns), c_str(cfg.lease), nullptr);
    // Another standby may win: the timeout cancels this election.
    if (K8sLeaseWaitElected(c_str(cfg.ns), c_str(cfg.lease),
                            cfg.elect_timeout ? cfg.elect_timeout : cfg.lease_duration, &epoch,
                            &msg) != 0) {
        say("NOT-ELECTED", take(msg));
        pause_ms(1000); // e.g. the service refused the campaign: do not spin
        return;
    }
    if (!begin_leading(epoch)) {
        K8sLeaseCancelElection(c_str(cfg.ns), c_str(cfg.lease), nullptr);
        return;
    }
    say("LEADER", "epoch=" + std::to_string(epoch));
    pause_ms(cfg.warm_up_ms);
    pthread_mutex_lock(&mu);
    lost = false;
    pthread_mutex_unlock(&mu);
    pthread_t monitor;
    bool monitoring = pthread_create(&monitor, nullptr, loss_monitor, nullptr) == 0;
    if (!monitoring)
        loss_monitor(nullptr); // no thread: serve until the loss, unlabelled
    // Serve as master until the leadership ends, the label kept meanwhile.
    if (!cfg.pod.empty())
        keep_label();
    if (monitoring)
        pthread_join(monitor, nullptr);
    say(is_stopping() ? "RESIGNED" : "LOST", "epoch=" + std::to_string(epoch));
    if (!cfg.pod.empty() &&
        K8sRemovePodLabel(c_str(cfg.pod_ns), c_str(cfg.pod), c_str(cfg.label_key), &msg) != 0)
        say("LABEL-ERROR", take(msg));
    K8sLeaseCancelElection(c_str(cfg.ns), c_str(cfg.lease), nullptr);
}

// --serve: one connection at a time, each given one line and closed.
void *serve_thread(void *arg)
{
    int fd = *static_cast<int *>(arg);
    for (;;) {
        int c = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) {
            if (errno != EINTR && errno != ECONNABORTED) {
                say("ERROR", std::string("--serve: accept: ") + std::strerror(errno));
                pause_ms(100);
            }
            continue;
        }
        pthread_mutex_lock(&mu);
        std::string line = cfg.identity + " " + std::to_string(leading_epoch) + "\n";
        pthread_mutex_unlock(&mu);
        (void)send(c, line.data(), line.size(), MSG_NOSIGNAL);
        close(c);
    }
    return nullptr;
}

// Listens on PORT (every IPv4 address) for --serve; exits 1 if it cannot.
int serve_listen(int port)
{
    struct sockaddr_in a = {};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, reinterpret_cast<struct sockaddr *>(&a), sizeof(a)) < 0 || listen(fd, 128) < 0) {
        std::fprintf(stderr, "k8s_lease_supervisor: --serve %d: %s\n", port, std::strerror(errno));
        std::exit(1);
    }
    return fd;
}

} // namespace

// Runs on the watch's thread, one call at a time.
extern "C" void on_holder_change(void *ctx, const char *holder, size_t holder_len,
                                 int64_t transitions)
{
    (void)ctx;
    say("WATCH", "holder=" + (holder ? std::string(holder, holder_len) : std::string("(none)")) +
                     " epoch=" + std::to_string(static_cast<long long>(transitions)));
}

namespace
{

int parse_int(const char *name, const char *s)
{
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (errno || !end || *end || v < 1 || v > 3600) {
        std::fprintf(stderr, "k8s_lease_supervisor: %s must be 1 to 3600, not \"%s\"\n", name, s);
        std::exit(2);
    }
    return static_cast<int>(v);
}

void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--help") {
            std::printf("usage: k8s_lease_supervisor --lease NAME --identity ID [--namespace NS]\n"
                        "  [--lease-duration S] [--renew-deadline S] [--retry-period S]\n"
                        "  [--intervals FILE] [--pod-label POD/KEY=VALUE]\n"
                        "  [--leader-label KEY=VALUE (the Pod: $POD_NAME, $POD_NAMESPACE)]\n"
                        "  [--warm-up-ms MS] [--serve PORT] [--elect-timeout S]\n"
                        "  (the service: $KUBELEASE_ENDPOINT)\n");
            std::exit(0);
        }
        if (!v) {
            std::fprintf(stderr, "k8s_lease_supervisor: unknown or incomplete option %s\n",
                         a.c_str());
            std::exit(2);
        }
        i++;
        if (a == "--namespace")
            cfg.ns = v;
        else if (a == "--lease")
            cfg.lease = v;
        else if (a == "--identity")
            cfg.identity = v;
        else if (a == "--lease-duration")
            cfg.lease_duration = parse_int("--lease-duration", v);
        else if (a == "--renew-deadline")
            cfg.renew_deadline = parse_int("--renew-deadline", v);
        else if (a == "--retry-period")
            cfg.retry_period = parse_int("--retry-period", v);
        else if (a == "--intervals")
            cfg.intervals = v;
        else if (a == "--pod-label") {
            std::string p = v;
            size_t slash = p.find('/'), eq = p.rfind('=');
            if (slash == std::string::npos || eq == std::string::npos || eq < slash || slash == 0 ||
                eq == slash + 1) {
                std::fprintf(stderr, "k8s_lease_supervisor: --pod-label must be POD/KEY=VALUE\n");
                std::exit(2);
            }
            cfg.pod = p.substr(0, slash);
            cfg.label_key = p.substr(slash + 1, eq - slash - 1);
            cfg.label_value = p.substr(eq + 1);
        } else if (a == "--leader-label") {
            std::string p = v;
            size_t eq = p.rfind('=');
            const char *pod = std::getenv("POD_NAME");
            if (eq == std::string::npos || eq == 0) {
                std::fprintf(stderr, "k8s_lease_supervisor: --leader-label must be KEY=VALUE\n");
                std::exit(2);
            }
            if (pod && pod[0]) { // the Downward API: no Pod name, no label
                cfg.pod = pod;
                cfg.label_key = p.substr(0, eq);
                cfg.label_value = p.substr(eq + 1);
            }
        } else if (a == "--warm-up-ms") {
            cfg.warm_up_ms = parse_int("--warm-up-ms", v);
        } else if (a == "--elect-timeout") {
            cfg.elect_timeout = parse_int("--elect-timeout", v);
        } else if (a == "--serve") {
            char *end = nullptr;
            errno = 0;
            long port = std::strtol(v, &end, 10);
            if (errno || !end || *end || port < 1 || port > 65535) {
                std::fprintf(stderr,
                             "k8s_lease_supervisor: --serve must be a port (1-65535), not \"%s\"\n",
                             v);
                std::exit(2);
            }
            cfg.serve_port = static_cast<int>(port);
        } else {
            std::fprintf(stderr, "k8s_lease_supervisor: unknown option %s\n", a.c_str());
            std::exit(2);
        }
    }
    const char *pod_ns = std::getenv("POD_NAMESPACE");
    cfg.pod_ns = pod_ns && pod_ns[0] ? pod_ns : cfg.ns;
    if (cfg.lease.empty() || cfg.identity.empty()) {
        std::fprintf(stderr, "k8s_lease_supervisor: --lease and --identity are required\n");
        std::exit(2);
    }
}

} // namespace

int main(int argc, char **argv)
{
    char *msg = nullptr;
    sigset_t set;
    pthread_t sig_thread;

    parse_args(argc, argv);
    if (!cfg.intervals.empty() &&
        (intervals_fd =
             open(cfg.intervals.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) {
        std::perror(cfg.intervals.c_str());
        return 1;
    }
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);

    if (K8sLeaseInit(&msg) != 0) {
        std::fprintf(stderr, "k8s_lease_supervisor: %s\n", take(msg).c_str());
        return 1;
    }
    static int serve_fd;
    pthread_t serve;
    if (cfg.serve_port) {
        serve_fd = serve_listen(cfg.serve_port);
        if (pthread_create(&serve, nullptr, serve_thread, &serve_fd) != 0 ||
            pthread_detach(serve) != 0) {
            std::fprintf(stderr, "k8s_lease_supervisor: cannot start the --serve thread\n");
            return 1;
        }
    }
    if (pthread_create(&sig_thread, nullptr, signal_thread, &set) != 0) {
        std::fprintf(stderr, "k8s_lease_supervisor: cannot start the signal thread\n");
        return 1;
    }
    say("START", "lease " + cfg.ns + "/" + cfg.lease + " (lease " +
                     std::to_string(cfg.lease_duration) + " s, renew " +
                     std::to_string(cfg.renew_deadline) + " s, retry " +
                     std::to_string(cfg.retry_period) + " s)");
    if (K8sLeaseWatchHolder(c_str(cfg.ns), c_str(cfg.lease), nullptr, on_holder_change, &msg) != 0)
        say("ERROR", "no watch: " + take(msg));
    while (!is_stopping())
        one_round();
    pthread_join(sig_thread, nullptr);
    K8sLeaseCancelWatch(c_str(cfg.ns), c_str(cfg.lease), nullptr);
    K8sLeaseWaitLost(c_str(cfg.ns), c_str(cfg.lease), nullptr);
    say("EXIT", "stopped");
    return 0;
}
