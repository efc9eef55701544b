/* kubeleased: the process. Its options come from flags.c (the command line
 * and the KUBELEASED_* environment); this file checks them together and
 * handles the signals; service.c starts and stops the rest. A wrong flag or
 * value stops start-up with one line saying what is wrong (exit 2).
 * SIGTERM/SIGINT: stop accepting, end streams with a clean end-of-stream
 * frame (campaigns get Lost SHUTDOWN and keep their Leases, so that their
 * holders resume on another replica), exit 0. Who may call: --auth
 * (docs/design.md, rule 7). */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/metrics.h"
#include "engine/engine.h"
#include "flags.h"
#include "service.h"

#define EXIT_USAGE 2

typedef int (*item_check)(const char *item, char *msg, size_t msg_len);

static int check_namespace(const char *ns, char *msg, size_t msg_len)
{
    return engine_validate_lease_ref(ns, "x", msg, msg_len);
}

static int check_label_key(const char *key, char *msg, size_t msg_len)
{
    engine_pod_label l = {.ns = "x", .pod = "x"};
    if (strlen(key) >= sizeof l.key) {
        snprintf(msg, msg_len, "pod_label_key: longer than %zu bytes", sizeof l.key - 1);
        return -1;
    }
    snprintf(l.key, sizeof l.key, "%s", key);
    return engine_validate_pod_label(&l, msg, msg_len);
}

/* Splits a comma-separated flag value into a NULL-terminated array and
 * checks each item; none, when set, is the error for an empty list. One
 * allocation (free it once): the pointers, then the items they point into.
 * NULL after saying what is wrong. */
static char **split_list(const char *flag, const char *list, item_check check, const char *none)
{
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    char **out = calloc(1, (n + 1) * sizeof *out + strlen(list) + 1);
    if (!out) {
        fprintf(stderr, "kubeleased: out of memory\n");
        return NULL;
    }
    char *items = strcpy((char *)(out + n + 1), list);
    size_t k = 0;
    for (char *tok = strtok(items, ","); tok; tok = strtok(NULL, ",")) {
        char msg[256];
        if (check(tok, msg, sizeof msg) != 0) {
            fprintf(stderr, "kubeleased: %s: %s\n", flag, msg);
            free(out);
            return NULL;
        }
        out[k++] = tok;
    }
    if (k == 0 && none) {
        fprintf(stderr, "kubeleased: %s: %s\n", flag, none);
        free(out);
        return NULL;
    }
    return out;
}

#define TERM_KEY_MIN 32
#define TERM_KEY_MAX 4096
/* Below this estimate (term_key_bits) a key is warned about. */
#define TERM_KEY_WEAK_BITS 96

/* The term key is a secret (docs/design.md, rule 8): as PostgreSQL checks
 * its key file, fd must be a regular file owned by kubeleased's user with
 * no access for group or others (0600 or less), or owned by root and
 * readable by a group, kubeleased's, at most (0640 or less: how a
 * Kubernetes Secret volume shows it, root-owned with the pod's fsGroup).
 * Returns 0, or -1 after saying what is wrong and how to fix it. */
static int check_term_key_mode(const char *path, int fd)
{
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fprintf(stderr, "kubeleased: --term-key-file: cannot stat %s: %s\n", path, strerror(errno));
        return -1;
    }
    unsigned mode = (unsigned)st.st_mode & 07777;
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "kubeleased: --term-key-file: %s is not a regular file\n", path);
        return -1;
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        fprintf(stderr,
                "kubeleased: --term-key-file: %s is owned by uid %u, neither kubeleased's user "
                "(uid %u) nor root: chown it\n",
                path, (unsigned)st.st_uid, (unsigned)geteuid());
        return -1;
    }
    if (st.st_uid == geteuid() && (mode & 077)) {
        fprintf(stderr,
                "kubeleased: --term-key-file: %s has mode %04o: others than its owner may use "
                "the key; chmod 600 %s\n",
                path, mode, path);
        return -1;
    }
    if (st.st_uid != geteuid() && (mode & 0137)) {
        fprintf(stderr,
                "kubeleased: --term-key-file: %s has mode %04o: a root-owned key may be "
                "readable by its group at most; chmod 640 %s (or 440, as the chart mounts it)\n",
                path, mode, path);
        return -1;
    }
    return 0;
}

