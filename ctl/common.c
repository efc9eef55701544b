/* The helpers every subcommand uses: exit codes, error and usage messages,
 * the common options, NS/NAME and durations, the client. No state. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

int ctl_exit_code(int status)
{
    if (status == KL_OK)
        return CTL_EXIT_OK;
    if (status == KL_NOT_FOUND)
        return CTL_EXIT_NOT_FOUND;
    if (status == KL_ERR_INVALID_ARGUMENT)
        return CTL_EXIT_USAGE;
    if (status > 0)
        return CTL_EXIT_STATUS_BASE; /* no such status today */
    return -status > 125 - CTL_EXIT_STATUS_BASE ? 125 : CTL_EXIT_STATUS_BASE - status;
}

int ctl_fail(int status, const kl_error *err)
{
    const char *msg = err && err->message[0] ? err->message : kl_strerror(status);
    fprintf(stderr, "kubeleasectl: %s\n", msg);
    return ctl_exit_code(status);
}

int ctl_usage_error(const struct ctl_command *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "kubeleasectl%s%s: ", cmd ? " " : "", cmd ? cmd->name : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nRun 'kubeleasectl %s%s--help' for usage.\n", cmd ? cmd->name : "",
            cmd ? " " : "");
    return CTL_EXIT_USAGE;
}

void ctl_print_help(const struct ctl_command *cmd, FILE *out)
{
    fprintf(out, "Usage: kubeleasectl %s %s\n\n%s.\n\n%s", cmd->name, cmd->synopsis, cmd->summary,
            cmd->help);
    fprintf(out, "\nCommon options:\n"
                 "  --endpoint URL   the kubelease service (default $KUBELEASE_ENDPOINT, else\n"
                 "                   http://127.0.0.1:8080)\n"
                 "  -h, --help       this text\n");
}

int ctl_common_option(const struct ctl_command *cmd, int ch, const char *arg, struct ctl_opts *o)
{
    switch (ch) {
    case 'E':
        o->endpoint = arg;
        return -1;
    case 'o':
        if (strcmp(arg, "json") == 0)
            o->output = CTL_OUT_JSON;
        else if (strcmp(arg, "table") == 0)
            o->output = CTL_OUT_TABLE;
        else
            return ctl_usage_error(cmd, "-o must be json or table, not \"%s\"", arg);
        return -1;
    case 'h':
        ctl_print_help(cmd, stdout);
        return CTL_EXIT_OK;
    default: /* getopt printed what was wrong */
        return ctl_usage_error(cmd, "invalid option");
    }
}

int ctl_parse_common(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o)
{
    static const struct option longopts[] = {CTL_COMMON_LONGOPTS};
    int ch, rc;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "o:h", longopts, NULL)) != -1)
        if ((rc = ctl_common_option(cmd, ch, optarg, o)) >= 0)
            return rc;
    return -1;
}

int ctl_parse_ref(const struct ctl_command *cmd, const char *ref, char *ns, size_t ns_size,
                  char *name, size_t name_size)
{
    const char *slash = strchr(ref, '/');
    size_t ns_len = slash ? (size_t)(slash - ref) : 0;
    if (!slash || ns_len == 0 || !slash[1] || strchr(slash + 1, '/'))
        return ctl_usage_error(cmd, "\"%s\" is not NAMESPACE/NAME", ref), -1;
    if (ns_len >= ns_size || strlen(slash + 1) >= name_size)
        return ctl_usage_error(cmd, "\"%.80s\" is too long for NAMESPACE/NAME", ref), -1;
    memcpy(ns, ref, ns_len);
    ns[ns_len] = 0;
    strcpy(name, slash + 1);
    return 0;
}

int ctl_parse_one_ref(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o,
                      char *ns, size_t ns_size, char *name, size_t name_size)
{
    int rc = ctl_parse_common(cmd, argc, argv, o);
    if (rc >= 0)
        return rc;
    if (argc - optind != 1)
        return ctl_usage_error(cmd, "expects one NAMESPACE/NAME");
    if (ctl_parse_ref(cmd, argv[optind], ns, ns_size, name, name_size) != 0)
        return CTL_EXIT_USAGE;
    return -1;
}

kl_client *ctl_open_one_ref(const struct ctl_command *cmd, int argc, char **argv,
                            struct ctl_opts *o, char *ns, size_t ns_size, char *name,
                            size_t name_size, int *exit_code)
{
    *exit_code = ctl_parse_one_ref(cmd, argc, argv, o, ns, ns_size, name, name_size);
    return *exit_code >= 0 ? NULL : ctl_client_new(o, exit_code);
}

int ctl_parse_duration(const struct ctl_command *cmd, const char *option, const char *s,
                       int seconds_ok, int64_t *ms)
{
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int64_t scale = 0;
    if (end && end != s && !errno && v >= 0 && v <= 86400000) {
        if (strcmp(end, "ms") == 0)
            scale = 1;
        else if (strcmp(end, "s") == 0 || (seconds_ok && *end == 0))
            scale = 1000;
    }
    if (!scale || v * scale > 86400000)
        return ctl_usage_error(cmd, "%s must be a duration like %s (at most a day), not \"%s\"",
                               option, seconds_ok ? "15 or 15s" : "500ms or 2s", s),
               -1;
    *ms = v * scale;
    return 0;
}

kl_client *ctl_client_new(const struct ctl_opts *o, int *exit_code)
{
    kl_error err;
    kl_client *c = kl_client_new(o->endpoint, &err);
    if (!c)
        *exit_code = ctl_fail(err.code, &err);
    return c;
}

int64_t ctl_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
