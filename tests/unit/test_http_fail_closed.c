/* Fail closed: a security setting the HTTP server cannot build stops its
 * start; it never serves without it. Every allocation http_server_start
 * makes fails in turn (curl's torture habit): each start either fails with
 * a reason, or serves exactly the namespaces it was given.
 *
 * The allocator is wrapped at link time (tests/CMakeLists.txt gives this
 * test -Wl,--wrap=malloc,...), and only the test's own thread fails:
 * libmicrohttpd's, the engine's and the timer's allocations go through. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "core/loop.h"
#include "engine/engine.h"
#include "http/server.h"
#include "store/memory.h"
#include "store/store.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);

static _Thread_local long fail_in = -1; /* allocations before one fails; -1: none */
static _Thread_local bool failed;

static bool fail_now(void)
{
    if (fail_in < 0 || fail_in-- > 0)
        return false;
    failed = true;
    return true;
}

void *__wrap_malloc(size_t n)
{
    return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    return fail_now() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
    return fail_now() ? NULL : __real_strdup(s);
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p;
    (void)ctx;
    return size * n;
}

/* GetHolder of ns/db; returns the HTTP status. */
static long get_holder(uint16_t port, const char *ns)
{
    char url[128], body[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/kubelease.v1.LeaseService/GetHolder",
             (unsigned)port);
    snprintf(body, sizeof body, "{\"namespace\":\"%s\",\"name\":\"db\"}", ns);
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

static void *run_engine(void *arg)
{
    engine_run(arg);
    return NULL;
}

static void test_http_start_fails_closed_when_allocations_fail(void **state)
{
    (void)state;
    loop *l = loop_new();
    store *st = store_memory_new(l);
    engine_config ec = {.loop = l, .store = st};
    engine *e = engine_new(&ec);
    pthread_t tid;
    pthread_create(&tid, NULL, run_engine, e);
    const char *const namespaces[] = {"team-a", NULL};
    http_config hc = {.listen = "127.0.0.1:0", .engine = e, .namespaces = namespaces};
    bool said_allow_list = false;
    int refused = 0;
    for (long k = 0;; k++) {
        char err[256] = "";
        fail_in = k;
        failed = false;
        http_server *srv = http_server_start(&hc, err, sizeof err);
        fail_in = -1;
        if (!srv) {
            if (!failed || !err[0])
                fail_msg("allocation %ld failed: the start failed without a reason", k);
            said_allow_list |= strstr(err, "cannot build the namespace allow-list") != NULL;
            refused++;
            continue;
        }
        /* Started: with exactly its allow-list, whatever failed. */
        long other = get_holder(http_server_port(srv), "team-b");
        long mine = get_holder(http_server_port(srv), "team-a");
        http_server_quiesce(srv);
        http_server_finish(srv, 1000);
        http_server_stop(srv);
        if (other != 403 || mine != 404)
            fail_msg("allocation %ld failed, yet the server started and answered team-b %ld "
                     "(want 403 permission_denied) and team-a %ld (want 404)",
                     k, other, mine);
        if (!failed)
            break; /* past the last allocation: a normal start */
    }
    printf("%d starts refused, one per allocation that failed\n", refused);
    assert_true(refused > 0);
    assert_true(said_allow_list);
    engine_stop(e);
    pthread_join(tid, NULL);
    engine_free(e);
    store_free(st);
    loop_free(l);
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_start_fails_closed_when_allocations_fail),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
