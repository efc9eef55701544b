/* The Connect protocol's envelopes, for the client and the server alike:
 * [flags u8][length u32 big-endian][message]. Pure functions over buffers,
 * no I/O: the decoder accepts the bytes in pieces split anywhere.
 *
 * Two ways to decode, over one decoder:
 *   - kl__envelope_decoder_feed/_take: one frame at a time, whatever its
 *     flags; the caller owns each message it takes (the server reads a
 *     request body this way);
 *   - kl__envelope_stream_feed: every frame of a response stream to a
 *     callback, under the stream's rules: no compressed message, nothing
 *     after the end-of-stream frame (the client reads its streams this way).
 *
 * A decoder owns its buffer until kl__envelope_decoder_free; errors are
 * sticky. Not thread-safe: one owner at a time. */
#ifndef KL_COMMON_ENVELOPE_H
#define KL_COMMON_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KL__ENVELOPE_HEADER          5
#define KL__ENVELOPE_FLAG_COMPRESSED 0x01u
#define KL__ENVELOPE_FLAG_END_STREAM 0x02u

/* Writes the 5-byte header for a message of len bytes into out. */
void kl__envelope_header(uint8_t out[KL__ENVELOPE_HEADER], unsigned flags, uint32_t len);
/* Header + message in one malloc'd buffer of *out_len bytes (the caller
 * frees it); NULL when out of memory or len does not fit 32 bits. */
uint8_t *kl__envelope_encode(unsigned flags, const uint8_t *msg, size_t len, size_t *out_len);

typedef enum kl__envelope_status {
    KL__ENVELOPE_NEED_MORE = 0, /* all input consumed, no complete frame yet */
    KL__ENVELOPE_FRAME = 1,     /* a frame is complete: kl__envelope_decoder_take */
    /* Errors (negative; sticky): */
    KL__ENVELOPE_TOO_LARGE = -1,  /* a header announced more than max_len bytes */
    KL__ENVELOPE_NO_MEMORY = -2,  /* no memory for the message */
    KL__ENVELOPE_COMPRESSED = -3, /* stream_feed: a compressed message */
    KL__ENVELOPE_AFTER_END = -4,  /* stream_feed: bytes after the end-of-stream frame */
    KL__ENVELOPE_STOPPED = -5,    /* stream_feed: the callback returned non-zero */
} kl__envelope_status;

/* The fields are private. */
struct kl__envelope_decoder {
    size_t max_len; /* the longest message accepted */
    uint8_t hdr[KL__ENVELOPE_HEADER];
    size_t hdr_len;            /* header bytes collected so far */
    uint8_t *msg;              /* the message buffer (msg_cap bytes; kept between frames) */
    size_t msg_cap;            /* bytes allocated */
    size_t msg_len;            /* the length the header announced */
    size_t have;               /* message bytes collected so far */
    bool frame_ready;          /* a complete frame waits to be taken */
    bool ended;                /* stream_feed: the end-of-stream frame was delivered */
    kl__envelope_status error; /* sticky; 0 while none */
};

/* An empty decoder for messages of at most max_len bytes. */
void kl__envelope_decoder_init(struct kl__envelope_decoder *d, size_t max_len);
/* Frees the buffer (and any half-built message); the decoder is then as
 * kl__envelope_decoder_init left it. */
void kl__envelope_decoder_free(struct kl__envelope_decoder *d);

/* Consumes bytes from data until a frame completes or the input is used up;
 * *consumed says how many. Returns KL__ENVELOPE_NEED_MORE,
 * KL__ENVELOPE_FRAME (then call kl__envelope_decoder_take before feeding the
 * rest; until then it keeps returning FRAME and consumes nothing), or the
 * sticky error (TOO_LARGE, NO_MEMORY; a longer message than max_len is
 * refused before anything is allocated). Any flags are accepted. */
kl__envelope_status kl__envelope_decoder_feed(struct kl__envelope_decoder *d, const uint8_t *data,
                                              size_t len, size_t *consumed);
/* Hands over the complete frame: *msg is malloc'd (the caller frees it; NULL
 * for an empty message), *len its length. The decoder starts the next frame. */
void kl__envelope_decoder_take(struct kl__envelope_decoder *d, unsigned *flags, uint8_t **msg,
                               size_t *len);
/* True when bytes of an unfinished (or untaken) frame are held. */
bool kl__envelope_decoder_partial(const struct kl__envelope_decoder *d);

/* Called for each frame of a stream. msg is NUL-terminated after its len
 * bytes (an end-of-stream frame's JSON reads as a string), never NULL, and
 * valid only during the call. Non-zero stops decoding. */
typedef int (*kl__envelope_cb)(void *ctx, unsigned flags, const uint8_t *msg, size_t len);

/* Feeds len bytes of a response stream, calling cb for each complete frame.
 * Returns 0 once every byte is consumed, or the sticky error: TOO_LARGE,
 * NO_MEMORY, COMPRESSED, AFTER_END, or STOPPED when cb returned non-zero
 * (cb keeps its own reason in ctx). */
kl__envelope_status kl__envelope_stream_feed(struct kl__envelope_decoder *d, const uint8_t *data,
                                             size_t len, kl__envelope_cb cb, void *ctx);

#endif
