/* Request validation before anything reaches the engine (DESIGN.md §4): the
 * engine's validators (engine_validate_*) applied to each request type, plus
 * the checks that only concern the wire (Confirm's epoch). Every function
 * returns 0, or -1 with a message naming the field in msg. Pure; any thread. */
#ifndef KL_RPC_VALIDATE_H
#define KL_RPC_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "engine/engine.h"
#include "kubelease/v1/kubelease.pb-c.h"
#include "rpc/route.h"

/* Validates a decoded request of method id (its message type must be the
 * method's request type). */
int rpc_validate_request(rpc_method_id id, const ProtobufCMessage *req, char *msg, size_t msg_len);
/* The namespace a request is about, NULL when it has none (ListLeases). */
const char *rpc_request_namespace(rpc_method_id id, const ProtobufCMessage *req);
/* Copies a validated CampaignRequest into the engine's form. */
void rpc_campaign_req(const Kubelease__V1__CampaignRequest *r, engine_campaign_req *out);

#endif
