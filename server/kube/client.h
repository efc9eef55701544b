/* HTTP transport to the apiserver: every request is a libcurl easy handle
 * run by the loop's multi handle (non-blocking; connections are kept alive
 * and reused, HTTP/2 multiplexed when the server offers it).
 *
 * Callbacks never run inside a libcurl callback or inside the call that
 * started the request: response headers and streamed data are handed over
 * from a zero-delay loop timer, completion from the loop's transfer-done
 * hook. So a callback may start or cancel any request, including its own,
 * and may free the client: what the running callback still uses is freed
 * when it returns (flags on the request and the client, as in hiredis).
 * Loop thread only. */
#ifndef KL_KUBE_CLIENT_H
#define KL_KUBE_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"
#include "kube/config.h"

#define KUBE_BODY_MAX (16 * 1024 * 1024)

typedef struct kube_client kube_client;
typedef struct kube_request kube_request;

typedef struct kube_response {
    long http_code;    /* 0 when no HTTP response arrived */
    int curl_code;     /* CURLcode; 0 on success */
    const char *error; /* transport error text ("" when none) */
    const char *body;  /* NUL-terminated; "" for a streamed 2xx body */
    size_t body_len;
    int64_t elapsed_ms; /* from start to completion */
} kube_response;

/* The request ended (any outcome). r is valid during the call only; the
 * request is freed after the callback returns. */
typedef void (*kube_done_fn)(void *ctx, const kube_response *r);
/* Streaming requests: the response headers arrived (called once, before any data). */
typedef void (*kube_headers_fn)(void *ctx, long http_code);
/* Streaming requests: a chunk of a 2xx body. Return 0 to go on; non-zero
 * aborts the transfer (done then reports curl_code != 0). */
typedef int (*kube_data_fn)(void *ctx, const char *data, size_t len);

typedef struct kube_request_opts {
    const char *method;       /* "GET", "POST", "PUT", "PATCH", "DELETE" */
    const char *path;         /* "/apis/..." with the query string; appended to the server */
    const char *body;         /* copied; NULL for none */
    const char *content_type; /* of the body; NULL: application/json */
    size_t body_len;
    int timeout_ms;             /* whole request; 0: no limit (watches) */
    kube_headers_fn on_headers; /* with on_data: a streaming request */
    kube_data_fn on_data;
    kube_done_fn on_done; /* required */
    void *ctx;
} kube_request_opts;

/* Takes the contents of *cfg (which is zeroed) and returns a client, or NULL
 * with err filled. */
kube_client *kube_client_new(loop *l, kube_config *cfg, char *err, size_t err_len);
/* Aborts every request without calling its callbacks. NULL is a no-op. From
 * inside a callback, the client is freed when that callback returns; no other
 * callback runs and kube_client_start returns NULL meanwhile. */
void kube_client_free(kube_client *c);

/* Starts a request; returns NULL when it cannot be started (out of memory,
 * libcurl refused, the client is being freed), without calling any callback. */
kube_request *kube_client_start(kube_client *c, const kube_request_opts *o);
/* Aborts a request; no callback runs for it after this returns. NULL is a no-op. */
void kube_client_cancel(kube_client *c, kube_request *r);

/* Bound service-account tokens rotate: the token file is re-read before a
 * request when the last read is this old, and after any 401. */
#define KUBE_TOKEN_REREAD_MS 60000

/* Makes the next request re-read the token file (done after a 401). */
void kube_client_token_stale(kube_client *c);
/* Re-reads the token file if it is due at now_ms (mono_ms()) or stale;
 * returns true when a new token was read. Called before every request. */
bool kube_client_token_maybe_refresh(kube_client *c, int64_t now_ms);
/* How many times the token file was (re-)read successfully. */
uint64_t kube_client_token_reads(const kube_client *c);
/* The token in use (for tests; secret: never log it). */
const char *kube_client_token(const kube_client *c);

#endif