/* An estimate of the key's entropy in bits, for a warning only: its
 * length times the Shannon entropy of its byte frequencies, and 0 for a
 * key that repeats a part of at most half its length ("abcabc..."). 32
 * random bytes estimate about 150 bits, 32 random hex digits about 120, 32
 * times 'a' 0. */
static double term_key_bits(const uint8_t *key, size_t n)
{
    for (size_t period = 1; period <= n / 2; period++) {
        size_t i = period;
        while (i < n && key[i] == key[i - period])
            i++;
        if (i == n)
            return 0;
    }
    unsigned counts[256] = {0};
    for (size_t i = 0; i < n; i++)
        counts[key[i]]++;
    double h = 0;
    for (int b = 0; b < 256; b++)
        if (counts[b]) {
            double p = (double)counts[b] / (double)n;
            h -= p * log2(p);
        }
    return h * (double)n;
}

/* Reads --term-key-file into key (trailing white space, such as the newline
 * of a file written by hand, is not part of it). Returns its length, or -1
 * after saying what is wrong. */
static ssize_t read_term_key(const char *path, uint8_t key[TERM_KEY_MAX + 1])
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kubeleased: --term-key-file: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (check_term_key_mode(path, fileno(f)) != 0) {
        fclose(f);
        return -1;
    }
    size_t n = fread(key, 1, TERM_KEY_MAX + 1, f);
    fclose(f);
    while (n > 0 &&
           (key[n - 1] == '\n' || key[n - 1] == '\r' || key[n - 1] == ' ' || key[n - 1] == '\t'))
        n--;
    if (n < TERM_KEY_MIN || n > TERM_KEY_MAX) {
        fprintf(stderr,
                "kubeleased: --term-key-file: %s holds %zu bytes; the key must be %d to %d "
                "(e.g. (umask 077; head -c 32 /dev/urandom | base64 > FILE))\n",
                path, n, TERM_KEY_MIN, TERM_KEY_MAX);
        return -1;
    }
    return (ssize_t)n;
}

/* --auth, --token-audience, --identity-policy, --review-rate,
 * --review-rate-per-ip and --metrics-auth into cfg. Returns 0, or -1
 * after saying what is wrong. */
static int configure_auth(const options *o, http_config *cfg)
{
    const char *mode = o->auth ? o->auth : o->dev ? "none" : "kubernetes";
    if (strcmp(mode, "kubernetes") == 0) {
        cfg->auth_mode = HTTP_AUTH_KUBERNETES;
    } else if (strcmp(mode, "none") == 0) {
        cfg->auth_mode = HTTP_AUTH_NONE;
    } else {
        fprintf(stderr, "kubeleased: --auth: \"%s\" is not kubernetes or none\n", mode);
        return -1;
    }
    if (o->dev && cfg->auth_mode == HTTP_AUTH_KUBERNETES) {
        fprintf(stderr, "kubeleased: --auth kubernetes needs a cluster to review tokens: drop "
                        "--dev, or use --auth none\n");
        return -1;
    }
    static const char *const policies[] = {"any", "serviceaccount", "pod"};
    size_t i = 0;
    while (i < 3 && strcmp(o->identity_policy, policies[i]) != 0)
        i++;
    if (i == 3) {
        fprintf(stderr, "kubeleased: --identity-policy: \"%s\" is not any, serviceaccount or pod\n",
                o->identity_policy);
        return -1;
    }
    if (i != 0 && cfg->auth_mode == HTTP_AUTH_NONE) {
        fprintf(stderr,
                "kubeleased: --identity-policy %s needs --auth kubernetes (without it "
                "callers are unknown)\n",
                o->identity_policy);
        return -1;
    }
    cfg->auth.identity_policy = (auth_identity_policy)i;
    cfg->auth.audience = o->token_audience;
    cfg->auth.review_rate = (unsigned)o->review_rate;
    cfg->auth.review_rate_per_ip = (unsigned)o->review_rate_per_ip;
    const char *metrics = o->metrics_auth                          ? o->metrics_auth
                          : cfg->auth_mode == HTTP_AUTH_KUBERNETES ? "kubernetes"
                                                                   : "none";
    if (strcmp(metrics, "kubernetes") != 0 && strcmp(metrics, "none") != 0) {
        fprintf(stderr, "kubeleased: --metrics-auth: \"%s\" is not kubernetes or none\n", metrics);
        return -1;
    }
    cfg->auth.metrics = strcmp(metrics, "kubernetes") == 0;
    if (cfg->auth.metrics && cfg->auth_mode == HTTP_AUTH_NONE) {
        fprintf(stderr, "kubeleased: --metrics-auth kubernetes needs --auth kubernetes (with "
                        "--auth none every RPC, ListLeases among them, is open anyway)\n");
        return -1;
    }
    return 0;
}

