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

kl_client *kw_client(char **msg)
{
    kl_error err = {0, ""};
    kl_client *c;

    pthread_mutex_lock(&client_mu);
    if (!client)
        client = kl_client_new(NULL, &err);
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
