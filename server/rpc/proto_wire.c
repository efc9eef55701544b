/* A walk over protobuf wire data, driven by the message descriptors, that
 * finds string fields holding a NUL. The data has been unpacked by
 * protobuf-c already, so it is well formed; the walk still checks every
 * length and stops at anything it does not expect. No state, no locks; any
 * thread. */
#include "rpc/proto_wire.h"

#include <stdio.h>
#include <string.h>

#include "rpc/json.h"

#define MAX_DEPTH 32
#define PATH_LEN  256

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

/* Reads a varint at *off; returns -1 when it runs past len. */
static int varint(const uint8_t *data, size_t len, size_t *off, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 64 && *off < len; shift += 7) {
        uint8_t b = data[(*off)++];
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/* Returns 1 with the field's path in path when a string holds a NUL, else
 * 0 (also for anything it cannot walk: protobuf-c judged the data). */
static int walk(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
                const char *prefix, int depth, char *path)
{
    size_t off = 0;
    while (off < len) {
        uint64_t tag, n;
        if (varint(data, len, &off, &tag) != 0)
            return 0;
        switch (tag & 7) {
        case WIRE_VARINT:
            if (varint(data, len, &off, &n) != 0)
                return 0;
            continue;
        case WIRE_FIXED64:
            off += 8;
            continue;
        case WIRE_FIXED32:
            off += 4;
            continue;
        case WIRE_LEN:
            break;
        default:
            return 0;
        }
        if (varint(data, len, &off, &n) != 0 || n > len - off)
            return 0;
        const uint8_t *value = data + off;
        off += n;
        const ProtobufCFieldDescriptor *f =
            tag >> 3 <= UINT32_MAX
                ? protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3))
                : NULL;
        if (!f || (f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_MESSAGE))
            continue;
        char name[128];
        rpc_json_name(f->name, name, sizeof name);
        snprintf(path, PATH_LEN, "%s%s%s", prefix, *prefix ? "." : "", name);
        if (f->type == PROTOBUF_C_TYPE_STRING) {
            if (memchr(value, '\0', n))
                return 1;
        } else if (depth < MAX_DEPTH) {
            char sub[PATH_LEN];
            memcpy(sub, path, PATH_LEN);
            if (walk(f->descriptor, value, n, sub, depth + 1, path))
                return 1;
        }
    }
    return 0;
}

int rpc_proto_check_strings(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
                            char *err, size_t err_len)
{
    char path[PATH_LEN] = "";
    if (!walk(d, data, len, "", 0, path))
        return 0;
    snprintf(err, err_len, "field \"%s\": contains a NUL byte", path);
    return -1;
}
