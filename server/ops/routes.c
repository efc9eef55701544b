/* The operator endpoints, routed and answered: GET (or HEAD) /livez,
 * /readyz, /metrics (the registry of core/metrics.c), / (the status page,
 * page.c), /leases (the status page's data: a ListLeases as JSON) and
 * /terms (a ListTerms as JSON), the last three calls to the engine through
 * http/ (http_call_start, http_rpc_dispatch). http/ calls them through the
 * hooks of ops_http_hooks (http/server.h), handed to it by
 * server/service.c.
 * They are answered on both listeners, even on connections over the
 * limits. /livez and /readyz are never authenticated; /metrics is with
 * --metrics-auth kubernetes (a token allowed get on the non-resource URL
 * /metrics, the Kubernetes convention); /leases is, as ListLeases is
 * (auth.c), /terms as ListTerms is; / is when the request carries
 * credentials, and without them it is the page without rows, whose script
 * reads /leases with the token the viewer gives it.
 *
 * The routes read and set the request (http_req: its method, codec and
 * scope) through http/internal.h, and authorize through http/auth.h
 * (s->auth), as http/'s own Connect routes do; the rest of the server
 * only through http/server.h (http_server_ready).
 *
 * Threads: MHD threads, inside the access handler of the request's
 * connection. Nothing here locks (/readyz asks http_server_ready, which
 * does). */
#include <stdio.h>
#include <string.h>

#include "core/metrics.h"
#include "http/auth.h"
#include "http/internal.h"
#include "kubelease/v1/kubelease.pb-c.h"
#include "ops/ops.h"
#include "rpc/lease_service.h"

#define NOT_FOUND "not found\n"

static enum MHD_Result readyz(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    char why[256];
    bool ready = http_server_ready(s, why, sizeof why);
    char text[300];
    snprintf(text, sizeof text, "%s\n", ready ? "ok" : why);
    return http_respond_text(conn, q, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, text);
}

/* A refusal of the status page or /metrics: "code: message" in text. */
static enum MHD_Result refuse(struct MHD_Connection *conn, http_req *q, const http_auth_denial *d)
{
    char text[600];
    snprintf(text, sizeof text, "%s: %s\n", rpc_code_name(d->code), d->message);
    return http_respond_text(conn, q, rpc_code_http_status(d->code), text);
}

/* The handler may run twice (auth.c). */
static enum MHD_Result metrics(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    if (auth_metrics(s->auth)) {
        auth_action act = {.verb = "get", .path = "/metrics", .ns = "", .name = ""};
        http_auth_denial d;
        switch (http_auth_authorize(s, conn, q, &act, &d)) {
        case HTTP_AUTH_WAIT:
            return MHD_YES;
        case HTTP_AUTH_DENIED:
            return refuse(conn, q, &d);
        case HTTP_AUTH_ALLOWED:
            break;
        }
    }
    size_t len = 0;
    char *body = metrics_render(&len);
    if (!body)
        return http_respond_text(conn, q, MHD_HTTP_NOT_FOUND, NOT_FOUND);
    return http_respond(conn, q, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body,
                        len);
}

/* The page without rows: what a browser gets under authentication, since
 * it sends no credentials with a navigation. It holds no lease data. */
static enum MHD_Result page_shell(struct MHD_Connection *conn, http_req *q)
{
    char *body = NULL;
    size_t len = 0;
    const char *ct = NULL;
    if (ops_status_page(NULL, &body, &len, &ct) != 0)
        return MHD_NO;
    return http_respond(conn, q, MHD_HTTP_OK, ct, body, len);
}

/* The viewer may list as for a ListLeases of every namespace, narrowed to
 * the namespaces it may list when it may not list them all (docs/design.md,
 * rule 7). The handler may run twice (auth.c). */
static http_auth_verdict authorize_list(http_server *s, struct MHD_Connection *conn, http_req *q,
                                        http_auth_denial *d)
{
    if (!s->auth)
        return HTTP_AUTH_ALLOWED;
    auth_action act = {.verb = "list", .ns = "", .name = "", .narrow_on_deny = true};
    return http_auth_authorize(s, conn, q, &act, d);
}

/* "/": a ListLeases rendered as HTML; under authentication without
 * credentials, the page without rows. */
static enum MHD_Result status_page(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    if (s->auth &&
        !MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION))
        return page_shell(conn, q);
    http_auth_denial d;
    switch (authorize_list(s, conn, q, &d)) {
    case HTTP_AUTH_WAIT:
        return MHD_YES;
    case HTTP_AUTH_DENIED:
        return refuse(conn, q, &d);
    case HTTP_AUTH_ALLOWED:
        break;
    }
    return http_call_start(s, conn, q, NULL);
}

