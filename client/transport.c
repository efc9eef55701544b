/* HTTP transfers over libcurl (see transport.h): request setup, response
 * collection (bodies and Connect envelopes), the multi handle that runs them,
 * and turning outcomes into statuses and messages. */
#include "transport.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connect_error.h"
#include "status.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_OK;

static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int kl__transport_global_init(kl_error *err)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return kl__seterr(err, KL_ERR_INTERNAL, "curl_global_init failed: %s",
                          curl_easy_strerror(curl_init_rc));
    return KL_OK;
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *ctx)
{
    (void)h;
    (void)access;
    pthread_mutex_lock(&((struct kl__transport *)ctx)->share_mu[data]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *ctx)
{
    (void)h;
    pthread_mutex_unlock(&((struct kl__transport *)ctx)->share_mu[data]);
}

/* The blocking calls' connection cache. Returns 0, or -1 out of memory. */
static int share_init(struct kl__transport *t)
{
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&t->share_mu[i], NULL);
    t->share_mu_ok = 1;
    t->share = curl_share_init();
    if (!t->share)
        return -1;
    curl_share_setopt(t->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(t->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(t->share, CURLSHOPT_USERDATA, t);
    if (curl_share_setopt(t->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK) {
        /* A libcurl without it: each call on a connection of its own. */
        curl_share_cleanup(t->share);
        t->share = NULL;
    }
    return 0;
}

int kl__transport_init(struct kl__transport *t, const char *endpoint, long connect_timeout_ms,
                       const char *token_file, const char *ca_file)
{
    memset(t, 0, sizeof(*t));
    t->connect_timeout_ms = connect_timeout_ms;
    if (kl__token_init(&t->token, token_file) != KL_OK || !(t->endpoint = strdup(endpoint)) ||
        (ca_file && !(t->ca_file = strdup(ca_file)))) {
        kl__transport_cleanup(t);
        return KL_ERR_NO_MEMORY;
    }
    size_t n = strlen(t->endpoint);
    while (n > 0 && t->endpoint[n - 1] == '/')
        t->endpoint[--n] = 0;
    t->multi = curl_multi_init();
    if (!t->multi) {
        kl__transport_cleanup(t);
        return KL_ERR_NO_MEMORY;
    }
    curl_multi_setopt(t->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
    if (share_init(t) != 0) {
        kl__transport_cleanup(t);
        return KL_ERR_NO_MEMORY;
    }
    return KL_OK;
}

void kl__transport_cleanup(struct kl__transport *t)
{
    if (t->multi)
        curl_multi_cleanup(t->multi);
    if (t->share)
        curl_share_cleanup(t->share); /* every call's handle is gone */
    if (t->share_mu_ok)
        for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
            pthread_mutex_destroy(&t->share_mu[i]);
    free(t->endpoint);
    free(t->ca_file);
    kl__token_cleanup(&t->token); /* also of a zeroed transport: a zeroed mutex is unlocked */
    memset(t, 0, sizeof(*t));
}

/* --- receiving ------------------------------------------------------------ */

static int on_envelope(void *ctx, unsigned flags, const uint8_t *msg, size_t len)
{
    struct kl__xfer *x = ctx;
    if (flags & KL__ENVELOPE_FLAG_END_STREAM) {
        x->end_seen = 1;
        kl__connect_error_parse((const char *)msg, len, x->end_code, sizeof(x->end_code),
                                x->end_message, sizeof(x->end_message));
        return 0;
    }
    int rc = x->type->on_message ? x->type->on_message(x, msg, len) : 0;
    if (rc != 0)
        x->abort_code = rc; /* for feed_stream */
    return rc;
}

/* Feeds response bytes to the stream's decoder. Returns KL_OK, the status
 * an on_message callback refused them with, KL_ERR_NO_MEMORY, or
 * KL_ERR_PROTOCOL (an envelope too long or compressed, data after the end). */
static int feed_stream(struct kl__xfer *x, const char *data, size_t n)
{
    kl__envelope_status st =
        kl__envelope_stream_feed(&x->dec, (const uint8_t *)data, n, on_envelope, x);
    if (st == KL__ENVELOPE_NEED_MORE)
        return KL_OK;
    if (st == KL__ENVELOPE_STOPPED)
        return x->abort_code;
    return st == KL__ENVELOPE_NO_MEMORY ? KL_ERR_NO_MEMORY : KL_ERR_PROTOCOL;
}

/* Keeps a unary (or error) body. Returns KL_OK, KL_ERR_PROTOCOL past the
 * body's limit, or KL_ERR_NO_MEMORY. */
static int keep_body(struct kl__xfer *x, const char *data, size_t n)
{
    int rc = kl__buf_append(&x->resp, data, n);
    if (rc == KL__BUF_OK)
        return KL_OK;
    return rc == KL__BUF_NO_MEMORY ? KL_ERR_NO_MEMORY : KL_ERR_PROTOCOL;
}

/* First bytes of a response: is it a stream of envelopes? */
static void check_response(struct kl__xfer *x)
{
    char *ctype = NULL;
    x->checked = 1;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->http);
    curl_easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ctype);
    x->streaming = x->type->stream && x->http == 200 && ctype &&
                   strncmp(ctype, "application/connect+proto", 25) == 0;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct kl__xfer *x = userdata;
    size_t n = size * nmemb;
    int rc;

    x->last_rx_ms = kl__now_ms();
    if (!x->checked)
        check_response(x);
    rc = x->streaming ? feed_stream(x, ptr, n) : keep_body(x, ptr, n);
    if (rc != 0) {
        x->aborted = 1;
        x->abort_code = rc;
        return 0; /* makes curl fail the transfer with CURLE_WRITE_ERROR */
    }
    return n;
}

/* --- transfers ------------------------------------------------------------ */

/* The request body: req packed, wrapped in an envelope for a stream. */
static int pack_body(struct kl__xfer *x, const ProtobufCMessage *req)
{
    size_t n = protobuf_c_message_get_packed_size(req);
    size_t off = x->type->stream ? KL__ENVELOPE_HEADER : 0;
    x->body = malloc(off + n + 1);
    if (!x->body)
        return KL_ERR_NO_MEMORY;
    x->body_len = off + protobuf_c_message_pack(req, x->body + off);
    if (off)
        kl__envelope_header(x->body, 0, (uint32_t)(x->body_len - off));
    return KL_OK;
}

static struct curl_slist *request_headers(const struct kl__xfer *x)
{
    struct curl_slist *h = NULL;
    char hdr[64];
    h = curl_slist_append(h, x->type->stream ? "Content-Type: application/connect+proto"
                                             : "Content-Type: application/proto");
    if (h && !x->type->stream)
        h = curl_slist_append(h, "Connect-Protocol-Version: 1");
    if (h && x->timeout_ms > 0) {
        snprintf(hdr, sizeof(hdr), "Connect-Timeout-Ms: %ld", x->timeout_ms);
        h = curl_slist_append(h, hdr);
    }
    if (h)
        h = curl_slist_append(h, "Expect:");
    if (h)
        h = kl__token_add_header(&x->t->token, h);
    return h;
}

static void set_options(struct kl__xfer *x, const char *url)
{
    curl_easy_setopt(x->h, CURLOPT_URL, url);
    curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->h, CURLOPT_PROXY, "");
    curl_easy_setopt(x->h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, (const char *)x->body);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE, (long)x->body_len);
    curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT_MS, x->t->connect_timeout_ms);
    if (x->timeout_ms > 0)
        curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, x->timeout_ms);
    if (x->t->ca_file) {
        /* Only this bundle is trusted; re-read for new connections at least
         * once a minute, so that a rotated CA takes effect. */
        curl_easy_setopt(x->h, CURLOPT_CAINFO, x->t->ca_file);
        curl_easy_setopt(x->h, CURLOPT_CAPATH, NULL);
#if LIBCURL_VERSION_NUM >= 0x075700
        curl_easy_setopt(x->h, CURLOPT_CA_CACHE_TIMEOUT, 60L);
#endif
    }
    if (x->type->stream) {
        /* A stream has a connection of its own, closed with it: the
         * service serves streams and calls on separate threads, told apart
         * by a connection's first request (docs/design.md, section 2). */
        curl_easy_setopt(x->h, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(x->h, CURLOPT_FORBID_REUSE, 1L);
    }
    curl_easy_setopt(x->h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(x->h, CURLOPT_TCP_KEEPIDLE, 5L);
    curl_easy_setopt(x->h, CURLOPT_TCP_KEEPINTVL, 2L);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    curl_easy_setopt(x->h, CURLOPT_ERRORBUFFER, x->errbuf);
}

struct kl__xfer *kl__xfer_new(struct kl__transport *t, const struct kl__xfer_type *type,
                              const ProtobufCMessage *req, long timeout_ms, void *data)
{
    struct kl__xfer *x = calloc(1, sizeof(*x));
    char url[1200];

    if (!x)
        return NULL;
    x->type = type;
    x->data = data;
    x->t = t;
    x->timeout_ms = timeout_ms;
    kl__envelope_decoder_init(&x->dec, KL__MAX_MESSAGE);
    kl__buf_init(&x->resp, KL__MAX_MESSAGE);
    if (pack_body(x, req) != KL_OK)
        goto fail;
    x->h = curl_easy_init();
    x->headers = x->h ? request_headers(x) : NULL;
    if (!x->headers)
        goto fail;
    snprintf(url, sizeof(url), "%s/kubelease.v1.LeaseService/%s", t->endpoint, type->method);
    set_options(x, url);
    x->sent_ms = kl__now_ms();
    x->last_rx_ms = x->sent_ms;
    return x;
fail:
    kl__xfer_drop(x);
    return NULL;
}

int kl__xfer_start(struct kl__xfer *x)
{
    if (curl_multi_add_handle(x->t->multi, x->h) != CURLM_OK)
        return KL_ERR_INTERNAL;
    x->started = 1;
    return KL_OK;
}

void kl__xfer_drop(struct kl__xfer *x)
{
    if (!x)
        return;
    /* Only a started transfer touches the multi handle: kl__unary_call
     * drops its transfer on another thread than the I/O thread. */
    if (x->started)
        curl_multi_remove_handle(x->t->multi, x->h);
    if (x->h)
        curl_easy_cleanup(x->h);
    curl_slist_free_all(x->headers);
    free(x->body);
    kl__buf_free(&x->resp);
    kl__envelope_decoder_free(&x->dec);
    free(x);
}

/* --- outcomes ------------------------------------------------------------- */

/* A TLS failure: the handshake, or the service's certificate refused. */
static int tls_failure(CURLcode rc)
{
    switch (rc) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
        return 1;
    default:
        return 0;
    }
}

