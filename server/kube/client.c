/* apiserver transport over the loop's curl multi handle (see client.h). The
 * client, its requests and their callbacks belong to the loop thread: no
 * locks. */
#include "kube/client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/list.h"
#include "common/secret.h"
#include "core/log.h"
#include "core/metrics.h"

/* Bound tokens rotate; re-read the file at least this often. */
#define TOKEN_REREAD_MS KUBE_TOKEN_REREAD_MS

/* A callback may cancel its own request or free the whole client (hiredis's
 * REDIS_IN_CALLBACK and REDIS_FREEING). While a callback runs, its request
 * and the client carry an IN_CALLBACK flag; a cancel or a free asked for
 * then aborts the transfers at once but only marks what the running callback
 * still uses (REQ_CANCELLED, CLIENT_FREEING), and callback_end() frees it
 * once the callback has returned. */
enum {
    REQ_IN_CALLBACK = 1 << 0, /* one of its callbacks is running */
    REQ_CANCELLED = 1 << 1,   /* cancelled: no further callback; freed by callback_end */
};
enum {
    CLIENT_IN_CALLBACK = 1 << 0, /* a request's callback is running */
    CLIENT_FREEING = 1 << 1,     /* kube_client_free was called from a callback */
};

struct kube_request {
    struct kl__list link; /* in kube_client.reqs */
    kube_client *c;
    CURL *easy;
    struct curl_slist *headers;
    kube_request_opts o;
    char *body_copy;
    char errbuf[CURL_ERROR_SIZE];
    /* Bytes received but not handed over yet (streaming), or the whole
     * body (buffered responses and non-2xx streaming responses); less than
     * KUBE_BODY_MAX bytes. */
    struct kl__buf buf;
    long http_code;
    bool headers_done;      /* the header block of the final response ended */
    bool headers_delivered; /* on_headers has run */
    bool streaming_body;    /* 2xx streaming: data goes to on_data */
    bool too_big;
    bool aborted;        /* on_data asked to stop */
    unsigned flags;      /* REQ_* */
    loop_timer dispatch; /* zero-delay timer handing data to the callbacks */
    int64_t started_ms;
    struct timespec started; /* for the latency metric */
    const char *verb;        /* Kubernetes verb for the metrics (static) */
};

struct kube_client {
    loop *l;
    kube_config cfg;
    struct kl__list reqs; /* kube_request.link: every request not yet freed */
    unsigned flags;       /* CLIENT_* */
    int64_t token_read_ms;
    bool token_stale;
    uint64_t token_reads;
    char *auth_header; /* "Authorization: Bearer ..." (secret) */
};

static int set_auth_header(kube_client *c)
{
    kl__secret_free(c->auth_header);
    c->auth_header = NULL;
    if (!c->cfg.token)
        return 0;
    size_t n = strlen(c->cfg.token) + 32;
    c->auth_header = malloc(n);
    if (!c->auth_header)
        return -1;
    snprintf(c->auth_header, n, "Authorization: Bearer %s", c->cfg.token);
    return 0;
}

static int setup_tls(const kube_config *cfg, CURL *e);

/* Fails closed: if libcurl cannot take the TLS settings (say, a build
 * without CA blobs), no request could honour them; say so at start-up. */
static int tls_check(const kube_config *cfg, char *err, size_t err_len)
{
    CURL *e = curl_easy_init();
    int rc = e ? setup_tls(cfg, e) : -1;
    if (e)
        curl_easy_cleanup(e);
    if (rc != 0)
        snprintf(err, err_len,
                 "%s: libcurl cannot apply the TLS settings (the cluster's CA, client "
                 "certificate or insecure-skip-tls-verify)",
                 cfg->source ? cfg->source : "kube config");
    return rc;
}

kube_client *kube_client_new(loop *l, kube_config *cfg, char *err, size_t err_len)
{
    if (tls_check(cfg, err, err_len) != 0)
        return NULL;
    kube_client *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    c->l = l;
    c->cfg = *cfg;
    memset(cfg, 0, sizeof *cfg);
    if (set_auth_header(c) != 0) {
        snprintf(err, err_len, "out of memory");
        kube_client_free(c);
        return NULL;
    }
    c->token_read_ms = mono_ms();
    c->token_reads = c->cfg.token_file ? 1 : 0;
    return c;
}

