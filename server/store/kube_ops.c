/* The Kubernetes store's single operations, one apiserver request each:
 * get is a GET; create a POST of the whole Lease; update a JSON merge patch
 * of the spec, conditional on metadata.resourceVersion (a stale one gets 409
 * Conflict), so that labels, annotations and fields other writers set
 * survive (a PUT would replace them); remove a DELETE, with the
 * resourceVersion as a precondition when one is given. Pods: pod_get a GET,
 * pod_label a JSON merge patch of the one label (other labels survive).
 * Events: record_event a POST of a core/v1 Event (kube/event_json.c).
 *
 * Each operation is a kube_op listed in its store until it completes; a
 * failure found before any request is sent is reported from a zero-delay
 * timer, so the callback never runs inside the call. Loop thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/names.h"
#include "core/log.h"
#include "kube/event_json.h"
#include "kube/lease_json.h"
#include "store/kube_map.h"
#include "store/kube_internal.h"

struct kube_op {
    struct kl__list link; /* in kube_store.ops */
    kube_store *ks;
    kube_request *req;
    loop_timer timer; /* delivers a failure found before any request */
    kube_verb verb;
    bool pod;   /* the answer is a Pod, not a Lease */
    bool event; /* the answer is an Event: only its status matters */
    store_cb cb;
    void *ctx;
    store_result res;
};

static void op_complete(kube_op *op)
{
    kl__list_remove(&op->link);
    op->cb(op->ctx, &op->res);
    free(op);
}

static void op_fail_fire(void *arg)
{
    op_complete(arg);
}

static kube_op *op_new(kube_store *ks, kube_verb verb, const char *ns, const char *name,
                       store_cb cb, void *ctx)
{
    kube_op *op = calloc(1, sizeof *op);
    if (!op)
        return NULL;
    op->ks = ks;
    loop_timer_init(ks->l, &op->timer);
    op->verb = verb;
    op->cb = cb;
    op->ctx = ctx;
    snprintf(op->res.lease.ns, sizeof op->res.lease.ns, "%s", ns ? ns : "");
    snprintf(op->res.lease.name, sizeof op->res.lease.name, "%s", name ? name : "");
    kl__list_insert_head(&ks->ops, &op->link);
    return op;
}

/* Reports a failure later, from the loop (never inside the starting call). */
static void op_fail(kube_op *op, store_status st, const char *msg)
{
    op->res.status = st;
    snprintf(op->res.message, sizeof op->res.message, "%s", msg);
    loop_timer_start(&op->timer, loop_now(op->ks->l), op_fail_fire, op);
}

/* A 2xx answer: the Lease it carries (a delete may answer with a Status). */
static void op_succeeded(kube_op *op, const kube_response *r)
{
    store_result *res = &op->res;
    kube_lease kl;
    char e[200];
    if (op->event) {
        res->status = STORE_OK;
        return;
    }
    if (op->pod) {
        if (kube_pod_decode(r->body, r->body_len, res->pod_ip, e, sizeof e) == 0) {
            res->status = STORE_OK;
        } else {
            res->status = STORE_INTERNAL;
            snprintf(res->message, sizeof res->message, "apiserver: bad Pod in response: %s", e);
        }
        return;
    }
    if (kube_lease_decode(r->body, r->body_len, &kl, e, sizeof e) == 0) {
        store_lease_from_kube(&kl, &res->lease);
        res->status = STORE_OK;
    } else if (op->verb == KUBE_VERB_DELETE) {
        res->status = STORE_OK; /* the body may be a Status; ns and name are set */
    } else {
        res->status = STORE_INTERNAL;
        snprintf(res->message, sizeof res->message, "apiserver: bad Lease in response: %s", e);
    }
}