/* A transfer that curl itself failed: unreachable, timed out, broken. */
static int curl_failure(struct kl__xfer *x, CURLcode rc, kl_error *err)
{
    const char *ep = x->t->endpoint, *method = x->type->method;
    if (tls_failure(rc))
        return kl__seterr(err, KL_ERR_UNAVAILABLE,
                          "TLS with the kubelease service at %s failed (%s; trusted CAs: %s): %s",
                          ep, curl_easy_strerror(rc),
                          x->t->ca_file ? x->t->ca_file : "the system's",
                          x->errbuf[0] ? x->errbuf : "no details");
    if (rc == CURLE_OPERATION_TIMEDOUT && x->http == 0)
        return kl__seterr(err, KL_ERR_TIMEOUT,
                          "kubelease service at %s did not answer %s in time: %s", ep, method,
                          x->errbuf[0] ? x->errbuf : "timeout");
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return kl__seterr(err, KL_ERR_TIMEOUT, "kubelease service at %s: %s timed out after %ld ms",
                          ep, method, x->timeout_ms);
    long os_errno = 0;
    curl_easy_getinfo(x->h, CURLINFO_OS_ERRNO, &os_errno);
    const char *why =
        os_errno ? strerror((int)os_errno) : (x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
    if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST)
        return kl__seterr(err, KL_ERR_UNAVAILABLE, "kubelease service at %s unreachable: %s", ep,
                          why);
    return kl__seterr(err, KL_ERR_UNAVAILABLE, "kubelease service at %s: %s failed: %s", ep, method,
                      why);
}

