/* HTTP transfers to the kubelease service over libcurl: Connect unary calls
 * and server streams, each carrying its own callbacks (as curl's easy
 * handles and hiredis' commands do), so the transport knows nothing of the
 * elections and watches that own them.
 *
 * Threads. A kl__transport is driven by one thread (the client's I/O
 * thread): kl__xfer_start, kl__xfer_drop, kl__transport_perform/_collect/
 * _poll are called there only; kl__transport_wake from any thread.
 * kl__unary_call runs a whole call on the calling thread with its own easy
 * handle and only reads the transport's immutable fields and its token
 * (which has its own lock). */
#ifndef KL_TRANSPORT_H
#define KL_TRANSPORT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <protobuf-c/protobuf-c.h>

#include "common/buf.h"
#include "common/envelope.h"
#include "kubelease.h"
#include "token.h"
#include "util.h"

#define KL__MAX_MESSAGE   (64 * 1024)        /* longest envelope or body accepted */
#define KL__MAX_LIST_BODY (16 * 1024 * 1024) /* longest ListLeases answer accepted */

struct kl__transport {
    char *endpoint; /* "http://host:port", without a trailing slash */
    char *ca_file;  /* the CA bundle https endpoints must chain to; NULL: the system's */
    long connect_timeout_ms;
    CURLM *multi;
    /* The blocking calls' connections (kl__unary_call), kept alive between
     * calls from any thread: a standby reading the holder every 200 ms
     * opens no connection, and does no TLS handshake, per read. */
    CURLSH *share;
    pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
    int share_mu_ok;        /* share_mu initialised */
    struct kl__token token; /* the bearer token of every request (thread-safe) */
};

/* curl_global_init, once per process. Returns KL_OK or KL_ERR_INTERNAL with
 * err filled. */
int kl__transport_global_init(kl_error *err);
/* Fills *t; token_file (NULL: none) holds the bearer token to send, ca_file
 * (NULL: the system's store; copied) the CAs https endpoints must chain to.
 * Returns KL_OK, or KL_ERR_NO_MEMORY with *t left empty (safe to pass to
 * kl__transport_cleanup). */
int kl__transport_init(struct kl__transport *t, const char *endpoint, long connect_timeout_ms,
                       const char *token_file, const char *ca_file);
/* Every started transfer must have been dropped or collected. */
void kl__transport_cleanup(struct kl__transport *t);

struct kl__xfer;

/* A message of a stream arrived (I/O thread, inside kl__transport_perform).
 * msg is valid only during the call. Returns 0, or a status that aborts the
 * transfer (it then finishes with x->aborted set). */
typedef int (*kl__xfer_message_fn)(struct kl__xfer *x, const uint8_t *msg, size_t len);
/* A started transfer finished (I/O thread, inside kl__transport_collect);
 * rc is curl's result for it (classify with kl__xfer_result). x is freed
 * when this returns: the owner must forget it. */
typedef void (*kl__xfer_done_fn)(struct kl__xfer *x, CURLcode rc);

/* What a kind of transfer is: its method and callbacks (static, the owner's). */
struct kl__xfer_type {
    const char *method;             /* "Campaign", "Confirm", ... */
    int stream;                     /* a Connect server stream */
    kl__xfer_message_fn on_message; /* streams: each message */
    kl__xfer_done_fn on_done;       /* started transfers: the end */
};

/* One HTTP request (unary or server stream) and its response. */
struct kl__xfer {
    const struct kl__xfer_type *type;
    void *data; /* the owner's */
    struct kl__transport *t;
    CURL *h;
    int started; /* in the multi handle (kl__xfer_start) */
    struct curl_slist *headers;
    uint8_t *body; /* request body (kept alive during the transfer) */
    size_t body_len;
    long timeout_ms;
    int64_t sent_ms;     /* monotonic time the request was created */
    int64_t last_rx_ms;  /* monotonic time of the last bytes received */
    struct kl__buf resp; /* unary body, or the error body of a stream; its limit is
                            KL__MAX_MESSAGE, or kl__unary_call's max_body */
    struct kl__envelope_decoder dec;
    int checked;       /* the response status was looked at */
    int streaming;     /* the stream answered 200 with envelopes */
    long http;         /* HTTP status, 0 before any */
    int end_seen;      /* the end-of-stream envelope arrived */
    char end_code[32]; /* its Connect error code, "" if none */
    char end_message[160];
    int aborted; /* a callback refused the data */
    int abort_code;
    char errbuf[CURL_ERROR_SIZE];
};

/* Creates a POST of req to type->method (timeout_ms 0 = none; the Connect
 * timeout header says the same to the service). sent_ms is taken now, before
 * the request is written, so deadlines computed from it can only be early.
 * Returns NULL on out of memory. */
struct kl__xfer *kl__xfer_new(struct kl__transport *t, const struct kl__xfer_type *type,
                              const ProtobufCMessage *req, long timeout_ms, void *data);
/* Hands x to the transport; its on_done will run. Returns KL_OK, or
 * KL_ERR_INTERNAL with x still the caller's (drop it). */
int kl__xfer_start(struct kl__xfer *x);
/* Stops x if started (without calling on_done) and frees it. NULL is a no-op. */
void kl__xfer_drop(struct kl__xfer *x);
/* Classifies a finished transfer: KL_OK for HTTP 200 with no stream error,
 * else a status with err filled with a message naming the service and the
 * method. rc is the transfer's CURLcode. */
int kl__xfer_result(struct kl__xfer *x, CURLcode rc, kl_error *err);

/* Performs a unary call on the calling thread (timeout_ms as above), accepting
 * a response body of at most max_body bytes (KL_ERR_PROTOCOL beyond). On
 * KL_OK out holds the response body (the caller frees it with kl__buf_free). */
int kl__unary_call(struct kl__transport *t, const char *method, const ProtobufCMessage *req,
                   long timeout_ms, size_t max_body, struct kl__buf *out, kl_error *err);

/* Runs the started transfers (their on_message callbacks). */
void kl__transport_perform(struct kl__transport *t);
/* Hands every finished transfer to its on_done, then frees it. */
void kl__transport_collect(struct kl__transport *t);
/* Waits for network activity, a wake-up or timeout_ms. */
void kl__transport_poll(struct kl__transport *t, int timeout_ms);
/* Ends a kl__transport_poll early. Any thread. */
void kl__transport_wake(struct kl__transport *t);

#endif
