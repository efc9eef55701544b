/* Who may call (docs/design.md, rule 7), in-process: the HTTP server with
 * --auth kubernetes on the memory store, its reviews answered by a
 * stand-in apiserver (fake_reviews.h) that counts them. Missing, invalid,
 * expired and wrong-audience tokens get unauthenticated with a message
 * saying which; a denied verb gets permission_denied worded like kubectl;
 * answers are cached (a known caller costs no review; concurrent first
 * checks sharing one review are test_auth_check's), an apiserver that
 * cannot answer means
 * unavailable (and nothing is cached), the identity policies bind
 * identities to ServiceAccounts and pods, ListLeases and the status page
 * show only the namespaces the caller may list, a review in flight at
 * shutdown ends the call cleanly, a flood of fresh bogus tokens from one
 * address costs its --review-rate-per-ip while a known caller is served,
 * and with --metrics-auth kubernetes /metrics answers 401, 403 or 200 by
 * token on both listeners. */
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "common/envelope.h"
#include "core/loop.h"
#include "core/metrics.h"
#include "engine/engine.h"
#include "http/server.h"
#include "ops/ops.h"
#include "kube/client.h"
#include "rpc/connect.h"
#include "store/memory.h"
#include "store/store.h"
#include "support/http_call.h"
#include "unit/fake_reviews.h"

#define MAX_STREAMS 4

typedef struct fixture {
    fake_apiserver api;
    loop *l;
    store *st;
    engine *e;
    kube_client *kube;
    pthread_t tid;
    http_server *srv;
    char base[64], ops[64];
    pthread_t streams[MAX_STREAMS];
    int n_streams;
} fixture;

static void *run_engine(void *arg)
{
    engine_run(arg);
    return NULL;
}

static int answer_ttl_ms; /* 0: the defaults */
static bool manual_clock; /* the loop's clock is clock_ms, moved by the test */
static _Atomic int64_t clock_ms;

static int64_t clock_read(void *ctx)
{
    (void)ctx;
    return atomic_load(&clock_ms);
}
static unsigned rate_per_ip; /* --review-rate-per-ip; 0: no limit */
static bool metrics_auth;    /* --metrics-auth kubernetes, and an ops listener */

static int setup_policy(void **state, auth_identity_policy policy)
{
    fixture *f = calloc(1, sizeof *f);
    if (fake_start(&f->api) != 0)
        fail_msg("cannot start the stand-in apiserver");
    f->l = loop_new();
    if (manual_clock) {
        atomic_store(&clock_ms, 1000000);
        loop_set_clock(f->l, clock_read, NULL); /* before the loop runs */
    }
    f->st = store_memory_new(f->l);
    kube_config kc = {0};
    char server[64], err[256];
    snprintf(server, sizeof server, "http://127.0.0.1:%d", f->api.port);
    kc.server = strdup(server);
    f->kube = kube_client_new(f->l, &kc, err, sizeof err);
    if (!f->kube)
        fail_msg("kube_client_new: %s", err);
    static const char *const label_keys[] = {"example.com/role", NULL};
    engine_config ec = {.loop = f->l, .store = f->st, .pod_label_keys = label_keys};
    f->e = engine_new(&ec);
    pthread_create(&f->tid, NULL, run_engine, f->e);
    http_config hc = {.ops = ops_http_hooks(),
                      .listen = "127.0.0.1:0",
                      .ops_listen = metrics_auth ? "127.0.0.1:0" : NULL,
                      .engine = f->e,
                      .auth_mode = HTTP_AUTH_KUBERNETES,
                      .auth = {.identity_policy = policy,
                               .loop = f->l,
                               .kube = f->kube,
                               .token_ttl_ms = answer_ttl_ms,
                               .access_ttl_ms = answer_ttl_ms,
                               .review_rate_per_ip = rate_per_ip,
                               .metrics = metrics_auth}};
    f->srv = http_server_start(&hc, err, sizeof err);
    if (!f->srv)
        fail_msg("http_server_start: %s", err);
    snprintf(f->base, sizeof f->base, "http://127.0.0.1:%u", (unsigned)http_server_port(f->srv));
    snprintf(f->ops, sizeof f->ops, "http://127.0.0.1:%u", (unsigned)http_server_ops_port(f->srv));
    /* alice may do everything everywhere; bob may get in team; carol may
     * list in team only. */
    fake_grant(&f->api, "system:serviceaccount:team:alice campaign *");
    fake_grant(&f->api, "system:serviceaccount:team:alice get *");
    fake_grant(&f->api, "system:serviceaccount:team:alice watch *");
    fake_grant(&f->api, "system:serviceaccount:team:alice list *");
    fake_grant(&f->api, "system:serviceaccount:team:bob get team");
    fake_grant(&f->api, "system:serviceaccount:team:carol list team");
    fake_grant(&f->api, "system:serviceaccount:team:carol get team");
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_policy(state, AUTH_IDENTITY_ANY);
}

