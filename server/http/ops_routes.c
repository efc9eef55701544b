/* The operator endpoints, routed and answered: GET (or HEAD) /livez,
 * /readyz, /metrics and / (the status page, a call to the engine: call.c).
 * They are answered even on connections over the limits. /livez and
 * /readyz are never authenticated; the status page is (auth.c), and so is
 * /metrics with --metrics-auth kubernetes (a token allowed get on the
 * non-resource URL /metrics, the Kubernetes convention).
 *
 * Threads: MHD threads, inside the access handler of the request's
 * connection. /readyz takes s->mu to read s->stopping and ask the engine
 * (which cannot go away meanwhile); nothing else here locks. */
#include <stdio.h>
#include <string.h>

#include "http/auth.h"
#include "http/http_ops.h"
#include "http/internal.h"

#define NOT_FOUND "not found\n"

static enum MHD_Result readyz(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    char why[256];
    bool ready;
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        ready = false;
        snprintf(why, sizeof why, "shutting down");
    } else {
        ready = engine_ready(s->engine, why, sizeof why);
    }
    pthread_mutex_unlock(&s->mu);
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
    if (http_auth_metrics(s->auth)) {
        http_auth_action act = {.verb = "get", .path = "/metrics", .ns = "", .name = ""};
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
    char *body = NULL;
    size_t len = 0;
    const char *ct = NULL;
    if (http_ops_metrics(&body, &len, &ct) != 0)
        return http_respond_text(conn, q, MHD_HTTP_NOT_FOUND, NOT_FOUND);
    return http_respond(conn, q, MHD_HTTP_OK, ct, body, len);
}

/* "/": a ListLeases rendered as HTML. With authorization on, the viewer
 * authenticates as for ListLeases and sees only the namespaces it may list
 * (docs/design.md, rule 7); the handler may run twice (auth.c). */
static enum MHD_Result status_page(http_server *s, struct MHD_Connection *conn, http_req *q)
{
    if (s->auth) {
        http_auth_action act = {.verb = "list", .ns = "", .name = "", .narrow_on_deny = true};
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
    return http_call_start(s, conn, q, NULL);
}

enum MHD_Result http_ops_route(http_server *s, struct MHD_Connection *conn, http_req *q,
                               const char *url, const char *method)
{
    bool get =
        strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    bool known = strcmp(url, "/livez") == 0 || strcmp(url, "/readyz") == 0 ||
                 strcmp(url, "/metrics") == 0 || strcmp(url, "/") == 0;
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
    return status_page(s, conn, q);
}
