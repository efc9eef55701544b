/* kubeleased: flags and signals; service.c starts and stops the rest.
 *
 * Every flag can also be set as an environment variable KUBELEASED_<NAME>
 * (--max-body-bytes -> KUBELEASED_MAX_BODY_BYTES); the command line wins. A
 * wrong flag or value stops start-up with one line saying what is wrong
 * (exit 2). SIGTERM/SIGINT: stop accepting, end streams with a clean
 * end-of-stream frame (campaigns get Lost SHUTDOWN and keep their Leases, so
 * that their holders resume on another replica), exit 0. Who may call:
 * --auth (docs/design.md, rule 7). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/log.h"
#include "core/metrics.h"
#include "engine/engine.h"
#include "service.h"

#define EXIT_USAGE 2

typedef struct options {
    const char *listen;
    const char *port_file;
    bool dev;
    const char *kubeconfig;
    const char *context;
    const char *sa_dir;
    bool allow_token_over_http;
    const char *log_level;
    const char *namespaces;
    const char *ops_listen;
    long max_connections;
    long max_per_ip;
    long max_body_bytes;
    long read_timeout_s;
    long max_grant_ms;
    long max_leases;
    const char *auth;
    const char *token_audience;
    const char *identity_policy;
    const char *term_key_file;
    const char *tls_cert_file;
    const char *tls_key_file;
    bool help, version;
} options;

typedef enum flag_kind { FLAG_BOOL, FLAG_STRING, FLAG_LONG } flag_kind;

typedef struct flag {
    const char *name; /* without "--" */
    flag_kind kind;
    size_t offset;
    long min, max; /* FLAG_LONG */
    const char *arg;
    const char *deflt;
    const char *help;
} flag;

#define OPT(field) offsetof(options, field)

static const flag flags[] = {
    {"listen", FLAG_STRING, OPT(listen), 0, 0, "ADDR:PORT", "0.0.0.0:8080",
     "address and port to serve on ([::1]:8080 for IPv6; port 0 picks a free one)"},
    {"ops-listen", FLAG_STRING, OPT(ops_listen), 0, 0, "ADDR:PORT", "none",
     "also serve /livez, /readyz, /metrics and the status page here, with connection slots "
     "of their own, so that probes and scrapes are answered even when clients hold every "
     "--max-connections slot (they are always served on --listen too)"},
    {"port-file", FLAG_STRING, OPT(port_file), 0, 0, "PATH", "none",
     "once listening, write the bound port (one line) to PATH; handy with port 0"},
    {"dev", FLAG_BOOL, OPT(dev), 0, 0, NULL, "false",
     "use the in-memory lease store (no cluster); leases live as long as the process"},
    {"kubeconfig", FLAG_STRING, OPT(kubeconfig), 0, 0, "PATH", "in-cluster config",
     "kubeconfig file to reach the apiserver"},
    {"context", FLAG_STRING, OPT(context), 0, 0, "NAME", "the current-context",
     "kubeconfig context"},
    {"sa-dir", FLAG_STRING, OPT(sa_dir), 0, 0, "DIR",
     "/var/run/secrets/kubernetes.io/serviceaccount",
     "service-account directory of the in-cluster config (token, ca.crt)"},
    {"allow-token-over-http", FLAG_BOOL, OPT(allow_token_over_http), 0, 0, NULL, "false",
     "let a kubeconfig send its bearer token to an http:// apiserver, in cleartext (refused "
     "otherwise)"},
    {"log-level", FLAG_STRING, OPT(log_level), 0, 0, "LEVEL", "info", "debug, info, warn or error"},
    {"namespaces", FLAG_STRING, OPT(namespaces), 0, 0, "NS,NS", "all",
     "serve only these namespaces; requests for others get permission_denied"},
    {"max-connections", FLAG_LONG, OPT(max_connections), 1, 1000000, "N", "1024",
     "most simultaneous client connections; RPCs on connections over it are refused with "
     "resource_exhausted (probes and metrics are still answered)"},
    {"max-per-ip", FLAG_LONG, OPT(max_per_ip), 0, 1000000, "N", "0",
     "most simultaneous connections from one IP address (0: no limit); RPCs over it are "
     "refused as for --max-connections"},
    {"max-body-bytes", FLAG_LONG, OPT(max_body_bytes), 64, 1048576, "N", "4096",
     "largest request body accepted (larger: resource_exhausted)"},
    {"read-timeout-s", FLAG_LONG, OPT(read_timeout_s), 1, 3600, "N", "10",
     "seconds a client has to send a whole request, head and body, from the connection's "
     "start or, kept alive, from the request's first byte; slower connections are closed "
     "(the idle timeout alone restarts with every byte)"},
    {"max-grant-ms", FLAG_LONG, OPT(max_grant_ms), 0, 3600000, "N", "0",
     "longest validity granted to a leader per confirmation (0: its retry period)"},
    {"max-leases", FLAG_LONG, OPT(max_leases), 1, 1000000, "N", "10000",
     "most Leases followed at once (each has its state and its apiserver watch); campaigns, "
     "watches and reads of further Leases get resource_exhausted. Reading a Lease that does "
     "not exist follows nothing"},
    {"auth", FLAG_STRING, OPT(auth), 0, 0, "MODE", "none with --dev, else kubernetes",
     "who may call: kubernetes (a bearer token checked with a TokenReview, every RPC with a "
     "SubjectAccessReview on elections.kubelease.io) or none (anyone reaching the port)"},
    {"token-audience", FLAG_STRING, OPT(token_audience), 0, 0, "AUD", "kubelease",
     "the audience callers' tokens must be issued for (--auth kubernetes)"},
    {"identity-policy", FLAG_STRING, OPT(identity_policy), 0, 0, "POLICY", "any",
     "which campaign identities a caller may use: any, serviceaccount (starting with "
     "\"<namespace>:<serviceaccount>\") or pod (its pod's name, from a pod-bound token)"},
    {"term-key-file", FLAG_STRING, OPT(term_key_file), 0, 0, "PATH", "a random key per process",
     "secret (32 to 4096 bytes) that term tokens derive from; give every replica the same "
     "one, or terms cannot be resumed on another replica or after a restart"},
    {"tls-cert-file", FLAG_STRING, OPT(tls_cert_file), 0, 0, "PATH", "none (plain HTTP)",
     "serve HTTPS (on --listen and --ops-listen) with this certificate chain (PEM); re-read "
     "when it changes, for new connections (needs --tls-key-file)"},
    {"tls-key-file", FLAG_STRING, OPT(tls_key_file), 0, 0, "PATH", "none",
     "the certificate's private key (PEM); re-read with the certificate"},
    {"help", FLAG_BOOL, OPT(help), 0, 0, NULL, NULL, "show this help and exit"},
    {"version", FLAG_BOOL, OPT(version), 0, 0, NULL, NULL, "print the version and exit"},
};
#define N_FLAGS (sizeof flags / sizeof flags[0])