static void op_done(void *ctx, const kube_response *r)
{
    kube_op *op = ctx;
    store_result *res = &op->res;
    op->req = NULL;
    res->http_code = (int)r->http_code;
    store_kube_note_reachable(op->ks, r->http_code);
    if (r->http_code >= 200 && r->http_code < 300) {
        op_succeeded(op, r);
    } else {
        kube_status st;
        bool have = store_kube_describe(r, &st, res->message, sizeof res->message);
        res->status = store_kube_map_status(r->http_code, have ? &st : NULL, op->verb);
        /* Conflicts and absent Leases are part of the protocol (debug);
         * anything else is worth a warning. */
        if (r->http_code == 0)
            log_event(LOG_WARN, "apiserver_error", "op=%s code=0 error=%s",
                      kube_verb_name(op->verb), log_q(r->error));
        else
            log_event(r->http_code == 409 || r->http_code == 404 ? LOG_DEBUG : LOG_WARN,
                      "apiserver_error", "op=%s code=%ld reason=%s message=%s",
                      kube_verb_name(op->verb), r->http_code, log_q(have ? st.reason : ""),
                      log_q(res->message));
    }
    if (res->status != STORE_OK && !op->pod && !op->event)
        memset(&res->lease, 0, sizeof res->lease);
    /* A Pod operation's result names its Pod (ns and name) whatever the
     * outcome, as the store contract says. */
    op_complete(op);
}

static void op_start(kube_op *op, const char *method, const char *path, const char *body,
                     size_t body_len, const char *content_type, int timeout_ms)
{
    kube_request_opts o = {
        .method = method,
        .path = path,
        .body = body,
        .body_len = body_len,
        .content_type = content_type,
        .timeout_ms = timeout_ms > 0 ? timeout_ms : LIST_TIMEOUT_MS,
        .on_done = op_done,
        .ctx = op,
    };
    op->req = kube_client_start(op->ks->c, &o);
    if (!op->req)
        op_fail(op, STORE_INTERNAL, "cannot start the request (out of memory)");
}

static bool check_names(kube_op *op, const char *ns, const char *name)
{
    /* Names go into apiserver paths: checked by the engine's rules (it
     * checked them first, so this refuses nothing the engine accepts). */
    if (kl__name_check_namespace(ns) != KL__NAME_OK) {
        op_fail(op, STORE_INVALID, "invalid namespace");
        return false;
    }
    if (name && kl__name_check_lease(name) != KL__NAME_OK) {
        op_fail(op, STORE_INVALID, "invalid lease name");
        return false;
    }
    return true;
}

void store_kube_get(store *s, const char *ns, const char *name, int timeout_ms, store_cb cb,
                    void *ctx)
{
    kube_store *ks = (kube_store *)s;
    kube_op *op = op_new(ks, KUBE_VERB_GET, ns, name, cb, ctx);
    if (!op || !check_names(op, ns, name ? name : ""))
        return;
    char path[512];
    snprintf(path, sizeof path, LEASES_PATH "/%s", ns, name);
    op_start(op, "GET", path, NULL, 0, NULL, timeout_ms);
}

/* The request body of a create (the whole Lease) or an update (the
 * conditional merge patch); NULL when a value cannot be encoded. */
static char *write_body(const store_lease *lease, bool create, size_t *len)
{
    kube_lease kl;
    if (!store_lease_to_kube(lease, &kl))
        return NULL;
    return create ? kube_lease_encode(&kl, false, len) : kube_lease_merge_patch(&kl, len);
}

static void write_lease(kube_store *ks, kube_verb verb, const store_lease *lease, int timeout_ms,
                        store_cb cb, void *ctx)
{
    kube_op *op = op_new(ks, verb, lease->ns, lease->name, cb, ctx);
    if (!op || !check_names(op, lease->ns, lease->name))
        return;
    bool create = verb == KUBE_VERB_CREATE;
    if (!create && !lease->resource_version[0]) {
        op_fail(op, STORE_INVALID, "update without a resourceVersion");
        return;
    }
    size_t len;
    char *body = write_body(lease, create, &len);
    if (!body) {
        op_fail(op, STORE_INVALID, "the Lease cannot be encoded (a value is out of range)");
        return;
    }
    char path[512];
    if (create)
        snprintf(path, sizeof path, LEASES_PATH, lease->ns);
    else
        snprintf(path, sizeof path, LEASES_PATH "/%s", lease->ns, lease->name);
    op_start(op, create ? "POST" : "PATCH", path, body, len,
             create ? NULL : "application/merge-patch+json", timeout_ms);
    free(body);
}

void store_kube_create(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx)
{
    write_lease((kube_store *)s, KUBE_VERB_CREATE, lease, timeout_ms, cb, ctx);
}

void store_kube_update(store *s, const store_lease *lease, int timeout_ms, store_cb cb, void *ctx)
{
    write_lease((kube_store *)s, KUBE_VERB_PATCH, lease, timeout_ms, cb, ctx);
}

