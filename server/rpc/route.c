/* The method table of kubelease.v1.LeaseService and the Connect codecs:
 * Content-Types, and request and response bodies in protobuf or JSON. No
 * state, no locks; any thread. */
#include "rpc/route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kubelease/v1/kubelease.pb-c.h"
#include "rpc/json.h"
#include "rpc/proto_wire.h"

#define METHOD(id, name, req, resp, stream)                                                        \
    {                                                                                              \
        id, name, RPC_SERVICE_PREFIX name, &kubelease__v1__##req##__descriptor,                    \
            &kubelease__v1__##resp##__descriptor, stream                                           \
    }

static const rpc_method methods[RPC_METHOD_COUNT] = {
    METHOD(RPC_METHOD_CAMPAIGN, "Campaign", campaign_request, campaign_event, true),
    METHOD(RPC_METHOD_CONFIRM, "Confirm", confirm_request, confirm_response, false),
    METHOD(RPC_METHOD_RESIGN, "Resign", resign_request, resign_response, false),
    METHOD(RPC_METHOD_GET_HOLDER, "GetHolder", get_holder_request, get_holder_response, false),
    METHOD(RPC_METHOD_WATCH_HOLDER, "WatchHolder", watch_holder_request, holder_event, true),
    METHOD(RPC_METHOD_LIST_LEASES, "ListLeases", list_leases_request, list_leases_response, false),
    METHOD(RPC_METHOD_CHECK_EPOCH, "CheckEpoch", check_epoch_request, check_epoch_response, false),
    METHOD(RPC_METHOD_LIST_CANDIDATES, "ListCandidates", list_candidates_request,
           list_candidates_response, false),
    METHOD(RPC_METHOD_HANDOFF, "Handoff", handoff_request, handoff_response, false),
    METHOD(RPC_METHOD_SET_POD_LABEL, "SetPodLabel", set_pod_label_request, set_pod_label_response,
           false),
    METHOD(RPC_METHOD_PROCLAIM, "Proclaim", proclaim_request, proclaim_response, false),
    METHOD(RPC_METHOD_LIST_TERMS, "ListTerms", list_terms_request, list_terms_response, false),
};

const rpc_method *rpc_method_find(const char *path)
{
    for (int i = 0; i < RPC_METHOD_COUNT; i++) {
        if (strcmp(methods[i].path, path) == 0)
            return &methods[i];
    }
    return NULL;
}

const rpc_method *rpc_method_get(rpc_method_id id)
{
    if ((int)id < 0 || id >= RPC_METHOD_COUNT)
        return NULL;
    return &methods[id];
}

int rpc_content_type_parse(const char *ct, bool stream, rpc_codec *out)
{
    if (!ct)
        return -1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, "; \t");
    static const struct {
        const char *type;
        bool stream;
        rpc_codec codec;
    } types[] = {
        {"application/proto", false, RPC_CODEC_PROTO},
        {"application/json", false, RPC_CODEC_JSON},
        {"application/connect+proto", true, RPC_CODEC_PROTO},
        {"application/connect+json", true, RPC_CODEC_JSON},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (types[i].stream == stream && strlen(types[i].type) == n &&
            strncasecmp(types[i].type, ct, n) == 0) {
            *out = types[i].codec;
            return 0;
        }
    }
    return -1;
}

const char *rpc_content_type(rpc_codec codec, bool stream)
{
    if (stream)
        return codec == RPC_CODEC_JSON ? "application/connect+json" : "application/connect+proto";
    return codec == RPC_CODEC_JSON ? "application/json" : "application/proto";
}

ProtobufCMessage *rpc_message_decode(rpc_codec codec, const ProtobufCMessageDescriptor *d,
                                     const uint8_t *data, size_t len, char *err, size_t err_len)
{
    if (codec == RPC_CODEC_JSON) {
        if (len == 0) {
            snprintf(err, err_len, "empty JSON body: send an object such as {}");
            return NULL;
        }
        return rpc_json_decode(d, (const char *)data, len, err, err_len);
    }
    ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, len, data);
    if (!m) {
        snprintf(err, err_len, "the body is not a valid %s protobuf message", d->name);
        return NULL;
    }
    if (rpc_proto_check_strings(d, data, len, err, err_len) != 0) {
        protobuf_c_message_free_unpacked(m, NULL);
        return NULL;
    }
    return m;
}

uint8_t *rpc_message_encode(rpc_codec codec, const ProtobufCMessage *m, size_t *len)
{
    if (codec == RPC_CODEC_JSON)
        return (uint8_t *)rpc_json_encode(m, len);
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return NULL;
    *len = protobuf_c_message_pack(m, buf);
    return buf;
}
