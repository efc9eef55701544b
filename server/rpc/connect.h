/* The Connect protocol's pure parts on the server's side: error codes and
 * their HTTP statuses, and the error JSON. No sockets. (The 5-byte envelopes
 * of streaming calls are common/envelope.h's, shared with the client.) */
#ifndef KL_RPC_CONNECT_H
#define KL_RPC_CONNECT_H

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

#endif
