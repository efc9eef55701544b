/* kubeleased's flags (see flags.h): one table drives the parsing of the
 * environment and of argv, and the --help text. */
#include "flags.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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
    {"max-per-ip", FLAG_LONG, OPT(max_per_ip), 0, 1000000, "N", "256",
     "most simultaneous connections from one IP address (0: no limit); RPCs over it are "
     "refused as for --max-connections (Confirms and Resigns are served), and no more than "
     "this wait for their first request. Behind node-level SNAT every client of a node "
     "shares one address: raise it above the connections of a node's clients"},
    {"first-request-timeout-s", FLAG_LONG, OPT(first_request_timeout_s), 1, 3600, "N", "3",
     "seconds a new connection has to send its first request (head within this of its "
     "accept, the whole request within this of its start; at most --read-timeout-s); "
     "connections that send nothing are closed before they can hold a slot"},
    {"max-body-bytes", FLAG_LONG, OPT(max_body_bytes), 64, 1048576, "N", "4096",
     "largest request body accepted (larger: resource_exhausted)"},
    {"max-header-bytes", FLAG_LONG, OPT(max_header_bytes), 1024, 1048576, "N", "3072",
     "room for a request's head (request line and headers, the bearer token among them); "
     "larger heads are refused with HTTP 431. Each connection holds this plus 1 KiB, most "
     "of what an open stream costs: raise it for large tokens or proxies adding headers"},
    {"read-timeout-s", FLAG_LONG, OPT(read_timeout_s), 1, 3600, "N", "10",
     "seconds a client has to send a whole request, head and body, from the connection's "
     "start or, kept alive, from the request's first byte; slower connections are closed "
     "(the idle timeout alone restarts with every byte)"},
    {"max-grant-ms", FLAG_LONG, OPT(max_grant_ms), 0, 3600000, "N", "0",
     "longest validity granted to a leader per confirmation (0: its retry period)"},
    {"max-leases", FLAG_LONG, OPT(max_leases), 1, 1000000, "N", "10000",
     "most Leases followed at once (each has its state and its apiserver watch); at the "
     "limit the least recently used Lease nobody campaigns on or watches is forgotten, and "
     "when every one is in use, campaigns, watches and reads of further Leases get "
     "resource_exhausted. Reading a Lease that does not exist follows nothing"},
    {"max-leases-per-caller", FLAG_LONG, OPT(max_leases_per_caller), 1, 1000000, "N", "256",
     "most Leases followed on one caller's account (the authenticated user, or the peer "
     "address with --auth none): those it last campaigned on or watched, and those its "
     "reads made kubeleased follow. At the limit its least recently used Lease nobody "
     "campaigns on or watches is forgotten; when all are in use, its campaigns, watches "
     "and reads of further Leases get resource_exhausted, and other callers are served"},
    {"max-leases-per-namespace", FLAG_LONG, OPT(max_leases_per_namespace), 1, 1000000, "N", "2048",
     "most Leases followed in one namespace, made room for and refused as for "
     "--max-leases-per-caller, so that one namespace cannot take every --max-leases slot"},
    {"auth", FLAG_STRING, OPT(auth), 0, 0, "MODE", "none with --dev, else kubernetes",
     "who may call: kubernetes (a bearer token checked with a TokenReview, every RPC with a "
     "SubjectAccessReview on elections.kubelease.io) or none (anyone reaching the port)"},
    {"token-audience", FLAG_STRING, OPT(token_audience), 0, 0, "AUD", "kubelease",
     "the audience callers' tokens must be issued for (--auth kubernetes)"},
    {"review-rate", FLAG_LONG, OPT(review_rate), 0, 100000, "N", "200",
     "most token and access reviews a second asked of the apiserver for callers not known "
     "yet, in all (0: no limit; bursts of two seconds' worth); over it a new caller gets "
     "unavailable and retries. Answers already known are asked again regardless"},
    {"review-rate-per-ip", FLAG_LONG, OPT(review_rate_per_ip), 0, 100000, "N", "20",
     "the same, for the callers of one IP address, an IPv6 one by its /64 (0: no limit), so "
     "that one client sending fresh bogus tokens cannot use up --review-rate"},
    {"metrics-auth", FLAG_STRING, OPT(metrics_auth), 0, 0, "MODE",
     "kubernetes with --auth kubernetes, else none",
     "who may read /metrics (on --listen and --ops-listen): kubernetes (a bearer token, for "
     "the apiserver's audience, allowed get on the non-resource URL /metrics) or none "
     "(anyone); /livez and /readyz are always open"},
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
    {"pod-label-keys", FLAG_STRING, OPT(pod_label_keys), 0, 0, "KEY,KEY", "none",
     "the Pod label keys a campaign may ask kubeleased to put on its own Pod while it leads "
     "(docs/design.md, rule 9); none: campaigns naming a label are refused"},
    {"events", FLAG_BOOL, OPT(events), 0, 0, NULL, "false",
     "record a Kubernetes Event (core/v1, reason LeaderElection) on the Lease at each term's "
     "start and end, as client-go's leader election does; rate-limited, never retried, never "
     "delaying leadership (needs create on events)"},
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

void flags_usage(FILE *out)
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

void flags_defaults(options *o)
{
    *o = (options){.listen = "0.0.0.0:8080",
                   .log_level = "info",
                   .max_connections = 1024,
                   .max_per_ip = 256,
                   .max_body_bytes = 4096,
                   .max_header_bytes = 3072,
                   .read_timeout_s = 10,
                   .first_request_timeout_s = 3,
                   .max_grant_ms = 0,
                   .max_leases = 10000,
                   .max_leases_per_caller = 256,
                   .max_leases_per_namespace = 2048,
                   .token_audience = "kubelease",
                   .review_rate = 200,
                   .review_rate_per_ip = 20,
                   .identity_policy = "any"};
}

int flags_parse(options *o, int argc, char **argv)
{
    return parse_env(o) != 0 || parse_args(o, argc, argv) != 0 ? -1 : 0;
}
