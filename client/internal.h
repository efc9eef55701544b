/* Private declarations shared by the modules of libkubelease. Nothing here is
 * part of the public API (include/kubelease.h is). */
#ifndef KL_INTERNAL_H
#define KL_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include <protobuf-c/protobuf-c.h>

#include "envelope.h"
#include "kubelease.h"
#include "status.h"
#include "util.h"
#include "validate.h"

#define KL__DEFAULT_ENDPOINT "http://127.0.0.1:8080"
#define KL__MAX_MESSAGE      (64 * 1024) /* longest envelope or body accepted */

/* --- deadline arithmetic (election.c, pure) ------------------------------- */

/* The leadership deadline after a confirmation sent at sent_ms (monotonic)
 * that granted valid_for_ms; never later than the service's own deadline. */
int64_t kl__deadline_after_confirm(int64_t sent_ms, int64_t valid_for_ms);
/* When to send the next Confirm: a third of the validity after sent_ms. */
int64_t kl__next_confirm_at(int64_t sent_ms, int64_t valid_for_ms);
/* Remaining validity at now_ms (0 when passed). */
int64_t kl__remaining_ms(int64_t deadline_ms, int64_t now_ms);

/* --- transport.c: HTTP transfers ------------------------------------------ */

enum kl__xfer_kind {
    KL__XFER_CAMPAIGN,
    KL__XFER_CONFIRM,
    KL__XFER_RESIGN,
    KL__XFER_WATCH,
    KL__XFER_UNARY_SYNC
};

struct kl_client;

/* One HTTP request (unary or server stream) and its response. */
struct kl__xfer {
    CURL *h;
    struct curl_slist *headers;
    uint8_t *body; /* request body (kept alive during the transfer) */
    size_t body_len;
    enum kl__xfer_kind kind;
    int stream;  /* a Connect server stream */
    void *owner; /* the election or watch */
    struct kl_client *client;
    struct kl__buf resp; /* unary body, or the error body of a stream */
    struct kl__envelope_decoder dec;
    int checked;       /* the response status was looked at */
    int streaming;     /* the stream answered 200 with envelopes */
    long http;         /* HTTP status, 0 before any */
    int64_t sent_ms;   /* monotonic time the request was started */
    int end_seen;      /* the end-of-stream envelope arrived */
    char end_code[32]; /* its Connect error code, "" if none */
    char end_message[160];
    int aborted; /* the write callback refused the data */
    int abort_code;
    int64_t last_rx_ms; /* monotonic time of the last bytes received */
    long timeout_ms;
    char errbuf[CURL_ERROR_SIZE];
};

/* Creates a POST of a protobuf message (packed into body, taking ownership of
 * body) to method; stream selects the Connect streaming content type (the body
 * is then wrapped in an envelope). Returns NULL on out of memory. */
struct kl__xfer *kl__xfer_new(struct kl_client *c, enum kl__xfer_kind kind, const char *method,
                              uint8_t *body, size_t body_len, int stream, long timeout_ms);
void kl__xfer_free(struct kl__xfer *x);
/* Classifies a finished transfer: KL_OK for HTTP 200 with no stream error,
 * else a status with err filled with a message naming the service and method.
 * curl_rc is the transfer's CURLcode. */
int kl__xfer_result(struct kl_client *c, struct kl__xfer *x, CURLcode curl_rc, const char *method,
                    kl_error *err);
/* Performs a unary call on the calling thread. On KL_OK, out holds the
 * response body (caller frees with kl__buf_free). Takes ownership of body. */
int kl__unary_sync(struct kl_client *c, const char *method, uint8_t *body, size_t body_len,
                   struct kl__buf *out, kl_error *err);
/* Packs a protobuf message into a new buffer; NULL on out of memory. */
uint8_t *kl__pack(const ProtobufCMessage *m, size_t *len);

/* --- client.c: the client ------------------------------------------------- */

struct kl__election;
struct kl__watch;

struct kl_client {
    char *endpoint; /* without a trailing slash */
    kl_client_options opts;
    pthread_mutex_t mu; /* protects everything below, and elections/watches */
    pthread_cond_t cv;  /* broadcast on every state change */
    pthread_t thread;
    CURLM *multi;
    int stopping;
    int free_on_exit; /* kl_client_free from a callback: the thread frees */
    struct kl__election *elections;
    struct kl__election *retired; /* replaced records still referenced by waiters */
    struct kl__watch *watches;
};

void kl__client_wake(struct kl_client *c);
int kl__client_on_io_thread(struct kl_client *c);
/* Waits on c->cv until abs_ms (monotonic; < 0 = no limit). c->mu held. */
void kl__client_wait_until(struct kl_client *c, int64_t abs_ms);

/* --- election.c ----------------------------------------------------------- */

/* Runs the elections' timers and transfers; c->mu held. Returns the next
 * time (monotonic ms) it needs to run, or INT64_MAX. */
int64_t kl__elections_process(struct kl_client *c, int64_t now);
/* A transfer of an election finished; c->mu held. */
void kl__election_xfer_done(struct kl_client *c, struct kl__xfer *x, CURLcode rc);
/* 1 when every election's I/O is done (for shutdown); c->mu held. */
int kl__elections_idle(struct kl_client *c);
void kl__elections_cancel_all(struct kl_client *c);
void kl__elections_free_all(struct kl_client *c);
/* A Campaign stream message arrived (I/O thread, c->mu NOT held). Returns 0
 * or a status that aborts the stream. */
int kl__election_on_message(struct kl__xfer *x, const uint8_t *msg, size_t len);

/* --- watch.c -------------------------------------------------------------- */

int64_t kl__watches_process(struct kl_client *c, int64_t now);
void kl__watch_xfer_done(struct kl_client *c, struct kl__xfer *x, CURLcode rc);
int kl__watches_idle(struct kl_client *c);
void kl__watches_cancel_all(struct kl_client *c);
void kl__watches_free_all(struct kl_client *c);
int kl__watch_on_message(struct kl__xfer *x, const uint8_t *msg, size_t len);

#endif