void kube_client_token_stale(kube_client *c)
{
    c->token_stale = true;
}

uint64_t kube_client_token_reads(const kube_client *c)
{
    return c->token_reads;
}

const char *kube_client_token(const kube_client *c)
{
    return c->cfg.token;
}

/* Re-reads a rotating token when it is old or was refused. */
bool kube_client_token_maybe_refresh(kube_client *c, int64_t now)
{
    if (!c->cfg.token_file)
        return false;
    if (!c->token_stale && now - c->token_read_ms < TOKEN_REREAD_MS)
        return false;
    char e[512];
    c->token_read_ms = now;
    c->token_stale = false;
    if (kube_config_token_refresh(&c->cfg, e, sizeof e) != 0) {
        log_event(LOG_WARN, "kube_token_reread_failed", "error=%s", log_q(e));
        return false;
    }
    c->token_reads++;
    if (set_auth_header(c) != 0)
        log_event(LOG_ERROR, "kube_token_reread_failed", "error=%s", log_q("out of memory"));
    return true;
}

static void req_free(kube_request *r)
{
    kl__list_remove(&r->link);
    loop_timer_stop(&r->dispatch);
    if (r->easy)
        curl_easy_cleanup(r->easy);
    curl_slist_free_all(r->headers);
    kl__secret_free(r->body_copy); /* a TokenReview's holds a bearer token */
    kl__buf_free(&r->buf);
    free(r);
}

static int buf_append(kube_request *r, const char *data, size_t n)
{
    int rc = kl__buf_append(&r->buf, data, n);
    if (rc == KL__BUF_TOO_LARGE)
        r->too_big = true;
    return rc == KL__BUF_OK ? 0 : -1;
}

static void client_release(kube_client *c)
{
    kl__secret_free(c->auth_header);
    kube_config_clear(&c->cfg);
    free(c);
}

/* Brackets every callback of r (see REQ_IN_CALLBACK). */
static void callback_begin(kube_request *r)
{
    r->flags |= REQ_IN_CALLBACK;
    r->c->flags |= CLIENT_IN_CALLBACK;
}

/* Ends a callback of r and carries out a cancel or free it asked for.
 * Returns false when r is gone: the caller touches neither r nor its client
 * again. */
static bool callback_end(kube_request *r)
{
    kube_client *c = r->c;
    r->flags &= ~(unsigned)REQ_IN_CALLBACK;
    c->flags &= ~(unsigned)CLIENT_IN_CALLBACK;
    if (!(r->flags & REQ_CANCELLED))
        return true;
    req_free(r);
    if (c->flags & CLIENT_FREEING)
        client_release(c); /* every other request was freed by kube_client_free */
    return false;
}

enum { DELIVER_OK, DELIVER_STOP, DELIVER_GONE };

/* Hands buffered headers and data to the callbacks. */
static int deliver(kube_request *r)
{
    if (!r->o.on_data || !r->headers_done)
        return DELIVER_OK;
    if (!r->headers_delivered) {
        r->headers_delivered = true;
        if (r->o.on_headers) {
            callback_begin(r);
            r->o.on_headers(r->o.ctx, r->http_code);
            if (!callback_end(r))
                return DELIVER_GONE;
        }
    }
    if (!r->streaming_body || r->buf.len == 0 || r->aborted)
        return DELIVER_OK;
    /* The bytes are handed over and the buffer starts afresh, so that a
     * burst does not keep its memory for the life of a watch. */
    size_t len;
    char *data = kl__buf_take(&r->buf, &len);
    callback_begin(r);
    int stop = r->o.on_data(r->o.ctx, data, len);
    free(data);
    if (!callback_end(r))
        return DELIVER_GONE;
    return stop ? DELIVER_STOP : DELIVER_OK;
}

static void dispatch_fire(void *arg);