static void env_name(const flag *f, char *out, size_t len)
{
    size_t o = (size_t)snprintf(out, len, "KUBELEASED_");
    for (const char *p = f->name; *p && o + 1 < len; p++)
        out[o++] = *p == '-' ? '_' : (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
    out[o] = '\0';
}

static void usage(FILE *out)
{
    fprintf(out, "Usage: kubeleased [flags]\n\n"
                 "kubelease's leader-election service: campaigns, holders and watches of\n"
                 "Kubernetes Leases over the Connect protocol (HTTP/1.1).\n\n"
                 "Flags (each also settable as the environment variable shown; the command\n"
                 "line wins):\n");
    for (size_t i = 0; i < N_FLAGS; i++) {
        const flag *f = &flags[i];
        char left[64], env[64];
        snprintf(left, sizeof left, "--%s%s%s", f->name, f->arg ? " " : "", f->arg ? f->arg : "");
        fprintf(out, "  %-28s %s\n", left, f->help);
        if (f->deflt) {
            env_name(f, env, sizeof env);
            fprintf(out, "  %-28s default: %s; env: %s\n", "", f->deflt, env);
        }
    }
    fprintf(out, "\nEndpoints: POST /kubelease.v1.LeaseService/<Method>, GET /livez, /readyz,\n"
                 "/metrics and / (status page). SIGTERM or SIGINT stops it cleanly.\n");
}

/* Sets one flag from text; source names it in errors ("--listen" or
 * "KUBELEASED_LISTEN"). */
static int set_flag(options *o, const flag *f, const char *value, const char *source)
{
    void *p = (char *)o + f->offset;
    switch (f->kind) {
    case FLAG_BOOL:
        if (!value || strcmp(value, "true") == 0 || strcmp(value, "1") == 0) {
            *(bool *)p = true;
        } else if (strcmp(value, "false") == 0 || strcmp(value, "0") == 0) {
            *(bool *)p = false;
        } else {
            fprintf(stderr, "kubeleased: %s: \"%s\" is not true or false\n", source, value);
            return -1;
        }
        return 0;
    case FLAG_STRING:
        if (!value || !*value) {
            fprintf(stderr, "kubeleased: %s needs a value (%s)\n", source, f->arg);
            return -1;
        }
        *(const char **)p = value;
        return 0;
    case FLAG_LONG: {
        if (!value || !*value) {
            fprintf(stderr, "kubeleased: %s needs a value (%s)\n", source, f->arg);
            return -1;
        }
        char *end = NULL;
        errno = 0;
        long v = strtol(value, &end, 10);
        if (errno || *end || v < f->min || v > f->max) {
            fprintf(stderr, "kubeleased: %s: \"%s\" is not a whole number from %ld to %ld\n",
                    source, value, f->min, f->max);
            return -1;
        }
        *(long *)p = v;
        return 0;
    }
    }
    return -1;
}

static const flag *find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < N_FLAGS; i++)
        if (strlen(flags[i].name) == len && strncmp(flags[i].name, name, len) == 0)
            return &flags[i];
    return NULL;
}

