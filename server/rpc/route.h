/* The methods of kubelease.v1.LeaseService, one row each with every fact
 * about it, and the codecs (Content-Types) of the Connect protocol. Pure;
 * any thread. */
#ifndef KL_RPC_ROUTE_H
#define KL_RPC_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "engine/engine.h"

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

typedef enum rpc_codec { RPC_CODEC_PROTO, RPC_CODEC_JSON } rpc_codec;

/* What a start carries beside the request: the caller's address, which the
 * Pod of a leader label must have (docs/design.md, rule 9; NULL: no
 * check), why that Pod is not the caller's (a Campaign goes on without the
 * label; NULL: it is), and who asks, for the engine's quotas
 * (engine_campaign_req.caller; NULL: unknown). */
typedef struct rpc_start_args {
    const char *peer_ip, *label_refused, *caller;
} rpc_start_args;

/* Where a request message keeps a fact: offsetof into the method's request
 * struct; 0 (the message's header, never a field): the request has none. */
typedef struct rpc_fields {
    size_t ns, name, identity, term_token, to_identity, epoch, value;
    size_t pod_ns, pod, label_key, label_value; /* a leader label */
} rpc_fields;

/* One method of the service and every fact about it: its wire, its
 * authorization, where its request keeps each fact, its validation, its
 * engine call and its encoding. The table is in rpc/lease_service.c. */
typedef struct rpc_method {
    rpc_method_id id;
    const char *name; /* "Campaign" */
    const char *path; /* "/kubelease.v1.LeaseService/Campaign" */
    const ProtobufCMessageDescriptor *request;
    const ProtobufCMessageDescriptor *response; /* of each stream message for streams */
    bool server_stream;
    /* Served past the connection limits (Confirm, Resign): a holder's
     * renewal must not wait behind readers. */
    bool urgent;
    /* Authorization (docs/design.md, rule 7): the verb on
     * elections.kubelease.io; holder_verb, when not NULL, the verb of a
     * request that names its identity (the holder's own Handoff, rule 8),
     * where an empty identity is none. */
    const char *verb, *holder_verb;
    /* The request lists over namespaces: an empty namespace is every one,
     * and a denial at the cluster scope is narrowed, not the end. */
    bool lists_namespaces;
    /* A leader label whose Pod is not the caller's is denied (SetPodLabel);
     * otherwise the call goes on without the label (Campaign). */
    bool pod_denies;
    rpc_fields at;
    /* Validation, in order (engine_validate_request). */
    engine_check checks[8];
    /* The engine's form of a Campaign (NULL for the others). */
    void (*campaign_form)(const ProtobufCMessage *req, engine_campaign_req *out);
    /* Unary: the engine call, and the response of its successful reply,
     * encoded with codec (malloc'd, *len bytes; NULL when out of memory). */
    int (*unary)(engine *e, const ProtobufCMessage *req, const rpc_start_args *a, engine_done done,
                 void *ctx);
    uint8_t *(*encode)(rpc_codec codec, const engine_reply *r, size_t *len);
    /* Stream: the engine call (its id, 0 when out of memory), and what
     * ends it when the peer leaves. */
    uint64_t (*stream)(engine *e, const ProtobufCMessage *req, const rpc_start_args *a,
                       engine_listener listener);
    void (*detach)(engine *e, uint64_t engine_id);
} rpc_method;

/* The method served at an URL path, NULL when there is none (the table:
 * rpc/lease_service.c). */
const rpc_method *rpc_method_find(const char *path);
const rpc_method *rpc_method_get(rpc_method_id id);

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
