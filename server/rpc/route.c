/* The Connect codecs: Content-Types, and request and response bodies in
 * protobuf or JSON. No state, no locks; any thread. */
#include "rpc/route.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rpc/json.h"
#include "rpc/proto_wire.h"

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
