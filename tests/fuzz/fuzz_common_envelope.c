/* Fuzz target: the Connect envelope codec (common/envelope.h), which the
 * client and the server share, both ways over the same input. The first
 * byte picks the piece sizes; the rest is fed in pieces
 *   - to the frame decoder (feed/take), as the server reads a request:
 *     every frame must come out whole (the bytes right after its header)
 *     and the bytes consumed must add up;
 *   - to the stream reader (stream_feed), as the client reads a response
 *     stream: each message is decoded as a CampaignEvent and a HolderEvent.
 * Must never crash, leak or read out of bounds. The corpus holds the
 * server's inputs (rpc_*) and the client's (client_*). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/envelope.h"
#include "kubelease/v1/kubelease.pb-c.h"

#define MAX_MESSAGE 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void frames(const uint8_t *data, size_t size, size_t piece)
{
    struct kl__envelope_decoder d;
    kl__envelope_decoder_init(&d, MAX_MESSAGE);
    size_t off = 0, framed = 0;
    while (off < size) {
        size_t n = size - off < piece ? size - off : piece;
        size_t used = 0;
        kl__envelope_status st = kl__envelope_decoder_feed(&d, data + off, n, &used);
        if (used > n)
            abort();
        off += used;
        if (st == KL__ENVELOPE_FRAME) {
            unsigned flags;
            uint8_t *msg;
            size_t len;
            kl__envelope_decoder_take(&d, &flags, &msg, &len);
            /* The frame is the bytes right after its header. */
            if (len > MAX_MESSAGE || framed + KL__ENVELOPE_HEADER + len > off)
                abort();
            if (flags != data[framed])
                abort();
            if (len && memcmp(msg, data + framed + KL__ENVELOPE_HEADER, len) != 0)
                abort();
            framed += KL__ENVELOPE_HEADER + len;
            free(msg);
        } else if (st == KL__ENVELOPE_NEED_MORE) {
            if (used != n)
                abort();
        } else {
            break; /* too large: sticky */
        }
    }
    kl__envelope_decoder_free(&d);
}

static int on_message(void *ctx, unsigned flags, const uint8_t *msg, size_t len)
{
    (void)ctx;
    if (msg[len] != 0)
        abort();
    if (flags & KL__ENVELOPE_FLAG_END_STREAM)
        return 0;
    Kubelease__V1__CampaignEvent *ev = kubelease__v1__campaign_event__unpack(NULL, len, msg);
    if (ev)
        kubelease__v1__campaign_event__free_unpacked(ev, NULL);
    Kubelease__V1__HolderEvent *h = kubelease__v1__holder_event__unpack(NULL, len, msg);
    if (h)
        kubelease__v1__holder_event__free_unpacked(h, NULL);
    return 0;
}

static void stream(const uint8_t *data, size_t size, size_t piece)
{
    struct kl__envelope_decoder d;
    kl__envelope_decoder_init(&d, MAX_MESSAGE);
    for (size_t pos = 0; pos < size; pos += piece) {
        size_t n = size - pos < piece ? size - pos : piece;
        if (kl__envelope_stream_feed(&d, data + pos, n, on_message, NULL) != 0)
            break;
    }
    kl__envelope_decoder_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    /* The first byte picks the piece sizes (1..64 and 1..17). */
    size_t piece = (size_t)(data[0] % 64) + 1, stream_piece = (size_t)(data[0] % 17) + 1;
    frames(data + 1, size - 1, piece);
    stream(data + 1, size - 1, stream_piece);
    return 0;
}