/* Checks what single flags cannot and fills in cfg. Returns 0, or -1 after
 * saying what is wrong. *namespaces and *pod_label_keys (free them) back
 * cfg's lists; key backs cfg's term key. */
/* The checks of single flags and pairs of flags that need no allocation. */
static int check_flags(const options *o, log_level *level)
{
    if (log_parse_level(o->log_level, level) != 0) {
        fprintf(stderr, "kubeleased: --log-level: \"%s\" is not debug, info, warn or error\n",
                o->log_level);
        return -1;
    }
    if (o->dev && (o->kubeconfig || o->context || o->sa_dir)) {
        fprintf(stderr, "kubeleased: --dev uses the in-memory store; drop --kubeconfig, "
                        "--context and --sa-dir\n");
        return -1;
    }
    if (!o->tls_cert_file != !o->tls_key_file) {
        fprintf(stderr,
                "kubeleased: --tls-cert-file and --tls-key-file go together; %s is "
                "missing\n",
                o->tls_cert_file ? "--tls-key-file" : "--tls-cert-file");
        return -1;
    }
    char err[512];
    if (http_listen_check(o->listen, err, sizeof err) != 0) {
        fprintf(stderr, "kubeleased: --listen: %s\n", err);
        return -1;
    }
    if (o->tls_cert_file && http_tls_check(o->tls_cert_file, o->tls_key_file, err, sizeof err)) {
        fprintf(stderr, "kubeleased: --tls-cert-file, --tls-key-file: %s\n", err);
        return -1;
    }
    if (o->ops_listen && http_listen_check(o->ops_listen, err, sizeof err) != 0) {
        fprintf(stderr, "kubeleased: --ops-listen: %s\n", err);
        return -1;
    }
    return 0;
}

