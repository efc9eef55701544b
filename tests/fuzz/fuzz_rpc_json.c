/* The proto3 JSON converter: any input either fails with a message or
 * yields a message whose JSON is a fixed point (encode, decode, encode gives
 * the same text) and survives the binary codec. Text holding a NUL byte
 * anywhere is never accepted (cJSON would cut a string there, or skip it
 * as whitespace). The first byte picks the message type. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kubelease/v1/kubelease.pb-c.h"
#include "rpc/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ProtobufCMessageDescriptor *types[] = {
    &kubelease__v1__campaign_request__descriptor,
    &kubelease__v1__campaign_event__descriptor,
    &kubelease__v1__confirm_request__descriptor,
    &kubelease__v1__confirm_response__descriptor,
    &kubelease__v1__resign_request__descriptor,
    &kubelease__v1__resign_response__descriptor,
    &kubelease__v1__get_holder_request__descriptor,
    &kubelease__v1__get_holder_response__descriptor,
    &kubelease__v1__watch_holder_request__descriptor,
    &kubelease__v1__holder_event__descriptor,
    &kubelease__v1__list_leases_request__descriptor,
    &kubelease__v1__list_leases_response__descriptor,
    &kubelease__v1__lost__descriptor,
    &kubelease__v1__check_epoch_request__descriptor,
    &kubelease__v1__check_epoch_response__descriptor,
    &kubelease__v1__list_candidates_request__descriptor,
    &kubelease__v1__list_candidates_response__descriptor,
    &kubelease__v1__handoff_request__descriptor,
    &kubelease__v1__handoff_response__descriptor,
    &kubelease__v1__set_pod_label_request__descriptor,
    &kubelease__v1__set_pod_label_response__descriptor,
    &kubelease__v1__pod_label__descriptor,
    &kubelease__v1__proclaim_request__descriptor,
    &kubelease__v1__proclaim_response__descriptor,
    &kubelease__v1__list_terms_request__descriptor,
    &kubelease__v1__list_terms_response__descriptor,
    &kubelease__v1__term__descriptor,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const ProtobufCMessageDescriptor *d = types[data[0] % (sizeof types / sizeof types[0])];
    char err[256];
    ProtobufCMessage *m = rpc_json_decode(d, (const char *)data + 1, size - 1, err, sizeof err);
    if (!m) {
        if (!err[0])
            abort(); /* every failure explains itself */
        return 0;
    }
    if (memchr(data + 1, '\0', size - 1))
        abort();
    size_t l1, l2;
    char *j1 = rpc_json_encode(m, &l1);
    ProtobufCMessage *m2 = j1 ? rpc_json_decode(d, j1, l1, err, sizeof err) : NULL;
    if (j1 && !m2)
        abort(); /* our own output must parse */
    char *j2 = m2 ? rpc_json_encode(m2, &l2) : NULL;
    if (j1 && j2 && (l1 != l2 || memcmp(j1, j2, l1) != 0))
        abort();
    if (m2) {
        size_t n = protobuf_c_message_get_packed_size(m2);
        uint8_t *buf = malloc(n + 1);
        protobuf_c_message_pack(m2, buf);
        ProtobufCMessage *m3 = protobuf_c_message_unpack(d, NULL, n, buf);
        if (!m3)
            abort();
        size_t l3;
        char *j3 = rpc_json_encode(m3, &l3);
        if (j3 && (l3 != l1 || memcmp(j3, j1, l1) != 0))
            abort();
        free(j3);
        protobuf_c_message_free_unpacked(m3, NULL);
        free(buf);
    }
    free(j1);
    free(j2);
    protobuf_c_message_free_unpacked(m, NULL);
    if (m2)
        protobuf_c_message_free_unpacked(m2, NULL);
    return 0;
}
