/* Request validation before anything reaches the engine (DESIGN.md §4).
 * Every function returns 0, or -1 with a message naming the field in msg.
 * Pure; any thread. */
#ifndef KL_RPC_VALIDATE_H
#define KL_RPC_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "rpc/route.h"

/* namespace: a DNS-1123 label (at most 63 bytes). */
int rpc_validate_namespace(const char *ns, char *msg, size_t msg_len);
/* name: a DNS-1123 subdomain (at most 253 bytes). */
int rpc_validate_name(const char *name, char *msg, size_t msg_len);
/* identity: 1 to 253 printable ASCII bytes. */
int rpc_validate_identity(const char *identity, char *msg, size_t msg_len);
/* lease_duration > renew_deadline > 1.2 x retry_period >= 1 (seconds), and
 * lease_duration at most a day. */
int rpc_validate_durations(int32_t lease_duration_s, int32_t renew_deadline_s,
                           int32_t retry_period_s, char *msg, size_t msg_len);

/* Validates a decoded request of method id (its message type must be the
 * method's request type). */
int rpc_validate_request(rpc_method_id id, const ProtobufCMessage *req, char *msg, size_t msg_len);
/* The namespace a request is about, NULL when it has none (ListLeases). */
const char *rpc_request_namespace(rpc_method_id id, const ProtobufCMessage *req);

#endif
