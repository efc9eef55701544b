/* A Connect request, from its headers to a call or a stream: the checks an
 * RPC passes before anything reaches the engine, each failing with a
 * Connect error that says what to change.
 *
 * Headers (http_rpc_begin): the method exists and is POSTed, the
 * Content-Type is one the method takes, the connection is within its limits,
 * Content-Length is within --max-body-bytes, no compression, a well-formed
 * Connect-Timeout-Ms. Body (http_rpc_finish): within the limit, exactly one
 * envelope for a stream, decodes; then rpc/admit.c decides, from the facts
 * passed in (the authorizer auth.c, --namespaces, the caller's address),
 * whether it starts (call.c or stream.c takes it), waits (authorization
 * asks the apiserver: the handler runs again with the answer and the body
 * is decoded again) or is answered with an error.
 *
 * Threads: MHD threads, inside the access handler of the request's
 * connection. No locks: only the request is touched. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "common/envelope.h"
#include "http/auth.h"
#include "http/internal.h"
#include "rpc/admit.h"
#include "rpc/lease_service.h"

/* Parses Connect-Timeout-Ms: at most 10 digits. Returns 0 or -1. */
static int parse_timeout(const char *v, int64_t *out)
{
    size_t n = strlen(v);
    if (n == 0 || n > 10)
        return -1;
    int64_t t = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -1;
        t = t * 10 + (v[i] - '0');
    }
    *out = t;
    return 0;
}

static const char *header(struct MHD_Connection *conn, const char *name)
{
    return MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
}

/* The checks after the method is known to be POSTed with a good Content-Type. */
static enum MHD_Result check_headers(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    char msg[512];
    bool is_stream = q->method->server_stream;
    bool urgent = q->method->urgent;
    const char *over = http_limits_over(conn, urgent);
    if (over) {
        q->close = true;
        return http_respond_error(conn, q, RPC_RESOURCE_EXHAUSTED, over);
    }
    /* A Confirm or Resign served past the limits is answered and its
     * connection closed: the room kept for them is not held by a kept-alive
     * connection (nor by junk Confirms) until the idle timeout. */
    if (urgent && http_limits_over(conn, false))
        q->close = true;
    const char *cl = header(conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->max_body) {
        snprintf(msg, sizeof msg, "request body of %.20s bytes exceeds the limit of %zu bytes", cl,
                 s->max_body);
        return http_respond_error(conn, q, RPC_RESOURCE_EXHAUSTED, msg);
    }
    /* No compression is offered; a compressed body would only fail to decode. */
    const char *enc =
        header(conn, is_stream ? "Connect-Content-Encoding" : MHD_HTTP_HEADER_CONTENT_ENCODING);
    if (enc && strcasecmp(enc, "identity") != 0) {
        snprintf(msg, sizeof msg, "compression \"%.40s\" is not supported: send identity", enc);
        return http_respond_error(conn, q, RPC_UNIMPLEMENTED, msg);
    }
    const char *to = header(conn, "Connect-Timeout-Ms");
    if (to && parse_timeout(to, &q->timeout_ms) != 0) {
        snprintf(msg, sizeof msg, "Connect-Timeout-Ms: \"%.40s\" is not 1 to 10 digits", to);
        return http_respond_error(conn, q, RPC_INVALID_ARGUMENT, msg);
    }
    return MHD_YES; /* wait for the body */
}

enum MHD_Result http_rpc_begin(http_server *s, struct MHD_Connection *conn, http_req *q,
                               const char *url, const char *method)
{
    char msg[512];
    q->kind = HTTP_REQ_RPC;
    q->method = rpc_method_find(url);
    if (!q->method) {
        snprintf(msg, sizeof msg, "no method %.200s in kubelease.v1.LeaseService",
                 url + strlen(RPC_SERVICE_PREFIX));
        /* An unknown path is an HTTP 404 whatever the code's own status. */
        return http_respond_unary_error(conn, q, RPC_UNIMPLEMENTED, MHD_HTTP_NOT_FOUND, msg);
    }
    if (strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
        snprintf(msg, sizeof msg, "%s needs POST, not %.20s", q->method->name, method);
        q->method = NULL; /* not an RPC of that method: do not count it */
        return http_respond_post_only(conn, q, msg);
    }
    bool is_stream = q->method->server_stream;
    const char *ct = header(conn, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (rpc_content_type_parse(ct, is_stream, &q->codec) != 0) {
        snprintf(msg, sizeof msg, "unsupported Content-Type \"%.100s\" for %s: use %s",
                 ct ? ct : "", q->method->name,
                 is_stream ? "application/connect+proto or application/connect+json"
                           : "application/proto or application/json");
        q->codec = RPC_CODEC_JSON;
        return http_respond_unary_error(conn, q, RPC_INVALID_ARGUMENT,
                                        MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, msg);
    }
    return check_headers(s, conn, q);
}

/* A stream's request body is exactly one uncompressed envelope: its message
 * into *msg (malloc'd, NULL when empty) and *len. Returns RPC_OK, or the
 * code of the error described in why. */
static rpc_code unwrap_envelope(const http_server *s, const http_req *q, uint8_t **msg, size_t *len,
                                char *why, size_t why_len)
{
    struct kl__envelope_decoder d;
    kl__envelope_decoder_init(&d, s->max_body);
    size_t used = 0;
    kl__envelope_status st =
        kl__envelope_decoder_feed(&d, (const uint8_t *)q->body.data, q->body.len, &used);
    if (st != KL__ENVELOPE_FRAME || used != q->body.len) {
        rpc_code code = RPC_INVALID_ARGUMENT;
        if (st == KL__ENVELOPE_FRAME) {
            snprintf(why, why_len, "the request must be exactly one envelope; found more bytes");
        } else if (st == KL__ENVELOPE_TOO_LARGE) {
            code = RPC_RESOURCE_EXHAUSTED;
            snprintf(why, why_len,
                     "the request envelope announces a message of %u bytes, over the limit of "
                     "%zu bytes (--max-body-bytes)",
                     (unsigned)d.msg_len, s->max_body);
        } else if (st == KL__ENVELOPE_NO_MEMORY) {
            code = RPC_RESOURCE_EXHAUSTED;
            snprintf(why, why_len, "out of memory for a message of %u bytes", (unsigned)d.msg_len);
        } else {
            snprintf(why, why_len,
                     "the request must be one envelope: [flags][length u32]"
                     "[message]; it is truncated");
        }
        kl__envelope_decoder_free(&d);
        return code;
    }
    unsigned flags = 0;
    kl__envelope_decoder_take(&d, &flags, msg, len);
    kl__envelope_decoder_free(&d);
    if (flags != 0) {
        free(*msg);
        *msg = NULL;
        snprintf(why, why_len, "%s",
                 flags & KL__ENVELOPE_FLAG_COMPRESSED
                     ? "compressed requests are not supported"
                     : "the request envelope has unexpected flags");
        return RPC_INVALID_ARGUMENT;
    }
    return RPC_OK;
}

void http_peer_ip(struct MHD_Connection *conn, char *out, size_t n)
{
    out[0] = '\0';
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
                  (socklen_t)n);
    } else if (sa && sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a))
            inet_ntop(AF_INET, &a->s6_addr[12], out, (socklen_t)n);
        else
            inet_ntop(AF_INET6, a, out, (socklen_t)n);
    }
}