static int parse_env(options *o)
{
    for (size_t i = 0; i < N_FLAGS; i++) {
        const flag *f = &flags[i];
        if (!f->deflt)
            continue; /* --help, --version */
        char env[64];
        env_name(f, env, sizeof env);
        const char *v = getenv(env);
        if (v && set_flag(o, f, v, env) != 0)
            return -1;
    }
    return 0;
}

static int parse_args(options *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr,
                    "kubeleased: unexpected argument \"%s\" (flags start with --; see "
                    "--help)\n",
                    a);
            return -1;
        }
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const flag *f = find_flag(name, len);
        if (!f) {
            fprintf(stderr, "kubeleased: unknown flag --%.*s (see --help)\n", (int)len, name);
            return -1;
        }
        char source[64];
        snprintf(source, sizeof source, "--%s", f->name);
        const char *value = eq ? eq + 1 : NULL;
        if (f->kind != FLAG_BOOL && !eq) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kubeleased: %s needs a value (%s)\n", source, f->arg);
                return -1;
            }
            value = argv[++i];
        }
        if (set_flag(o, f, value, source) != 0)
            return -1;
    }
    return 0;
}

/* Splits --namespaces into a NULL-terminated array and checks each name.
 * One allocation (free it once): the pointers, then the names they point
 * into. NULL after saying what is wrong. */
static char **split_namespaces(const char *list)
{
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    char **out = calloc(1, (n + 1) * sizeof *out + strlen(list) + 1);
    if (!out) {
        fprintf(stderr, "kubeleased: out of memory\n");
        return NULL;
    }
    char *names = strcpy((char *)(out + n + 1), list);
    size_t k = 0;
    for (char *tok = strtok(names, ","); tok; tok = strtok(NULL, ",")) {
        char msg[256];
        if (engine_validate_lease_ref(tok, "x", msg, sizeof msg) != 0) {
            fprintf(stderr, "kubeleased: --namespaces: %s\n", msg);
            free(out);
            return NULL;
        }
        out[k++] = tok;
    }
    if (k == 0) {
        fprintf(stderr, "kubeleased: --namespaces: no namespace given\n");
        free(out);
        return NULL;
    }
    return out;
}

#define TERM_KEY_MIN 32
#define TERM_KEY_MAX 4096

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
    size_t n = fread(key, 1, TERM_KEY_MAX + 1, f);
    fclose(f);
    while (n > 0 &&
           (key[n - 1] == '\n' || key[n - 1] == '\r' || key[n - 1] == ' ' || key[n - 1] == '\t'))
        n--;
    if (n < TERM_KEY_MIN || n > TERM_KEY_MAX) {
        fprintf(stderr,
                "kubeleased: --term-key-file: %s holds %zu bytes; the key must be %d to %d "
                "(e.g. head -c 32 /dev/urandom | base64 > FILE)\n",
                path, n, TERM_KEY_MIN, TERM_KEY_MAX);
        return -1;
    }
    return (ssize_t)n;
}

/* --auth, --token-audience and --identity-policy into cfg. Returns 0, or -1
 * after saying what is wrong. */
