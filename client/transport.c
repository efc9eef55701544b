/* HTTP transfers over libcurl: request setup, response collection (bodies
 * and Connect envelopes), and turning outcomes into statuses and messages. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

uint8_t *kl__pack(const ProtobufCMessage *m, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return NULL;
    *len = protobuf_c_message_pack(m, buf);
    return buf;
}

static int on_envelope(void *ctx, unsigned flags, const uint8_t *msg, size_t len)
{
    struct kl__xfer *x = ctx;
    if (flags & KL__ENV_END_STREAM) {
        x->end_seen = 1;
        kl__connect_error_parse((const char *)msg, len, x->end_code, sizeof(x->end_code),
                                x->end_message, sizeof(x->end_message));
        return 0;
    }
    if (x->kind == KL__XFER_CAMPAIGN)
        return kl__election_on_message(x, msg, len);
    return kl__watch_on_message(x, msg, len);
}

/* First bytes of a response: is it a stream of envelopes? */
static void check_response(struct kl__xfer *x)
{
    char *ctype = NULL;
    x->checked = 1;
    curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &x->http);
    curl_easy_getinfo(x->h, CURLINFO_CONTENT_TYPE, &ctype);
    x->streaming = x->stream && x->http == 200 && ctype &&
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
    if (x->streaming)
        rc = kl__envelope_feed(&x->dec, (const uint8_t *)ptr, n, on_envelope, x);
    else
        rc = kl__buf_append(&x->resp, ptr, n, KL__MAX_MESSAGE);
    if (rc != 0) {
        x->aborted = 1;
        x->abort_code = rc;
        return 0; /* makes curl fail the transfer with CURLE_WRITE_ERROR */
    }
    return n;
}