static int configure(const options *o, service_config *cfg, log_level *level, char ***namespaces,
                     char ***pod_label_keys, uint8_t key[TERM_KEY_MAX + 1])
{
    if (check_flags(o, level) != 0)
        return -1;
    ssize_t key_len = 0;
    if (o->term_key_file && (key_len = read_term_key(o->term_key_file, key)) < 0)
        return -1;
    *namespaces = NULL;
    if (o->namespaces) {
        *namespaces =
            split_list("--namespaces", o->namespaces, check_namespace, "no namespace given");
        if (!*namespaces)
            return -1;
    }
    *pod_label_keys = NULL;
    if (o->pod_label_keys && !(*pod_label_keys = split_list("--pod-label-keys", o->pod_label_keys,
                                                            check_label_key, NULL))) {
        free(*namespaces);
        *namespaces = NULL;
        return -1;
    }
    *cfg = (service_config){
        .dev = o->dev,
        .kube = {.kubeconfig = o->kubeconfig,
                 .context = o->context,
                 .sa_dir = o->sa_dir,
                 .allow_token_over_http = o->allow_token_over_http},
        .max_grant_ms = o->max_grant_ms,
        .max_leases = (int)o->max_leases,
        .max_leases_per_caller = (int)o->max_leases_per_caller,
        .max_leases_per_namespace = (int)o->max_leases_per_namespace,
        .events = o->events,
        .pod_label_keys = (const char *const *)*pod_label_keys,
        .term_key = key_len ? key : NULL,
        .term_key_len = (size_t)key_len,
        .http = {.listen = o->listen,
                 .max_connections = (unsigned)o->max_connections,
                 .max_per_ip = (unsigned)o->max_per_ip,
                 .max_body_bytes = (size_t)o->max_body_bytes,
                 .max_header_bytes = (size_t)o->max_header_bytes,
                 .read_timeout_ms = (unsigned)o->read_timeout_s * 1000,
                 .first_request_timeout_ms = (unsigned)o->first_request_timeout_s * 1000,
                 .namespaces = (const char *const *)*namespaces,
                 .pod_ip_check = !o->dev,
                 .ops_listen = o->ops_listen,
                 .tls_cert_file = o->tls_cert_file,
                 .tls_key_file = o->tls_key_file},
    };
    if (configure_auth(o, &cfg->http) != 0) {
        free(*namespaces);
        *namespaces = NULL;
        free(*pod_label_keys);
        *pod_label_keys = NULL;
        return -1;
    }
    return 0;
}

static void set_build_info(void)
{
    char v[64], labels[96];
    metrics_label_escape(KL_VERSION_STRING, v, sizeof v);
    snprintf(labels, sizeof labels, "version=\"%s\"", v);
    metrics_set("kubelease_build_info", labels, 1);
}

/* SIGTERM and SIGINT are taken synchronously by this thread (sigwait):
 * blocked here, before any thread starts, so that every thread inherits the
 * mask. */
