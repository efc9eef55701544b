/* The command of `kubeleasectl elect` (see child.h). Between fork and
 * execve the child makes only async-signal-safe calls: the parent has
 * threads (libkubelease's), whose locks may be held at the fork. */
#include "child.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl.h"

extern char **environ;

static const char *const managed_vars[] = {
    "KUBELEASE_EPOCH=", "KUBELEASE_NAMESPACE=", "KUBELEASE_LEASE=", "KUBELEASE_VALUE="};

static int is_managed(const char *kv)
{
    for (size_t i = 0; i < sizeof(managed_vars) / sizeof(managed_vars[0]); i++)
        if (strncmp(kv, managed_vars[i], strlen(managed_vars[i])) == 0)
            return 1;
    return 0;
}

/* 0 when path names an executable regular file; else 126 (it exists) or
 * 127. */
static int check_program(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return CTL_EXIT_NO_COMMAND;
    if (!S_ISREG(st.st_mode) || access(path, X_OK) != 0)
        return CTL_EXIT_CANNOT_EXEC;
    return 0;
}

/* Finds name as a shell would: as given when it has a '/', else in the
 * directories of $PATH. Returns 0 with *path malloc'd, or 126/127. */
static int find_program(const char *name, char **path)
{
    const char *dirs = getenv("PATH");
    int worst = CTL_EXIT_NO_COMMAND;
    char buf[4096];

    if (strchr(name, '/')) {
        int rc = check_program(name);
        if (rc == 0 && !(*path = strdup(name)))
            return -1;
        return rc;
    }
    if (!dirs || !*dirs)
        dirs = "/usr/local/bin:/usr/bin:/bin";
    for (const char *d = dirs;; d++) {
        const char *end = strchrnul(d, ':');
        int len = (int)(end - d);
        snprintf(buf, sizeof(buf), "%.*s/%s", len ? len : 1, len ? d : ".", name);
        int rc = check_program(buf);
        if (rc == 0)
            return (*path = strdup(buf)) ? 0 : -1;
        if (rc == CTL_EXIT_CANNOT_EXEC)
            worst = rc;
        if (!*end)
            return worst;
        d = end;
    }
}

int ctl_child_prepare(struct ctl_child *ch, char **argv, const sigset_t *mask)
{
    size_t n = 0, k = 0;
    memset(ch, 0, sizeof(*ch));
    ch->argv = argv;
    ch->mask = *mask;
    int rc = find_program(argv[0], &ch->path);
    if (rc > 0) {
        fprintf(stderr, "kubeleasectl: %s: %s\n", argv[0],
                rc == CTL_EXIT_NO_COMMAND ? "command not found" : "not an executable file");
        return rc;
    }
    while (environ && environ[n])
        n++;
    ch->envp = rc == 0 ? calloc(n + 5, sizeof(char *)) : NULL;
    if (!ch->envp) {
        fprintf(stderr, "kubeleasectl: out of memory\n");
        ctl_child_free(ch);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        if (!is_managed(environ[i]))
            ch->envp[k++] = environ[i];
    ch->env_slots = k;
    return 0;
}

void ctl_child_free(struct ctl_child *ch)
{
    free(ch->path);
    free(ch->envp);
    ch->path = NULL;
    ch->envp = NULL;
}

/* In the child: only async-signal-safe calls until execve. */
static void __attribute__((noreturn)) child_exec(const struct ctl_child *ch, pid_t parent)
{
    /* Its own process group, so that signals reach what it starts too. */
    setpgid(0, 0);
    /* SIGKILL when kubeleasectl dies (SIGKILL, OOM): the command must not
     * outlive the process that knows the leadership deadline. If the parent
     * died before prctl, no signal will come: getppid() then names the
     * reaper, so exit as if the signal had come. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(128 + SIGKILL);
    /* Only stdin, stdout and stderr: the library's sockets stay ours. */
    if (close_range(3, ~0U, 0) != 0)
        for (int fd = 3; fd < 65536; fd++)
            close(fd);
    sigprocmask(SIG_SETMASK, &ch->mask, NULL);
    execve(ch->path, ch->argv, ch->envp);
    _exit(errno == ENOENT ? CTL_EXIT_NO_COMMAND : CTL_EXIT_CANNOT_EXEC);
}

pid_t ctl_child_start(struct ctl_child *ch, int64_t epoch, const char *ns, const char *name,
                      const char *value)
{
    snprintf(ch->vars[0], sizeof(ch->vars[0]), "KUBELEASE_EPOCH=%" PRId64, epoch);
    snprintf(ch->vars[1], sizeof(ch->vars[1]), "KUBELEASE_NAMESPACE=%s", ns);
    snprintf(ch->vars[2], sizeof(ch->vars[2]), "KUBELEASE_LEASE=%s", name);
    size_t k = ch->env_slots;
    for (size_t i = 0; i < 3; i++)
        ch->envp[k++] = ch->vars[i];
    if (value) {
        snprintf(ch->value_var, sizeof(ch->value_var), "KUBELEASE_VALUE=%s", value);
        ch->envp[k++] = ch->value_var;
    }
    ch->envp[k] = NULL;

    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        child_exec(ch, parent);
    if (pid > 0)
        setpgid(pid, pid); /* as the child does: whichever runs first */
    return pid;
}

void ctl_child_signal(pid_t pid, int sig)
{
    if (kill(-pid, sig) != 0)
        kill(pid, sig);
}

int ctl_child_exit_code(int wait_status)
{
    if (WIFEXITED(wait_status))
        return WEXITSTATUS(wait_status);
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return 1;
}
