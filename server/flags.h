/* kubeleased's command line: the options, the table of flags that sets them
 * (name, kind, limits, default and help of each), and reading them from the
 * environment and argv. Every flag can also be set as an environment
 * variable KUBELEASED_<NAME> (--max-body-bytes -> KUBELEASED_MAX_BODY_BYTES);
 * the command line wins. Checks that involve more than one flag are
 * main.c's. Start-up only, one thread. */
#ifndef KL_FLAGS_H
#define KL_FLAGS_H

#include <stdbool.h>
#include <stdio.h>

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
    long max_header_bytes;
    long read_timeout_s;
    long first_request_timeout_s;
    long max_grant_ms;
    long max_leases;
    long max_leases_per_caller;
    long max_leases_per_namespace;
    const char *auth;
    const char *token_audience;
    const char *identity_policy;
    long review_rate, review_rate_per_ip;
    const char *metrics_auth;
    const char *term_key_file;
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *pod_label_keys;
    bool events;
    bool help, version;
} options;

/* The defaults (the table's "default" column says the same to people). */
void flags_defaults(options *o);
/* Reads the KUBELEASED_* variables, then argv. Returns 0, or -1 after
 * saying on stderr, in one line, which flag or variable is wrong and why. */
int flags_parse(options *o, int argc, char **argv);
/* The --help text: every flag, its default and its variable. */
void flags_usage(FILE *out);

#endif
