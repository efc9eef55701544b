/* The process-wide kubelease client of libk8s_lease_wrapper (K8sLeaseInit)
 * and the error messages handed to callers.
 *
 * The Go wrapper kept one Kubernetes client per process, created on first
 * use; this keeps one kl_client for $KUBELEASE_ENDPOINT the same way. It is
 * created under client_mu and never freed: callers may still be blocked in
 * it when the process exits, and exiting ends its thread. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static pthread_mutex_t client_mu = PTHREAD_MUTEX_INITIALIZER;
static kl_client *client; /* under client_mu; set once, never freed */

int kw_fail(char **msg, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    if (!msg)
        return -1;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    *msg = s;
    return -1;
}

const char *kw_str(const char *s)
{
    return s ? s : "";
}

/* The library's log on stderr, from the level $KUBELEASE_LOG names (debug,
 * info, warn, error; any other value: warn) up; unset or empty: none. */
static int log_from = KL_LOG_ERROR + 1;

static void log_stderr(void *ctx, int level, const char *message)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    (void)ctx;
    if (level >= log_from && level >= KL_LOG_DEBUG && level <= KL_LOG_ERROR)
        fprintf(stderr, "kubelease: %s: %s\n", names[level], message);
}

static void log_options(kl_client_options *o)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    const char *want = getenv("KUBELEASE_LOG");
    if (!want || !want[0])
        return;
    log_from = KL_LOG_WARN;
    for (int i = KL_LOG_DEBUG; i <= KL_LOG_ERROR; i++)
        if (strcmp(want, names[i]) == 0)
            log_from = i;
    o->log = log_stderr;
}

kl_client *kw_client(char **msg)
{
    kl_error err = {0, ""};
    kl_client *c;

    pthread_mutex_lock(&client_mu);
    if (!client) {
        kl_client_options o;
        kl_client_options_init(&o);
        log_options(&o);
        client = kl_client_new_opts(NULL, &o, &err);
    }
    c = client;
    pthread_mutex_unlock(&client_mu);
    if (!c)
        kw_fail(msg, "cannot create the kubelease client for $KUBELEASE_ENDPOINT: %s", err.message);
    return c;
}

kl_client *kw_client_if_any(void)
{
    pthread_mutex_lock(&client_mu);
    kl_client *c = client;
    pthread_mutex_unlock(&client_mu);
    return c;
}

KW_EXPORT int K8sLeaseInit(char **errMsg)
{
    return kw_client(errMsg) ? 0 : -1;
}
