/* kubelease.v1.LeaseService on the engine: every mapping between the
 * protobuf messages and the engine's calls, replies and events, in both
 * directions, and the engine's status codes as Connect codes.
 *
 * Each function here reads the method's row (rpc_method, route.h; the
 * table is in lease_service.c): where its request keeps each fact, its
 * checks, its engine call and its encoding. Requests are validated in one
 * pass (engine_validate_request with the row's checks: the engine's rules
 * plus those that only concern the wire, such as Confirm's epoch) before
 * anything reaches the engine, then turned into engine calls. Replies and
 * events are turned into the method's response message and encoded with
 * the call's codec.
 *
 * Nothing here knows HTTP. Pure apart from the engine calls, which post to
 * the engine thread and return at once; any thread. */
#ifndef KL_RPC_LEASE_SERVICE_H
#define KL_RPC_LEASE_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "engine/engine.h"
#include "rpc/connect.h"
#include "rpc/route.h"

/* Validates a decoded request of method id (its message type must be the
 * method's request type). Returns 0, or -1 with a message naming the field
 * in msg. */
int rpc_validate_request(rpc_method_id id, const ProtobufCMessage *req, char *msg, size_t msg_len);
/* The namespace a request is about, NULL when it has none (a ListLeases of
 * every namespace). */
const char *rpc_request_namespace(rpc_method_id id, const ProtobufCMessage *req);
/* The Lease name a request is about, NULL when it has none (ListLeases). */
const char *rpc_request_name(rpc_method_id id, const ProtobufCMessage *req);
/* The campaign identity a request acts for (Campaign, Confirm, Resign,
 * SetPodLabel, a holder's own Handoff), NULL for the others. */
const char *rpc_request_identity(rpc_method_id id, const ProtobufCMessage *req);

/* The leader label a validated Campaign or SetPodLabel names, its Pod's
 * namespace filled in (the Lease's when the request leaves it empty): true
 * when it names one, else false with *out all empty. */
bool rpc_request_label(rpc_method_id id, const ProtobufCMessage *req, engine_pod_label *out);

/* The Connect code of an engine status code; RPC_UNKNOWN for a value the
 * table does not know. */
rpc_code rpc_code_of_engine(engine_code c);

/* Sends a validated unary request (Confirm, Resign, GetHolder, ListLeases,
 * CheckEpoch, ListCandidates, ListTerms, Handoff, SetPodLabel, Proclaim) to
 * the engine; done runs once on the engine thread with its reply. peer_ip, when not NULL,
 * is the caller's address, which the Pod of a SetPodLabel must have
 * (docs/design.md, rule 9). caller: who asks, for the engine's quotas
 * (engine_campaign_req.caller; NULL: unknown).
 * Returns 0, or -1 when out of memory or id is not a unary method (done is
 * then never called). */
int rpc_unary_start(engine *e, rpc_method_id id, const ProtobufCMessage *req, const char *peer_ip,
                    const char *caller, engine_done done, void *ctx);
/* The response message of a successful reply to unary method id, encoded
 * with codec: a malloc'd buffer of *len bytes (caller frees), NULL when out
 * of memory. */
uint8_t *rpc_reply_encode(rpc_method_id id, rpc_codec codec, const engine_reply *r, size_t *len);

/* Starts the engine side of a validated stream request (Campaign or
 * WatchHolder) whose events go to listener. peer_ip, when not NULL, is the
 * caller's address, which the Pod of a campaign's label must have
 * (docs/design.md, rule 9); label_refused, when not NULL, why that Pod is
 * not the caller's (the campaign goes on without the label); caller, who
 * asks, as for rpc_unary_start. Returns the engine's id (> 0), or 0 when
 * out of memory (listener untouched). */
uint64_t rpc_stream_start(engine *e, rpc_method_id id, const ProtobufCMessage *req,
                          const char *peer_ip, const char *label_refused, const char *caller,
                          engine_listener listener);
/* The peer of stream engine_id left: a campaign is detached (not resigned:
 * the Lease is released only after the granted validity, docs/design.md,
 * rule 3), a watch is dropped. */
void rpc_stream_detach(engine *e, rpc_method_id id, uint64_t engine_id);
/* The stream message of an engine event (a CampaignEvent, or a HolderEvent
 * for ENGINE_EVENT_HOLDER), encoded with codec: malloc'd, *len bytes; NULL
 * when out of memory, and for ENGINE_EVENT_REFUSED, which is no message:
 * the stream ends with rpc_code_of_engine(ev->code) instead. */
uint8_t *rpc_event_encode(rpc_codec codec, const engine_event *ev, size_t *len);

#endif
