/* Every request type unpacked from arbitrary bytes, as the server does with
 * an application/proto body: then validated, and its JSON form must be a
 * fixed point of the converter, and admission (without an authorizer)
 * never waits. The first byte picks the method. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/admit.h"
#include "rpc/json.h"
#include "rpc/lease_service.h"
#include "rpc/route.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const rpc_method *method = rpc_method_get((rpc_method_id)(data[0] % RPC_METHOD_COUNT));
    char err[512];
    ProtobufCMessage *m =
        rpc_message_decode(RPC_CODEC_PROTO, method->request, data + 1, size - 1, err, sizeof err);
    if (!m)
        return 0;
    (void)rpc_validate_request(method->id, m, err, sizeof err);
    (void)rpc_request_namespace(method->id, m);
    engine_pod_label label;
    (void)rpc_request_label(method->id, m, &label);
    char *served[] = {"default", NULL};
    const rpc_admit_in in = {.namespaces = served, .pod_ip_check = true, .peer_ip = "10.0.0.1"};
    rpc_admission adm;
    if (rpc_admit(method, m, &in, &adm) == RPC_ADMIT_WAIT) /* no authorizer: never waits */
        abort();
    size_t l1, l2;
    uint8_t *j1 = rpc_message_encode(RPC_CODEC_JSON, m, &l1);
    ProtobufCMessage *m2 =
        j1 ? rpc_message_decode(RPC_CODEC_JSON, method->request, j1, l1, err, sizeof err) : NULL;
    if (j1 && !m2)
        abort();
    uint8_t *j2 = m2 ? rpc_message_encode(RPC_CODEC_JSON, m2, &l2) : NULL;
    if (j1 && j2 && (l1 != l2 || memcmp(j1, j2, l1) != 0))
        abort();
    free(j1);
    free(j2);
    if (m2)
        protobuf_c_message_free_unpacked(m2, NULL);
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
