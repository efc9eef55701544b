/* The command `kubeleasectl elect` runs while it leads: its program found
 * once, its environment, its start (fork and exec with the safeguards of
 * the process-tree contract), signals to its process group, and its exit
 * status.
 *
 * Threads. Main thread only: ctl_child_start forks from the calling thread,
 * and PR_SET_PDEATHSIG fires when *that thread* ends, so it must be the
 * thread that lives as long as the process. */
#ifndef CTL_CHILD_H
#define CTL_CHILD_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

struct ctl_child {
    char *path;  /* the program, resolved against $PATH */
    char **argv; /* the caller's (not owned) */
    char **envp; /* the environment without KUBELEASE_{EPOCH,NAMESPACE,LEASE,VALUE},
                  * and four slots for them at env_slots */
    size_t env_slots;
    char vars[3][320];
    char value_var[16 + 1024 + 1]; /* KUBELEASE_VALUE= and the leader value */
    sigset_t mask; /* the signal mask the program starts with */
};

/* Prepares ch for argv (argv[0] searched in $PATH unless it has a '/'),
 * with the environment of this process and mask for the program. Returns 0,
 * or CTL_EXIT_NO_COMMAND / CTL_EXIT_CANNOT_EXEC after printing why, or -1 on
 * out of memory (printed). */
int ctl_child_prepare(struct ctl_child *ch, char **argv, const sigset_t *mask);
void ctl_child_free(struct ctl_child *ch);

/* Starts the program with KUBELEASE_EPOCH, KUBELEASE_NAMESPACE,
 * KUBELEASE_LEASE and (value not NULL) KUBELEASE_VALUE set, in its own
 * process group (its id is the pid), with only stdin, stdout and stderr
 * open, and SIGKILL as its parent-death signal. Returns its pid, or -1 with
 * errno set (fork failed). */
pid_t ctl_child_start(struct ctl_child *ch, int64_t epoch, const char *ns, const char *name,
                      const char *value);

/* Sends sig to the child's process group (to pid alone if the group is
 * gone, e.g. the child moved to its own). */
void ctl_child_signal(pid_t pid, int sig);

/* The exit code a shell would report for a wait status: the exit status,
 * or 128 + the signal number. */
int ctl_child_exit_code(int wait_status);

#endif
