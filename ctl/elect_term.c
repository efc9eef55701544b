/* One term of `kubeleasectl elect`: the command runs while this process
 * leads, and never past the leadership deadline — the safety contract
 * (docs/design.md, rules 1 and 2) extended to a process tree:
 *
 *   - the deadline is the library's (kl_is_leader's validity added to the
 *     monotonic time taken *before* asking), so it is never later than the
 *     library's, which is never later than the service's;
 *   - when that deadline comes within the grace (--term-grace, by default a
 *     third of the validity granted: two confirmations missed in a row)
 *     without a fresh confirmation, or the library reports the loss, the
 *     command's process group gets SIGTERM;
 *   - it gets SIGKILL ELECT_KILL_MARGIN_MS before the deadline at the
 *     latest;
 *   - the Lease is resigned only after the command has been reaped and its
 *     process group killed, so a successor never overlaps with it
 *     (docs/design.md, rule 3 lets the successor in at once after that).
 *
 * Main thread only (see elect.h). The wait is a poll bounded by the next of
 * those two points: each wake-up asks the library again, which moves them
 * when a confirmation arrived meanwhile. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "elect.h"

enum stop_why {
    WHY_NONE,     /* the command ended on its own */
    WHY_DEADLINE, /* the deadline came within the grace */
    WHY_LOST,     /* the library reported the loss */
    WHY_SIGNAL,   /* kubeleasectl got SIGINT or SIGTERM */
};

struct term {
    int64_t epoch;
    int64_t deadline; /* monotonic ms; never later than the library's */
    int64_t grace;    /* SIGTERM this long before the deadline */
    int leader;       /* the library still reports leadership */
    pid_t pid;        /* the command (and its process group); 0 once reaped */
    pid_t pgid;
    int status; /* its wait status once reaped */
    enum stop_why why;
    int64_t term_at; /* when it got SIGTERM; 0 before */
    int killed;
};

/* Asks the library how long leadership is guaranteed. */
static void refresh(struct elect *e, struct term *t)
{
    int64_t valid = 0, before = ctl_now_ms();
    if (!t->leader)
        return;
    if (kl_is_leader(e->c, e->cfg.ns, e->cfg.name, &valid, NULL) == 1)
        t->deadline = before + valid;
    else
        t->leader = 0;
}

static int64_t grace_for(const struct elect *e, int64_t validity)
{
    if (!e->cfg.term_grace_ms)
        return validity / 3;
    /* Above half the validity, an ordinary late confirmation would stop
     * the command. */
    if (e->cfg.term_grace_ms > validity / 2) {
        elect_log(e,
                  "--term-grace %" PRId64 "ms is more than half the validity granted (%" PRId64
                  " ms): using %" PRId64 " ms",
                  e->cfg.term_grace_ms, validity, validity / 2);
        return validity / 2;
    }
    return e->cfg.term_grace_ms;
}

/* SIGKILL after --stop-timeout, or ELECT_KILL_MARGIN_MS before the
 * deadline if that comes first. */
static int64_t kill_at(const struct elect *e, const struct term *t)
{
    int64_t at = t->deadline - ELECT_KILL_MARGIN_MS;
    return t->term_at + e->cfg.stop_timeout_ms < at ? t->term_at + e->cfg.stop_timeout_ms : at;
}

static void stop(const struct elect *e, struct term *t, enum stop_why why, int64_t now)
{
    static const char *const reasons[] = {
        [WHY_DEADLINE] = "no confirmation: the deadline is near",
        [WHY_LOST] = "leadership lost",
        [WHY_SIGNAL] = "asked to stop",
    };
    t->why = why;
    t->term_at = now;
    ctl_child_signal(t->pid, SIGTERM);
    elect_log(e, "%s: SIGTERM to pid %d (SIGKILL in %" PRId64 " ms unless it exits%s)",
              reasons[why], (int)t->pid, kill_at(e, t) - now,
              t->leader ? " or leadership is confirmed again" : "");
}

/* The command exited: its process group gets SIGKILL while the zombie
 * still holds the group's id, then it is reaped. */