/* Answers cached for 2 s of a clock the test moves. */
static int setup_short_ttl(void **state)
{
    answer_ttl_ms = 2000;
    manual_clock = true;
    int rc = setup_policy(state, AUTH_IDENTITY_ANY);
    answer_ttl_ms = 0;
    manual_clock = false;
    return rc;
}

/* At most 5 reviews a second from one address (bursts of 10). */
static int setup_rate(void **state)
{
    rate_per_ip = 5;
    int rc = setup_policy(state, AUTH_IDENTITY_ANY);
    rate_per_ip = 0;
    return rc;
}

/* /metrics authorized, on both listeners. */
static int setup_metrics(void **state)
{
    metrics_auth = true;
    int rc = setup_policy(state, AUTH_IDENTITY_ANY);
    metrics_auth = false;
    return rc;
}

static int setup_sa(void **state)
{
    return setup_policy(state, AUTH_IDENTITY_SERVICEACCOUNT);
}

static int setup_pod(void **state)
{
    return setup_policy(state, AUTH_IDENTITY_POD);
}

static void shutdown_fixture(fixture *f)
{
    http_server_quiesce(f->srv);
    engine_stop(f->e);
    pthread_join(f->tid, NULL);
    engine_free(f->e);
    http_server_finish(f->srv, 3000);
    http_server_stop(f->srv);
    f->srv = NULL;
    kube_client_free(f->kube);
    store_free(f->st);
    loop_free(f->l);
    for (int i = 0; i < f->n_streams; i++)
        pthread_join(f->streams[i], NULL);
    fake_stop(&f->api);
}

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->srv)
        shutdown_fixture(f);
    free(f);
    return 0;
}

typedef http_body body;

/* One request with token (NULL: no Authorization header); the HTTP status. */
static long http(const char *base, const char *path, const char *ctype, const char *token,
                 const void *data, size_t len, body *out)
{
    char auth[512];
    if (token)
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    return http_call(base, path, ctype, token ? auth : NULL, data, len, out);
}

static long rpc(const fixture *f, const char *method, const char *json, const char *token,
                body *out)
{
    char path[128];
    snprintf(path, sizeof path, "/kubelease.v1.LeaseService/%s", method);
    return http(f->base, path, "application/json", token, json, strlen(json), out);
}

#define GET_X "{\"namespace\":\"team\",\"name\":\"x\"}"

static void expect_reviews(fixture *f, int token_reviews, int access_reviews)
{
    int t, a;
    fake_counts(&f->api, &t, &a, NULL);
    assert_int_equal(t, token_reviews);
    assert_int_equal(a, access_reviews);
}

/* A JWT (unsigned: the stand-in refuses it) with these claims. */
static void jwt(const char *claims, char *out, size_t out_len)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t n = strlen(claims), o = (size_t)snprintf(out, out_len, "eyJhbGciOiJSUzI1NiJ9.");
    for (size_t i = 0; i < n && o + 5 < out_len; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)claims[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)(unsigned char)claims[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)claims[i + 2];
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = b64[v >> 6 & 63];
        if (i + 2 < n)
            out[o++] = b64[v & 63];
    }
    snprintf(out + o, out_len - o, ".c2lnbmF0dXJl");
}

static void test_auth_missing_malformed_invalid_expired_and_wrong_audience_tokens(void **state)
{
    fixture *f = *state;
    body b;
    assert_int_equal(rpc(f, "GetHolder", GET_X, NULL, &b), 401);
    assert_non_null(strstr(b.data, "\"unauthenticated\""));
    assert_non_null(strstr(b.data, "no credentials"));
    assert_int_equal(http(f->base, "/kubelease.v1.LeaseService/GetHolder", "application/json", "",
                          GET_X, strlen(GET_X), &b),
                     401);
    assert_non_null(strstr(b.data, "\"unauthenticated\""));
    expect_reviews(f, 0, 0);

    assert_int_equal(rpc(f, "GetHolder", GET_X, "nobody-knows-me", &b), 401);
    assert_non_null(strstr(b.data, "the token is invalid"));
    assert_non_null(strstr(b.data, "invalid bearer token"));
    /* Refusals are cached briefly: no second review. */
    assert_int_equal(rpc(f, "GetHolder", GET_X, "nobody-knows-me", &b), 401);
    expect_reviews(f, 1, 0);

    char tok[512];
    jwt("{\"aud\":[\"kubelease\"],\"exp\":1000000000,\"sub\":\"x\"}", tok, sizeof tok);
    assert_int_equal(rpc(f, "GetHolder", GET_X, tok, &b), 401);
    assert_non_null(strstr(b.data, "the token expired at 2001-09-09T01:46:40Z"));
    jwt("{\"aud\":\"https://kubernetes.default.svc\",\"exp\":9999999999}", tok, sizeof tok);
    assert_int_equal(rpc(f, "GetHolder", GET_X, tok, &b), 401);
    assert_non_null(strstr(b.data, "audience is [https://kubernetes.default.svc], not "
                                   "\\\"kubelease\\\""));
    pthread_mutex_lock(&f->api.mu);
    assert_string_equal(f->api.last_audience, "kubelease");
    pthread_mutex_unlock(&f->api.mu);
}

