#include "rpc/validate.h"

#include <stdio.h>
#include <string.h>

static int lease_ref(const char *ns, const char *name, char *msg, size_t msg_len)
{
    return engine_validate_lease_ref(ns, name, msg, msg_len);
}

static int lease_ref_identity(const char *ns, const char *name, const char *identity, char *msg,
                              size_t msg_len)
{
    if (engine_validate_lease_ref(ns, name, msg, msg_len) != 0)
        return -1;
    return engine_validate_identity(identity, msg, msg_len);
}

void rpc_campaign_req(const Kubelease__V1__CampaignRequest *r, engine_campaign_req *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->ns, sizeof out->ns, "%s", r->namespace_ ? r->namespace_ : "");
    snprintf(out->name, sizeof out->name, "%s", r->name ? r->name : "");
    snprintf(out->identity, sizeof out->identity, "%s", r->identity ? r->identity : "");
    out->lease_duration_s = r->lease_duration_seconds;
    out->renew_deadline_s = r->renew_deadline_seconds;
    out->retry_period_s = r->retry_period_seconds;
    out->resume_epoch = r->resume_epoch;
}

int rpc_validate_request(rpc_method_id id, const ProtobufCMessage *req, char *msg, size_t msg_len)
{
    const rpc_method *m = rpc_method_get(id);
    if (!m || !req || req->descriptor != m->request) {
        snprintf(msg, msg_len, "internal: request of the wrong type");
        return -1;
    }
    switch (id) {
    case RPC_METHOD_CAMPAIGN: {
        const Kubelease__V1__CampaignRequest *r = (const void *)req;
        /* The lengths first, on the request's own strings: the engine's
         * form has fixed-size buffers. */
        if (lease_ref_identity(r->namespace_, r->name, r->identity, msg, msg_len) != 0)
            return -1;
        engine_campaign_req c;
        rpc_campaign_req(r, &c);
        return engine_validate_campaign(&c, msg, msg_len);
    }
    case RPC_METHOD_CONFIRM: {
        const Kubelease__V1__ConfirmRequest *r = (const void *)req;
        if (lease_ref_identity(r->namespace_, r->name, r->identity, msg, msg_len) != 0)
            return -1;
        if (r->epoch <= 0) {
            snprintf(msg, msg_len, "epoch: %lld, must be the positive epoch of a term",
                     (long long)r->epoch);
            return -1;
        }
        return 0;
    }
    case RPC_METHOD_RESIGN: {
        const Kubelease__V1__ResignRequest *r = (const void *)req;
        return lease_ref_identity(r->namespace_, r->name, r->identity, msg, msg_len);
    }
    case RPC_METHOD_GET_HOLDER: {
        const Kubelease__V1__GetHolderRequest *r = (const void *)req;
        return lease_ref(r->namespace_, r->name, msg, msg_len);
    }
    case RPC_METHOD_WATCH_HOLDER: {
        const Kubelease__V1__WatchHolderRequest *r = (const void *)req;
        return lease_ref(r->namespace_, r->name, msg, msg_len);
    }
    case RPC_METHOD_LIST_LEASES:
        return 0;
    case RPC_METHOD_COUNT:
        break;
    }
    snprintf(msg, msg_len, "internal: unknown method");
    return -1;
}

const char *rpc_request_namespace(rpc_method_id id, const ProtobufCMessage *req)
{
    switch (id) {
    case RPC_METHOD_CAMPAIGN:
        return ((const Kubelease__V1__CampaignRequest *)req)->namespace_;
    case RPC_METHOD_CONFIRM:
        return ((const Kubelease__V1__ConfirmRequest *)req)->namespace_;
    case RPC_METHOD_RESIGN:
        return ((const Kubelease__V1__ResignRequest *)req)->namespace_;
    case RPC_METHOD_GET_HOLDER:
        return ((const Kubelease__V1__GetHolderRequest *)req)->namespace_;
    case RPC_METHOD_WATCH_HOLDER:
        return ((const Kubelease__V1__WatchHolderRequest *)req)->namespace_;
    default:
        return NULL;
    }
}
