/* The check on protobuf wire data that protobuf-c does not make: it copies
 * a string field with its length but hands it over NUL-terminated, so a NUL
 * inside ("pod-a\0zzz") would silently cut it to "pod-a". Pure; any
 * thread. */
#ifndef KL_RPC_PROTO_WIRE_H
#define KL_RPC_PROTO_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Checks data, which protobuf-c unpacked as a message of type d: no string
 * field, at any depth, contains a NUL. Returns 0, or -1 with a message
 * naming the field in err ("field \"identity\": ..."). */
int rpc_proto_check_strings(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
                            char *err, size_t err_len);

#endif
