/* The leadership subcommands: `candidates NS/NAME` (kl_list_candidates), as
 * a table or as JSON, and `handoff NS/NAME [IDENTITY]` (kl_handoff). Main
 * thread only. */
#include <getopt.h>
#include <string.h>

#include "ctl.h"

static void print_candidates_table(FILE *f, const kl_candidate_info *rows, size_t n)
{
    size_t wid = strlen("IDENTITY"), wrep = strlen("REPLICA");
    for (size_t i = 0; i < n; i++) {
        size_t a = strlen(rows[i].identity), b = strlen(rows[i].replica[0] ? rows[i].replica : "-");
        wid = a > wid ? a : wid;
        wrep = b > wrep ? b : wrep;
    }
    fprintf(f, "%-*s  %-7s  %-9s  %s\n", (int)wid, "IDENTITY", "ROLE", "WAITING", "REPLICA");
    for (size_t i = 0; i < n; i++) {
        char waiting[32];
        ctl_format_duration(waiting, sizeof(waiting), rows[i].campaigning_for_ms);
        fprintf(f, "%-*s  %-7s  %-9s  %s\n", (int)wid, rows[i].identity,
                rows[i].leader ? "leader" : "standby", waiting,
                rows[i].replica[0] ? rows[i].replica : "-");
    }
}

static void print_candidates_json(FILE *f, const char *ns, const char *name,
                                  const kl_candidate_info *rows, size_t n)
{
    fputs("{\"namespace\":", f);
    ctl_json_string(f, ns);
    fputs(",\"name\":", f);
    ctl_json_string(f, name);
    fputs(",\"candidates\":[", f);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",{\"identity\":" : "{\"identity\":", f);
        ctl_json_string(f, rows[i].identity);
        fprintf(f, ",\"leader\":%s,\"campaigningForMs\":%lld,\"replica\":",
                rows[i].leader ? "true" : "false", (long long)rows[i].campaigning_for_ms);
        ctl_json_string(f, rows[i].replica[0] ? rows[i].replica : NULL);
        fputc('}', f);
    }
    fputs("]}\n", f);
}

int ctl_candidates(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o)
{
    kl_candidate_info *rows = NULL;
    size_t n = 0;
    kl_error err;
    char ns[64], name[254];
    int rc;
    kl_client *c = ctl_open_one_ref(cmd, argc, argv, o, ns, sizeof(ns), name, sizeof(name), &rc);
    if (!c)
        return rc;
    rc = kl_list_candidates(c, ns, name, &rows, &n, &err);
    kl_client_free(c);
    if (rc != KL_OK)
        return ctl_fail(rc, &err);
    if (o->output == CTL_OUT_JSON)
        print_candidates_json(stdout, ns, name, rows, n);
    else if (n == 0)
        fprintf(stderr, "No candidates for %s/%s through this service replica.\n", ns, name);
    else
        print_candidates_table(stdout, rows, n);
    kl_free(rows);
    return CTL_EXIT_OK;
}

int ctl_handoff(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o)
{
    kl_error err;
    char ns[64], name[254];
    int rc = ctl_parse_common(cmd, argc, argv, o);
    if (rc >= 0)
        return rc;
    if (argc - optind != 1 && argc - optind != 2)
        return ctl_usage_error(cmd, "expects NAMESPACE/NAME and an optional IDENTITY");
    if (ctl_parse_ref(cmd, argv[optind], ns, sizeof(ns), name, sizeof(name)) != 0)
        return CTL_EXIT_USAGE;
    const char *to = argc - optind == 2 ? argv[optind + 1] : NULL;
    kl_client *c = ctl_client_new(o, &rc);
    if (!c)
        return rc;
    rc = kl_handoff(c, ns, name, to, &err);
    kl_client_free(c);
    if (rc != KL_OK)
        return ctl_fail(rc, &err);
    fprintf(stderr, "kubeleasectl: %s/%s handed off to %s\n", ns, name,
            to ? to : "the next in line");
    return CTL_EXIT_OK;
}