/* The request an authorization is asked for. */
typedef struct http_asker {
    http_server *s;
    struct MHD_Connection *conn;
    http_req *q;
} http_asker;

/* admit's authorizer: auth.c, from its caches or by suspending the request
 * while the loop asks the apiserver (the handler then runs again with the
 * answer and the message decoded the first time, http_rpc_finish). */
static rpc_auth_verdict authorize(void *ctx, const auth_action *a, rpc_code *code, char *msg,
                                  size_t msg_len)
{
    const http_asker *w = ctx;
    http_auth_denial d;
    switch (http_auth_authorize(w->s, w->conn, w->q, a, &d)) {
    case HTTP_AUTH_ALLOWED:
        return RPC_AUTH_ALLOWED;
    case HTTP_AUTH_WAIT:
        return RPC_AUTH_PENDING;
    case HTTP_AUTH_DENIED:
        break;
    }
    *code = d.code;
    snprintf(msg, msg_len, "%s", d.message);
    return RPC_AUTH_DENIED;
}

enum MHD_Result http_rpc_dispatch(http_server *s, struct MHD_Connection *conn, http_req *q,
                                  const ProtobufCMessage *m)
{
    http_asker asker = {s, conn, q};
    char peer_ip[48] = "";
    if (!s->auth) /* the quotas' caller, and the label's Pod's address */
        http_peer_ip(conn, peer_ip, sizeof peer_ip);
    const rpc_admit_in in = {.authorize = s->auth ? authorize : NULL,
                             .auth_ctx = &asker,
                             .namespaces = s->namespaces,
                             .pod_ip_check = s->pod_ip_check,
                             .peer_ip = peer_ip};
    rpc_admission adm;
    switch (rpc_admit(q->method, m, &in, &adm)) {
    case RPC_ADMIT_WAIT:
        return MHD_YES; /* suspended: this runs again with the answer */
    case RPC_ADMIT_ERROR:
        return http_respond_error(conn, q, adm.code, adm.message);
    case RPC_ADMIT_OK:
        break;
    }
    if (!s->auth) /* with authentication, auth.c names the caller */
        snprintf(q->caller, sizeof q->caller, "%s", peer_ip);
    snprintf(q->peer, sizeof q->peer, "%s", adm.peer);
    const char *ns = rpc_request_namespace(q->method->id, m);
    if (q->method->lists_namespaces && ns)
        snprintf(q->scope.ns, sizeof q->scope.ns, "%s", ns);
    if (q->method->server_stream)
        return http_stream_start(s, conn, q, m);
    if (q->timeout_ms == 0)
        return http_respond_error(conn, q, RPC_DEADLINE_EXCEEDED, "Connect-Timeout-Ms is 0");
    return http_call_start(s, conn, q, m);
}

enum MHD_Result http_rpc_finish(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    char msg[512];
    if (q->too_large) {
        snprintf(msg, sizeof msg, "request body exceeds the limit of %zu bytes", s->max_body);
        return http_respond_error(conn, q, RPC_RESOURCE_EXHAUSTED, msg);
    }
    ProtobufCMessage *m = q->msg; /* decoded before admission waited */
    q->msg = NULL;
    if (!m) {
        const uint8_t *data = (const uint8_t *)q->body.data;
        size_t len = q->body.len;
        uint8_t *env = NULL;
        if (q->method->server_stream) {
            rpc_code code = unwrap_envelope(s, q, &env, &len, msg, sizeof msg);
            if (code != RPC_OK)
                return http_respond_stream_error(conn, q, code, msg);
            data = env;
        }
        m = rpc_message_decode(q->codec, q->method->request, data ? data : (const uint8_t *)"", len,
                               msg, sizeof msg);
        free(env);
        if (!m)
            return http_respond_error(conn, q, RPC_INVALID_ARGUMENT, msg);
    }
    enum MHD_Result ret = http_rpc_dispatch(s, conn, q, m);
    if (q->auth) { /* admission waits: the handler runs again with m */
        q->msg = m;
        return ret;
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (q->stream) /* a stream lives for minutes or hours: its body is done with */
        kl__buf_free(&q->body);
    return ret;
}
