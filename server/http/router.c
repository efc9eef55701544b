/* Routing: libmicrohttpd's access handlers and completion callback. A
 * request under RPC_SERVICE_PREFIX is a Connect RPC (rpc.c); any other path
 * is an operator endpoint, answered by the hooks of the layer above
 * (http_ops_hooks, server/ops/). The --ops-listen daemon serves only the
 * latter. The body is collected here, up to --max-body-bytes; a
 * call resumed by the engine comes back here to be answered (call.c). Each
 * request's phases (head in, body in, over) go to conn_limit.c for the
 * read deadline.
 *
 * Threads: MHD threads. MHD runs one connection on one thread at a time, so
 * the request's state needs no lock; call.c and stream.c lock what they
 * share. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/auth.h"
#include "http/internal.h"

/* An operator endpoint: the hooks' route, 404 without hooks. */
static enum MHD_Result ops_route(http_server *s, struct MHD_Connection *conn, http_req *q,
                                 const char *url, const char *method)
{
    if (!s->ops)
        return http_respond_text(conn, q, MHD_HTTP_NOT_FOUND, "not found\n");
    q->csp = s->ops->page_csp();
    return s->ops->route(s, conn, q, url, method);
}

/* Appends upload data to the request body; past --max-body-bytes the body
 * is dropped and the request marked too large (out of memory too: it is
 * answered as over the limit, there is nothing better to say). */
static void append_body(http_req *q, const char *data, size_t n)
{
    if (q->too_large)
        return;
    if (kl__buf_append(&q->body, data, n) != KL__BUF_OK) {
        q->too_large = true;
        kl__buf_free(&q->body);
    }
}

/* Counts the request's Content-Length and Transfer-Encoding headers. */
static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    (void)value;
    unsigned *n = cls;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        n[0]++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0)
        n[1]++;
    return MHD_YES;
}

/* The framing a request's headers say, for every request: the acceptor
 * checks a connection's first head byte by byte (framing.h), and this
 * catches what libmicrohttpd would take on the later ones of a kept-alive
 * connection, and on TLS. Returns NULL, or what is wrong. */
static const char *framing_error(struct MHD_Connection *conn)
{
    unsigned n[2] = {0, 0};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, n);
    if (n[0] > 1)
        return "ambiguous request framing: two Content-Length headers";
    if (n[0] && n[1])
        return "ambiguous request framing: Content-Length with Transfer-Encoding";
    return NULL;
}

/* Both daemons: a request's first call (its head is in). */
static http_req *req_new(const http_server *s, struct MHD_Connection *conn, void **req_cls)
{
    http_req *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    q->start_us = mono_us();
    q->timeout_ms = -1;
    kl__buf_init(&q->body, s->max_body);
    *req_cls = q;
    http_conn_request_begin(conn);
    return q;
}

enum MHD_Result http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *upload_data,
                                size_t *upload_data_size, void **req_cls)
{
    (void)version;
    http_server *s = cls;
    http_req *q = *req_cls;
    if (!q) {
        if (!(q = req_new(s, conn, req_cls)))
            return MHD_NO;
        const char *bad = framing_error(conn);
        if (bad) {
            q->kind = HTTP_REQ_OTHER;
            q->close = true;
            return http_respond_text(conn, q, MHD_HTTP_BAD_REQUEST, bad);
        }
        if (strncmp(url, RPC_SERVICE_PREFIX, strlen(RPC_SERVICE_PREFIX)) == 0)
            return http_rpc_begin(s, conn, q, url, method);
        /* Answered once the request is complete, so that the connection
         * can be kept alive (probes, scrapes). */
        q->kind = HTTP_REQ_OTHER;
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!q->responded)
            append_body(q, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    http_conn_request_read(conn); /* a call without upload data: the body is in */
    if (q->call)
        return http_call_resumed(s, conn, q);
    if (q->responded)
        return MHD_YES;
    if (q->kind == HTTP_REQ_RPC)
        return http_rpc_finish(s, conn, q);
    return ops_route(s, conn, q, url, method);
}

enum MHD_Result http_on_ops_request(void *cls, struct MHD_Connection *conn, const char *url,
                                    const char *method, const char *version,
                                    const char *upload_data, size_t *upload_data_size,
                                    void **req_cls)
{
    (void)version;
    (void)upload_data;
    http_server *s = cls;
    http_req *q = *req_cls;
    if (!q) {
        if (!(q = req_new(s, conn, req_cls)))
            return MHD_NO;
        q->kind = HTTP_REQ_OTHER;
        const char *bad = framing_error(conn);
        if (bad) {
            q->close = true;
            return http_respond_text(conn, q, MHD_HTTP_BAD_REQUEST, bad);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        *upload_data_size = 0; /* no endpoint here takes a body */
        return MHD_YES;
    }
    http_conn_request_read(conn);
    if (q->call)
        return http_call_resumed(s, conn, q);
    if (q->responded)
        return MHD_YES;
    return ops_route(s, conn, q, url, method);
}

void http_on_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                       enum MHD_RequestTerminationCode toe)
{
    http_server *s = cls;
    http_req *q = *req_cls;
    if (!q)
        return;
    *req_cls = NULL;
    http_conn_request_done(conn);
    http_stream_request_done(s, q, toe);
    http_call_request_done(s, q);
    http_auth_request_done(s, q);
    if (q->msg)
        protobuf_c_message_free_unpacked(q->msg, NULL);
    http_list_scope_clear(&q->scope);
    kl__buf_free(&q->body);
    free(q->label_refused);
    free(q);
}