int kl__xfer_result(struct kl__xfer *x, CURLcode rc, kl_error *err)
{
    const char *ep = x->t->endpoint, *method = x->type->method;
    char code[32], msg[160];

    if (x->aborted)
        return kl__seterr(err, x->abort_code, "kubelease service at %s: %s: %s", ep, method,
                          x->abort_code == KL_ERR_NO_MEMORY
                              ? "out of memory"
                              : "malformed or oversized response (is it a kubelease service?)");
    if (rc != CURLE_OK)
        return curl_failure(x, rc, err);
    /* An answer without a body (a protobuf message with every field at its
     * default) never reached on_write. */
    if (!x->checked)
        check_response(x);
    if (x->http != 200) {
        char why[200] = "";
        if (x->http == 401)
            kl__token_refused(&x->t->token, why, sizeof(why));
        if (x->resp.len && kl__connect_error_parse(x->resp.data, x->resp.len, code, sizeof(code),
                                                   msg, sizeof(msg)))
            return kl__seterr(err, kl__status_from_connect(code),
                              "kubelease service at %s: %s: %s: %s%s%s%s", ep, method, code, msg,
                              why[0] ? " (" : "", why, why[0] ? ")" : "");
        return kl__seterr(err, kl__status_from_http(x->http),
                          "kubelease service at %s answered HTTP %ld to %s%s", ep, x->http, method,
                          x->http == 404 ? " (is it a kubelease service?)" : "");
    }
    if (x->type->stream && !x->streaming)
        return kl__seterr(err, KL_ERR_PROTOCOL,
                          "kubelease service at %s: %s did not answer with a Connect stream", ep,
                          method);
    if (x->type->stream && x->end_code[0]) {
        char why[200] = "";
        if (strcmp(x->end_code, "unauthenticated") == 0)
            kl__token_refused(&x->t->token, why, sizeof(why));
        return kl__seterr(err, kl__status_from_connect(x->end_code),
                          "kubelease service at %s: %s ended: %s: %s%s%s%s", ep, method,
                          x->end_code, x->end_message, why[0] ? " (" : "", why, why[0] ? ")" : "");
    }
    if (x->type->stream && !x->end_seen)
        return kl__seterr(err, KL_ERR_UNAVAILABLE, "kubelease service at %s: %s stream broke off",
                          ep, method);
    return KL_OK;
}