static void test_auth_allowed_and_denied_calls_are_cached(void **state)
{
    fixture *f = *state;
    body b;
    /* Allowed: the call reaches the engine (the Lease does not exist). */
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 404);
    assert_non_null(strstr(b.data, "\"not_found\""));
    expect_reviews(f, 1, 1);
    for (int i = 0; i < 20; i++)
        assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 404);
    expect_reviews(f, 1, 1);
    /* bob may get every election of team: the namespace's answer serves
     * the other names too. */
    for (int i = 0; i < 20; i++) {
        char get[64];
        snprintf(get, sizeof get, "{\"namespace\":\"team\",\"name\":\"e%d\"}", i);
        assert_int_equal(rpc(f, "GetHolder", get, "tok-bob", &b), 404);
    }
    expect_reviews(f, 1, 1);
    /* Denied, like kubectl, and cached as well. */
    const char *resign = "{\"namespace\":\"team\",\"name\":\"x\",\"identity\":\"a\"}";
    assert_int_equal(rpc(f, "Resign", resign, "tok-bob", &b), 403);
    assert_non_null(strstr(b.data, "\"permission_denied\""));
    assert_non_null(strstr(b.data,
                           "elections.kubelease.io \\\"x\\\" is forbidden: User "
                           "\\\"system:serviceaccount:team:bob\\\" cannot campaign resource "
                           "\\\"elections\\\" in API group \\\"kubelease.io\\\" in the namespace "
                           "\\\"team\\\""));
    assert_int_equal(rpc(f, "Resign", resign, "tok-bob", &b), 403);
    expect_reviews(f, 1, 3); /* the namespace's question, then this election's */
    /* Another namespace is another question. */
    assert_int_equal(rpc(f, "GetHolder", "{\"namespace\":\"other\",\"name\":\"x\"}", "tok-bob", &b),
                     403);
    assert_non_null(strstr(b.data, "in the namespace \\\"other\\\""));
    expect_reviews(f, 1, 5);
    /* The probes and the metrics need no token; the metrics count. */
    assert_int_equal(http(f->base, "/livez", NULL, NULL, NULL, 0, &b), 200);
    assert_int_equal(http(f->base, "/readyz", NULL, NULL, NULL, 0, &b), 200);
    assert_int_equal(http(f->base, "/metrics", NULL, NULL, NULL, 0, &b), 200);
    assert_non_null(strstr(
        b.data, "kubelease_auth_reviews_total{kind=\"TokenReview\",result=\"authenticated\"}"));
    assert_non_null(strstr(
        b.data, "kubelease_auth_reviews_total{kind=\"SubjectAccessReview\",result=\"denied\"}"));
    assert_non_null(strstr(b.data, "kubelease_auth_cache_hits_total{cache=\"access\"}"));
}

/* No answer from the apiserver is no access, and is not remembered. */
static void test_auth_fails_closed_when_the_apiserver_cannot_answer(void **state)
{
    fixture *f = *state;
    body b;
    fake_script(&f->api, 500, 201, 0);
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-alice", &b), 503);
    assert_non_null(strstr(b.data, "\"unavailable\""));
    assert_non_null(strstr(b.data, "the apiserver did not answer a TokenReview"));
    fake_script(&f->api, 403, 201, 0);
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-alice", &b), 503);
    assert_non_null(strstr(b.data, "kubeleased may not create tokenreviews"));
    fake_script(&f->api, 201, 500, 0);
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-alice", &b), 503);
    assert_non_null(strstr(b.data, "SubjectAccessReview"));
    fake_script(&f->api, 201, 201, 0);
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-alice", &b), 404);
    /* Once more with the apiserver gone altogether. */
    fake_stop(&f->api);
    assert_int_equal(
        rpc(f, "GetHolder", "{\"namespace\":\"elsewhere\",\"name\":\"x\"}", "tok-alice", &b), 503);
    assert_non_null(strstr(b.data, "cannot reach the apiserver"));
    fake_start(&f->api); /* teardown stops it */
}

/* kubelease_auth_cache_hits_total{cache="access"} on the server's /metrics. */
static double access_hits(const fixture *f)
{
    body b;
    assert_int_equal(http(f->base, "/metrics", NULL, NULL, NULL, 0, &b), 200);
    const char *k = "kubelease_auth_cache_hits_total{cache=\"access\"} ";
    const char *p = strstr(b.data, k);
    return p ? strtod(p + strlen(k), NULL) : 0;
}

/* Reviews whose answers kubeleased has handled (every kind and result of
 * kubelease_auth_reviews_total). */
static double handled_reviews(const fixture *f)
{
    body b;
    assert_int_equal(http(f->base, "/metrics", NULL, NULL, NULL, 0, &b), 200);
    double n = 0;
    for (const char *p = strstr(b.data, "\nkubelease_auth_reviews_total{"); p;
         p = strstr(p + 1, "\nkubelease_auth_reviews_total{")) {
        const char *v = strchr(p, '}');
        if (v)
            n += strtod(v + 1, NULL);
    }
    return n;
}

