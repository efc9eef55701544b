/* The Connect envelope codec (see envelope.h). Pure: no I/O, no globals;
 * the only allocations are the encoded buffers it returns and each
 * decoder's message buffer. */
#include "common/envelope.h"

#include <stdlib.h>
#include <string.h>

void kl__envelope_header(uint8_t out[KL__ENVELOPE_HEADER], unsigned flags, uint32_t len)
{
    out[0] = (uint8_t)flags;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

uint8_t *kl__envelope_encode(unsigned flags, const uint8_t *msg, size_t len, size_t *out_len)
{
    if (len > UINT32_MAX)
        return NULL;
    uint8_t *buf = malloc(KL__ENVELOPE_HEADER + len);
    if (!buf)
        return NULL;
    kl__envelope_header(buf, flags, (uint32_t)len);
    if (len)
        memcpy(buf + KL__ENVELOPE_HEADER, msg, len);
    *out_len = KL__ENVELOPE_HEADER + len;
    return buf;
}

void kl__envelope_decoder_init(struct kl__envelope_decoder *d, size_t max_len)
{
    memset(d, 0, sizeof *d);
    d->max_len = max_len;
}

void kl__envelope_decoder_free(struct kl__envelope_decoder *d)
{
    free(d->msg);
    kl__envelope_decoder_init(d, d->max_len);
}

/* Forgets the frame just delivered or taken; the buffer stays for the next. */
static void next_frame(struct kl__envelope_decoder *d)
{
    d->hdr_len = 0;
    d->msg_len = 0;
    d->have = 0;
    d->frame_ready = false;
}

/* Called once the header is complete: checks the announced length and sizes
 * the buffer for the message and a NUL after it. */
static kl__envelope_status start_frame(struct kl__envelope_decoder *d)
{
    const uint8_t *h = d->hdr;
    d->msg_len = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | (size_t)h[4];
    d->have = 0;
    if (d->msg_len > d->max_len)
        return KL__ENVELOPE_TOO_LARGE;
    if (d->msg_len + 1 > d->msg_cap) {
        uint8_t *m = realloc(d->msg, d->msg_len + 1);
        if (!m)
            return KL__ENVELOPE_NO_MEMORY;
        d->msg = m;
        d->msg_cap = d->msg_len + 1;
    }
    return KL__ENVELOPE_NEED_MORE;
}

kl__envelope_status kl__envelope_decoder_feed(struct kl__envelope_decoder *d, const uint8_t *data,
                                              size_t len, size_t *consumed)
{
    size_t used = 0;
    *consumed = 0;
    if (d->error)
        return d->error;
    if (d->frame_ready)
        return KL__ENVELOPE_FRAME;
    if (d->hdr_len < KL__ENVELOPE_HEADER) {
        size_t take = KL__ENVELOPE_HEADER - d->hdr_len;
        if (take > len)
            take = len;
        if (take)
            memcpy(d->hdr + d->hdr_len, data, take);
        d->hdr_len += take;
        used = take;
        *consumed = used;
        if (d->hdr_len < KL__ENVELOPE_HEADER)
            return KL__ENVELOPE_NEED_MORE;
        kl__envelope_status st = start_frame(d);
        if (st != KL__ENVELOPE_NEED_MORE)
            return d->error = st;
    }
    size_t take = d->msg_len - d->have;
    if (take > len - used)
        take = len - used;
    if (take) {
        memcpy(d->msg + d->have, data + used, take);
        d->have += take;
        used += take;
    }
    *consumed = used;
    if (d->have < d->msg_len)
        return KL__ENVELOPE_NEED_MORE;
    d->msg[d->msg_len] = 0;
    d->frame_ready = true;
    return KL__ENVELOPE_FRAME;
}

void kl__envelope_decoder_take(struct kl__envelope_decoder *d, unsigned *flags, uint8_t **msg,
                               size_t *len)
{
    *flags = d->hdr[0];
    *len = d->msg_len;
    *msg = NULL;
    if (d->msg_len) {
        *msg = d->msg;
        d->msg = NULL;
        d->msg_cap = 0;
    }
    next_frame(d);
}

bool kl__envelope_decoder_partial(const struct kl__envelope_decoder *d)
{
    return d->hdr_len > 0;
}

/* A stream refuses a compressed message as soon as its header says so. */
static bool compressed(const struct kl__envelope_decoder *d)
{
    return d->hdr_len == KL__ENVELOPE_HEADER && (d->hdr[0] & KL__ENVELOPE_FLAG_COMPRESSED);
}

kl__envelope_status kl__envelope_stream_feed(struct kl__envelope_decoder *d, const uint8_t *data,
                                             size_t len, kl__envelope_cb cb, void *ctx)
{
    size_t pos = 0;
    if (d->error)
        return d->error;
    while (pos < len) {
        if (d->ended)
            return d->error = KL__ENVELOPE_AFTER_END;
        size_t used;
        kl__envelope_status st = kl__envelope_decoder_feed(d, data + pos, len - pos, &used);
        pos += used;
        if (st < 0)
            return st;
        if (compressed(d))
            return d->error = KL__ENVELOPE_COMPRESSED;
        if (st == KL__ENVELOPE_NEED_MORE)
            break;
        unsigned flags = d->hdr[0];
        size_t n = d->msg_len;
        next_frame(d);
        if (flags & KL__ENVELOPE_FLAG_END_STREAM)
            d->ended = true;
        if (cb(ctx, flags, d->msg, n) != 0)
            return d->error = KL__ENVELOPE_STOPPED;
    }
    return KL__ENVELOPE_NEED_MORE;
}