static void reap(struct term *t)
{
    siginfo_t info;
    memset(&info, 0, sizeof(info));
    if (waitid(P_PID, (id_t)t->pid, &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid != t->pid)
        return;
    kill(-t->pgid, SIGKILL);
    while (waitpid(t->pid, &t->status, 0) < 0 && errno == EINTR)
        ;
    t->pid = 0;
}

static void on_signal(struct elect *e, struct term *t, int sig, int64_t now)
{
    if (sig == SIGCHLD) {
        reap(t);
        return;
    }
    if (++e->stop_signals > 1 && t->term_at && !t->killed) {
        elect_log(e, "%s again: SIGKILL to pid %d", strsignal(sig), (int)t->pid);
        ctl_child_signal(t->pid, SIGKILL);
        t->killed = 1;
    } else if (!t->term_at) {
        stop(e, t, WHY_SIGNAL, now);
    }
}

/* One step: look at the deadline, act, wait for the next point or event. */
static void supervise(struct elect *e, struct term *t)
{
    struct elect_msg m;
    int sig = 0;
    refresh(e, t);
    int64_t now = ctl_now_ms();
    if (!t->term_at && !t->leader)
        stop(e, t, WHY_LOST, now);
    else if (!t->term_at && now >= t->deadline - t->grace)
        stop(e, t, WHY_DEADLINE, now);
    if (t->term_at && !t->killed && now >= kill_at(e, t)) {
        ctl_child_signal(t->pid, SIGKILL);
        t->killed = 1;
        elect_log(e, "SIGKILL to pid %d, %" PRId64 " ms before the deadline", (int)t->pid,
                  t->deadline - now);
    }
    int64_t wake = !t->term_at ? t->deadline - t->grace : !t->killed ? kill_at(e, t) : -1;
    int64_t wait_ms = wake < 0 ? -1 : wake > now ? wake - now : 0;
    int ev = elect_wait(e, wait_ms > INT_MAX ? INT_MAX : (int)wait_ms, &m, &sig);
    if (ev == ELECT_SIGNAL)
        on_signal(e, t, sig, ctl_now_ms());
    else if (ev == ELECT_MESSAGE && m.kind == ELECT_MSG_ENDED) {
        t->leader = 0;
        if (m.rc != KL_OK)
            elect_log(e, "%s", m.message);
    }
}

/* The command is gone: resign, then decide. */
static int end_term(struct elect *e, struct term *t, int ran, int *code)
{
    if (ran)
        elect_log(e, "pid %d exited with status %d", (int)t->pgid, ctl_child_exit_code(t->status));
    kl_cancel_election(e->c, e->cfg.ns, e->cfg.name, NULL);
    elect_end_election(e);
    if (e->stop_signals || (ran && t->why == WHY_NONE)) {
        *code = ran ? ctl_child_exit_code(t->status) : CTL_EXIT_OK;
        elect_log(e, "resigned; exiting with status %d", *code);
        return 0;
    }
    if (e->cfg.once) {
        *code = ctl_exit_code(KL_ERR_LOST);
        elect_log(e, "leadership ended (--once): exiting with status %d", *code);
        return 0;
    }
    return 1;
}

int elect_lead(struct elect *e, int64_t epoch, int *code)
{
    struct term t = {.epoch = epoch, .leader = 1};
    refresh(e, &t);
    int64_t validity = t.deadline - ctl_now_ms();
    t.grace = grace_for(e, validity);
    if (!t.leader || validity <= t.grace) {
        elect_log(e, "elected (epoch %" PRId64 ") but too close to the deadline to start", epoch);
        t.why = WHY_DEADLINE;
        return end_term(e, &t, 0, code);
    }
    t.pid = t.pgid = ctl_child_start(&e->child, epoch, e->cfg.ns, e->cfg.name, e->cfg.value);
    if (t.pid < 0) {
        elect_log(e, "cannot start the command: %s", strerror(errno));
        e->stop_signals++; /* exit after resigning */
        end_term(e, &t, 0, code);
        *code = ctl_exit_code(KL_ERR_INTERNAL);
        return 0;
    }
    elect_log(e, "elected (epoch %" PRId64 ", valid for %" PRId64 " ms): started pid %d", epoch,
              validity, (int)t.pid);
    while (t.pid > 0)
        supervise(e, &t);
    return end_term(e, &t, 1, code);
}
