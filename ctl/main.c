/* kubeleasectl: the command line of kubelease, for operators and for
 * programs not written in C. The table of subcommands, the options that may
 * come before one, and the overview. Each subcommand lives in its own file
 * (cmd_lease.c, cmd_leadership.c, cmd_history.c, cmd_watch.c, elect.c). */
#include <stdio.h>
#include <string.h>

#include "ctl.h"

#define CTL_STR_(x) #x
#define CTL_STR(x)  CTL_STR_(x)
#define CTL_VERSION                                                                                \
    CTL_STR(KL_VERSION_MAJOR) "." CTL_STR(KL_VERSION_MINOR) "." CTL_STR(KL_VERSION_PATCH)

static const struct ctl_command commands[] = {
    {"get", "NAMESPACE/NAME [-o json|table]", "Show who holds a Lease and for how long",
     "Prints the holder (<none> when nobody holds the Lease), the fencing epoch,\n"
     "the time since the holder or epoch last changed (SINCE), the validity the\n"
     "service granted the holder that is left (VALIDITY; - when the holder does\n"
     "not campaign through this service), and the candidates and watchers there.\n"
     "Exits 1 when the Lease does not exist.\n\n"
     "Options:\n"
     "  -o, --output FORMAT   table (default) or json: {\"namespace\", \"name\",\n"
     "                        \"holder\" (null when none), \"epoch\", \"sinceTransitionMs\",\n"
     "                        \"validForMs\", \"candidates\", \"watchers\",\n"
     "                        \"leaseDurationSeconds\"}\n",
     ctl_get},
    {"list", "[-n NAMESPACE | -A] [-o json|table]", "List the Leases the service follows",
     "Lists the Leases the service follows (with a campaign or a watch there, or\n"
     "read in the last ten minutes), with the columns of `get`.\n\n"
     "Options:\n"
     "  -n, --namespace NS    only this namespace (default \"default\")\n"
     "  -A, --all-namespaces  every namespace\n"
     "  -o, --output FORMAT   table (default) or json: {\"leases\": [objects of get]}\n",
     ctl_list},
    {"watch", "NAMESPACE/NAME [-o json|table]", "Print a line for every change of holder",
     "Prints the current holder, then one line for every change of holder or\n"
     "epoch, until SIGINT or SIGTERM (then exits 0).\n\n"
     "Options:\n"
     "  -o, --output FORMAT   table (default): TIME NS/NAME holder=ID epoch=N; or json,\n"
     "                        one object per line: {\"time\", \"namespace\", \"name\",\n"
     "                        \"holder\" (null when none), \"epoch\"}\n",
     ctl_watch},
    {"candidates", "NAMESPACE/NAME [-o json|table]", "List the candidates for a Lease",
     "Lists the campaigns for the Lease in line order: the leader first, then the\n"
     "standbys in the order they would be elected, with how long each has been\n"
     "campaigning (WAITING) and the kubeleased replica holding its campaign\n"
     "(REPLICA; - for a leader campaigning through another replica). A service\n"
     "replica lists the campaigns it holds, and the leader from the Lease.\n\n"
     "Options:\n"
     "  -o, --output FORMAT   table (default) or json: {\"namespace\", \"name\",\n"
     "                        \"candidates\": [{\"identity\", \"leader\",\n"
     "                        \"campaigningForMs\", \"replica\" (null when elsewhere)}]}\n",
     ctl_candidates},
    {"history", "NAMESPACE/NAME [-o json|table]", "Show the last terms of a Lease",
     "Lists the last terms of the Lease (at most 32, oldest first) as the\n"
     "kubeleased replica answering saw them: the holder, the epoch, when the term\n"
     "started (UTC), how long it lasted (so far, while it goes on), why it ended\n"
     "(END: resigned, expired, handed_off, superseded, renew_failed, deleted,\n"
     "shutdown, resume_failed; (leading) while it goes on), the leaderless time\n"
     "before it (GAP BEFORE; - when unknown) and the replica that served it (-\n"
     "for a term only seen in the Lease: another replica's). Then how long the\n"
     "Lease has been leaderless, or the validity left of the current grant.\n"
     "Exits 1 when that replica does not follow the Lease.\n\n"
     "Options:\n"
     "  -o, --output FORMAT   table (default) or json: {\"namespace\", \"name\",\n"
     "                        \"nowUnixMs\", \"leaderlessSinceUnixMs\" (0: a leader),\n"
     "                        \"validForMs\", \"leaseDurationSeconds\", \"terms\":\n"
     "                        [{\"holder\", \"epoch\", \"startUnixMs\", \"endUnixMs\" (0:\n"
     "                        goes on), \"endReason\" (null: goes on), \"gapBeforeMs\"\n"
     "                        (-1: unknown), \"replica\" (null: seen in the Lease)}]}\n",
     ctl_history},
    {"handoff", "NAMESPACE/NAME [IDENTITY]", "Hand the leadership of a Lease to a candidate",
     "Ends the current term and has IDENTITY (a standby campaigning through the\n"
     "same kubeleased replica as the leader; without it, the next in line) elected\n"
     "next, in one write: no other candidate can take the Lease in between. The\n"
     "leader learns it lost (\"handed off\") and the next term starts once its\n"
     "library acknowledges, in milliseconds, or at the latest when the validity\n"
     "granted to it has passed. Needs the verb handoff on the election\n"
     "(elections.kubelease.io) when the service authenticates callers. Exits 16\n"
     "when nobody holds the Lease through that replica or IDENTITY is no standby\n"
     "there (the message says which), 17 when not allowed.\n",
     ctl_handoff},
    {"elect", "NAMESPACE/NAME --identity ID [options] -- COMMAND [ARGS...]",
     "Run a command while leading a Lease",
     "Campaigns for the Lease; when elected, starts COMMAND with KUBELEASE_EPOCH,\n"
     "KUBELEASE_NAMESPACE, KUBELEASE_LEASE (and KUBELEASE_VALUE with --value) in\n"
     "its environment, in its own process\n"
     "group, with only stdin, stdout and stderr open. When leadership is lost, or\n"
     "its deadline comes within --term-grace without a fresh confirmation, the\n"
     "group gets SIGTERM; SIGKILL follows after --stop-timeout, or 100 ms before\n"
     "the deadline if that comes first. Then kubeleasectl resigns and campaigns\n"
     "again (exits 16 with --once). When COMMAND exits on its own, kubeleasectl\n"
     "resigns and exits with its status. SIGINT or SIGTERM stop COMMAND the same\n"
     "way (a second signal kills it at once), resign, and exit with its status\n"
     "(0 when it was not running). If kubeleasectl dies, COMMAND gets\n"
     "SIGKILL (PR_SET_PDEATHSIG): COMMAND should exec its long-running program.\n\n"
     "Options:\n"
     "  --identity ID          this candidate's identity (required)\n"
     "  --lease-duration S     lease duration in seconds (default 15)\n"
     "  --renew-deadline S     renew deadline in seconds (default 10)\n"
     "  --retry-period S       retry period in seconds (default 2)\n"
     "  --term-grace DURATION  SIGTERM this long before the deadline when not\n"
     "                         confirmed (e.g. 500ms; default a third of the\n"
     "                         validity granted, at most half of it)\n"
     "  --stop-timeout DURATION  SIGKILL this long after SIGTERM at the latest\n"
     "                         (default 10s; the deadline comes first if earlier)\n"
     "  --once                 exit after the first term instead of campaigning again\n"
     "  --value TEXT           the leader value: what the leader says about itself\n"
     "                         (an address, a version; at most 1024 bytes), read by\n"
     "                         `get` and `watch`\n"
     "  --grant DURATION       the validity of each confirmation (200ms to the retry\n"
     "                         period; default the retry period): what a crash costs\n"
     "                         in failover\n",
     ctl_elect},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static const struct ctl_command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void overview(FILE *out)
{
    fprintf(out, "Usage: kubeleasectl [--endpoint URL] COMMAND [options] [arguments]\n\n"
                 "The command line of kubelease: look at elections, run a program as leader.\n\n"
                 "Commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-7s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  help    Show the help of a command\n\n"
                 "Run 'kubeleasectl COMMAND --help' for its options. The service is\n"
                 "--endpoint, else $KUBELEASE_ENDPOINT, else http://127.0.0.1:8080.\n"
                 "Exit codes: 0 ok, 1 not found, 2 usage, 10 + |kl_status| for other\n"
                 "library errors (12 unavailable, 13 timeout, 16 leadership lost, ...);\n"
                 "elect exits with its command's status.\n");
}

int main(int argc, char **argv)
{
    struct ctl_opts o = {NULL, CTL_OUT_TABLE};
    int i = 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--endpoint") == 0 && i + 1 < argc) {
            o.endpoint = argv[++i];
        } else if (strncmp(argv[i], "--endpoint=", 11) == 0) {
            o.endpoint = argv[i] + 11;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            overview(stdout);
            return CTL_EXIT_OK;
        } else if (strcmp(argv[i], "--version") == 0) {
            printf("kubeleasectl %s (libkubelease %s)\n", CTL_VERSION, kl_version());
            return CTL_EXIT_OK;
        } else {
            return ctl_usage_error(NULL, "unknown option \"%s\"", argv[i]);
        }
    }
    if (i == argc) {
        overview(stderr);
        return CTL_EXIT_USAGE;
    }
    if (strcmp(argv[i], "help") == 0) {
        const struct ctl_command *cmd = i + 1 < argc ? find_command(argv[i + 1]) : NULL;
        if (i + 1 < argc && !cmd)
            return ctl_usage_error(NULL, "no command \"%s\"", argv[i + 1]);
        if (cmd)
            ctl_print_help(cmd, stdout);
        else
            overview(stdout);
        return CTL_EXIT_OK;
    }
    const struct ctl_command *cmd = find_command(argv[i]);
    if (!cmd)
        return ctl_usage_error(NULL, "no command \"%s\"", argv[i]);
    return cmd->run(cmd, argc - i, argv + i, &o);
}