/* Until kubeleased has handled n review answers; each look is a request
 * to /metrics, and 20,000 of them (seconds) mean they are not coming. */
static void wait_handled(const fixture *f, double n)
{
    for (int i = 0; handled_reviews(f) < n; i++)
        if (i == 20000)
            fail_msg("kubeleased handled %.0f review answers, not %.0f", handled_reviews(f), n);
}

typedef struct sentinel {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool ran;
} sentinel;

static void sentinel_run(void *arg)
{
    sentinel *t = arg;
    pthread_mutex_lock(&t->mu);
    t->ran = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* Every review the stand-in was asked is answered and its answer cached:
 * kubeleased counted as many answers, and a task posted after them has
 * run on the loop thread (the one that caches them). */
static void settle(fixture *f)
{
    int tr, ar;
    fake_counts(&f->api, &tr, &ar, NULL);
    wait_handled(f, tr + ar);
    sentinel t = {.ran = false};
    pthread_mutex_init(&t.mu, NULL);
    pthread_cond_init(&t.cv, NULL);
    assert_int_equal(loop_post(f->l, sentinel_run, &t), 0);
    pthread_mutex_lock(&t.mu);
    while (!t.ran)
        pthread_cond_wait(&t.cv, &t.mu);
    pthread_mutex_unlock(&t.mu);
    pthread_cond_destroy(&t.cv);
    pthread_mutex_destroy(&t.mu);
}

/* A caller who keeps calling (a leader confirming) is answered from the
 * caches throughout: the answers are asked again before they expire. Yet
 * none is used past its expiry: a revoked grant is refused, and when the
 * apiserver stops answering, the calls fail closed. */
/* The call made now finds its answers due for refreshing (token and
 * access): it is answered from the cache while both are asked again, and
 * the two new answers are in when this returns. */
static void call_and_refresh(fixture *f, const char *token, long status)
{
    body b;
    double handled = handled_reviews(f);
    assert_int_equal(rpc(f, "GetHolder", GET_X, token, &b), status);
    wait_handled(f, handled + 2);
    settle(f);
}

static void test_auth_answers_are_refreshed_before_they_expire(void **state)
{
    fixture *f = *state;
    body b;
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 404);
    expect_reviews(f, 1, 1);
    double before = access_hits(f);
    /* Three lifetimes of an answer (2 s): asked again at three quarters of
     * each, the answers never expire while the calls go on. */
    for (int i = 0; i < 3; i++) {
        atomic_fetch_add(&clock_ms, 1499);
        assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 404);
        settle(f);
        expect_reviews(f, 1 + i, 1 + i); /* not due yet: nothing asked */
        atomic_fetch_add(&clock_ms, 1);
        call_and_refresh(f, "tok-bob", 404);
        expect_reviews(f, 2 + i, 2 + i);
    }
    printf("6 calls over 4.5 s, answers cached 2 s: %.0f answered from the cache\n",
           access_hits(f) - before);
    assert_int_equal(access_hits(f) - before, 6);

    /* The apiserver stops answering: at its expiry no answer is used, and
     * the calls fail closed. */
    fake_script(&f->api, 201, 500, 0);
    atomic_fetch_add(&clock_ms, 2000);
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 503);
    assert_non_null(strstr(b.data, "SubjectAccessReview"));
    fake_script(&f->api, 201, 201, 0);
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 404);
    settle(f);
    /* A revoked grant is refused once its answer is asked again. */
    fake_revoke(&f->api, "system:serviceaccount:team:bob get team");
    atomic_fetch_add(&clock_ms, 1500); /* three quarters of its life: asked again */
    call_and_refresh(f, "tok-bob", 404);
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 403);
    assert_non_null(strstr(b.data, "cannot get resource"));
}

static double refused_reviews(const fixture *f)
{
    body b;
    assert_int_equal(http(f->base, "/metrics", NULL, NULL, NULL, 0, &b), 200);
    const char *k =
        "kubelease_auth_reviews_total{kind=\"TokenReview\",result=\"unauthenticated\"} ";
    const char *p = strstr(b.data, k);
    return p ? strtod(p + strlen(k), NULL) : 0;
}

/* A token revoked while its accepted answer is cached (its ServiceAccount
 * deleted) is refused from the moment its answer is asked again: the
 * refusal replaces the accepted answer rather than waiting beside it for
 * the accepted one to expire. */
static void test_auth_revoked_token_is_refused_once_asked_again(void **state)
{
    fixture *f = *state;
    body b;
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 404);
    double refused = refused_reviews(f);
    fake_revoke_token(&f->api, "tok-bob");
    /* Answered from the cache until the answer is asked again, at three
     * quarters of its life. */
    atomic_fetch_add(&clock_ms, 1499);
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 404);
    settle(f);
    assert_true(refused_reviews(f) == refused);
    atomic_fetch_add(&clock_ms, 1);
    call_and_refresh(f, "tok-bob", 404);
    assert_true(refused_reviews(f) > refused);
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 401);
}

