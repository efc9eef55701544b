/* The kube store against the real control plane (tests/controlplane), with
 * the ServiceAccount's credentials: create/get/update/remove with their
 * conflicts, updates that keep others' labels and annotations, watches
 * (named and namespace-wide), an apiserver restart in the middle of a watch,
 * the in-cluster configuration path, and a token re-read after a 401.
 * Skipped (77) without $KUBELEASE_TEST_ENV. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/loop.h"
#include "kube/client.h"
#include "store/kube.h"

static char env_dir[512];
static char ns[64];
static char control_url[256];
static char sa_dir[600];
static char svc_host[128], svc_port[16];

static loop *lp;
static pthread_t loop_thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* ---- plumbing: the loop runs on its own thread; the test waits on cv ---- */

static void *loop_main(void *arg)
{
    (void)arg;
    loop_run(lp);
    return NULL;
}

typedef struct call {
    void (*fn)(struct call *);
    store *s;
    store_lease lease;
    char rv[STORE_RV_MAX];
    int timeout_ms;
    bool done;
    store_result res;
} call;

static void call_cb(void *ctx, const store_result *res)
{
    call *c = ctx;
    pthread_mutex_lock(&mu);
    c->res = *res;
    c->done = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void run_call(void *arg)
{
    call *c = arg;
    c->fn(c);
}

static bool wait_until(bool (*cond)(void *), void *arg, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&mu);
    bool ok;
    while (!(ok = cond(arg))) {
        if (pthread_cond_timedwait(&cv, &mu, &dl) == ETIMEDOUT) {
            ok = cond(arg);
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return ok;
}

static bool call_done(void *arg)
{
    return ((call *)arg)->done;
}

static store_result do_call(call *c)
{
    c->done = false;
    if (!c->timeout_ms)
        c->timeout_ms = 5000;
    assert_int_equal(loop_post(lp, run_call, c), 0);
    if (!wait_until(call_done, c, c->timeout_ms + 5000))
        fail_msg("store operation did not complete");
    return c->res;
}

static void fn_get(call *c)
{
    c->s->ops->get(c->s, c->lease.ns, c->lease.name, c->timeout_ms, call_cb, c);
}
static void fn_create(call *c)
{
    c->s->ops->create(c->s, &c->lease, c->timeout_ms, call_cb, c);
}
static void fn_update(call *c)
{
    c->s->ops->update(c->s, &c->lease, c->timeout_ms, call_cb, c);
}
static void fn_remove(call *c)
{
    c->s->ops->remove(c->s, c->lease.ns, c->lease.name, c->rv, c->timeout_ms, call_cb, c);
}

static store_result op(store *s, void (*fn)(call *), const store_lease *l, const char *rv)
{
    call c = {.fn = fn, .s = s, .lease = *l};
    snprintf(c.rv, sizeof c.rv, "%s", rv ? rv : "");
    return do_call(&c);
}

static store_lease lease_named(const char *name, const char *holder, int64_t trans)
{
    store_lease l = {0};
    snprintf(l.ns, sizeof l.ns, "%s", ns);
    snprintf(l.name, sizeof l.name, "%s", name);
    snprintf(l.holder, sizeof l.holder, "%s", holder);
    l.lease_duration_s = 15;
    l.transitions = trans;
    l.acquire_time_us = wall_us();
    l.renew_time_us = l.acquire_time_us;
    return l;
}

/* ---- watch recording ---- */

#define MAX_EV 256
typedef struct rec_ev {
    store_event_type type;
    store_lease lease;
} rec_ev;

typedef struct recorder {
    rec_ev ev[MAX_EV];
    int n;
    store *s;
    const char *name; /* NULL: namespace */
    store_watch *w;
    bool stopped;
} recorder;

static void on_watch(void *ctx, store_event_type type, const store_lease *lease)
{
    recorder *r = ctx;
    pthread_mutex_lock(&mu);
    if (r->n < MAX_EV) {
        r->ev[r->n].type = type;
        if (lease)
            r->ev[r->n].lease = *lease;
        r->n++;
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void start_watch(void *arg)
{
    recorder *r = arg;
    r->w = r->s->ops->watch(r->s, ns, r->name, on_watch, r);
}

static void stop_watch(void *arg)
{
    recorder *r = arg;
    r->s->ops->unwatch(r->s, r->w);
    pthread_mutex_lock(&mu);
    r->stopped = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static bool stopped(void *arg)
{
    return ((recorder *)arg)->stopped;
}

static void watch_begin(recorder *r, store *s, const char *name)
{
    memset(r, 0, sizeof *r);
    r->s = s;
    r->name = name;
    assert_int_equal(loop_post(lp, start_watch, r), 0);
}

static void watch_end(recorder *r)
{
    assert_int_equal(loop_post(lp, stop_watch, r), 0);
    assert_true(wait_until(stopped, r, 5000));
}

typedef struct want {
    recorder *r;
    int from;
    store_event_type type;
    const char *name;
    const char *rv;
    int found; /* index */
} want;

static bool have_event(void *arg)
{
    want *w = arg;
    for (int i = w->from; i < w->r->n; i++) {
        const rec_ev *e = &w->r->ev[i];
        if (e->type != w->type)
            continue;
        if (w->name && strcmp(e->lease.name, w->name) != 0)
            continue;
        if (w->rv && strcmp(e->lease.resource_version, w->rv) != 0)
            continue;
        w->found = i;
        return true;
    }
    return false;
}

/* Waits for an event at index >= from; returns its index. */
static int expect_event(recorder *r, int from, store_event_type type, const char *name,
                        const char *rv, int timeout_ms)
{
    want w = {r, from, type, name, rv, -1};
    if (!wait_until(have_event, &w, timeout_ms))
        fail_msg("no %s event for %s (rv %s) after index %d within %d ms (have %d events)",
                 type == STORE_EVENT_PUT      ? "PUT"
                 : type == STORE_EVENT_DELETE ? "DELETE"
                 : type == STORE_EVENT_SYNCED ? "SYNCED"
                                              : "BROKEN",
                 name ? name : "-", rv ? rv : "-", from, timeout_ms, r->n);
    return w.found;
}

/* ---- environment ---- */

static void read_env(void)
{
    char p[700];
    snprintf(p, sizeof p, "%s/env", env_dir);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = 0;
        char *v = eq + 1;
        size_t vl = strlen(v);
        if (vl >= 2 && v[0] == '\'' && v[vl - 1] == '\'') {
            v[vl - 1] = 0;
            v++;
        }
        if (strcmp(line, "KL_TEST_NAMESPACE") == 0)
            snprintf(ns, sizeof ns, "%s", v);
        else if (strcmp(line, "KL_CONTROL_URL") == 0)
            snprintf(control_url, sizeof control_url, "%s", v);
        else if (strcmp(line, "KUBERNETES_SERVICE_HOST") == 0)
            snprintf(svc_host, sizeof svc_host, "%s", v);
        else if (strcmp(line, "KUBERNETES_SERVICE_PORT") == 0)
            snprintf(svc_port, sizeof svc_port, "%s", v);
    }
    fclose(f);
    snprintf(sa_dir, sizeof sa_dir, "%s/serviceaccount", env_dir);
    assert_true(ns[0] && control_url[0] && svc_host[0] && svc_port[0]);
}

static store *sa_store(void)
{
    char kc[700], err[512];
    snprintf(kc, sizeof kc, "%s/sa.kubeconfig", env_dir);
    store_kube_opts o = {.kubeconfig = kc};
    store *s = store_kube_new(lp, &o, err, sizeof err);
    if (!s)
        fail_msg("store_kube_new: %s", err);
    assert_string_equal(s->kind, "kube");
    return s;
}

static void free_store(void *arg)
{
    store_free(arg);
}

static bool marker_seen;

static void marker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    marker_seen = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static bool marker_done(void *arg)
{
    (void)arg;
    return marker_seen;
}

/* Destroys the store on the loop thread and waits until that has run. */
static void destroy_store(store *s)
{
    pthread_mutex_lock(&mu);
    marker_seen = false;
    pthread_mutex_unlock(&mu);
    assert_int_equal(loop_post(lp, free_store, s), 0);
    assert_int_equal(loop_post(lp, marker, NULL), 0);
    assert_true(wait_until(marker_done, NULL, 5000));
}

static int setup(void **state)
{
    (void)state;
    lp = loop_new();
    assert_non_null(lp);
    return pthread_create(&loop_thread, NULL, loop_main, NULL);
}

static int teardown(void **state)
{
    (void)state;
    loop_stop(lp);
    pthread_join(loop_thread, NULL);
    loop_free(lp);
    return 0;
}

static char lease_name[64];

/* ---- tests ---- */

static void test_kube_store_crud_and_conflicts(void **state)
{
    (void)state;
    store *s = sa_store();
    snprintf(lease_name, sizeof lease_name, "kt-crud-%d", (int)getpid());
    store_lease l = lease_named(lease_name, "replica-a", 1);

    recorder wr;
    watch_begin(&wr, s, lease_name);
    /* Absent at first: DELETE, then SYNCED. */
    int i = expect_event(&wr, 0, STORE_EVENT_DELETE, lease_name, NULL, 10000);
    i = expect_event(&wr, i, STORE_EVENT_SYNCED, NULL, NULL, 10000);

    store_result r = op(s, fn_get, &l, NULL);
    assert_int_equal(r.status, STORE_NOT_FOUND);
    assert_int_equal(r.http_code, 404);

    r = op(s, fn_create, &l, NULL);
    if (r.status != STORE_OK)
        fail_msg("create: %s %s", store_status_name(r.status), r.message);
    assert_string_equal(r.lease.holder, "replica-a");
    assert_int_equal(r.lease.transitions, 1);
    assert_int_equal(r.lease.lease_duration_s, 15);
    /* MicroTime keeps microseconds through the apiserver. */
    assert_int_equal(r.lease.renew_time_us, l.renew_time_us);
    char rv1[STORE_RV_MAX];
    strcpy(rv1, r.lease.resource_version);
    assert_true(rv1[0]);
    i = expect_event(&wr, i, STORE_EVENT_PUT, lease_name, rv1, 10000);

    r = op(s, fn_create, &l, NULL);
    assert_int_equal(r.status, STORE_EXISTS);
    assert_int_equal(r.http_code, 409);
    assert_non_null(strstr(r.message, "409 AlreadyExists"));

    r = op(s, fn_get, &l, NULL);
    assert_int_equal(r.status, STORE_OK);
    assert_string_equal(r.lease.resource_version, rv1);
    assert_string_equal(r.lease.holder, "replica-a");

    store_lease u = r.lease;
    strcpy(u.holder, "replica-b");
    u.transitions = 2;
    r = op(s, fn_update, &u, NULL);
    if (r.status != STORE_OK)
        fail_msg("update: %s %s", store_status_name(r.status), r.message);
    char rv2[STORE_RV_MAX];
    strcpy(rv2, r.lease.resource_version);
    assert_string_not_equal(rv1, rv2);
    assert_string_equal(r.lease.holder, "replica-b");
    assert_int_equal(r.lease.transitions, 2);
    i = expect_event(&wr, i, STORE_EVENT_PUT, lease_name, rv2, 10000);

    /* The same write again carries a stale resourceVersion. */
    r = op(s, fn_update, &u, NULL);
    assert_int_equal(r.status, STORE_CONFLICT);
    assert_non_null(strstr(r.message, "apiserver: 409 Conflict: Operation cannot be fulfilled"));

    r = op(s, fn_remove, &l, rv1);
    assert_int_equal(r.status, STORE_CONFLICT);
    r = op(s, fn_remove, &l, rv2);
    if (r.status != STORE_OK)
        fail_msg("remove: %s %s", store_status_name(r.status), r.message);
    i = expect_event(&wr, i, STORE_EVENT_DELETE, lease_name, NULL, 10000);
    r = op(s, fn_remove, &l, NULL);
    assert_int_equal(r.status, STORE_NOT_FOUND);
    assert_true(s->ops->reachable(s));

    /* Events came in order: the PUTs before the DELETE. */
    pthread_mutex_lock(&mu);
    int puts = 0;
    for (int k = 0; k < wr.n; k++)
        if (wr.ev[k].type == STORE_EVENT_PUT)
            puts++;
    assert_int_equal(puts, 2);
    assert_int_equal(wr.ev[wr.n - 1].type, STORE_EVENT_DELETE);
    pthread_mutex_unlock(&mu);
    watch_end(&wr);

    /* Another namespace is outside the ServiceAccount's RBAC. */
    store_lease other = l;
    strcpy(other.ns, "default");
    r = op(s, fn_get, &other, NULL);
    assert_int_equal(r.status, STORE_FORBIDDEN);
    assert_int_equal(r.http_code, 403);

    destroy_store(s);
}

/* A request to the apiserver as the ServiceAccount, with the curl tool;
 * the response body goes to out. Returns the HTTP status (0 on failure). */
static int sa_request(const char *method, const char *path, const char *merge_patch, char *out,
                      size_t out_len)
{
    char token[4096] = "", p[700], cmd[8192];
    snprintf(p, sizeof p, "%s/token", sa_dir);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    size_t n = fread(token, 1, sizeof token - 1, f);
    fclose(f);
    token[n] = 0;
    token[strcspn(token, "\r\n")] = 0;
    snprintf(cmd, sizeof cmd,
             "curl -s -A kubelease-test -w '\\n%%{http_code}' --cacert '%s/ca.crt' -H "
             "'Authorization: Bearer %s' "
             "-X %s %s%s%s 'https://%s:%s%s'",
             sa_dir, token, method,
             merge_patch ? "-H 'Content-Type: application/merge-patch+json' --data-binary '" : "",
             merge_patch ? merge_patch : "", merge_patch ? "'" : "", svc_host, svc_port, path);
    FILE *pp = popen(cmd, "r");
    assert_non_null(pp);
    n = fread(out, 1, out_len - 1, pp);
    out[n] = 0;
    pclose(pp);
    char *nl = strrchr(out, '\n');
    if (!nl)
        return 0;
    *nl = 0;
    return atoi(nl + 1);
}

/* Updates are conditional merge patches of the spec: labels and annotations
 * that others put on the Lease survive a renewal and a release, and a
 * release removes the times and the duration. The term nonce is the one
 * annotation the store writes, beside the others (docs/design.md, rule 8). */
static void test_kube_store_update_keeps_metadata(void **state)
{
    (void)state;
    store *s = sa_store();
    char name[64], path[256], body[16384];
    snprintf(name, sizeof name, "kt-meta-%d", (int)getpid());
    snprintf(path, sizeof path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s", ns, name);
    store_lease l = lease_named(name, "replica-a", 1);
    strcpy(l.term_nonce, "first-nonce");
    store_result r = op(s, fn_create, &l, NULL);
    if (r.status != STORE_OK)
        fail_msg("create: %s %s", store_status_name(r.status), r.message);
    assert_string_equal(r.lease.term_nonce, "first-nonce");
    assert_int_equal(sa_request("PATCH", path,
                                "{\"metadata\":{\"labels\":{\"team\":\"kv\"},"
                                "\"annotations\":{\"example.com/owner\":\"ops\"}}}",
                                body, sizeof body),
                     200);

    /* A write with the resourceVersion from before the label is a conflict. */
    store_lease u = r.lease;
    u.renew_time_us = wall_us();
    r = op(s, fn_update, &u, NULL);
    assert_int_equal(r.status, STORE_CONFLICT);

    r = op(s, fn_get, &l, NULL);
    assert_int_equal(r.status, STORE_OK);
    u = r.lease;
    assert_string_equal(u.term_nonce, "first-nonce");
    u.renew_time_us = wall_us();
    strcpy(u.term_nonce, "second-nonce");
    r = op(s, fn_update, &u, NULL);
    if (r.status != STORE_OK)
        fail_msg("renewal: %s %s", store_status_name(r.status), r.message);
    assert_int_equal(r.lease.renew_time_us, u.renew_time_us);
    assert_string_equal(r.lease.term_nonce, "second-nonce");
    assert_int_equal(sa_request("GET", path, NULL, body, sizeof body), 200);
    if (!strstr(body, "\"kubelease.io/term-nonce\":\"second-nonce\"") ||
        !strstr(body, "\"example.com/owner\":\"ops\""))
        fail_msg("the term nonce is not beside the other annotations: %s", body);

    u = r.lease;
    u.holder[0] = 0;
    u.lease_duration_s = 0;
    u.acquire_time_us = u.renew_time_us = 0;
    r = op(s, fn_update, &u, NULL);
    if (r.status != STORE_OK)
        fail_msg("release: %s %s", store_status_name(r.status), r.message);
    assert_string_equal(r.lease.holder, "");
    assert_int_equal(r.lease.lease_duration_s, 0);
    assert_int_equal(r.lease.acquire_time_us, 0);
    assert_int_equal(r.lease.renew_time_us, 0);
    assert_int_equal(r.lease.transitions, 1);

    assert_int_equal(sa_request("GET", path, NULL, body, sizeof body), 200);
    if (!strstr(body, "\"team\":\"kv\"") || !strstr(body, "\"example.com/owner\":\"ops\""))
        fail_msg("labels or annotations lost by the store's writes: %s", body);
    assert_null(strstr(body, "renewTime"));
    destroy_store(s);
}

static void test_kube_store_namespace_watch(void **state)
{
    (void)state;
    store *s = sa_store();
    char a[64], b[64];
    snprintf(a, sizeof a, "kt-ns-a-%d", (int)getpid());
    snprintf(b, sizeof b, "kt-ns-b-%d", (int)getpid());
    store_lease la = lease_named(a, "x", 1), lb = lease_named(b, "y", 1);
    store_result r = op(s, fn_create, &la, NULL);
    assert_int_equal(r.status, STORE_OK);

    recorder wr;
    watch_begin(&wr, s, NULL);
    int i = expect_event(&wr, 0, STORE_EVENT_PUT, a, r.lease.resource_version, 10000);
    i = expect_event(&wr, i, STORE_EVENT_SYNCED, NULL, NULL, 10000);
    r = op(s, fn_create, &lb, NULL);
    assert_int_equal(r.status, STORE_OK);
    i = expect_event(&wr, i, STORE_EVENT_PUT, b, r.lease.resource_version, 10000);
    assert_int_equal(op(s, fn_remove, &la, NULL).status, STORE_OK);
    assert_int_equal(op(s, fn_remove, &lb, NULL).status, STORE_OK);
    i = expect_event(&wr, i, STORE_EVENT_DELETE, a, NULL, 10000);
    expect_event(&wr, i, STORE_EVENT_DELETE, b, NULL, 10000);
    watch_end(&wr);
    destroy_store(s);
}

static int control_restart(int down_ms, const char *signal)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "curl -sf -X POST '%s/apiserver/restart?down_ms=%d&signal=%s' >/dev/null", control_url,
             down_ms, signal);
    return system(cmd);
}

/* signal: TERM (a graceful restart) or KILL (a crash). */
static void watch_survives_restart(const char *signal, int down_ms)
{
    store *s = sa_store();
    snprintf(lease_name, sizeof lease_name, "kt-restart-%s-%d", signal[0] == 'K' ? "kill" : "term",
             (int)getpid());
    store_lease l = lease_named(lease_name, "before", 1);
    store_result r = op(s, fn_create, &l, NULL);
    assert_int_equal(r.status, STORE_OK);
    store_lease cur = r.lease;

    recorder wr;
    watch_begin(&wr, s, lease_name);
    int i = expect_event(&wr, 0, STORE_EVENT_PUT, lease_name, cur.resource_version, 10000);
    i = expect_event(&wr, i, STORE_EVENT_SYNCED, NULL, NULL, 10000);

    /* The control endpoint answers once the apiserver is down again and up. */
    assert_int_equal(control_restart(down_ms, signal), 0);
    int b = expect_event(&wr, i, STORE_EVENT_BROKEN, NULL, NULL, 30000);

    /* Write the final state as soon as the apiserver takes writes again. */
    strcpy(cur.holder, "after");
    cur.transitions = 2;
    for (int attempt = 0;; attempt++) {
        r = op(s, fn_update, &cur, NULL);
        if (r.status == STORE_OK)
            break;
        if (attempt > 300)
            fail_msg("update after restart: %s %s", store_status_name(r.status), r.message);
        struct timespec ts = {0, 100 * 1000000};
        nanosleep(&ts, NULL); /* retry pacing for an apiserver still starting */
    }
    /* The watch comes back (SYNCED after BROKEN) and delivers the final state. */
    expect_event(&wr, b, STORE_EVENT_SYNCED, NULL, NULL, 30000);
    expect_event(&wr, b, STORE_EVENT_PUT, lease_name, r.lease.resource_version, 30000);
    assert_true(s->ops->reachable(s));
    watch_end(&wr);
    assert_int_equal(op(s, fn_remove, &l, NULL).status, STORE_OK);
    destroy_store(s);
}

static void test_kube_store_watch_survives_apiserver_restart(void **state)
{
    (void)state;
    watch_survives_restart("TERM", 2000);
}

static void test_kube_store_watch_survives_apiserver_crash(void **state)
{
    (void)state;
    watch_survives_restart("KILL", 500);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Figures for the report: update round trips and how soon the watch
 * delivers a write, both on loopback. */
static void test_kube_store_latency_figures(void **state)
{
    (void)state;
    store *s = sa_store();
    snprintf(lease_name, sizeof lease_name, "kt-latency-%d", (int)getpid());
    store_lease l = lease_named(lease_name, "x", 1);
    store_result r = op(s, fn_create, &l, NULL);
    assert_int_equal(r.status, STORE_OK);
    recorder wr;
    watch_begin(&wr, s, lease_name);
    int i = expect_event(&wr, 0, STORE_EVENT_SYNCED, NULL, NULL, 10000);
    enum { N = 50 };
    int64_t rtt[N], lag[N];
    store_lease cur = r.lease;
    for (int k = 0; k < N; k++) {
        cur.renew_time_us = wall_us();
        int64_t t0 = mono_us();
        r = op(s, fn_update, &cur, NULL);
        int64_t t1 = mono_us();
        assert_int_equal(r.status, STORE_OK);
        cur = r.lease;
        i = expect_event(&wr, i, STORE_EVENT_PUT, lease_name, cur.resource_version, 10000);
        int64_t t2 = mono_us();
        rtt[k] = t1 - t0;
        lag[k] = t2 - t0;
    }
    qsort(rtt, N, sizeof rtt[0], cmp_i64);
    qsort(lag, N, sizeof lag[0], cmp_i64);
    fprintf(stderr,
            "figures: update round trip p50 %.2f ms p90 %.2f ms; write-to-watch-event p50 %.2f ms "
            "p90 %.2f ms (n=%d, loopback)\n",
            rtt[N / 2] / 1000.0, rtt[N * 9 / 10] / 1000.0, lag[N / 2] / 1000.0,
            lag[N * 9 / 10] / 1000.0, N);
    watch_end(&wr);
    assert_int_equal(op(s, fn_remove, &l, NULL).status, STORE_OK);
    destroy_store(s);
}

static void copy_file(const char *from, const char *to)
{
    char cmd[1600];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    assert_int_equal(system(cmd), 0);
}

static void test_kube_store_in_cluster_and_token_reread_after_401(void **state)
{
    (void)state;
    char dir[] = "/tmp/kl-sa-it-XXXXXX", p[700], q[700], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(p, sizeof p, "%s/ca.crt", sa_dir);
    snprintf(q, sizeof q, "%s/ca.crt", dir);
    copy_file(p, q);
    snprintf(p, sizeof p, "%s/namespace", sa_dir);
    snprintf(q, sizeof q, "%s/namespace", dir);
    copy_file(p, q);
    /* A token the apiserver rejects. */
    snprintf(q, sizeof q, "%s/token", dir);
    FILE *f = fopen(q, "w");
    assert_non_null(f);
    fputs("not-a-valid-token", f);
    fclose(f);

    setenv("KUBERNETES_SERVICE_HOST", svc_host, 1);
    setenv("KUBERNETES_SERVICE_PORT", svc_port, 1);
    store_kube_opts o = {.sa_dir = dir};
    store *s = store_kube_new(lp, &o, err, sizeof err);
    if (!s)
        fail_msg("in-cluster store: %s", err);
    store_lease l = lease_named("kt-incluster", "z", 1);
    store_result r = op(s, fn_get, &l, NULL);
    assert_int_equal(r.status, STORE_FORBIDDEN);
    assert_int_equal(r.http_code, 401);

    /* The token rotates; after the 401 the next request re-reads it. */
    snprintf(p, sizeof p, "%s/token", sa_dir);
    copy_file(p, q);
    r = op(s, fn_get, &l, NULL);
    if (r.status != STORE_NOT_FOUND)
        fail_msg("after the token re-read: %s %s", store_status_name(r.status), r.message);
    r = op(s, fn_create, &l, NULL);
    assert_int_equal(r.status, STORE_OK);
    assert_int_equal(op(s, fn_remove, &l, NULL).status, STORE_OK);
    destroy_store(s);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static store *store_from_kubeconfig(const char *dir, const char *text, char *err, size_t err_len)
{
    char kc[700];
    snprintf(kc, sizeof kc, "%s/kubeconfig", dir);
    FILE *f = fopen(kc, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    store_kube_opts o = {.kubeconfig = kc};
    return store_kube_new(lp, &o, err, err_len);
}

/* Every way of trusting the apiserver and of proving who we are reaches it:
 * client certificate and key as data (admin.kubeconfig) and as files, a CA
 * file, a tokenFile, insecure-skip-tls-verify; without a CA the TLS check
 * fails with a message that says so. */
static void test_kube_store_tls_and_credential_variants(void **state)
{
    (void)state;
    char err[512], kc[700], text[4096], server[200] = "";
    store_lease l = lease_named("kt-tls-absent", "x", 1);

    snprintf(kc, sizeof kc, "%s/admin.kubeconfig", env_dir);
    store_kube_opts o = {.kubeconfig = kc};
    store *s = store_kube_new(lp, &o, err, sizeof err);
    if (!s)
        fail_msg("admin kubeconfig: %s", err);
    store_result r = op(s, fn_get, &l, NULL);
    if (r.status != STORE_NOT_FOUND)
        fail_msg("client certificate data: %s %s", store_status_name(r.status), r.message);
    destroy_store(s);

    snprintf(server, sizeof server, "https://%s:%s", svc_host, svc_port);
    char dir[] = "/tmp/kl-tls-it-XXXXXX";
    assert_non_null(mkdtemp(dir));
    snprintf(
        text, sizeof text,
        "current-context: files\n"
        "contexts:\n- name: files\n  context: {cluster: c, user: admin}\n"
        "- name: insecure\n  context: {cluster: insecure, user: sa}\n"
        "- name: noca\n  context: {cluster: noca, user: sa}\n"
        "clusters:\n- name: c\n  cluster: {server: '%s', certificate-authority: '%s/pki/ca.crt'}\n"
        "- name: insecure\n  cluster: {server: '%s', insecure-skip-tls-verify: true}\n"
        "- name: noca\n  cluster: {server: '%s'}\n"
        "users:\n- name: admin\n  user: {client-certificate: '%s/pki/admin.crt', "
        "client-key: '%s/pki/admin.key'}\n"
        "- name: sa\n  user: {tokenFile: '%s/token'}\n",
        server, env_dir, server, server, env_dir, env_dir, sa_dir);
    s = store_from_kubeconfig(dir, text, err, sizeof err);
    if (!s)
        fail_msg("files kubeconfig: %s", err);
    r = op(s, fn_get, &l, NULL);
    if (r.status != STORE_NOT_FOUND)
        fail_msg("client certificate files: %s %s", store_status_name(r.status), r.message);
    destroy_store(s);

    char kcp[700];
    snprintf(kcp, sizeof kcp, "%s/kubeconfig", dir);
    store_kube_opts oi = {.kubeconfig = kcp, .context = "insecure"};
    s = store_kube_new(lp, &oi, err, sizeof err);
    assert_non_null(s);
    r = op(s, fn_get, &l, NULL);
    if (r.status != STORE_NOT_FOUND)
        fail_msg("insecure-skip-tls-verify with a tokenFile: %s %s", store_status_name(r.status),
                 r.message);
    destroy_store(s);

    store_kube_opts on = {.kubeconfig = kcp, .context = "noca"};
    s = store_kube_new(lp, &on, err, sizeof err);
    assert_non_null(s);
    r = op(s, fn_get, &l, NULL);
    assert_int_equal(r.status, STORE_UNAVAILABLE);
    assert_int_equal(r.http_code, 0);
    if (!strstr(r.message, "certificate"))
        fail_msg("no CA: \"%s\" does not mention the certificate", r.message);
    assert_false(s->ops->reachable(s));
    destroy_store(s);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_kube_store_config_errors(void **state)
{
    (void)state;
    char err[512];
    store_kube_opts o = {.kubeconfig = "/nonexistent/kubeconfig"};
    assert_null(store_kube_new(lp, &o, err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/kubeconfig"));
    char kc[700];
    snprintf(kc, sizeof kc, "%s/sa.kubeconfig", env_dir);
    store_kube_opts o2 = {.kubeconfig = kc, .context = "no-such-context"};
    assert_null(store_kube_new(lp, &o2, err, sizeof err));
    assert_non_null(strstr(err, "context \"no-such-context\" not found"));
}

int main(void)
{
    const char *e = getenv("KUBELEASE_TEST_ENV");
    if (!e || !e[0]) {
        fprintf(stderr, "KUBELEASE_TEST_ENV is not set: skipping\n");
        return 77;
    }
    snprintf(env_dir, sizeof env_dir, "%s", e);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    read_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kube_store_config_errors),
        cmocka_unit_test(test_kube_store_tls_and_credential_variants),
        cmocka_unit_test(test_kube_store_crud_and_conflicts),
        cmocka_unit_test(test_kube_store_update_keeps_metadata),
        cmocka_unit_test(test_kube_store_namespace_watch),
        cmocka_unit_test(test_kube_store_in_cluster_and_token_reread_after_401),
        cmocka_unit_test(test_kube_store_latency_figures),
        cmocka_unit_test(test_kube_store_watch_survives_apiserver_restart),
        cmocka_unit_test(test_kube_store_watch_survives_apiserver_crash),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
