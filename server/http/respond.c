/* Answers: every response the server builds from a buffer is created,
 * queued and destroyed here (MHD_RESPMEM_MUST_FREE: the response owns the
 * body), and every finished RPC is counted here.
 *
 * Threads: MHD threads, inside the access handler of the request's
 * connection. No locks: only the request and its connection are touched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/envelope.h"
#include "core/log.h"
#include "http/internal.h"
#include "http/metrics.h"

void http_req_account(const http_req *q, rpc_code code)
{
    if (!q->method)
        return;
    int64_t us = mono_us() - q->start_us;
    http_metrics_rpc_done(q->method->name, rpc_code_name(code), (double)us / 1e6);
    if (log_enabled(LOG_DEBUG))
        log_event(LOG_DEBUG, "rpc", "method=%s code=%s us=%lld", q->method->name,
                  rpc_code_name(code), (long long)us);
}

/* allow: the Allow header's value, NULL for none. */
static enum MHD_Result queue(struct MHD_Connection *conn, http_req *q, int status,
                             const char *content_type, const char *allow, void *body, size_t len)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (content_type)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    /* HTML runs only what its route's policy allows (q->csp: the status
     * page's script and style), nothing without one. */
    if (content_type && strncmp(content_type, "text/html", 9) == 0) {
        MHD_add_response_header(r, "Content-Security-Policy",
                                q->csp ? q->csp : "default-src 'none'");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    }
    if (allow)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (q->close)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    q->responded = true;
    enum MHD_Result ret = MHD_queue_response(conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result http_respond(struct MHD_Connection *conn, http_req *q, int status,
                             const char *content_type, void *body, size_t len)
{
    return queue(conn, q, status, content_type, NULL, body, len);
}

enum MHD_Result http_respond_text(struct MHD_Connection *conn, http_req *q, int status,
                                  const char *text)
{
    char *body = strdup(text);
    if (!body)
        return MHD_NO;
    return queue(conn, q, status, "text/plain; charset=utf-8", NULL, body, strlen(body));
}

enum MHD_Result http_respond_unary_error(struct MHD_Connection *conn, http_req *q, rpc_code code,
                                         int status, const char *message)
{
    char *body = rpc_error_json(code, message);
    if (!body)
        return MHD_NO;
    http_req_account(q, code);
    return queue(conn, q, status ? status : rpc_code_http_status(code), "application/json", NULL,
                 body, strlen(body));
}

enum MHD_Result http_respond_stream_error(struct MHD_Connection *conn, http_req *q, rpc_code code,
                                          const char *message)
{
    char *json = rpc_end_stream_json(code, message);
    if (!json)
        return MHD_NO;
    size_t len;
    uint8_t *frame = kl__envelope_encode(KL__ENVELOPE_FLAG_END_STREAM, (const uint8_t *)json,
                                         strlen(json), &len);
    free(json);
    if (!frame)
        return MHD_NO;
    http_req_account(q, code);
    return queue(conn, q, MHD_HTTP_OK, rpc_content_type(q->codec, true), NULL, frame, len);
}

enum MHD_Result http_respond_error(struct MHD_Connection *conn, http_req *q, rpc_code code,
                                   const char *message)
{
    if (q->method && q->method->server_stream)
        return http_respond_stream_error(conn, q, code, message);
    return http_respond_unary_error(conn, q, code, 0, message);
}

enum MHD_Result http_respond_post_only(struct MHD_Connection *conn, http_req *q,
                                       const char *message)
{
    char *body = rpc_error_json(RPC_UNIMPLEMENTED, message);
    if (!body)
        return MHD_NO;
    return queue(conn, q, MHD_HTTP_METHOD_NOT_ALLOWED, "application/json", "POST", body,
                 strlen(body));
}