/* A flood of fresh bogus tokens from one address costs the apiserver its
 * --review-rate-per-ip and no more; the flood is told to slow down; a
 * caller already known keeps being answered from the cache (refused
 * tokens have a cache of their own and never evict it). */
static void test_auth_bogus_token_flood_is_bounded_by_the_rate(void **state)
{
    fixture *f = *state;
    body b;
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 404);
    expect_reviews(f, 1, 1);
    int64_t t0 = mono_ms();
    enum { FLOOD = 300 };
    int refused = 0, limited = 0;
    for (int i = 0; i < FLOOD; i++) {
        char tok[32];
        snprintf(tok, sizeof tok, "bogus-%d", i);
        long st = rpc(f, "GetHolder", GET_X, tok, &b);
        if (st == 401) {
            refused++;
        } else {
            assert_int_equal(st, 503);
            assert_non_null(strstr(b.data, "\"unavailable\""));
            assert_non_null(strstr(b.data, "over --review-rate-per-ip, 5 reviews a second"));
            assert_non_null(strstr(b.data, "retry in"));
            limited++;
        }
        if (i % 10 == 0)
            assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-bob", &b), 404);
    }
    double s = (double)(mono_ms() - t0) / 1000;
    int tr, ar;
    fake_counts(&f->api, &tr, &ar, NULL);
    printf("%d fresh bogus tokens in %.2f s: %d TokenReviews (%d refused, %d told to retry)\n",
           FLOOD, s, tr - 1, refused, limited);
    assert_true(tr - 1 <= 10 + 5 * s + 1);
    assert_int_equal(refused, tr - 1);
    assert_int_equal(ar, 1);
    /* The same bad token again is answered from the refused tokens' cache. */
    assert_int_equal(rpc(f, "GetHolder", GET_X, "bogus-0", &b), 401);
    expect_reviews(f, tr, 1);
}

/* --metrics-auth kubernetes: /metrics needs a token allowed get on the
 * non-resource URL /metrics, on both listeners (401 without a token or
 * with a bad one, 403 when not allowed, 200 when allowed, then cached);
 * the probes stay open. */
static void test_auth_metrics_need_a_token_allowed_get_on_metrics(void **state)
{
    fixture *f = *state;
    body b;
    fake_grant(&f->api, "system:serviceaccount:team:prom get /metrics");
    const char *bases[] = {f->base, f->ops};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(http(bases[i], "/livez", NULL, NULL, NULL, 0, &b), 200);
        assert_int_equal(http(bases[i], "/readyz", NULL, NULL, NULL, 0, &b), 200);
        assert_int_equal(http(bases[i], "/metrics", NULL, NULL, NULL, 0, &b), 401);
        assert_non_null(strstr(b.data, "unauthenticated: no credentials"));
        assert_non_null(strstr(b.data, "allowed get on /metrics"));
        assert_int_equal(http(bases[i], "/metrics", NULL, "nobody-knows-me", NULL, 0, &b), 401);
        assert_non_null(strstr(b.data, "the token is invalid"));
        /* alice may do everything to elections, nothing to /metrics. */
        assert_int_equal(http(bases[i], "/metrics", NULL, "tok-alice", NULL, 0, &b), 403);
        assert_non_null(strstr(b.data, "permission_denied: forbidden: User "
                                       "\"system:serviceaccount:team:alice\" cannot get path "
                                       "\"/metrics\""));
        assert_int_equal(http(bases[i], "/metrics", NULL, "tok-prom", NULL, 0, &b), 200);
        assert_non_null(strstr(b.data, "kubelease_auth_reviews_total"));
    }
    /* One review of each kind per caller, both listeners together. */
    expect_reviews(f, 3, 2);
    /* A token reviewed for /metrics (the apiserver's audience) is another
     * question than the same token for RPCs (kubeleased's audience). */
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-alice", &b), 404);
    expect_reviews(f, 4, 3);
}

static void test_auth_serviceaccount_identity_policy(void **state)
{
    fixture *f = *state;
    body b;
    const char *mine = "{\"namespace\":\"team\",\"name\":\"x\",\"identity\":\"team:alice:0\"}";
    const char *bare = "{\"namespace\":\"team\",\"name\":\"x\",\"identity\":\"team:alice\"}";
    const char *longer = "{\"namespace\":\"team\",\"name\":\"x\",\"identity\":\"team:alice2\"}";
    const char *other = "{\"namespace\":\"team\",\"name\":\"x\",\"identity\":\"team:bob\"}";
    assert_int_equal(rpc(f, "Resign", mine, "tok-alice", &b), 200);
    assert_int_equal(rpc(f, "Resign", bare, "tok-alice", &b), 200);
    assert_int_equal(rpc(f, "Resign", longer, "tok-alice", &b), 403);
    assert_non_null(strstr(b.data, "--identity-policy serviceaccount"));
    assert_int_equal(rpc(f, "Resign", other, "tok-alice", &b), 403);
    assert_non_null(strstr(b.data, "does not start with the caller's \\\"team:alice\\\""));
    /* Calls without an identity are not concerned. */
    assert_int_equal(rpc(f, "GetHolder", GET_X, "tok-alice", &b), 404);
}

