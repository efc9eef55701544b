/* The Connect protocol's pure parts: error codes and their HTTP statuses,
 * the error JSON, and the 5-byte envelopes of streaming calls. No sockets. */
#ifndef KL_RPC_CONNECT_H
#define KL_RPC_CONNECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* X(enum, wire name, HTTP status): the official Connect code table. */
#define RPC_CODE_MAP(X)                                                                            \
    X(RPC_OK, "ok", 200)                                                                           \
    X(RPC_CANCELED, "canceled", 499)                                                               \
    X(RPC_UNKNOWN, "unknown", 500)                                                                 \
    X(RPC_INVALID_ARGUMENT, "invalid_argument", 400)                                               \
    X(RPC_DEADLINE_EXCEEDED, "deadline_exceeded", 504)                                             \
    X(RPC_NOT_FOUND, "not_found", 404)                                                             \
    X(RPC_ALREADY_EXISTS, "already_exists", 409)                                                   \
    X(RPC_PERMISSION_DENIED, "permission_denied", 403)                                             \
    X(RPC_RESOURCE_EXHAUSTED, "resource_exhausted", 429)                                           \
    X(RPC_FAILED_PRECONDITION, "failed_precondition", 400)                                         \
    X(RPC_ABORTED, "aborted", 409)                                                                 \
    X(RPC_OUT_OF_RANGE, "out_of_range", 400)                                                       \
    X(RPC_UNIMPLEMENTED, "unimplemented", 501)                                                     \
    X(RPC_INTERNAL, "internal", 500)                                                               \
    X(RPC_UNAVAILABLE, "unavailable", 503)                                                         \
    X(RPC_DATA_LOSS, "data_loss", 500)                                                             \
    X(RPC_UNAUTHENTICATED, "unauthenticated", 401)

typedef enum rpc_code {
#define RPC_CODE_ENUM(e, name, status) e,
    RPC_CODE_MAP(RPC_CODE_ENUM)
#undef RPC_CODE_ENUM
        RPC_CODE_COUNT
} rpc_code;

/* "invalid_argument" etc.; "unknown" for values out of range. */
const char *rpc_code_name(rpc_code c);
/* The HTTP status of a unary error response with this code. */
int rpc_code_http_status(rpc_code c);
/* Parses a wire name; returns 0, or -1 when the name is not a Connect code. */
int rpc_code_from_name(const char *name, rpc_code *out);

/* {"code":"...","message":"..."}: the body of a unary error. Returns a
 * malloc'd NUL-terminated string (caller frees), NULL when out of memory. */
char *rpc_error_json(rpc_code c, const char *message);
/* The JSON of an end-of-stream frame: "{}" for RPC_OK, else
 * {"error":{"code":"...","message":"..."}}. malloc'd; NULL when out of memory. */
char *rpc_end_stream_json(rpc_code c, const char *message);

/* Envelopes: [flags u8][length u32 big-endian][message]. */
#define RPC_ENVELOPE_HEADER 5
#define RPC_FLAG_COMPRESSED 0x01
#define RPC_FLAG_END_STREAM 0x02

/* Writes the 5-byte header for a message of len bytes into out. */
void rpc_envelope_header(uint8_t flags, uint32_t len, uint8_t out[RPC_ENVELOPE_HEADER]);
/* Header + message in one malloc'd buffer of *out_len bytes; NULL when out of
 * memory or len does not fit 32 bits. */
uint8_t *rpc_envelope_encode(uint8_t flags, const uint8_t *msg, size_t len, size_t *out_len);

typedef enum rpc_envelope_status {
    RPC_ENVELOPE_NEED_MORE = 0, /* all input consumed, no complete frame yet */
    RPC_ENVELOPE_FRAME,         /* a frame is complete: rpc_envelope_decoder_take */
    RPC_ENVELOPE_TOO_LARGE,     /* the header announces more than max_len */
    RPC_ENVELOPE_NO_MEMORY,
} rpc_envelope_status;

/* Incremental decoder: feed it bytes split anywhere. */
typedef struct rpc_envelope_decoder {
    size_t max_len; /* largest message accepted */
    uint8_t hdr[RPC_ENVELOPE_HEADER];
    size_t hdr_len;
    uint8_t flags;
    uint32_t msg_len;
    uint8_t *msg; /* the message being assembled (malloc'd) */
    size_t have;
    bool frame_ready;
    rpc_envelope_status error; /* sticky */
} rpc_envelope_decoder;

void rpc_envelope_decoder_init(rpc_envelope_decoder *d, size_t max_len);
/* Consumes bytes from data until a frame completes or the input is used up;
 * *consumed says how many. After RPC_ENVELOPE_FRAME call
 * rpc_envelope_decoder_take before feeding the rest. Errors are sticky. */
rpc_envelope_status rpc_envelope_decoder_feed(rpc_envelope_decoder *d, const uint8_t *data,
                                              size_t len, size_t *consumed);
/* Hands over the complete frame: *msg is malloc'd (caller frees; NULL for an
 * empty message), *len its length. Resets the decoder for the next frame. */
void rpc_envelope_decoder_take(rpc_envelope_decoder *d, uint8_t *flags, uint8_t **msg, size_t *len);
/* True when bytes of an unfinished frame are buffered. */
bool rpc_envelope_decoder_partial(const rpc_envelope_decoder *d);
void rpc_envelope_decoder_free(rpc_envelope_decoder *d);

#endif