static void block_signals(sigset_t *sigs)
{
    sigemptyset(sigs);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* One descriptor per client connection: allow as many as we may. */
static void raise_fd_limit(void)
{
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
}

/* Writes the port to path atomically (a temp file renamed into place), so a
 * reader never sees a partial line. */
static int write_port_file(const char *path, unsigned port)
{
    size_t n = strlen(path) + 16;
    char *tmp = malloc(n);
    if (!tmp)
        return -1;
    snprintf(tmp, n, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int rc = -1;
    if (f) {
        int ok = fprintf(f, "%u\n", port) > 0;
        if (fclose(f) == 0 && ok && rename(tmp, path) == 0)
            rc = 0;
        else
            unlink(tmp);
    }
    free(tmp);
    return rc;
}

/* glibc gives each thread that allocates an arena of its own, up to eight
 * per core; kubeleased's allocating threads (the acceptor, two daemons'
 * workers, the engine, the timer) each leave their arena's free memory
 * resident, some 6 MB at 11,000 connections (bench/README.md, "Memory").
 * Two arenas keep the engine from contending with the HTTP threads on one
 * lock. MALLOC_ARENA_MAX, when set, is left to decide. */
static void bound_malloc_arenas(void)
{
    if (!getenv("MALLOC_ARENA_MAX"))
        mallopt(M_ARENA_MAX, 2);
}

/* What start-up says about the term key: a weak one (key_bits, -1 for
 * none), or none at all against a cluster. */
static void warn_term_key(const options *o, double key_bits)
{
    if (key_bits >= 0 && key_bits < TERM_KEY_WEAK_BITS)
        log_event(LOG_WARN, "term_key_weak", "file=%s estimated_bits=%.0f msg=%s",
                  log_q(o->term_key_file), key_bits,
                  log_q("the term key looks like it has little entropy (repeated or few "
                        "distinct bytes): whoever guesses it can forge term tokens; make one "
                        "with (umask 077; head -c 32 /dev/urandom | base64 > FILE)"));
    if (!o->term_key_file && !o->dev)
        log_event(LOG_WARN, "term_key_random", "msg=%s",
                  log_q("no --term-key-file: term tokens use a random key of this "
                        "process, so a term cannot be resumed on another replica or "
                        "after a restart; give every replica the same key file"));
}

int main(int argc, char **argv)
{
    bound_malloc_arenas();
    options o;
    flags_defaults(&o);
    if (flags_parse(&o, argc, argv) != 0)
        return EXIT_USAGE;
    if (o.help) {
        flags_usage(stdout);
        return 0;
    }
    if (o.version) {
        printf("kubeleased %s\n", KL_VERSION_STRING);
        return 0;
    }
    service_config cfg;
    log_level level;
    char **namespaces = NULL, **pod_label_keys = NULL;
    static uint8_t term_key[TERM_KEY_MAX + 1];
    if (configure(&o, &cfg, &level, &namespaces, &pod_label_keys, term_key) != 0)
        return EXIT_USAGE;
    /* A guess at the key's strength, for a warning once started. */
    double key_bits = cfg.term_key_len ? term_key_bits(term_key, cfg.term_key_len) : -1;
    log_set_level(level);
    metrics_init();
    set_build_info();
    sigset_t sigs;
    block_signals(&sigs);
    raise_fd_limit();

    char err[512];
    service *svc = NULL;
    service_status st = service_start(&cfg, &svc, err, sizeof err);
    explicit_bzero(term_key, sizeof term_key); /* the engine has its own copy */
    int rc = st == SERVICE_BAD_CONFIG ? EXIT_USAGE : 1;
    if (st != SERVICE_OK) {
        fprintf(stderr, "kubeleased: %s\n", err);
        goto done;
    }
    if (o.port_file && write_port_file(o.port_file, (unsigned)service_port(svc)) != 0) {
        fprintf(stderr, "kubeleased: --port-file: cannot write %s: %s\n", o.port_file,
                strerror(errno));
        goto done;
    }
    char ops[32] = "";
    if (o.ops_listen)
        snprintf(ops, sizeof ops, " ops_port=%u", (unsigned)service_ops_port(svc));
    bool auth = cfg.http.auth_mode == HTTP_AUTH_KUBERNETES;
    log_event(LOG_INFO, "started",
              "version=%s listen=%s port=%u%s store=%s namespaces=%s max_connections=%ld "
              "max_body_bytes=%ld read_timeout_s=%ld auth=%s token_audience=%s "
              "identity_policy=%s tls=%s pod_label_keys=%s events=%s",
              KL_VERSION_STRING, log_q(o.listen), (unsigned)service_port(svc), ops,
              service_store_kind(svc), log_q(o.namespaces ? o.namespaces : "all"),
              o.max_connections, o.max_body_bytes, o.read_timeout_s, auth ? "kubernetes" : "none",
              log_q(o.token_audience), log_q(o.identity_policy), o.tls_cert_file ? "true" : "false",
              log_q(o.pod_label_keys ? o.pod_label_keys : ""), o.events ? "true" : "false");
    if (auth)
        log_event(LOG_INFO, "auth_limits", "metrics_auth=%s review_rate=%ld review_rate_per_ip=%ld",
                  cfg.http.auth.metrics ? "kubernetes" : "none", o.review_rate,
                  o.review_rate_per_ip);
    if (!auth && !o.dev)
        log_event(LOG_WARN, "auth_disabled", "msg=%s",
                  log_q("--auth none against a cluster: ANY client that reaches this port may "
                        "campaign for, confirm, resign, read and list ANY Lease kubeleased "
                        "serves, and depose any leader. Use --auth kubernetes outside of "
                        "tests."));
    warn_term_key(&o, key_bits);

    int sig = 0;
    sigwait(&sigs, &sig);
    log_event(LOG_INFO, "shutdown", "signal=%s", sig == SIGTERM ? "TERM" : "INT");
    rc = 0;
done:
    service_stop(svc); /* stops accepting, ends streams, keeps held Leases */
    free(namespaces);
    free(pod_label_keys);
    if (rc == 0)
        log_event(LOG_INFO, "stopped", "%s", "");
    return rc;
}