static void test_auth_pod_identity_policy(void **state)
{
    fixture *f = *state;
    body b;
    const char *mine = "{\"namespace\":\"team\",\"name\":\"x\",\"identity\":\"kv-0\"}";
    const char *theirs = "{\"namespace\":\"team\",\"name\":\"x\",\"identity\":\"kv-1\"}";
    assert_int_equal(rpc(f, "Resign", mine, "pod-alice-kv-0", &b), 200);
    assert_int_equal(rpc(f, "Resign", theirs, "pod-alice-kv-0", &b), 403);
    assert_non_null(strstr(b.data, "is not the caller's pod team/kv-0"));
    /* The namespace is part of the Pod's identity: alice's Pod team/kv-0
     * is not kv-0 of another namespace, but may say so in full. */
    const char *other_ns = "{\"namespace\":\"other\",\"name\":\"x\",\"identity\":\"kv-0\"}";
    const char *qualified = "{\"namespace\":\"other\",\"name\":\"x\",\"identity\":\"team/kv-0\"}";
    const char *forged = "{\"namespace\":\"other\",\"name\":\"x\",\"identity\":\"other/kv-0\"}";
    assert_int_equal(rpc(f, "Resign", other_ns, "pod-alice-kv-0", &b), 403);
    assert_non_null(strstr(b.data, "--identity-policy pod"));
    assert_int_equal(rpc(f, "Resign", qualified, "pod-alice-kv-0", &b), 200);
    assert_int_equal(rpc(f, "Resign", forged, "pod-alice-kv-0", &b), 403);
    assert_int_equal(rpc(f, "Resign", mine, "tok-alice", &b), 403);
    assert_non_null(strstr(b.data, "not bound to a pod"));
    /* The policy holds for Confirm too (the engine then answers). */
    const char *confirm = "{\"namespace\":\"team\",\"name\":\"x\",\"identity\":\"kv-1\","
                          "\"epoch\":\"1\"}";
    assert_int_equal(rpc(f, "Confirm", confirm, "pod-alice-kv-0", &b), 403);
}

/* A campaign naming a Pod and a label (docs/design.md, rule 9): the label
 * is refused (the campaign goes on without it, and its stream says why)
 * when the token's pod claim names another Pod or another namespace, when
 * the token is bound to none, or when the key is not in --pod-label-keys.
 * The stream is read for 500 ms (Connect-Timeout-Ms). */
static long campaign_with_label(const fixture *f, const char *lease, const char *pod_ns,
                                const char *pod, const char *key, const char *token, body *b)
{
    char json[512], auth[512];
    uint8_t env[600];
    snprintf(json, sizeof json,
             "{\"namespace\":\"team\",\"name\":\"%s\",\"identity\":\"kv-0\","
             "\"leaseDurationSeconds\":15,\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":2,"
             "\"podNamespace\":\"%s\",\"podName\":\"%s\",\"podLabelKey\":\"%s\","
             "\"podLabelValue\":\"leader\"}",
             lease, pod_ns, pod, key);
    size_t n = strlen(json);
    kl__envelope_header(env, 0, (uint32_t)n);
    memcpy(env + 5, json, n);
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "%s/kubelease.v1.LeaseService/Campaign", f->base);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/connect+json");
    h = curl_slist_append(h, auth);
    h = curl_slist_append(h, "Connect-Timeout-Ms: 500");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)env);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(n + 5));
    memset(b, 0, sizeof *b);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_body_add);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return rc == CURLE_OK ? status : -1;
}

/* The stream's frames follow 5-byte envelope headers (NULs in them). */
static bool has(const body *b, const char *text)
{
    return memmem(b->data, b->len, text, strlen(text)) != NULL;
}

/* The campaign was elected and its label refused, saying why. */
static void expect_label_refused(const body *b, const char *why)
{
    assert_true(has(b, "\"elected\""));
    assert_true(has(b, "POD_LABEL_STATE_REFUSED"));
    if (!has(b, why))
        fail_msg("no \"%s\" in the stream: %.*s", why, (int)b->len, b->data);
}

