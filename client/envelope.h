/* Connect protocol envelopes: [flags u8][length u32 big-endian][message].
 * Pure functions over buffers, no I/O: the decoder accepts the stream in
 * pieces split anywhere. */
#ifndef KL_ENVELOPE_H
#define KL_ENVELOPE_H

#include <stddef.h>
#include <stdint.h>

#define KL__ENV_COMPRESSED 0x01u
#define KL__ENV_END_STREAM 0x02u
#define KL__ENV_HEADER     5

/* Called for each complete envelope; msg is valid only during the call.
 * A non-zero return stops decoding and is returned by kl__envelope_feed. */
typedef int (*kl__envelope_cb)(void *ctx, unsigned flags, const uint8_t *msg, size_t len);

struct kl__envelope_decoder {
    uint8_t hdr[KL__ENV_HEADER];
    size_t hdr_len; /* header bytes collected so far */
    uint8_t *msg;   /* message buffer, msg_cap bytes */
    size_t msg_cap;
    size_t msg_len;  /* message bytes collected so far */
    size_t msg_need; /* length announced by the header */
    size_t max_len;  /* longest message accepted */
    int ended;       /* an end-of-stream envelope was seen */
    int error;       /* sticky: the first error returned */
};

void kl__envelope_decoder_init(struct kl__envelope_decoder *d, size_t max_len);
/* Frees the buffer; the decoder may be re-initialised afterwards. */
void kl__envelope_decoder_free(struct kl__envelope_decoder *d);
/* Feeds len bytes. Returns 0, or: KL_ERR_PROTOCOL for a message longer than
 * max_len, a compressed message, or data after the end-of-stream envelope;
 * KL_ERR_NO_MEMORY; or the callback's non-zero return. Errors are sticky. */
int kl__envelope_feed(struct kl__envelope_decoder *d, const uint8_t *data, size_t len,
                      kl__envelope_cb cb, void *ctx);
/* 1 when the decoder is between envelopes (nothing partial buffered). */
int kl__envelope_idle(const struct kl__envelope_decoder *d);

/* Writes the 5-byte header for a message of len bytes into out. */
void kl__envelope_header(uint8_t out[KL__ENV_HEADER], unsigned flags, uint32_t len);

/* Parses a Connect error JSON ({"code":"...","message":"..."} at top level or
 * under "error"). Copies the strings (NUL-terminated, truncated to fit, JSON
 * escapes decoded, non-ASCII \u escapes as '?'); a missing field yields "".
 * Returns 1 if a "code" was found, 0 otherwise. Never reads past len. */
int kl__connect_error_parse(const char *json, size_t len, char *code, size_t code_size,
                            char *message, size_t message_size);

#endif