int kl__unary_call(struct kl__transport *t, const char *method, const ProtobufCMessage *req,
                   long timeout_ms, size_t max_body, struct kl__buf *out, kl_error *err)
{
    const struct kl__xfer_type type = {method, 0, NULL, NULL};
    struct kl__xfer *x = kl__xfer_new(t, &type, req, timeout_ms, NULL);
    if (!x)
        return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory preparing %s", method);
    if (t->share)
        curl_easy_setopt(x->h, CURLOPT_SHARE, t->share);
    kl__buf_init(&x->resp, max_body); /* empty yet: only its limit changes */
    CURLcode rc = curl_easy_perform(x->h);
    int st = kl__xfer_result(x, rc, err);
    if (st == KL_OK) {
        *out = x->resp;
        memset(&x->resp, 0, sizeof(x->resp));
    }
    kl__xfer_drop(x);
    return st;
}

/* --- the multi handle ----------------------------------------------------- */

void kl__transport_perform(struct kl__transport *t)
{
    int running = 0;
    curl_multi_perform(t->multi, &running);
}

void kl__transport_collect(struct kl__transport *t)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(t->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct kl__xfer *x = NULL;
        CURLcode rc = m->data.result;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
        curl_multi_remove_handle(t->multi, m->easy_handle);
        x->started = 0;
        x->type->on_done(x, rc);
        kl__xfer_drop(x);
    }
}

void kl__transport_poll(struct kl__transport *t, int timeout_ms)
{
    curl_multi_poll(t->multi, NULL, 0, timeout_ms, NULL);
}

void kl__transport_wake(struct kl__transport *t)
{
    curl_multi_wakeup(t->multi);
}
