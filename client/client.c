/* The client object: creation with its options, the work its I/O thread
 * runs (every election and watch), and its one teardown, which both
 * kl_client_free and the I/O thread (after kl_client_free from a callback)
 * use. kl_version and kl_free live here too. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "status.h"
#include "util.h"
#include "validate.h"

#define KL__DEFAULT_ENDPOINT "http://127.0.0.1:8080"

#define KL_STR_(x) #x
#define KL_STR(x)  KL_STR_(x)

const char *kl_version(void)
{
    return KL_STR(KL_VERSION_MAJOR) "." KL_STR(KL_VERSION_MINOR) "." KL_STR(KL_VERSION_PATCH);
}

void kl_free(void *p)
{
    free(p);
}

void kl_client_options_init(kl_client_options *opts)
{
    if (opts)
        memset(opts, 0, sizeof(*opts));
}

/* Frees the client and everything it holds; the I/O thread has ended (or
 * never started) and every transfer has been dropped. */
static void client_destroy(struct kl_client *c)
{
    KL__LIST_FOREACH_SAFE (link, &c->elections) {
        kl__list_remove(link);
        kl__election_unref(kl__election_of(link));
    }
    KL__LIST_FOREACH_SAFE (link, &c->watches) {
        kl__list_remove(link);
        kl__watch_free(kl__watch_of(link));
    }
    kl__loop_destroy(&c->loop);
    free(c);
}

/* The I/O thread's work (loop.mu held). */
static int64_t client_run(void *arg, int64_t now)
{
    struct kl_client *c = arg;
    int64_t next = kl__elections_process(&c->elections, now);
    next = kl__min64(next, kl__watches_process(&c->watches, now));
    if (c->stopping && kl__elections_idle(&c->elections) && kl__list_empty(&c->watches))
        return KL__LOOP_STOP;
    return next;
}

/* The I/O thread ends. Only it writes free_on_exit (kl_client_free from a
 * callback runs on it), so reading it here needs no lock. */
static void client_exit(void *arg)
{
    struct kl_client *c = arg;
    if (c->free_on_exit) {
        pthread_detach(pthread_self());
        client_destroy(c);
    }
}

/* Checks the options and fills in the defaults. */
static int client_options(const kl_client_options *in, kl_client_options *out, kl_error *err)
{
    kl_client_options_init(out);
    if (in) {
        if (in->connect_timeout_ms < 0 || in->request_timeout_ms < 0 || in->resign_timeout_ms < 0 ||
            in->max_backoff_ms < 0)
            return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                              "opts: timeouts must be >= 0 milliseconds (0 = default)");
        if (in->health_deadline_ms < 0)
            return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                              "opts: health_deadline_ms must be >= 0 milliseconds (0 = off)");
        *out = *in;
    }
    if (out->connect_timeout_ms == 0)
        out->connect_timeout_ms = 2000;
    if (out->request_timeout_ms == 0)
        out->request_timeout_ms = 5000;
    if (out->resign_timeout_ms == 0)
        out->resign_timeout_ms = 2000;
    if (out->max_backoff_ms == 0)
        out->max_backoff_ms = 2000;
    if (!out->token_file) {
        const char *env = getenv("KUBELEASE_TOKEN_FILE");
        out->token_file = env && *env ? env : NULL;
    }
    if (!out->ca_file || !*out->ca_file)
        out->ca_file = getenv("KUBELEASE_CA_FILE");
    if (out->ca_file && !*out->ca_file)
        out->ca_file = NULL;
    if (out->ca_file && access(out->ca_file, R_OK) != 0)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "ca_file \"%.160s\"%s: cannot read it: %s",
                          out->ca_file, in && in->ca_file ? "" : " ($KUBELEASE_CA_FILE)",
                          strerror(errno));
    return KL_OK;
}

kl_client *kl_client_new(const char *endpoint, kl_error *err)
{
    return kl_client_new_opts(endpoint, NULL, err);
}

kl_client *kl_client_new_opts(const char *endpoint, const kl_client_options *opts, kl_error *err)
{
    kl_client_options o;
    struct kl_client *c;

    kl__clearerr(err);
    if (!endpoint) {
        endpoint = getenv("KUBELEASE_ENDPOINT");
        if (!endpoint || !*endpoint)
            endpoint = KL__DEFAULT_ENDPOINT;
    }
    if (kl__check_endpoint(endpoint, err) != KL_OK || client_options(opts, &o, err) != KL_OK ||
        kl__transport_global_init(err) != KL_OK)
        return NULL;
    c = calloc(1, sizeof(*c));
    if (!c || kl__loop_init(&c->loop, endpoint, &o) != KL_OK) {
        free(c);
        kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory creating the kubelease client");
        return NULL;
    }
    if (kl__loop_start(&c->loop, client_run, client_exit, c, err) != KL_OK) {
        client_destroy(c);
        return NULL;
    }
    return c;
}

void kl_client_free(kl_client *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->loop.mu);
    c->stopping = 1;
    KL__LIST_FOREACH (link, &c->elections) {
        struct kl__election *el = kl__election_of(link);
        kl__election_cancel(el, "election for %s cancelled: the client was freed", el->core.key);
    }
    KL__LIST_FOREACH (link, &c->watches)
        kl__watch_cancel(kl__watch_of(link));
    if (kl__loop_on_thread(&c->loop)) {
        /* From a callback: the I/O thread frees the client when it is done. */
        c->free_on_exit = 1;
        pthread_mutex_unlock(&c->loop.mu);
        return;
    }
    kl__loop_changed(&c->loop);
    pthread_mutex_unlock(&c->loop.mu);
    kl__loop_wake(&c->loop);
    pthread_join(c->loop.thread, NULL);
    client_destroy(c);
}
