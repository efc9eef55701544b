/* The methods of kubelease.v1.LeaseService, their message types, and the
 * codecs (Content-Types) of the Connect protocol. Pure; any thread. */
#ifndef KL_RPC_ROUTE_H
#define KL_RPC_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define RPC_SERVICE_PREFIX "/kubelease.v1.LeaseService/"

typedef enum rpc_method_id {
    RPC_METHOD_CAMPAIGN,
    RPC_METHOD_CONFIRM,
    RPC_METHOD_RESIGN,
    RPC_METHOD_GET_HOLDER,
    RPC_METHOD_WATCH_HOLDER,
    RPC_METHOD_LIST_LEASES,
    RPC_METHOD_CHECK_EPOCH,
    RPC_METHOD_LIST_CANDIDATES,
    RPC_METHOD_HANDOFF,
    RPC_METHOD_SET_POD_LABEL,
    RPC_METHOD_PROCLAIM,
    RPC_METHOD_LIST_TERMS,
    RPC_METHOD_COUNT
} rpc_method_id;

typedef struct rpc_method {
    rpc_method_id id;
    const char *name; /* "Campaign" */
    const char *path; /* "/kubelease.v1.LeaseService/Campaign" */
    const ProtobufCMessageDescriptor *request;
    const ProtobufCMessageDescriptor *response; /* of each stream message for streams */
    bool server_stream;
} rpc_method;

/* The method served at an URL path, NULL when there is none. */
const rpc_method *rpc_method_find(const char *path);
const rpc_method *rpc_method_get(rpc_method_id id);

typedef enum rpc_codec { RPC_CODEC_PROTO, RPC_CODEC_JSON } rpc_codec;

/* Parses a request Content-Type (case-insensitive, parameters such as
 * "; charset=utf-8" ignored): application/proto and application/json for
 * unary calls, application/connect+proto and application/connect+json for
 * streams. Returns 0, or -1 when it is not one this kind of call accepts. */
int rpc_content_type_parse(const char *content_type, bool stream, rpc_codec *out);
/* The Content-Type of responses. */
const char *rpc_content_type(rpc_codec codec, bool stream);

/* Decodes a request body. A NUL inside any string field is an error in
 * both codecs (neither protobuf-c nor cJSON would keep the rest of the
 * string). Returns a message to free with
 * protobuf_c_message_free_unpacked(m, NULL), or NULL with a reason naming
 * the field, where there is one, in err. */
ProtobufCMessage *rpc_message_decode(rpc_codec codec, const ProtobufCMessageDescriptor *d,
                                     const uint8_t *data, size_t len, char *err, size_t err_len);
/* Encodes a message; malloc'd buffer of *len bytes (caller frees), NULL when
 * out of memory. */
uint8_t *rpc_message_encode(rpc_codec codec, const ProtobufCMessage *m, size_t *len);

#endif