void store_kube_remove(store *s, const char *ns, const char *name, const char *rv, int timeout_ms,
                       store_cb cb, void *ctx)
{
    kube_store *ks = (kube_store *)s;
    kube_op *op = op_new(ks, KUBE_VERB_DELETE, ns, name, cb, ctx);
    if (!op || !check_names(op, ns, name ? name : ""))
        return;
    char path[512], body[256];
    snprintf(path, sizeof path, LEASES_PATH "/%s", ns, name);
    if (!rv || !rv[0]) {
        op_start(op, "DELETE", path, NULL, 0, NULL, timeout_ms);
        return;
    }
    /* The resourceVersion is a precondition: a stale one gets 409 Conflict. */
    for (const char *p = rv; *p; p++) {
        if (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20 || p - rv >= STORE_RV_MAX) {
            op_fail(op, STORE_INVALID, "invalid resourceVersion");
            return;
        }
    }
    int n = snprintf(body, sizeof body,
                     "{\"apiVersion\":\"v1\",\"kind\":\"DeleteOptions\","
                     "\"preconditions\":{\"resourceVersion\":\"%s\"}}",
                     rv);
    op_start(op, "DELETE", path, body, (size_t)n, NULL, timeout_ms);
}

#define PODS_PATH "/api/v1/namespaces/%s/pods/%s"

/* A Pod operation; NULL when the names are refused (the failure is on its way). */
static kube_op *pod_op(kube_store *ks, kube_verb verb, const char *ns, const char *pod, store_cb cb,
                       void *ctx, char *path, size_t path_len)
{
    kube_op *op = op_new(ks, verb, ns, pod, cb, ctx);
    if (!op)
        return NULL;
    op->pod = true;
    if (!check_names(op, ns, NULL))
        return NULL;
    if (!pod || kl__name_check_lease(pod) != KL__NAME_OK) { /* a DNS-1123 subdomain too */
        op_fail(op, STORE_INVALID, "invalid pod name");
        return NULL;
    }
    snprintf(path, path_len, PODS_PATH, ns, pod);
    return op;
}

void store_kube_pod_get(store *s, const char *ns, const char *pod, int timeout_ms, store_cb cb,
                        void *ctx)
{
    char path[512];
    kube_op *op = pod_op((kube_store *)s, KUBE_VERB_GET, ns, pod, cb, ctx, path, sizeof path);
    if (op)
        op_start(op, "GET", path, NULL, 0, NULL, timeout_ms);
}

void store_kube_pod_label(store *s, const char *ns, const char *pod, const char *key,
                          const char *value, int timeout_ms, store_cb cb, void *ctx)
{
    char path[512];
    kube_op *op = pod_op((kube_store *)s, KUBE_VERB_PATCH, ns, pod, cb, ctx, path, sizeof path);
    if (!op)
        return;
    size_t len;
    char *body = kube_pod_label_patch(key, value, &len);
    if (!body) {
        op_fail(op, STORE_INTERNAL, "out of memory");
        return;
    }
    op_start(op, "PATCH", path, body, len, "application/merge-patch+json", timeout_ms);
    free(body);
}

#define EVENTS_PATH "/api/v1/namespaces/%s/events"

void store_kube_record_event(store *s, const store_lease_event *ev, int timeout_ms, store_cb cb,
                             void *ctx)
{
    kube_store *ks = (kube_store *)s;
    kube_op *op = op_new(ks, KUBE_VERB_CREATE, ev->lease.ns, ev->lease.name, cb, ctx);
    if (!op)
        return;
    op->event = true;
    if (!check_names(op, ev->lease.ns, ev->lease.name))
        return;
    kube_event ke;
    store_event_to_kube(ev, &ke);
    size_t len;
    char *body = kube_event_encode(&ke, &len);
    if (!body) {
        op_fail(op, STORE_INVALID, "the Event cannot be encoded (a value is out of range)");
        return;
    }
    char path[256];
    snprintf(path, sizeof path, EVENTS_PATH, ev->lease.ns);
    op_start(op, "POST", path, body, len, NULL, timeout_ms);
    free(body);
}

void store_kube_ops_cancel_all(kube_store *ks)
{
    while (!kl__list_empty(&ks->ops)) {
        kube_op *op = KL__LIST_ENTRY(kl__list_first(&ks->ops), kube_op, link);
        kube_client_cancel(ks->c, op->req);
        loop_timer_stop(&op->timer);
        kl__list_remove(&op->link);
        free(op);
    }
}
