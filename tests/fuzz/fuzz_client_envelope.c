/* Fuzz target: the client's Connect envelope decoder fed in pieces (the first
 * byte chooses the split size), each message then decoded as a CampaignEvent
 * and a HolderEvent as the client does, and end frames parsed as Connect
 * error JSON. Must never crash, leak or read out of bounds. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "envelope.h"
#include "kubelease/v1/kubelease.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_message(void *ctx, unsigned flags, const uint8_t *msg, size_t len)
{
    (void)ctx;
    if (flags & KL__ENV_END_STREAM) {
        char code[32], message[160];
        kl__connect_error_parse((const char *)msg, len, code, sizeof(code), message,
                                sizeof(message));
        return 0;
    }
    Kubelease__V1__CampaignEvent *ev = kubelease__v1__campaign_event__unpack(NULL, len, msg);
    if (ev)
        kubelease__v1__campaign_event__free_unpacked(ev, NULL);
    Kubelease__V1__HolderEvent *h = kubelease__v1__holder_event__unpack(NULL, len, msg);
    if (h)
        kubelease__v1__holder_event__free_unpacked(h, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct kl__envelope_decoder d;
    size_t step;

    if (size == 0)
        return 0;
    step = (size_t)data[0] % 17 + 1;
    data++;
    size--;
    kl__envelope_decoder_init(&d, 4096);
    for (size_t pos = 0; pos < size; pos += step) {
        size_t n = size - pos < step ? size - pos : step;
        if (kl__envelope_feed(&d, data + pos, n, on_message, NULL) != 0)
            break;
    }
    /* The same bytes, whole, as a Connect error body. */
    char code[16], message[32];
    kl__connect_error_parse((const char *)data, size, code, sizeof(code), message, sizeof(message));
    kl__envelope_decoder_free(&d);
    return 0;
}
