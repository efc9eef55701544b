/* `watch NS/NAME`: one line per change of holder or leader value
 * (kl_watch_holder_ex) until
 * SIGINT or SIGTERM. The main thread waits for the signal with sigwait; the
 * callback prints on the library's I/O thread (stdio locks each call), and
 * when stdout fails it signals the main thread to stop. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"

struct watch_ctx {
    const char *ns;
    const char *name;
    enum ctl_output output;
    atomic_int write_errno; /* 0 while stdout works */
};

static void on_holder(void *arg, const char *holder, size_t holder_len, int64_t epoch,
                      const void *value, size_t value_len)
{
    struct watch_ctx *w = arg;
    char now[40];
    (void)holder_len;
    if (atomic_load(&w->write_errno))
        return;
    ctl_format_now(now, sizeof(now));
    if (w->output == CTL_OUT_JSON) {
        printf("{\"time\":\"%s\",\"namespace\":", now);
        ctl_json_string(stdout, w->ns);
        fputs(",\"name\":", stdout);
        ctl_json_string(stdout, w->name);
        fputs(",\"holder\":", stdout);
        ctl_json_string(stdout, holder);
        printf(",\"epoch\":%" PRId64, epoch);
        if (value_len) {
            fputs(",\"value\":", stdout);
            ctl_json_bytes(stdout, value, value_len);
        }
        fputs("}\n", stdout);
    } else {
        printf("%s  %s/%s  holder=%s  epoch=%" PRId64, now, w->ns, w->name,
               holder ? holder : "<none>", epoch);
        if (value_len) {
            fputs("  value=", stdout);
            ctl_print_value_text(stdout, value, value_len);
        }
        fputc('\n', stdout);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        atomic_store(&w->write_errno, errno ? errno : EIO);
        kill(getpid(), SIGTERM); /* the main thread is in sigwait */
    }
}

int ctl_watch(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o)
{
    struct watch_ctx w = {.ns = NULL};
    char ns[64], name[254];
    kl_error err;
    sigset_t set;
    int sig, rc = ctl_parse_one_ref(cmd, argc, argv, o, ns, sizeof(ns), name, sizeof(name));
    if (rc >= 0)
        return rc;
    w.ns = ns;
    w.name = name;
    w.output = o->output;
    /* Blocked before the library's thread exists, taken by sigwait below. */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    kl_client *c = ctl_client_new(o, &rc);
    if (!c)
        return rc;
    rc = kl_watch_holder_ex(c, ns, name, on_holder, &w, &err);
    if (rc != KL_OK) {
        kl_client_free(c);
        return ctl_fail(rc, &err);
    }
    sigwait(&set, &sig);
    kl_cancel_watch(c, ns, name, NULL);
    kl_client_free(c);
    rc = atomic_load(&w.write_errno);
    if (rc && rc != EPIPE) {
        fprintf(stderr, "kubeleasectl: writing the watch: %s\n", strerror(rc));
        return CTL_EXIT_STATUS_BASE - KL_ERR_INTERNAL;
    }
    return CTL_EXIT_OK;
}