static void schedule_dispatch(kube_request *r)
{
    if (!loop_timer_active(&r->dispatch))
        loop_timer_start(&r->dispatch, loop_now(r->c->l), dispatch_fire, r);
}

static size_t on_header(char *line, size_t size, size_t n, void *arg)
{
    kube_request *r = arg;
    size_t len = size * n;
    if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
        /* A new response (after 100 Continue, say): start over. */
        r->headers_done = false;
        return len;
    }
    if ((len == 2 && line[0] == '\r' && line[1] == '\n') || (len == 1 && line[0] == '\n')) {
        long code = 0;
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200) {
            r->http_code = code;
            r->headers_done = true;
            r->streaming_body = r->o.on_data && code >= 200 && code < 300;
            if (r->o.on_data)
                schedule_dispatch(r);
        }
    }
    return len;
}

static size_t on_write(char *data, size_t size, size_t n, void *arg)
{
    kube_request *r = arg;
    size_t len = size * n;
    if (r->aborted)
        return 0;
    if (buf_append(r, data, len) != 0)
        return 0; /* CURLE_WRITE_ERROR */
    if (r->streaming_body)
        schedule_dispatch(r);
    return len;
}

static void finish(kube_request *r, CURLcode result);

static void dispatch_fire(void *arg)
{
    kube_request *r = arg;
    int rc = deliver(r);
    if (rc == DELIVER_STOP) {
        /* Timers run outside libcurl callbacks: the transfer can end here. */
        r->aborted = true;
        loop_curl_remove(r->c->l, r->easy);
        finish(r, CURLE_WRITE_ERROR);
    }
}

/* The Kubernetes verb of a request: get, list, watch, create, update,
 * patch, delete (the apiserver's own names). */
static const char *verb_of(const char *method, const char *path)
{
    if (strcmp(method, "GET") == 0) {
        const char *q = strchr(path, '?');
        if (q && (strstr(q, "watch=1") || strstr(q, "watch=true")))
            return "watch";
        size_t n = q ? (size_t)(q - path) : strlen(path);
        while (n > 0 && path[n - 1] == '/')
            n--;
        return n >= 7 && memcmp(path + n - 7, "/leases", 7) == 0 ? "list" : "get";
    }
    if (strcmp(method, "POST") == 0)
        return "create";
    if (strcmp(method, "PUT") == 0)
        return "update";
    if (strcmp(method, "PATCH") == 0)
        return "patch";
    if (strcmp(method, "DELETE") == 0)
        return "delete";
    return "other";
}

/* kubelease_apiserver_requests_total{verb,code} (code "error" when no
 * response came) and the latency of everything but watches, whose streams
 * last minutes by design. */
static void account(const kube_request *r, long http_code)
{
    char labels[64];
    if (http_code > 0)
        snprintf(labels, sizeof labels, "verb=\"%s\",code=\"%ld\"", r->verb, http_code);
    else
        snprintf(labels, sizeof labels, "verb=\"%s\",code=\"error\"", r->verb);
    metrics_add("kubelease_apiserver_requests_total", labels, 1);
    if (strcmp(r->verb, "watch") != 0) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double s = (double)(now.tv_sec - r->started.tv_sec) +
                   (double)(now.tv_nsec - r->started.tv_nsec) / 1e9;
        snprintf(labels, sizeof labels, "verb=\"%s\"", r->verb);
        metrics_observe("kubelease_apiserver_request_duration_seconds", labels, s);
    }
}

/* Reports the outcome and frees r. */
static void finish(kube_request *r, CURLcode result)
{
    if (r->http_code == 401)
        r->c->token_stale = true;
    kube_response res = {0};
    res.http_code = r->http_code;
    res.curl_code = (int)result;
    if (result == CURLE_OK && r->too_big)
        res.curl_code = CURLE_WRITE_ERROR;
    if (r->too_big)
        res.error = "response body too large";
    else if (r->aborted)
        res.error = "aborted";
    else if (result != CURLE_OK)
        res.error = r->errbuf[0] ? r->errbuf : curl_easy_strerror(result);
    else
        res.error = "";
    if (res.curl_code != CURLE_OK && !r->headers_done)
        res.http_code = 0;
    bool no_body = r->streaming_body || !r->buf.data;
    res.body = no_body ? "" : r->buf.data;
    res.body_len = no_body ? 0 : r->buf.len;
    res.elapsed_ms = mono_ms() - r->started_ms;
    account(r, res.http_code);
    callback_begin(r);
    r->o.on_done(r->o.ctx, &res);
    if (callback_end(r))
        req_free(r);
}

