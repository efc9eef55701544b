/* Connect envelopes: the incremental decoder fed the input in pieces whose
 * sizes come from the input itself; every frame must come out whole, and the
 * bytes consumed must add up. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/connect.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* The first byte picks the piece size (1..64). */
    size_t piece = (size_t)(data[0] % 64) + 1;
    data++;
    size--;
    rpc_envelope_decoder d;
    rpc_envelope_decoder_init(&d, 4096);
    size_t off = 0, framed = 0;
    while (off < size) {
        size_t n = size - off < piece ? size - off : piece;
        size_t used = 0;
        rpc_envelope_status st = rpc_envelope_decoder_feed(&d, data + off, n, &used);
        if (used > n)
            abort();
        off += used;
        if (st == RPC_ENVELOPE_FRAME) {
            uint8_t flags, *msg;
            size_t len;
            rpc_envelope_decoder_take(&d, &flags, &msg, &len);
            /* The frame is the bytes right after its header. */
            if (len > 4096 || framed + RPC_ENVELOPE_HEADER + len > off)
                abort();
            if (len && memcmp(msg, data + framed + RPC_ENVELOPE_HEADER, len) != 0)
                abort();
            framed += RPC_ENVELOPE_HEADER + len;
            free(msg);
        } else if (st == RPC_ENVELOPE_NEED_MORE) {
            if (used != n)
                abort();
        } else {
            break; /* too large: sticky */
        }
    }
    rpc_envelope_decoder_free(&d);
    return 0;
}
