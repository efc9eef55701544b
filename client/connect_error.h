/* The Connect error JSON the service answers with (a unary error's body, an
 * end-of-stream frame): read without a JSON library, since libkubelease
 * depends only on libcurl and protobuf-c. The envelopes themselves are
 * common/envelope.h's. Pure: no I/O, no allocation, any thread. */
#ifndef KL_CONNECT_ERROR_H
#define KL_CONNECT_ERROR_H

#include <stddef.h>

/* Parses a Connect error JSON ({"code":"...","message":"..."} at top level or
 * under "error"). Copies the strings (NUL-terminated, truncated to fit, JSON
 * escapes decoded, non-ASCII \u escapes as '?'); a missing field yields "".
 * Returns 1 if a "code" was found, 0 otherwise. Never reads past len. */
int kl__connect_error_parse(const char *json, size_t len, char *code, size_t code_size,
                            char *message, size_t message_size);

#endif
