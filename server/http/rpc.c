/* A Connect request, from its headers to a call or a stream: the checks an
 * RPC passes before anything reaches the engine, each failing with a
 * Connect error that says what to change.
 *
 * Headers (http_rpc_begin): the method exists and is POSTed, the
 * Content-Type is one the method takes, the connection is within its limits,
 * Content-Length is within --max-body-bytes, no compression, a well-formed
 * Connect-Timeout-Ms. Body (http_rpc_finish): within the limit, exactly one
 * envelope for a stream, decodes, validates (rpc/lease_service.c), is
 * authorized (auth.c; the handler may run twice when the answer has to
 * wait for the apiserver: the body is decoded again), is in a served
 * namespace; then call.c or stream.c takes it.
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
    bool urgent = q->method->id == RPC_METHOD_CONFIRM || q->method->id == RPC_METHOD_RESIGN;
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

static bool namespace_served(const http_server *s, const char *ns)
{
    if (!s->namespaces || !ns)
        return true;
    for (char **p = s->namespaces; *p; p++)
        if (strcmp(*p, ns) == 0)
            return true;
    return false;
}

/* Who may do what the request asks (docs/design.md, rule 7): the verb on
 * elections.kubelease.io of each method, in the Lease's namespace and name.
 * A ListLeases of every namespace by a caller who may not list them all is
 * narrowed to those it may. */
static http_auth_verdict authorize(http_server *s, struct MHD_Connection *conn, http_req *q,
                                   const ProtobufCMessage *m, http_auth_denial *d)
{
    static const char *const verbs[RPC_METHOD_COUNT] = {
        [RPC_METHOD_CAMPAIGN] = "campaign",   [RPC_METHOD_CONFIRM] = "campaign",
        [RPC_METHOD_RESIGN] = "campaign",     [RPC_METHOD_GET_HOLDER] = "get",
        [RPC_METHOD_WATCH_HOLDER] = "watch",  [RPC_METHOD_LIST_LEASES] = "list",
        [RPC_METHOD_HANDOFF] = "handoff",     [RPC_METHOD_CHECK_EPOCH] = "get",
        [RPC_METHOD_LIST_CANDIDATES] = "get", [RPC_METHOD_SET_POD_LABEL] = "campaign",
        [RPC_METHOD_PROCLAIM] = "campaign",   [RPC_METHOD_LIST_TERMS] = "get",
    };
    if (!s->auth)
        return HTTP_AUTH_ALLOWED;
    rpc_method_id id = q->method->id;
    const char *ns = rpc_request_namespace(id, m), *name = rpc_request_name(id, m);
    const char *identity = rpc_request_identity(id, m), *verb = verbs[id];
    /* The holder hands off its own term as it resigns it (its token decides,
     * rule 8); anyone else needs the verb handoff. */
    if (id == RPC_METHOD_HANDOFF)
        verb = identity ? "campaign" : "handoff";
    engine_pod_label label;
    bool has_label = rpc_request_label(id, m, &label);
    auth_action act = {.verb = verb,
                       .ns = ns ? ns : "",
                       .name = name ? name : "",
                       .identity = identity,
                       .narrow_on_deny = id == RPC_METHOD_LIST_LEASES,
                       .pod_ns = label.ns,
                       .pod = has_label ? label.pod : NULL,
                       .pod_denies = id == RPC_METHOD_SET_POD_LABEL};
    return http_auth_authorize(s, conn, q, &act, d);
}

enum MHD_Result http_rpc_dispatch(http_server *s, struct MHD_Connection *conn, http_req *q,
                                  const ProtobufCMessage *m)
{
    char msg[512];
    if (rpc_validate_request(q->method->id, m, msg, sizeof msg) != 0)
        return http_respond_error(conn, q, RPC_INVALID_ARGUMENT, msg);
    http_auth_denial d;
    switch (authorize(s, conn, q, m, &d)) {
    case HTTP_AUTH_WAIT:
        return MHD_YES; /* suspended: this runs again with the answer */
    case HTTP_AUTH_DENIED:
        return http_respond_error(conn, q, d.code, d.message);
    case HTTP_AUTH_ALLOWED:
        break;
    }
    if (!s->auth) /* the quotas' caller; with authentication, auth.c names it */
        http_peer_ip(conn, q->caller, sizeof q->caller);
    const char *ns = rpc_request_namespace(q->method->id, m);
    if (q->method->id == RPC_METHOD_LIST_LEASES && ns)
        snprintf(q->scope.ns, sizeof q->scope.ns, "%s", ns);
    if (!namespace_served(s, ns)) {
        snprintf(msg, sizeof msg, "namespace \"%s\" is not served by this kubeleased", ns);
        return http_respond_error(conn, q, RPC_PERMISSION_DENIED, msg);
    }
    /* Without authentication, only the Pod's address says the caller is it
     * (docs/design.md, rule 9): "?" (no address) matches no Pod. */
    engine_pod_label label;
    if (!s->auth && s->pod_ip_check && rpc_request_label(q->method->id, m, &label)) {
        http_peer_ip(conn, q->peer, sizeof q->peer);
        if (!q->peer[0])
            snprintf(q->peer, sizeof q->peer, "?");
    }
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