static void test_auth_pod_label_only_on_the_callers_pod_and_allowed_keys(void **state)
{
    fixture *f = *state;
    body b;
    campaign_with_label(f, "x1", "", "kv-1", "example.com/role", "pod-alice-kv-0", &b);
    expect_label_refused(&b, "pod team/kv-1 is not the caller's pod team/kv-0");
    /* Her Pod's name in another namespace is not her Pod. */
    campaign_with_label(f, "x2", "other", "kv-0", "example.com/role", "pod-alice-kv-0", &b);
    expect_label_refused(&b, "pod other/kv-0 is not the caller's pod team/kv-0");
    campaign_with_label(f, "x3", "", "kv-0", "example.com/role", "tok-alice", &b);
    expect_label_refused(&b, "not bound to a pod");
    campaign_with_label(f, "x4", "", "kv-0", "example.com/other", "pod-alice-kv-0", &b);
    expect_label_refused(&b, "is not one of --pod-label-keys");
    /* Her own Pod: accepted. */
    campaign_with_label(f, "x5", "team", "kv-0", "example.com/role", "pod-alice-kv-0", &b);
    assert_true(has(&b, "POD_LABEL_STATE_ACCEPTED"));
    assert_false(has(&b, "POD_LABEL_STATE_REFUSED"));
    /* SetPodLabel of a Pod not hers is refused before the engine. */
    const char *set = "{\"namespace\":\"team\",\"name\":\"x1\",\"identity\":\"kv-0\","
                      "\"podNamespace\":\"other\",\"podName\":\"kv-0\","
                      "\"podLabelKey\":\"example.com/role\"}";
    assert_int_equal(rpc(f, "SetPodLabel", set, "pod-alice-kv-0", &b), 403);
    assert_non_null(strstr(b.data, "pod other/kv-0 is not the caller's pod team/kv-0"));
}

typedef struct stream_arg {
    const fixture *f;
    char json[256];
    long status;
    body b;
} stream_arg;

static void *campaign(void *arg)
{
    stream_arg *a = arg;
    uint8_t env[512];
    size_t n = strlen(a->json);
    kl__envelope_header(env, 0, (uint32_t)n);
    memcpy(env + 5, a->json, n);
    a->status = http(a->f->base, "/kubelease.v1.LeaseService/Campaign", "application/connect+json",
                     "tok-alice", env, n + 5, &a->b);
    return NULL;
}

/* Starts a campaign of alice's for ns/name and waits until it leads. */
static void lead(fixture *f, stream_arg *a, const char *ns, const char *name)
{
    a->f = f;
    snprintf(a->json, sizeof a->json,
             "{\"namespace\":\"%s\",\"name\":\"%s\",\"identity\":\"a\",\"leaseDurationSeconds\":15,"
             "\"renewDeadlineSeconds\":10,\"retryPeriodSeconds\":2}",
             ns, name);
    pthread_create(&f->streams[f->n_streams++], NULL, campaign, a);
    char get[128];
    snprintf(get, sizeof get, "{\"namespace\":\"%s\",\"name\":\"%s\"}", ns, name);
    body b;
    for (int i = 0; i < 20000; i++) /* each look is a GetHolder: seconds in all */
        if (rpc(f, "GetHolder", get, "tok-alice", &b) == 200 && strstr(b.data, "\"holder\":\"a\""))
            return;
    fail_msg("%s/%s was not elected: %s", ns, name, b.data);
}