struct kl__xfer *kl__xfer_new(struct kl_client *c, enum kl__xfer_kind kind, const char *method,
                              uint8_t *body, size_t body_len, int stream, long timeout_ms)
{
    struct kl__xfer *x = calloc(1, sizeof(*x));
    char url[1200];
    char hdr[64];

    if (!x) {
        free(body);
        return NULL;
    }
    x->kind = kind;
    x->stream = stream;
    x->client = c;
    x->timeout_ms = timeout_ms;
    kl__envelope_decoder_init(&x->dec, KL__MAX_MESSAGE);
    if (stream) {
        x->body = malloc(body_len + KL__ENV_HEADER);
        if (!x->body)
            goto fail;
        kl__envelope_header(x->body, 0, (uint32_t)body_len);
        memcpy(x->body + KL__ENV_HEADER, body, body_len);
        x->body_len = body_len + KL__ENV_HEADER;
        free(body);
    } else {
        x->body = body;
        x->body_len = body_len;
    }
    body = NULL;
    x->h = curl_easy_init();
    if (!x->h)
        goto fail;
    snprintf(url, sizeof(url), "%s/kubelease.v1.LeaseService/%s", c->endpoint, method);
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, stream ? "Content-Type: application/connect+proto"
                                    : "Content-Type: application/proto");
    if (h && !stream)
        h = curl_slist_append(h, "Connect-Protocol-Version: 1");
    if (h && timeout_ms > 0) {
        snprintf(hdr, sizeof(hdr), "Connect-Timeout-Ms: %ld", timeout_ms);
        h = curl_slist_append(h, hdr);
    }
    if (h)
        h = curl_slist_append(h, "Expect:");
    if (!h)
        goto fail;
    x->headers = h;
    curl_easy_setopt(x->h, CURLOPT_URL, url);
    curl_easy_setopt(x->h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->h, CURLOPT_PROXY, "");
    curl_easy_setopt(x->h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(x->h, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDS, (const char *)x->body);
    curl_easy_setopt(x->h, CURLOPT_POSTFIELDSIZE, (long)x->body_len);
    curl_easy_setopt(x->h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->opts.connect_timeout_ms);
    if (timeout_ms > 0)
        curl_easy_setopt(x->h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(x->h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(x->h, CURLOPT_TCP_KEEPIDLE, 5L);
    curl_easy_setopt(x->h, CURLOPT_TCP_KEEPINTVL, 2L);
    curl_easy_setopt(x->h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(x->h, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->h, CURLOPT_PRIVATE, x);
    curl_easy_setopt(x->h, CURLOPT_ERRORBUFFER, x->errbuf);
    x->sent_ms = kl__now_ms();
    x->last_rx_ms = x->sent_ms;
    return x;
fail:
    free(body);
    kl__xfer_free(x);
    return NULL;
}

void kl__xfer_free(struct kl__xfer *x)
{
    if (!x)
        return;
    if (x->h)
        curl_easy_cleanup(x->h);
    curl_slist_free_all(x->headers);
    free(x->body);
    kl__buf_free(&x->resp);
    kl__envelope_decoder_free(&x->dec);
    free(x);
}

int kl__xfer_result(struct kl_client *c, struct kl__xfer *x, CURLcode curl_rc, const char *method,
                    kl_error *err)
{
    char code[32], msg[160];

    if (x->aborted)
        return kl__seterr(err, x->abort_code, "kubelease service at %s: %s: %s", c->endpoint,
                          method,
                          x->abort_code == KL_ERR_NO_MEMORY
                              ? "out of memory"
                              : "malformed or oversized response (is it a kubelease service?)");
    if (curl_rc == CURLE_OPERATION_TIMEDOUT && x->http == 0)
        return kl__seterr(err, KL_ERR_TIMEOUT,
                          "kubelease service at %s did not answer %s in time: %s", c->endpoint,
                          method, x->errbuf[0] ? x->errbuf : "timeout");
    if (curl_rc == CURLE_OPERATION_TIMEDOUT)
        return kl__seterr(err, KL_ERR_TIMEOUT, "kubelease service at %s: %s timed out after %ld ms",
                          c->endpoint, method, x->timeout_ms);
    if (curl_rc != CURLE_OK) {
        long os_errno = 0;
        curl_easy_getinfo(x->h, CURLINFO_OS_ERRNO, &os_errno);
        if (curl_rc == CURLE_COULDNT_CONNECT || curl_rc == CURLE_COULDNT_RESOLVE_HOST)
            return kl__seterr(err, KL_ERR_UNAVAILABLE, "kubelease service at %s unreachable: %s",
                              c->endpoint,
                              os_errno ? strerror((int)os_errno)
                                       : (x->errbuf[0] ? x->errbuf : curl_easy_strerror(curl_rc)));
        return kl__seterr(err, KL_ERR_UNAVAILABLE, "kubelease service at %s: %s failed: %s",
                          c->endpoint, method,
                          os_errno ? strerror((int)os_errno)
                                   : (x->errbuf[0] ? x->errbuf : curl_easy_strerror(curl_rc)));
    }
    if (x->http != 200) {
        if (x->resp.len && kl__connect_error_parse(x->resp.data, x->resp.len, code, sizeof(code),
                                                   msg, sizeof(msg)))
            return kl__seterr(err, kl__status_from_connect(code),
                              "kubelease service at %s: %s: %s: %s", c->endpoint, method, code,
                              msg);
        return kl__seterr(err, kl__status_from_http(x->http),
                          "kubelease service at %s answered HTTP %ld to %s%s", c->endpoint, x->http,
                          method, x->http == 404 ? " (is it a kubelease service?)" : "");
    }
    if (x->stream && !x->streaming)
        return kl__seterr(err, KL_ERR_PROTOCOL,
                          "kubelease service at %s: %s did not answer with a Connect stream",
                          c->endpoint, method);
    if (x->stream && x->end_code[0])
        return kl__seterr(err, kl__status_from_connect(x->end_code),
                          "kubelease service at %s: %s ended: %s: %s", c->endpoint, method,
                          x->end_code, x->end_message);
    if (x->stream && !x->end_seen)
        return kl__seterr(err, KL_ERR_UNAVAILABLE, "kubelease service at %s: %s stream broke off",
                          c->endpoint, method);
    return KL_OK;
}

int kl__unary_sync(struct kl_client *c, const char *method, uint8_t *body, size_t body_len,
                   struct kl__buf *out, kl_error *err)
{
    struct kl__xfer *x =
        kl__xfer_new(c, KL__XFER_UNARY_SYNC, method, body, body_len, 0, c->opts.request_timeout_ms);
    if (!x)
        return kl__seterr(err, KL_ERR_NO_MEMORY, "out of memory preparing %s", method);
    CURLcode rc = curl_easy_perform(x->h);
    int st = kl__xfer_result(c, x, rc, method, err);
    if (st == KL_OK) {
        *out = x->resp;
        memset(&x->resp, 0, sizeof(x->resp));
    }
    kl__xfer_free(x);
    return st;
}
