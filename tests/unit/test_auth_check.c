/* The authorizer alone (server/auth/): auth_check against the stand-in
 * apiserver, its loop on a thread of its own and its clock moved by hand,
 * so that expiry is exact and nothing sleeps: concurrent first checks of
 * one token share one TokenReview and one SubjectAccessReview, cached
 * answers hold until their last millisecond and not one past it, and
 * checks the loop never answered are dropped when the authorizer is
 * freed. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "auth/auth.h"
#include "core/loop.h"
#include "kube/client.h"
#include "unit/fake_reviews.h"

#define T0     1000000 /* where the clock starts */
#define TTL_MS 2000    /* every answer's lifetime here */

/* The loop's clock: read by the loop thread and by auth_check's callers. */
static _Atomic int64_t now_ms;

static int64_t clock_read(void *ctx)
{
    (void)ctx;
    return atomic_load(&now_ms);
}

typedef struct fixture {
    fake_apiserver api;
    loop *l;
    kube_client *kube;
    auth_ctx *a;
    pthread_t tid;
    bool running;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, dropped, allowed, sentinels; /* under mu */
} fixture;

static void *run_loop(void *arg)
{
    loop_run(arg);
    return NULL;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (fake_start(&f->api) != 0)
        fail_msg("cannot start the stand-in apiserver");
    atomic_store(&now_ms, T0);
    f->l = loop_new();
    loop_set_clock(f->l, clock_read, NULL);
    kube_config kc = {0};
    char server[64], err[256];
    snprintf(server, sizeof server, "http://127.0.0.1:%d", f->api.port);
    kc.server = strdup(server);
    f->kube = kube_client_new(f->l, &kc, err, sizeof err);
    if (!f->kube)
        fail_msg("kube_client_new: %s", err);
    auth_config cfg = {.loop = f->l,
                       .kube = f->kube,
                       .token_ttl_ms = TTL_MS,
                       .negative_ttl_ms = TTL_MS,
                       .access_ttl_ms = TTL_MS};
    f->a = auth_new(&cfg);
    assert_non_null(f->a);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    pthread_create(&f->tid, NULL, run_loop, f->l);
    f->running = true;
    fake_grant(&f->api, "system:serviceaccount:team:alice get *");
    *state = f;
    return 0;
}

static void stop_loop(fixture *f)
{
    if (!f->running)
        return;
    loop_stop(f->l);
    pthread_join(f->tid, NULL);
    f->running = false;
}

static int teardown(void **state)
{
    fixture *f = *state;
    stop_loop(f);
    auth_free(f->a);
    kube_client_free(f->kube);
    loop_free(f->l);
    fake_stop(&f->api);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
    return 0;
}

