/* The proto3 JSON mapping for any protobuf-c message, driven by its
 * descriptors (no per-message code).
 *
 * Output: lowerCamelCase field names, default values omitted (except a set
 * oneof member), 64-bit integers as strings, enums by name, bytes as base64.
 * Input: both the lowerCamelCase and the original field names; integers as
 * numbers or strings of decimal digits (no whitespace, no '+'); enums by
 * name or number; null means the default; unknown fields are ignored. A NUL
 * in any string (raw or \u0000), bytes between tokens other than JSON
 * whitespace, and anything but whitespace after the object are errors.
 * Errors name the field ("field \"leaseDurationSeconds\": ..."). Pure
 * functions, any thread. */
#ifndef KL_RPC_JSON_H
#define KL_RPC_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>
#include <protobuf-c/protobuf-c.h>

/* The proto3 JSON name of a field name: "lease_duration_seconds" ->
 * "leaseDurationSeconds". Truncates to out_len - 1 bytes. */
void rpc_json_name(const char *field_name, char *out, size_t out_len);

/* Returns a new cJSON object (caller cJSON_Delete's it), NULL when out of memory. */
cJSON *rpc_json_from_message(const ProtobufCMessage *m);
/* The unformatted JSON text of m; malloc'd (caller frees), NULL when out of memory. */
char *rpc_json_encode(const ProtobufCMessage *m, size_t *len);

/* Builds a message of type d from a JSON object. Returns a message to free
 * with protobuf_c_message_free_unpacked(m, NULL), or NULL with a message
 * naming the field in err. */
ProtobufCMessage *rpc_json_to_message(const ProtobufCMessageDescriptor *d, const cJSON *obj,
                                      char *err, size_t err_len);
/* Same from JSON text of len bytes (need not be NUL-terminated). */
ProtobufCMessage *rpc_json_decode(const ProtobufCMessageDescriptor *d, const char *text, size_t len,
                                  char *err, size_t err_len);

#endif