static void test_auth_list_and_status_page_show_only_what_the_caller_may_list(void **state)
{
    fixture *f = *state;
    stream_arg in_team, elsewhere;
    lead(f, &in_team, "team", "mine");
    lead(f, &elsewhere, "secret", "theirs");
    body b;
    /* alice may list everywhere. */
    assert_int_equal(rpc(f, "ListLeases", "{}", "tok-alice", &b), 200);
    assert_non_null(strstr(b.data, "\"mine\""));
    assert_non_null(strstr(b.data, "\"theirs\""));
    /* carol only in team: the rest is left out, not refused. */
    assert_int_equal(rpc(f, "ListLeases", "{}", "tok-carol", &b), 200);
    assert_non_null(strstr(b.data, "\"mine\""));
    assert_null(strstr(b.data, "\"theirs\""));
    assert_int_equal(rpc(f, "ListLeases", "{\"namespace\":\"team\"}", "tok-carol", &b), 200);
    assert_non_null(strstr(b.data, "\"mine\""));
    assert_int_equal(rpc(f, "ListLeases", "{\"namespace\":\"secret\"}", "tok-carol", &b), 403);
    assert_non_null(strstr(b.data, "cannot list resource \\\"elections\\\" in API group "
                                   "\\\"kubelease.io\\\" in the namespace \\\"secret\\\""));
    /* bob may list nowhere: an empty list. */
    assert_int_equal(rpc(f, "ListLeases", "{}", "tok-bob", &b), 200);
    assert_string_equal(b.data, "{}");
    /* The status page: without credentials (a browser's navigation), the
     * page without rows; with them, narrowed the same way. */
    assert_int_equal(http(f->base, "/", NULL, NULL, NULL, 0, &b), 200);
    assert_non_null(strstr(b.data, "<form id=\"auth\""));
    assert_null(strstr(b.data, "mine"));
    assert_null(strstr(b.data, "theirs"));
    assert_int_equal(http(f->base, "/", NULL, "tok-carol", NULL, 0, &b), 200);
    assert_non_null(strstr(b.data, "<div class=\"lease\">mine</div>"));
    assert_null(strstr(b.data, "theirs"));
    assert_int_equal(http_call(f->base, "/", NULL, "Authorization: Basic YTpi", NULL, 0, &b), 401);
    assert_non_null(strstr(b.data, "is not \"Bearer <token>\""));
    /* /leases, the page's data: ListLeases narrowed alike, in JSON. */
    assert_int_equal(http(f->base, "/leases", NULL, "tok-alice", NULL, 0, &b), 200);
    assert_non_null(strstr(b.data, "\"mine\""));
    assert_non_null(strstr(b.data, "\"theirs\""));
    assert_int_equal(http(f->base, "/leases", NULL, "tok-carol", NULL, 0, &b), 200);
    assert_non_null(strstr(b.data, "\"mine\""));
    assert_null(strstr(b.data, "theirs"));
    /* A query selects nothing: the namespace is not a parameter here. */
    assert_int_equal(http(f->base, "/leases?namespace=secret", NULL, "tok-carol", NULL, 0, &b),
                     200);
    assert_non_null(strstr(b.data, "\"mine\""));
    assert_null(strstr(b.data, "theirs"));
    /* bob may list no Lease here: said, rather than an empty list. */
    assert_int_equal(http(f->base, "/leases", NULL, "tok-bob", NULL, 0, &b), 403);
    assert_non_null(strstr(b.data, "\"code\":\"permission_denied\""));
    assert_non_null(strstr(b.data, "may list none of the elections served here"));
    /* Bad credentials and requests: refused, with what is wrong. */
    assert_int_equal(http(f->base, "/leases", NULL, NULL, NULL, 0, &b), 401);
    assert_non_null(strstr(b.data, "\"code\":\"unauthenticated\""));
    assert_non_null(strstr(b.data, "no credentials"));
    assert_int_equal(http_call(f->base, "/leases", NULL, "Authorization: Basic YTpi", NULL, 0, &b),
                     401);
    assert_non_null(strstr(b.data, "is not \\\"Bearer <token>\\\""));
    assert_int_equal(
        http_call(f->base, "/leases", NULL, "Authorization: Bearer a\x01b", NULL, 0, &b), 401);
    assert_non_null(strstr(b.data, "holds characters no token has"));
    assert_int_equal(http(f->base, "/leases", "application/json", "tok-alice", "{}", 2, &b), 405);
    assert_int_equal(http(f->base, "/leases/x", NULL, "tok-alice", NULL, 0, &b), 404);
    /* When the apiserver cannot say, nothing is shown. */
    fake_script(&f->api, 201, 500, 0);
    assert_int_equal(rpc(f, "ListLeases", "{}", "tok-dave", &b), 503);
    fake_script(&f->api, 201, 201, 0);
}

typedef struct pending {
    const fixture *f;
    long status;
    body b;
} pending;

static void *call_pending(void *arg)
{
    pending *p = arg;
    p->status = rpc(p->f, "GetHolder", GET_X, "tok-alice", &p->b);
    return NULL;
}

/* A call waiting for a review when the service stops is answered. */
static void test_auth_review_in_flight_at_shutdown_ends_the_call(void **state)
{
    fixture *f = *state;
    pending p = {.f = f};
    pthread_t t;
    fake_script(&f->api, 201, 201, 1);
    pthread_create(&t, NULL, call_pending, &p);
    fake_wait_held(&f->api, 1); /* the call waits for the review held there */
    http_server_quiesce(f->srv);
    engine_stop(f->e);
    pthread_join(f->tid, NULL);
    engine_free(f->e);
    http_server_finish(f->srv, 3000);
    pthread_join(t, NULL);
    assert_int_equal(p.status, 503);
    assert_non_null(strstr(p.b.data, "shutting down"));
    http_server_stop(f->srv);
    f->srv = NULL;
    kube_client_free(f->kube);
    store_free(f->st);
    loop_free(f->l);
    fake_stop(&f->api);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    metrics_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_auth_missing_malformed_invalid_expired_and_wrong_audience_tokens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth_allowed_and_denied_calls_are_cached, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_auth_revoked_token_is_refused_once_asked_again,
                                        setup_short_ttl, teardown),
        cmocka_unit_test_setup_teardown(test_auth_answers_are_refreshed_before_they_expire,
                                        setup_short_ttl, teardown),
        cmocka_unit_test_setup_teardown(test_auth_fails_closed_when_the_apiserver_cannot_answer,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth_bogus_token_flood_is_bounded_by_the_rate,
                                        setup_rate, teardown),
        cmocka_unit_test_setup_teardown(test_auth_metrics_need_a_token_allowed_get_on_metrics,
                                        setup_metrics, teardown),
        cmocka_unit_test_setup_teardown(test_auth_serviceaccount_identity_policy, setup_sa,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_auth_pod_identity_policy, setup_pod, teardown),
        cmocka_unit_test_setup_teardown(
            test_auth_pod_label_only_on_the_callers_pod_and_allowed_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_auth_list_and_status_page_show_only_what_the_caller_may_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth_review_in_flight_at_shutdown_ends_the_call, setup,
                                        teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
