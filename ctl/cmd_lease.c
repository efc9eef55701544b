/* The read subcommands on Leases: `get NS/NAME` (kl_get_lease) and
 * `list [-n NS | -A]` (kl_list_leases), as a table or as JSON. Main thread
 * only. */
#include <getopt.h>
#include <string.h>

#include "ctl.h"

/* The live holder's leader value (*value NULL when none, or when it cannot
 * be read: the rest of the answer stands). */
static void holder_value(kl_client *c, const char *ns, const char *name, void **value, size_t *len)
{
    char *holder = NULL;
    if (kl_get_holder_ex(c, ns, name, &holder, NULL, value, len, NULL) < 0) {
        *value = NULL;
        *len = 0;
    }
    kl_free(holder);
}

int ctl_get(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o)
{
    kl_lease_info info;
    kl_error err;
    char ns[sizeof(info.ns)], name[sizeof(info.name)];
    int rc;
    kl_client *c = ctl_open_one_ref(cmd, argc, argv, o, ns, sizeof(ns), name, sizeof(name), &rc);
    if (!c)
        return rc;
    rc = kl_get_lease(c, ns, name, &info, &err);
    void *value = NULL;
    size_t value_len = 0;
    if (rc == KL_OK)
        holder_value(c, ns, name, &value, &value_len);
    kl_client_free(c);
    if (rc == KL_NOT_FOUND) {
        fprintf(stderr, "kubeleasectl: Lease %s/%s not found\n", ns, name);
        return CTL_EXIT_NOT_FOUND;
    }
    if (rc != KL_OK)
        return ctl_fail(rc, &err);
    if (o->output == CTL_OUT_JSON) {
        ctl_print_lease_json(stdout, &info, value, value_len);
        fputc('\n', stdout);
    } else {
        ctl_print_lease_table(stdout, &info, 1);
        if (value_len) {
            fputs("VALUE   ", stdout);
            ctl_print_value_text(stdout, value, value_len);
            fputc('\n', stdout);
        }
    }
    kl_free(value);
    return CTL_EXIT_OK;
}

/* Parses list's options: *ns is NULL for -A. Returns -1 to go on, or an
 * exit code. */
static int list_options(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o,
                        const char **ns)
{
    static const struct option longopts[] = {{"namespace", required_argument, NULL, 'n'},
                                             {"all-namespaces", no_argument, NULL, 'A'},
                                             CTL_COMMON_LONGOPTS};
    int ch, rc, all = 0;
    *ns = NULL;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "n:Ao:h", longopts, NULL)) != -1) {
        if (ch == 'n')
            *ns = optarg;
        else if (ch == 'A')
            all = 1;
        else if ((rc = ctl_common_option(cmd, ch, optarg, o)) >= 0)
            return rc;
    }
    if (all && *ns)
        return ctl_usage_error(cmd, "-n and -A exclude each other");
    if (optind != argc)
        return ctl_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (!all && !*ns)
        *ns = "default";
    return -1;
}

int ctl_list(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o)
{
    kl_lease_info *rows = NULL;
    size_t n = 0;
    kl_error err;
    const char *ns;
    int rc = list_options(cmd, argc, argv, o, &ns);
    if (rc >= 0)
        return rc;
    kl_client *c = ctl_client_new(o, &rc);
    if (!c)
        return rc;
    rc = kl_list_leases(c, ns, &rows, &n, &err);
    if (rc != KL_OK) {
        kl_client_free(c);
        return ctl_fail(rc, &err);
    }
    if (o->output == CTL_OUT_JSON) {
        /* The values: one GetHolder per held Lease (kl_lease_info has none). */
        fputs("{\"leases\":[", stdout);
        for (size_t i = 0; i < n; i++) {
            void *value = NULL;
            size_t value_len = 0;
            if (rows[i].holder[0])
                holder_value(c, rows[i].ns, rows[i].name, &value, &value_len);
            fputs(i ? ",\n" : "\n", stdout);
            ctl_print_lease_json(stdout, &rows[i], value, value_len);
            kl_free(value);
        }
        fputs(n ? "\n]}\n" : "]}\n", stdout);
    } else if (n == 0) {
        fprintf(stderr, "No Leases followed by the service%s%s.\n", ns ? " in namespace " : "",
                ns ? ns : "");
    } else {
        ctl_print_lease_table(stdout, rows, n);
    }
    kl_free(rows);
    kl_client_free(c);
    return CTL_EXIT_OK;
}
