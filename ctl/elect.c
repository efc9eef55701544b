/* `kubeleasectl elect NS/NAME --identity ID [...] -- CMD [ARGS...]`: its
 * options, its setup (signals, the client, the command), and the campaign
 * loop: stand by until elected, lead the term (elect_term.c), and campaign
 * again or exit. Threads: see elect.h. */
#include "elect.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

void elect_log(const struct elect *e, const char *fmt, ...)
{
    char now[40], line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    ctl_format_now(now, sizeof(now));
    fprintf(stderr, "kubeleasectl: %s %s/%s: %s\n", now, e->cfg.ns, e->cfg.name, line);
}

/* --- the waiting thread --------------------------------------------------- */

static void post(struct elect *e, const struct elect_msg *m)
{
    /* Smaller than PIPE_BUF: one atomic write. */
    while (write(e->msg_fd[1], m, sizeof(*m)) < 0 && errno == EINTR)
        ;
}

static void *waiter_main(void *arg)
{
    struct elect *e = arg;
    struct elect_msg m = {.kind = ELECT_MSG_ELECTED};
    kl_error err;

    m.rc = kl_wait_elected(e->c, e->cfg.ns, e->cfg.name, -1, &m.epoch, &err);
    snprintf(m.message, sizeof(m.message), "%s", m.rc == KL_OK ? "" : err.message);
    m.final = m.rc != KL_OK;
    post(e, &m);
    if (m.final)
        return NULL;
    m.kind = ELECT_MSG_ENDED;
    m.rc = kl_wait_lost(e->c, e->cfg.ns, e->cfg.name, &err);
    snprintf(m.message, sizeof(m.message), "%s", m.rc == KL_OK ? "" : err.message);
    m.final = 1;
    post(e, &m);
    return NULL;
}

