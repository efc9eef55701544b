/* kl_check_epoch: one CheckEpoch call on the calling thread, for servers
 * that fence a leader's writes by its epoch. Takes no lock: it reads only
 * the client's immutable transport fields. */
#include "client.h"
#include "kubelease/v1/kubelease.pb-c.h"
#include "status.h"
#include "transport.h"
#include "util.h"
#include "validate.h"

int kl_check_epoch(kl_client *c, const char *ns, const char *lease, int64_t epoch, int *current,
                   int64_t *lease_transitions, kl_error *err)
{
    Kubelease__V1__CheckEpochRequest req = KUBELEASE__V1__CHECK_EPOCH_REQUEST__INIT;
    struct kl__buf out = {0};

    if (current)
        *current = 0;
    if (lease_transitions)
        *lease_transitions = 0;
    int rc = kl__check_call(c, ns, lease, err);
    if (rc != KL_OK)
        return rc;
    if (!current)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "current (the output pointer) is NULL");
    if (epoch <= 0)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "epoch %lld is not the positive epoch of a term", (long long)epoch);
    req.namespace_ = (char *)ns;
    req.name = (char *)lease;
    req.epoch = epoch;
    rc = kl__unary_call(&c->loop.tr, "CheckEpoch", &req.base, c->loop.opts.request_timeout_ms,
                        KL__MAX_MESSAGE, &out, err);
    if (rc != KL_OK)
        return rc < 0 ? rc
                      : kl__seterr(err, KL_ERR_PROTOCOL,
                                   "kubelease service at %s answered CheckEpoch with not_found",
                                   c->loop.tr.endpoint);
    Kubelease__V1__CheckEpochResponse *r =
        kubelease__v1__check_epoch_response__unpack(NULL, out.len, (uint8_t *)out.data);
    kl__buf_free(&out);
    if (!r)
        return kl__seterr(err, KL_ERR_PROTOCOL,
                          "kubelease service at %s sent an unreadable CheckEpoch answer",
                          c->loop.tr.endpoint);
    *current = r->current ? 1 : 0;
    if (lease_transitions)
        *lease_transitions = r->epoch;
    kubelease__v1__check_epoch_response__free_unpacked(r, NULL);
    return KL_OK;
}