static int configure_auth(const options *o, http_auth_config *cfg)
{
    const char *mode = o->auth ? o->auth : o->dev ? "none" : "kubernetes";
    if (strcmp(mode, "kubernetes") == 0) {
        cfg->mode = HTTP_AUTH_KUBERNETES;
    } else if (strcmp(mode, "none") == 0) {
        cfg->mode = HTTP_AUTH_NONE;
    } else {
        fprintf(stderr, "kubeleased: --auth: \"%s\" is not kubernetes or none\n", mode);
        return -1;
    }
    if (o->dev && cfg->mode == HTTP_AUTH_KUBERNETES) {
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
    if (i != 0 && cfg->mode == HTTP_AUTH_NONE) {
        fprintf(stderr,
                "kubeleased: --identity-policy %s needs --auth kubernetes (without it "
                "callers are unknown)\n",
                o->identity_policy);
        return -1;
    }
    cfg->identity_policy = (http_identity_policy)i;
    cfg->audience = o->token_audience;
    return 0;
}

/* Checks what single flags cannot and fills in cfg. Returns 0, or -1 after
 * saying what is wrong. *namespaces (free it) backs cfg's namespaces; key
 * backs cfg's term key. */
static int configure(const options *o, service_config *cfg, log_level *level, char ***namespaces,
                     uint8_t key[TERM_KEY_MAX + 1])
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
    ssize_t key_len = 0;
    if (o->term_key_file && (key_len = read_term_key(o->term_key_file, key)) < 0)
        return -1;
    if (o->ops_listen && http_listen_check(o->ops_listen, err, sizeof err) != 0) {
        fprintf(stderr, "kubeleased: --ops-listen: %s\n", err);
        return -1;
    }
    *namespaces = NULL;
    if (o->namespaces) {
        *namespaces = split_namespaces(o->namespaces);
        if (!*namespaces)
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
        .term_key = key_len ? key : NULL,
        .term_key_len = (size_t)key_len,
        .http = {.listen = o->listen,
                 .max_connections = (unsigned)o->max_connections,
                 .max_per_ip = (unsigned)o->max_per_ip,
                 .max_body_bytes = (size_t)o->max_body_bytes,
                 .read_timeout_ms = (unsigned)o->read_timeout_s * 1000,
                 .namespaces = (const char *const *)*namespaces,
                 .ops_listen = o->ops_listen,
                 .tls_cert_file = o->tls_cert_file,
                 .tls_key_file = o->tls_key_file},
    };
    if (configure_auth(o, &cfg->http.auth) != 0) {
        free(*namespaces);
        *namespaces = NULL;
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

int main(int argc, char **argv)
{
    options o = {.listen = "0.0.0.0:8080",
                 .log_level = "info",
                 .max_connections = 1024,
                 .max_per_ip = 0,
                 .max_body_bytes = 4096,
                 .read_timeout_s = 10,
                 .max_grant_ms = 0,
                 .max_leases = 10000,
                 .token_audience = "kubelease",
                 .identity_policy = "any"};
    if (parse_env(&o) != 0 || parse_args(&o, argc, argv) != 0)
        return EXIT_USAGE;
    if (o.help) {
        usage(stdout);
        return 0;
    }
    if (o.version) {
        printf("kubeleased %s\n", KL_VERSION_STRING);
        return 0;
    }
    service_config cfg;
    log_level level;
    char **namespaces = NULL;
    static uint8_t term_key[TERM_KEY_MAX + 1];
    if (configure(&o, &cfg, &level, &namespaces, term_key) != 0)
        return EXIT_USAGE;
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
    bool auth = cfg.http.auth.mode == HTTP_AUTH_KUBERNETES;
    log_event(LOG_INFO, "started",
              "version=%s listen=%s port=%u%s store=%s namespaces=%s max_connections=%ld "
              "max_body_bytes=%ld read_timeout_s=%ld auth=%s token_audience=%s "
              "identity_policy=%s tls=%s",
              KL_VERSION_STRING, log_q(o.listen), (unsigned)service_port(svc), ops,
              service_store_kind(svc), log_q(o.namespaces ? o.namespaces : "all"),
              o.max_connections, o.max_body_bytes, o.read_timeout_s, auth ? "kubernetes" : "none",
              log_q(o.token_audience), log_q(o.identity_policy),
              o.tls_cert_file ? "true" : "false");
    if (!auth && !o.dev)
        log_event(LOG_WARN, "auth_disabled", "msg=%s",
                  log_q("--auth none against a cluster: ANY client that reaches this port may "
                        "campaign for, confirm, resign, read and list ANY Lease kubeleased "
                        "serves, and depose any leader. Use --auth kubernetes outside of "
                        "tests."));
    if (!o.term_key_file && !o.dev)
        log_event(LOG_WARN, "term_key_random", "msg=%s",
                  log_q("no --term-key-file: term tokens use a random key of this "
                        "process, so a term cannot be resumed on another replica or "
                        "after a restart; give every replica the same key file"));

    int sig = 0;
    sigwait(&sigs, &sig);
    log_event(LOG_INFO, "shutdown", "signal=%s", sig == SIGTERM ? "TERM" : "INT");
    rc = 0;
done:
    service_stop(svc); /* stops accepting, ends streams, keeps held Leases */
    free(namespaces);
    if (rc == 0)
        log_event(LOG_INFO, "stopped", "%s", "");
    return rc;
}