int elect_wait(struct elect *e, int timeout_ms, struct elect_msg *m, int *sig)
{
    struct pollfd p[2] = {{e->sig_fd, POLLIN, 0}, {e->msg_fd[0], POLLIN, 0}};
    if (poll(p, 2, timeout_ms) <= 0)
        return ELECT_TIMEOUT; /* EINTR too: the caller looks again */
    if (p[0].revents & POLLIN) {
        struct signalfd_siginfo si;
        if (read(e->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
            *sig = (int)si.ssi_signo;
            return ELECT_SIGNAL;
        }
    }
    if ((p[1].revents & POLLIN) && read(e->msg_fd[0], m, sizeof(*m)) == (ssize_t)sizeof(*m)) {
        if (m->final) {
            pthread_join(e->waiter, NULL);
            e->waiter_running = 0;
        }
        return ELECT_MESSAGE;
    }
    return ELECT_TIMEOUT;
}

void elect_end_election(struct elect *e)
{
    struct elect_msg m;
    while (e->waiter_running) {
        ssize_t n = read(e->msg_fd[0], &m, sizeof(m));
        if (n == (ssize_t)sizeof(m) && m.final) {
            pthread_join(e->waiter, NULL);
            e->waiter_running = 0;
        } else if (n <= 0 && errno != EINTR) {
            break; /* cannot happen: this process holds the write end */
        }
    }
    kl_wait_ended(e->c, e->cfg.ns, e->cfg.name, 5000, NULL);
}

/* --- campaigning ---------------------------------------------------------- */

/* Statuses with which campaigning again cannot help. */
static int permanent(int rc)
{
    return rc == KL_ERR_INVALID_ARGUMENT || rc == KL_ERR_PERMISSION_DENIED ||
           rc == KL_ERR_PROTOCOL || rc == KL_ERR_ALREADY_RUNNING;
}

/* Stands by until elected; returns the waiting thread's first message in
 * *m, or 0 with *code set when a signal ended the campaign. */
static int stand_by(struct elect *e, struct elect_msg *m, int *code)
{
    int sig;
    for (;;) {
        int ev = elect_wait(e, -1, m, &sig);
        if (ev == ELECT_MESSAGE)
            return 1;
        if (ev == ELECT_SIGNAL && sig != SIGCHLD) {
            e->stop_signals++;
            elect_log(e, "%s while standing by: resigning", strsignal(sig));
            kl_cancel_election(e->c, e->cfg.ns, e->cfg.name, NULL);
            elect_end_election(e);
            *code = CTL_EXIT_OK;
            return 0;
        }
    }
}

/* One campaign: stand by, lead. Returns 1 to campaign again, 0 to exit
 * with *code. */
static int elect_round(struct elect *e, int *code)
{
    struct elect_cfg *cfg = &e->cfg;
    struct elect_msg m;
    kl_error err;
    int sig;

    kl_election_options eo;
    kl_election_options_init(&eo);
    eo.lease_duration_s = cfg->lease_s;
    eo.renew_deadline_s = cfg->renew_s;
    eo.retry_period_s = cfg->retry_s;
    eo.value = cfg->value;
    eo.value_len = cfg->value ? strlen(cfg->value) : 0;
    eo.grant_ms = (int)cfg->grant_ms;
    int rc = kl_run_election_opts(e->c, cfg->ns, cfg->name, cfg->identity, &eo, &err);
    if (rc != KL_OK) {
        *code = ctl_fail(rc, &err);
        return 0;
    }
    if (pthread_create(&e->waiter, NULL, waiter_main, e) != 0) {
        kl_cancel_election(e->c, cfg->ns, cfg->name, NULL);
        kl_wait_ended(e->c, cfg->ns, cfg->name, 5000, NULL);
        *code = ctl_fail(KL_ERR_INTERNAL, NULL);
        return 0;
    }
    e->waiter_running = 1;
    elect_log(e, "campaigning as %s", cfg->identity);
    if (!stand_by(e, &m, code))
        return 0;
    if (m.rc == KL_OK)
        return elect_lead(e, m.epoch, code);
    elect_end_election(e);
    elect_log(e, "the campaign ended: %s", m.message);
    if (permanent(m.rc) || cfg->once) {
        *code = ctl_exit_code(m.rc);
        return 0;
    }
    /* Someone resigned this campaign: stand again after a retry period
     * (still answering signals), not in a tight loop. */
    int64_t until = ctl_now_ms() + (int64_t)cfg->retry_s * 1000;
    for (int64_t now; (now = ctl_now_ms()) < until;)
        if (elect_wait(e, (int)(until - now), &m, &sig) == ELECT_SIGNAL && sig != SIGCHLD) {
            *code = CTL_EXIT_OK;
            return 0;
        }
    return 1;
}

/* --- options and setup ---------------------------------------------------- */

static int seconds_option(const struct ctl_command *cmd, const char *name, const char *arg,
                          int *out)
{
    int64_t ms;
    if (ctl_parse_duration(cmd, name, arg, 1, &ms) != 0)
        return -1;
    if (ms % 1000 != 0)
        return ctl_usage_error(cmd, "%s must be whole seconds, not \"%s\"", name, arg), -1;
    *out = (int)(ms / 1000);
    return 0;
}

/* Parses argv[0..argc) (the part before "--"). Returns -1 to go on, or an
 * exit code. */
static int elect_options(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o,
                         struct elect_cfg *cfg)
{
    static const struct option longopts[] = {
        {"identity", required_argument, NULL, 'i'},
        {"lease-duration", required_argument, NULL, 'D'},
        {"renew-deadline", required_argument, NULL, 'R'},
        {"retry-period", required_argument, NULL, 'P'},
        {"term-grace", required_argument, NULL, 'G'},
        {"stop-timeout", required_argument, NULL, 'S'},
        {"value", required_argument, NULL, 'V'},
        {"grant", required_argument, NULL, 'g'},
        {"once", no_argument, NULL, '1'},
        {"endpoint", required_argument, NULL, 'E'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch, rc;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'i':
            cfg->identity = optarg;
            continue;
        case '1':
            cfg->once = 1;
            continue;
        case 'V':
            if (strlen(optarg) > 1024)
                return ctl_usage_error(cmd, "--value is longer than 1024 bytes");
            cfg->value = optarg;
            continue;
        case 'g':
            rc = ctl_parse_duration(cmd, "--grant", optarg, 0, &cfg->grant_ms);
            break;
        case 'D':
            rc = seconds_option(cmd, "--lease-duration", optarg, &cfg->lease_s);
            break;
        case 'R':
            rc = seconds_option(cmd, "--renew-deadline", optarg, &cfg->renew_s);
            break;
        case 'P':
            rc = seconds_option(cmd, "--retry-period", optarg, &cfg->retry_s);
            break;
        case 'G':
            rc = ctl_parse_duration(cmd, "--term-grace", optarg, 0, &cfg->term_grace_ms);
            break;
        case 'S':
            rc = ctl_parse_duration(cmd, "--stop-timeout", optarg, 0, &cfg->stop_timeout_ms);
            break;
        default:
            if ((rc = ctl_common_option(cmd, ch, optarg, o)) >= 0)
                return rc;
            continue;
        }
        if (rc != 0)
            return CTL_EXIT_USAGE;
    }
    if (argc - optind != 1)
        return ctl_usage_error(cmd, "expects one NAMESPACE/NAME before --");
    if (!cfg->identity)
        return ctl_usage_error(cmd, "--identity is required");
    if (ctl_parse_ref(cmd, argv[optind], cfg->ns, sizeof(cfg->ns), cfg->name, sizeof(cfg->name)) !=
        0)
        return CTL_EXIT_USAGE;
    return -1;
}

/* Blocks the signals (before any thread starts), prepares the command and
 * the channels, creates the client. Returns -1 to go on, or an exit code. */
static int elect_setup(struct elect *e, const struct ctl_opts *o, char **command)
{
    sigset_t set, old;
    int rc;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    signal(SIGCHLD, SIG_DFL); /* an inherited SIG_IGN would reap the command for us */
    pthread_sigmask(SIG_BLOCK, &set, &old);
    rc = ctl_child_prepare(&e->child, command, &old);
    if (rc != 0)
        return rc > 0 ? rc : ctl_exit_code(KL_ERR_NO_MEMORY);
    e->sig_fd = signalfd(-1, &set, SFD_CLOEXEC);
    if (e->sig_fd < 0 || pipe2(e->msg_fd, O_CLOEXEC) != 0) {
        fprintf(stderr, "kubeleasectl: %s\n", strerror(errno));
        return ctl_exit_code(KL_ERR_INTERNAL);
    }
    e->c = ctl_client_new(o, &rc);
    return e->c ? -1 : rc;
}

int ctl_elect(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o)
{
    struct elect e = {.cfg = {.lease_s = 15, .renew_s = 10, .retry_s = 2, .stop_timeout_ms = 10000},
                      .sig_fd = -1,
                      .msg_fd = {-1, -1}};
    int dashes = 1, code;
    while (dashes < argc && strcmp(argv[dashes], "--") != 0)
        dashes++;
    code = elect_options(cmd, dashes, argv, o, &e.cfg);
    if (code >= 0)
        return code;
    if (dashes + 1 >= argc)
        return ctl_usage_error(cmd, "expects -- COMMAND [ARGS...] after the options");
    code = elect_setup(&e, o, argv + dashes + 1);
    if (code < 0)
        while (elect_round(&e, &code))
            ;
    kl_client_free(e.c);
    ctl_child_free(&e.child);
    if (e.sig_fd >= 0)
        close(e.sig_fd);
    for (int i = 0; i < 2; i++)
        if (e.msg_fd[i] >= 0)
            close(e.msg_fd[i]);
    return code;
}
