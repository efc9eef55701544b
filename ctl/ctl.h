/* kubeleasectl: the declarations its subcommands share. The program is a
 * client of libkubelease's public API only (include/kubelease.h), as curl's
 * command line is of libcurl.
 *
 * Threads. Every subcommand runs on the main thread; the library's I/O
 * thread runs watch callbacks (cmd_watch.c) and elect adds one waiting
 * thread (elect.c). The helpers here keep no state: safe from any thread. */
#ifndef CTL_H
#define CTL_H

/* The largest epoch a Lease records (leaseTransitions is an int32): a Lease
 * there can start no new term. */
#define CTL_EPOCH_MAX 2147483647

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kubelease.h"

/* Exit codes (README, "kubeleasectl"). A library status s < 0 other than
 * KL_ERR_INVALID_ARGUMENT exits with 10 + |s| (ctl_exit_code). */
enum {
    CTL_EXIT_OK = 0,
    CTL_EXIT_NOT_FOUND = 1,
    CTL_EXIT_USAGE = 2,
    CTL_EXIT_STATUS_BASE = 10,
    CTL_EXIT_CANNOT_EXEC = 126,
    CTL_EXIT_NO_COMMAND = 127,
};

enum ctl_output { CTL_OUT_TABLE, CTL_OUT_JSON };

/* What every subcommand accepts: --endpoint (also before the subcommand),
 * -o/--output, -h/--help. */
struct ctl_opts {
    const char *endpoint; /* NULL: the library's default ($KUBELEASE_ENDPOINT) */
    enum ctl_output output;
};

struct ctl_command;
typedef int (*ctl_run_fn)(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o);

/* One subcommand: the table in main.c lists them. */
struct ctl_command {
    const char *name;
    const char *synopsis; /* the arguments after the name */
    const char *summary;  /* one line for the overview */
    const char *help;     /* the rest of `kubeleasectl NAME --help` */
    ctl_run_fn run;       /* argv[0] is the subcommand's name */
};

int ctl_get(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o);
int ctl_list(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o);
int ctl_watch(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o);
int ctl_candidates(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o);
int ctl_handoff(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o);
int ctl_history(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o);
int ctl_elect(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o);

/* --- common.c ------------------------------------------------------------- */

/* The exit code of a library status (0 for KL_OK, 1 for KL_NOT_FOUND, 2 for
 * KL_ERR_INVALID_ARGUMENT, else 10 + |status|, at most 125). */
int ctl_exit_code(int status);
/* Prints "kubeleasectl: MESSAGE" (err's, or kl_strerror(status)) and returns
 * ctl_exit_code(status). */
int ctl_fail(int status, const kl_error *err);
/* Prints "kubeleasectl NAME: MESSAGE" and a pointer to --help on stderr;
 * returns CTL_EXIT_USAGE. */
int ctl_usage_error(const struct ctl_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints `kubeleasectl NAME --help`. */
void ctl_print_help(const struct ctl_command *cmd, FILE *out);

/* The long options of struct ctl_opts, to end a subcommand's table with. */
#define CTL_COMMON_LONGOPTS                                                                        \
    {"endpoint", required_argument, NULL, 'E'}, {"output", required_argument, NULL, 'o'},          \
        {"help", no_argument, NULL, 'h'},                                                          \
    {                                                                                              \
        NULL, 0, NULL, 0                                                                           \
    }
/* Handles one of the common options (getopt's ch and optarg). Returns -1 to
 * go on, CTL_EXIT_OK after --help was printed, or CTL_EXIT_USAGE. */
int ctl_common_option(const struct ctl_command *cmd, int ch, const char *arg, struct ctl_opts *o);

/* Parses argv with only the common options (getopt_long; optind is left at
 * the first operand). Returns -1 to go on, or an exit code (CTL_EXIT_OK
 * after --help). */
int ctl_parse_common(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o);

/* Splits "NS/NAME" into ns and name (buffers of kl_lease_info's sizes).
 * Returns 0, or -1 after printing a usage error. */
int ctl_parse_ref(const struct ctl_command *cmd, const char *ref, char *ns, size_t ns_size,
                  char *name, size_t name_size);
/* The preamble of a command of one NAMESPACE/NAME operand: the common
 * options (ctl_parse_common), then exactly one operand, split into ns and
 * name (ctl_parse_ref). Returns -1 to go on, or an exit code (CTL_EXIT_OK
 * after --help, CTL_EXIT_USAGE after printing a usage error). */
int ctl_parse_one_ref(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o,
                      char *ns, size_t ns_size, char *name, size_t name_size);
/* ctl_parse_one_ref, then the client (ctl_client_new): the client, or NULL
 * with *exit_code the exit code (CTL_EXIT_OK after --help). */
kl_client *ctl_open_one_ref(const struct ctl_command *cmd, int argc, char **argv,
                            struct ctl_opts *o, char *ns, size_t ns_size, char *name,
                            size_t name_size, int *exit_code);
/* Parses a duration "Nms" or "Ns" (a unit is required) into *ms; plain
 * integers are seconds when seconds_ok. Returns 0, or -1 after printing a
 * usage error naming the option. */
int ctl_parse_duration(const struct ctl_command *cmd, const char *option, const char *s,
                       int seconds_ok, int64_t *ms);

/* A client of o->endpoint; NULL after printing why (*exit_code set). */
kl_client *ctl_client_new(const struct ctl_opts *o, int *exit_code);

/* CLOCK_MONOTONIC in milliseconds (the library's clock). */
int64_t ctl_now_ms(void);

/* --- output.c ------------------------------------------------------------- */

/* Writes s as a JSON string (quoted, escaped); NULL as null. */
void ctl_json_string(FILE *f, const char *s);
/* "850ms", "12.3s", "5m12s", "3h05m", "2d03h"; "-" for ms <= 0. */
void ctl_format_duration(char *buf, size_t size, int64_t ms);
/* Now, UTC, as "2006-01-02T15:04:05.000Z". */
void ctl_format_now(char *buf, size_t size);
/* The Lease table: a header and one row each. */
void ctl_print_lease_table(FILE *f, const kl_lease_info *rows, size_t n);
/* One Lease as a JSON object (no newline). */
/* One Lease as a JSON object; value (value_len bytes, 0: none) its
 * holder's leader value, in base64 as proto3 JSON writes bytes. */
void ctl_print_lease_json(FILE *f, const kl_lease_info *r, const void *value, size_t value_len);
/* data (n bytes) as a JSON string of its base64. */
void ctl_json_bytes(FILE *f, const void *data, size_t n);
/* A leader value for people: as text when every byte is printable ASCII,
 * else "<N bytes>". */
void ctl_print_value_text(FILE *f, const void *data, size_t n);

#endif
