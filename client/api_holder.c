/* The public holder functions: kl_watch_holder and kl_cancel_watch (the
 * client's list of watches; the I/O thread runs them, see watch.c) and
 * kl_get_holder (one GetHolder call on the calling thread, kl__holder_get,
 * which kl_get_lease shares). Every function but the GetHolder call takes
 * the loop's mutex. */
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "kubelease/v1/kubelease.pb-c.h"
#include "status.h"
#include "transport.h"
#include "util.h"
#include "validate.h"
#include "watch.h"

static struct kl__watch *watch_find(struct kl_client *c, const char *ns, const char *lease)
{
    KL__LIST_FOREACH (link, &c->watches) {
        struct kl__watch *w = kl__watch_of(link);
        if (!kl__watch_cancelled(w) && kl__key_is(w->key, ns, lease))
            return w;
    }
    return NULL;
}

static int watch_start(kl_client *c, const char *ns, const char *lease, kl_holder_cb cb,
                       kl_holder_ex_cb cb_ex, void *ctx, kl_error *err)
{
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (!cb && !cb_ex)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "cb (the callback) is NULL");
    struct kl__watch *w = kl__watch_new(&c->loop, ns, lease, cb, cb_ex, ctx);
    if (!w)
        return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory starting the watch");
    pthread_mutex_lock(&c->loop.mu);
    if (c->stopping) {
        rc = kl__seterr(err, KL_ERR_CANCELLED, "the client is being freed");
    } else if (watch_find(c, ns, lease)) {
        rc = kl__seterr(err, KL_ERR_ALREADY_WATCHING, "watch for %s/%s already running", ns, lease);
    } else {
        kl__list_insert_head(&c->watches, &w->link);
        w = NULL;
        kl__loop_wake(&c->loop);
    }
    pthread_mutex_unlock(&c->loop.mu);
    if (w)
        kl__watch_free(w);
    return rc;
}

int kl_watch_holder(kl_client *c, const char *ns, const char *lease, kl_holder_cb cb, void *ctx,
                    kl_error *err)
{
    return watch_start(c, ns, lease, cb, NULL, ctx, err);
}

int kl_watch_holder_ex(kl_client *c, const char *ns, const char *lease, kl_holder_ex_cb cb,
                       void *ctx, kl_error *err)
{
    return watch_start(c, ns, lease, NULL, cb, ctx, err);
}

int kl_cancel_watch(kl_client *c, const char *ns, const char *lease, kl_error *err)
{
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    pthread_mutex_lock(&c->loop.mu);
    struct kl__watch *w = watch_find(c, ns, lease);
    if (w) {
        kl__watch_cancel(w);
        /* On the I/O thread no callback of this watch can be running except
         * the caller itself; elsewhere, wait for a running one to return. */
        if (!kl__loop_on_thread(&c->loop)) {
            w->waiters++;
            while (w->state == KL__W_CANCELLING)
                kl__loop_wait_until(&c->loop, -1);
            w->waiters--;
        }
        kl__loop_wake(&c->loop);
    }
    pthread_mutex_unlock(&c->loop.mu);
    return KL_OK;
}

int kl__holder_get(struct kl_client *c, const char *ns, const char *lease, char **holder,
                   int64_t *lease_transitions, int64_t *since_ms, void **value, size_t *value_len,
                   kl_error *err)
{
    Kubelease__V1__GetHolderRequest req = KUBELEASE__V1__GET_HOLDER_REQUEST__INIT;
    struct kl__buf out = {0};

    req.namespace_ = (char *)ns;
    req.name = (char *)lease;
    int rc = kl__unary_call(&c->loop.tr, "GetHolder", &req.base, c->loop.opts.request_timeout_ms,
                            KL__MAX_MESSAGE, &out, err);
    if (rc != KL_OK)
        return rc; /* KL_NOT_FOUND too: err says which Lease */
    Kubelease__V1__GetHolderResponse *r =
        kubelease__v1__get_holder_response__unpack(NULL, out.len, (uint8_t *)out.data);
    kl__buf_free(&out);
    if (!r)
        return kl__seterr(err, KL_ERR_PROTOCOL,
                          "kubelease service at %s sent an unreadable GetHolder answer",
                          c->loop.tr.endpoint);
    if (r->holder && r->holder[0]) {
        *holder = strdup(r->holder);
        if (!*holder) {
            kubelease__v1__get_holder_response__free_unpacked(r, NULL);
            return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory copying the holder");
        }
    }
    if (lease_transitions)
        *lease_transitions = r->epoch;
    if (since_ms)
        *since_ms = r->since_transition_ms;
    if (value && r->value.len && *holder) {
        if (!(*value = malloc(r->value.len))) {
            free(*holder);
            *holder = NULL;
            kubelease__v1__get_holder_response__free_unpacked(r, NULL);
            return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory copying the leader value");
        }
        memcpy(*value, r->value.data, r->value.len);
        *value_len = r->value.len;
    }
    kubelease__v1__get_holder_response__free_unpacked(r, NULL);
    return KL_OK;
}

int kl_get_holder(kl_client *c, const char *ns, const char *lease, char **holder,
                  int64_t *lease_transitions, kl_error *err)
{
    if (holder)
        *holder = NULL;
    if (lease_transitions)
        *lease_transitions = 0;
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (!holder)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "holder (the output pointer) is NULL");
    return kl__holder_get(c, ns, lease, holder, lease_transitions, NULL, NULL, NULL, err);
}

int kl_get_holder_ex(kl_client *c, const char *ns, const char *lease, char **holder,
                     int64_t *lease_transitions, void **value, size_t *value_len, kl_error *err)
{
    if (holder)
        *holder = NULL;
    if (lease_transitions)
        *lease_transitions = 0;
    if (value)
        *value = NULL;
    if (value_len)
        *value_len = 0;
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (!holder || !value || !value_len)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "holder, value and value_len (the output pointers) must not be NULL");
    return kl__holder_get(c, ns, lease, holder, lease_transitions, NULL, value, value_len, err);
}
