/* pause: the sandbox process of every Pod on the test node (containerd's
 * sandbox_image). It holds the Pod's namespaces, reaps the zombies of
 * processes that share its PID namespace, and exits on SIGINT or SIGTERM,
 * as Kubernetes' own pause does. Built static, so that its image holds
 * nothing else. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig)
{
    (void)sig;
    _exit(0);
}

static void on_child(int sig)
{
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void)
{
    struct sigaction stop = {.sa_handler = on_stop};
    struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};

    if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
        sigaction(SIGCHLD, &child, NULL) < 0)
        return 1;
    for (;;)
        pause();
}
