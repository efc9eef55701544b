/* `kubeleasectl elect`: the state its two files share. elect.c campaigns
 * and stands by; elect_term.c supervises the command through one term.
 *
 * Threads. The main thread owns everything here. One waiting thread per
 * campaign blocks in kl_wait_elected, then kl_wait_lost, and reports each
 * return as a struct elect_msg on a pipe; it reads only the immutable cfg
 * and c. Signals (SIGINT, SIGTERM, SIGCHLD) are blocked in every thread and
 * read from a signalfd, so the main thread waits for all three sources in
 * one poll. */
#ifndef CTL_ELECT_H
#define CTL_ELECT_H

#include <pthread.h>
#include <stdint.h>

#include "child.h"
#include "ctl.h"

/* How long before the leadership deadline the command gets SIGKILL: the
 * time the kernel and a late wake-up of kubeleasectl may take
 * (README, "kubeleasectl", the process-tree contract). */
#define ELECT_KILL_MARGIN_MS 100

struct elect_cfg {
    char ns[64];
    char name[254];
    const char *identity;
    int lease_s, renew_s, retry_s;
    int64_t term_grace_ms;   /* 0: a third of the validity granted */
    const char *value;       /* --value: the leader value (text); NULL: none */
    int64_t grant_ms;        /* --grant: 0 for the service's */
    int64_t stop_timeout_ms; /* from SIGTERM to SIGKILL, at most */
    int once;
};

enum elect_msg_kind { ELECT_MSG_ELECTED, ELECT_MSG_ENDED };

/* What the waiting thread reports: kl_wait_elected's or kl_wait_lost's
 * return. final: the thread ends after this one. */
struct elect_msg {
    int kind;
    int rc;
    int final;
    int64_t epoch;
    char message[256];
};

struct elect {
    struct elect_cfg cfg;
    kl_client *c;
    struct ctl_child child;
    int sig_fd;    /* signalfd of SIGINT, SIGTERM, SIGCHLD */
    int msg_fd[2]; /* the waiting thread's pipe */
    pthread_t waiter;
    int waiter_running; /* started and its final message not read */
    int stop_signals;   /* SIGINT and SIGTERM received so far */
};

enum elect_event { ELECT_TIMEOUT, ELECT_SIGNAL, ELECT_MESSAGE };

/* Waits at most timeout_ms (-1: no limit) for a signal (*sig) or a message
 * of the waiting thread (*m; the thread is joined after its final one). */
int elect_wait(struct elect *e, int timeout_ms, struct elect_msg *m, int *sig);
/* After kl_cancel_election or the end of an election: reads the waiting
 * thread's last messages, joins it, and waits (bounded) until the library
 * is done with the election, its resignation answered. */
void elect_end_election(struct elect *e);
/* Logs "kubeleasectl: TIME NS/NAME: MESSAGE" on stderr. */
void elect_log(const struct elect *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Leads the term of epoch (kl_wait_elected returned): runs the command
 * until it exits or must stop, then resigns. Returns 1 to campaign again,
 * 0 to exit with *code. */
int elect_lead(struct elect *e, int64_t epoch, int *code);

#endif