/* "/leases": the ListLeases of every namespace the viewer may list, in
 * Connect's JSON (a reply, or an error with its HTTP status), counted as a
 * ListLeases. It reads and changes nothing else, takes no body and no
 * parameter. A viewer narrowed to no Lease at all is answered
 * permission_denied rather than an empty list (http_list_scope.deny_empty):
 * the page can then say why it shows nothing, and the answer tells no more
 * than the empty list would. */
static enum MHD_Result leases(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    q->method = rpc_method_get(RPC_METHOD_LIST_LEASES);
    q->codec = RPC_CODEC_JSON;
    http_auth_denial d;
    switch (authorize_list(s, conn, q, &d)) {
    case HTTP_AUTH_WAIT:
        return MHD_YES;
    case HTTP_AUTH_DENIED:
        return http_respond_unary_error(conn, q, d.code, 0, d.message);
    case HTTP_AUTH_ALLOWED:
        break;
    }
    q->scope.deny_empty = true;
    return http_call_start(s, conn, q, NULL);
}

/* The query parameters of /terms: each of namespace and name at most once,
 * without a NUL (MHD decodes %00 into one, which would cut the value);
 * others are ignored. */
typedef struct terms_query {
    const char *ns, *name;
    int n_ns, n_name;
    bool nul_ns, nul_name;
} terms_query;

static enum MHD_Result terms_arg(void *ctx, enum MHD_ValueKind kind, const char *key,
                                 size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    (void)key_size;
    terms_query *t = ctx;
    bool nul = value && strlen(value) != value_size;
    if (strcmp(key, "namespace") == 0) {
        t->ns = value;
        t->n_ns++;
        t->nul_ns |= nul;
    } else if (strcmp(key, "name") == 0) {
        t->name = value;
        t->n_name++;
        t->nul_name |= nul;
    }
    return MHD_YES;
}

/* "/terms?namespace=NS&name=NAME": a ListTerms in Connect's JSON (a
 * reply, or an error with its HTTP status: 400 naming the bad parameter,
 * 401 and 403 as /leases, 404 when the Lease is not followed here): the
 * parameters make the request, which goes the RPC's way from there
 * (http_rpc_dispatch: validated, authorized with verb get on the election,
 * the served namespaces) and is counted as one. It
 * reads the engine's history of one Lease and nothing else; a body is
 * ignored. The handler may run twice (auth.c). */
static enum MHD_Result terms(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    q->method = rpc_method_get(RPC_METHOD_LIST_TERMS);
    q->codec = RPC_CODEC_JSON;
    terms_query t = {0};
    MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, terms_arg, &t);
    const char *dup = t.n_ns > 1 ? "namespace" : t.n_name > 1 ? "name" : NULL;
    const char *nul = t.nul_ns ? "namespace" : t.nul_name ? "name" : NULL;
    char msg[512];
    if (dup || nul) {
        snprintf(msg, sizeof msg, "%s: %s", dup ? dup : nul,
                 dup ? "given more than once" : "holds a NUL byte");
        return http_respond_unary_error(conn, q, RPC_INVALID_ARGUMENT, 0, msg);
    }
    Kubelease__V1__ListTermsRequest req = KUBELEASE__V1__LIST_TERMS_REQUEST__INIT;
    req.namespace_ = (char *)(t.ns ? t.ns : "");
    req.name = (char *)(t.name ? t.name : "");
    return http_rpc_dispatch(s, conn, q, &req.base);
}

static enum MHD_Result route(http_server *s, struct MHD_Connection *conn, http_req *q,
                             const char *url, const char *method)
{
    bool get =
        strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    bool known = strcmp(url, "/livez") == 0 || strcmp(url, "/readyz") == 0 ||
                 strcmp(url, "/metrics") == 0 || strcmp(url, "/") == 0 ||
                 strcmp(url, "/leases") == 0 || strcmp(url, "/terms") == 0;
    /* 404 before 405: an unknown path is unknown whatever the method. */
    if (!known)
        return http_respond_text(conn, q, MHD_HTTP_NOT_FOUND, NOT_FOUND);
    if (!get)
        return http_respond_text(conn, q, MHD_HTTP_METHOD_NOT_ALLOWED,
                                 "method not allowed: use GET\n");
    if (strcmp(url, "/livez") == 0)
        return http_respond_text(conn, q, MHD_HTTP_OK, "ok\n");
    if (strcmp(url, "/readyz") == 0)
        return readyz(s, conn, q);
    if (strcmp(url, "/metrics") == 0)
        return metrics(s, conn, q);
    if (strcmp(url, "/leases") == 0)
        return leases(s, conn, q);
    if (strcmp(url, "/terms") == 0)
        return terms(s, conn, q);
    return status_page(s, conn, q);
}

static const http_ops_hooks hooks = {
    .route = route,
    .render_page = ops_status_page,
    .page_csp = ops_page_csp,
};

const http_ops_hooks *ops_http_hooks(void)
{
    return &hooks;
}