static void on_done(void *arg, CURL *easy, CURLcode result)
{
    kube_request *r = arg;
    (void)easy;
    loop_timer_stop(&r->dispatch);
    long code = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code >= 200 && !r->headers_done) {
        r->http_code = code;
        r->headers_done = true;
        r->streaming_body = r->o.on_data && code < 300;
    }
    int rc = r->aborted ? DELIVER_OK : deliver(r);
    if (rc == DELIVER_GONE)
        return;
    if (rc == DELIVER_STOP)
        r->aborted = true;
    finish(r, result);
}

/* A peer that vanishes without a FIN (a partition, a host that died) is
 * noticed by TCP keepalive after idle + count x interval (15 + 3 x 5 s), and
 * data left unacknowledged for 30 s fails the connection. */
static int on_socket(void *arg, curl_socket_t fd, curlsocktype purpose)
{
    (void)arg;
    if (purpose == CURLSOCKTYPE_IPCXN) {
        int cnt = 3, user_timeout_ms = 30000;
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
    }
    return CURL_SOCKOPT_OK;
}

#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (curl_easy_setopt(e, opt, val) != CURLE_OK)                                             \
            goto fail;                                                                             \
    } while (0)

/* Trust: with a CA in the configuration (kubeconfig or service account),
 * that CA alone, as client-go does: CURLOPT_CAINFO_BLOB replaces libcurl's
 * CA bundle but not its CA directory (/etc/ssl/certs on Debian), so both
 * defaults are switched off, or a certificate any public or corporate CA
 * issued would be taken for the apiserver's, and the bearer token sent to
 * it. Without a CA, the system's CAs. */
static int setup_tls(const kube_config *cfg, CURL *e)
{
    struct curl_blob b;
    if (cfg->ca.data) {
        b = (struct curl_blob){cfg->ca.data, cfg->ca.len, CURL_BLOB_NOCOPY};
        SET(CURLOPT_CAINFO_BLOB, &b);
        SET(CURLOPT_CAINFO, NULL);
        SET(CURLOPT_CAPATH, NULL);
    }
    if (cfg->client_cert.data) {
        b = (struct curl_blob){cfg->client_cert.data, cfg->client_cert.len, CURL_BLOB_NOCOPY};
        SET(CURLOPT_SSLCERT_BLOB, &b);
        SET(CURLOPT_SSLCERTTYPE, "PEM");
        b = (struct curl_blob){cfg->client_key.data, cfg->client_key.len, CURL_BLOB_NOCOPY};
        SET(CURLOPT_SSLKEY_BLOB, &b);
        SET(CURLOPT_SSLKEYTYPE, "PEM");
    }
    if (cfg->insecure) {
        SET(CURLOPT_SSL_VERIFYPEER, 0L);
        SET(CURLOPT_SSL_VERIFYHOST, 0L);
    }
    return 0;
fail:
    return -1;
}

/* The request's header list: Accept, no Expect, the body's type and the
 * bearer token. */
static int setup_headers(kube_client *c, kube_request *r)
{
    char content_type[96] = "";
    if (r->o.body)
        snprintf(content_type, sizeof content_type, "Content-Type: %s",
                 r->o.content_type ? r->o.content_type : "application/json");
    const char *hdrs[] = {"Accept: application/json",
                          "Expect:", content_type[0] ? content_type : NULL, c->auth_header};
    for (size_t i = 0; i < sizeof hdrs / sizeof hdrs[0]; i++) {
        if (!hdrs[i])
            continue;
        struct curl_slist *h = curl_slist_append(r->headers, hdrs[i]);
        if (!h)
            return -1;
        r->headers = h;
    }
    return 0;
}