static void on_done(void *ctx, auth_verdict *v)
{
    fixture *f = ctx;
    auth_subject_unref(v->narrow);
    pthread_mutex_lock(&f->mu);
    f->done++;
    f->allowed += v->result == AUTH_ALLOWED;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void on_drop(void *ctx)
{
    fixture *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->dropped++;
    pthread_mutex_unlock(&f->mu);
}

static void sentinel(void *arg)
{
    fixture *f = arg;
    pthread_mutex_lock(&f->mu);
    f->sentinels++;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Every task posted so far has run on the loop thread (tasks run in
 * posting order). */
static void loop_caught_up(fixture *f)
{
    pthread_mutex_lock(&f->mu);
    int want = f->sentinels + 1;
    pthread_mutex_unlock(&f->mu);
    assert_int_equal(loop_post(f->l, sentinel, f), 0);
    pthread_mutex_lock(&f->mu);
    while (f->sentinels < want)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static void wait_done(fixture *f, int n)
{
    pthread_mutex_lock(&f->mu);
    while (f->done < n)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

static const auth_action get_x = {.verb = "get", .ns = "team", .name = "x"};

static auth_result check(fixture *f, const char *token, bool ask)
{
    auth_verdict v;
    auth_result r = auth_check(f->a, token, strlen(token), &get_x, &v, ask ? on_done : NULL,
                               ask ? on_drop : NULL, f);
    if (r == AUTH_ALLOWED)
        auth_subject_unref(v.narrow);
    return r;
}

static void expect_reviews(fixture *f, int token_reviews, int access_reviews)
{
    int t, a;
    fake_counts(&f->api, &t, &a, NULL);
    assert_int_equal(t, token_reviews);
    assert_int_equal(a, access_reviews);
}

/* N checks of one token arriving while its first review is in flight wait
 * on it: one TokenReview, then one SubjectAccessReview, for all. */
static void test_auth_concurrent_checks_of_one_token_share_one_review(void **state)
{
    fixture *f = *state;
    enum { N = 16 };
    fake_script(&f->api, 201, 201, 1);
    for (int i = 0; i < N; i++)
        assert_int_equal(check(f, "tok-alice", true), AUTH_PENDING);
    fake_wait_held(&f->api, 1); /* the review is at the apiserver */
    loop_caught_up(f);          /* and every check has run and joined it */
    fake_script(&f->api, 201, 201, 0);
    wait_done(f, N);
    assert_int_equal(f->allowed, N);
    int tr, ar;
    fake_counts(&f->api, &tr, &ar, NULL);
    printf("%d concurrent checks of one token: %d TokenReview(s), %d SubjectAccessReview(s)\n", N,
           tr, ar);
    expect_reviews(f, 1, 1);
    /* And the answers are cached now. */
    assert_int_equal(check(f, "tok-alice", false), AUTH_ALLOWED);
    expect_reviews(f, 1, 1);
}

/* A cached answer holds until the last millisecond of its life, and not
 * one past it; the caches look only (done NULL) without asking. */
static void test_auth_cached_answers_expire_on_the_loops_clock(void **state)
{
    fixture *f = *state;
    assert_int_equal(check(f, "tok-alice", false), AUTH_PENDING); /* nothing known, nothing asked */
    expect_reviews(f, 0, 0);
    assert_int_equal(check(f, "tok-alice", true), AUTH_PENDING);
    wait_done(f, 1);
    assert_int_equal(f->allowed, 1);
    expect_reviews(f, 1, 1);
    /* Three quarters into their life the answers are used and asked again
     * (in the background: the refresh is cached when it is in). */
    atomic_store(&now_ms, T0 + TTL_MS * 3 / 4 - 1);
    assert_int_equal(check(f, "tok-alice", false), AUTH_ALLOWED);
    loop_caught_up(f);
    expect_reviews(f, 1, 1); /* not due yet: nothing asked */
    atomic_store(&now_ms, T0 + TTL_MS - 1);
    fake_script(&f->api, 201, 201, 1); /* the refreshes stay at the apiserver */
    assert_int_equal(check(f, "tok-alice", false), AUTH_ALLOWED);
    loop_caught_up(f);
    /* At its expiry no answer is used, whatever is in flight. */
    atomic_store(&now_ms, T0 + TTL_MS);
    assert_int_equal(check(f, "tok-alice", false), AUTH_PENDING);
    fake_script(&f->api, 201, 201, 0);
}

/* The loop stops with checks waiting for the apiserver: freeing the
 * authorizer drops them (their done never runs). */
static void test_auth_checks_never_answered_are_dropped_at_free(void **state)
{
    fixture *f = *state;
    fake_script(&f->api, 201, 201, 1);
    for (int i = 0; i < 3; i++)
        assert_int_equal(check(f, "tok-alice", true), AUTH_PENDING);
    fake_wait_held(&f->api, 1);
    loop_caught_up(f);
    stop_loop(f);
    auth_free(f->a);
    f->a = NULL;
    assert_int_equal(f->dropped, 3);
    assert_int_equal(f->done, 0);
    fake_script(&f->api, 201, 201, 0);
}

int main(void)
{
    (void)fake_revoke; /* fake_reviews.h's, for test_http_auth */
    (void)fake_revoke_token;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_auth_concurrent_checks_of_one_token_share_one_review,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(test_auth_cached_answers_expire_on_the_loops_clock, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_auth_checks_never_answered_are_dropped_at_free, setup,
                                        teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