/* Every option of r's easy handle: the URL, connection behaviour, timeouts,
 * callbacks, method, headers, body and TLS. */
static int setup_easy(kube_client *c, kube_request *r, const char *url)
{
    CURL *e = r->easy;
    const kube_request_opts *o = &r->o;
    SET(CURLOPT_URL, url);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_ERRORBUFFER, r->errbuf);
#if LIBCURL_VERSION_NUM >= 0x075500
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
#endif
    SET(CURLOPT_USERAGENT, "kubeleased/" KL_VERSION_STRING);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_TCP_KEEPIDLE, 15L);
    SET(CURLOPT_TCP_KEEPINTVL, 5L);
    SET(CURLOPT_SOCKOPTFUNCTION, on_socket);
    /* Prefer a new stream on the HTTP/2 connection being set up over a
     * second connection. */
    SET(CURLOPT_PIPEWAIT, 1L);
    if (o->timeout_ms > 0) {
        SET(CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
        SET(CURLOPT_CONNECTTIMEOUT_MS, (long)o->timeout_ms);
    } else {
        SET(CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    }
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, r);
    SET(CURLOPT_WRITEFUNCTION, on_write);
    SET(CURLOPT_WRITEDATA, r);
    if (strcmp(o->method, "GET") != 0)
        SET(CURLOPT_CUSTOMREQUEST, o->method);
    if (setup_headers(c, r) != 0)
        goto fail;
    SET(CURLOPT_HTTPHEADER, r->headers);
    if (o->body) {
        r->body_copy = malloc(o->body_len + 1);
        if (!r->body_copy)
            goto fail;
        memcpy(r->body_copy, o->body, o->body_len);
        r->body_copy[o->body_len] = 0;
        SET(CURLOPT_POSTFIELDSIZE, (long)o->body_len);
        SET(CURLOPT_POSTFIELDS, r->body_copy);
    }
    return setup_tls(&c->cfg, e);
fail:
    return -1;
}

kube_request *kube_client_start(kube_client *c, const kube_request_opts *o)
{
    if (c->flags & CLIENT_FREEING)
        return NULL;
    kube_client_token_maybe_refresh(c, mono_ms());
    kube_request *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->c = c;
    r->o = *o;
    loop_timer_init(c->l, &r->dispatch);
    r->started_ms = mono_ms();
    clock_gettime(CLOCK_MONOTONIC, &r->started);
    r->verb = verb_of(o->method, o->path);
    kl__buf_init(&r->buf, KUBE_BODY_MAX - 1); /* and its NUL */
    kl__list_insert_head(&c->reqs, &r->link);
    size_t ulen = strlen(c->cfg.server) + strlen(o->path) + 1;
    char *url = malloc(ulen);
    r->easy = curl_easy_init();
    if (!url || !r->easy)
        goto fail;
    snprintf(url, ulen, "%s%s", c->cfg.server, o->path);
    if (setup_easy(c, r, url) != 0 || loop_curl_add(c->l, r->easy, on_done, r) != 0)
        goto fail;
    free(url);
    return r;
fail:
    free(url);
    req_free(r);
    return NULL;
}

void kube_client_cancel(kube_client *c, kube_request *r)
{
    if (!r || (r->flags & REQ_CANCELLED))
        return;
    r->flags |= REQ_CANCELLED;
    loop_timer_stop(&r->dispatch);
    loop_curl_remove(c->l, r->easy);
    if (!(r->flags & REQ_IN_CALLBACK))
        req_free(r);
}

void kube_client_free(kube_client *c)
{
    if (!c || (c->flags & CLIENT_FREEING))
        return;
    c->flags |= CLIENT_FREEING;
    KL__LIST_FOREACH_SAFE (link, &c->reqs)
        kube_client_cancel(c, KL__LIST_ENTRY(link, kube_request, link));
    if (!(c->flags & CLIENT_IN_CALLBACK))
        client_release(c);
}
