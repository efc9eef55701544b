/* The kube store's watch logic on recorded apiserver responses, replayed by
 * a scripted HTTP server on 127.0.0.1: bookmarks move the resume point, a
 * stream cut mid-event is reported BROKEN and resumed from the last
 * resourceVersion with the state re-reported, and 410 Gone — as a watch
 * ERROR event and as an HTTP status — leads to a relist that reports
 * deletions. (The real apiserver is exercised by the integration test.) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/loop.h"
#include "store/kube.h"

#define LEASE(rv, holder)                                                                          \
    "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":"        \
    "\"demo\",\"namespace\":\"ns1\",\"resourceVersion\":\"" rv "\"},\"spec\":{"                    \
    "\"holderIdentity\":\"" holder "\",\"leaseDurationSeconds\":15,\"leaseTransitions\":1}}"
#define LIST(rv, items)                                                                            \
    "{\"kind\":\"LeaseList\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{"             \
    "\"resourceVersion\":\"" rv "\"},\"items\":[" items "]}"

typedef enum step_kind { BODY, STREAM_CUT, STREAM_HOLD } step_kind;
typedef struct step {
    const char *expect; /* substring of the request line */
    step_kind kind;
    int status;
    const char *body; /* BODY: the whole body; streams: chunks separated by '|' */
} step;

static const step script[] = {
    {"GET /apis/coordination.k8s.io/v1/namespaces/ns1/leases?fieldSelector=metadata.name%3Ddemo "
     "HTTP",
     BODY, 200, LIST("100", LEASE("90", "a"))},
    {"resourceVersion=100&allowWatchBookmarks=true", STREAM_CUT, 200,
     "{\"type\":\"MODIFIED\",\"object\":" LEASE("101",
                                                "b") "}\n|"
                                                     "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":"
                                                     "\"Lease\",\"metadata\":{\"resourceVersion\":"
                                                     "\"150\"}}}\n|{\"type\":\"MODIFIED\",\"obj"},
    {"resourceVersion=150&", STREAM_HOLD, 200,
     "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
     "\"status\":\"Failure\",\"message\":\"too old resource version: 150 (280)\",\"reason\":"
     "\"Expired\",\"code\":410}}\n"},
    {"leases?fieldSelector=metadata.name%3Ddemo HTTP", BODY, 200, LIST("300", "")},
    {"resourceVersion=300&", BODY, 410,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"too old resource version\",\"reason\":\"Expired\",\"code\":410}"},
    {"leases?fieldSelector=metadata.name%3Ddemo HTTP", BODY, 200, LIST("400", LEASE("399", "c"))},
    {"resourceVersion=400&", STREAM_HOLD, 200, ""},
};
#define N_STEPS (int)(sizeof script / sizeof script[0])

static int listen_fd, port;
static pthread_t server_thread, loop_thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int steps_served, steps_started;
static char failure[512];
static bool saw_bearer = true;

static void send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void send_chunk(int fd, const char *s, size_t n)
{
    char hdr[32];
    snprintf(hdr, sizeof hdr, "%zx\r\n", n);
    send_all(fd, hdr, strlen(hdr));
    send_all(fd, s, n);
    send_all(fd, "\r\n", 2);
}

static void *server_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < N_STEPS; i++) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        char req[8192];
        size_t len = 0;
        req[0] = 0;
        while (len < sizeof req - 1 && !strstr(req, "\r\n\r\n")) {
            ssize_t r = recv(fd, req + len, sizeof req - 1 - len, 0);
            if (r <= 0)
                break;
            len += (size_t)r;
            req[len] = 0;
        }
        const step *st = &script[i];
        pthread_mutex_lock(&mu);
        if (!strstr(req, st->expect) && !failure[0])
            snprintf(failure, sizeof failure, "step %d: request \"%.200s\" lacks \"%s\"", i, req,
                     st->expect);
        if (!strstr(req, "Authorization: Bearer replay-token\r\n"))
            saw_bearer = false;
        steps_started = i + 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        char head[256];
        if (st->kind == BODY) {
            snprintf(head, sizeof head,
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     st->status, strlen(st->body));
            send_all(fd, head, strlen(head));
            send_all(fd, st->body, strlen(st->body));
        } else {
            snprintf(head, sizeof head,
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                     st->status);
            send_all(fd, head, strlen(head));
            char *copy = strdup(st->body);
            for (char *save, *c = strtok_r(copy, "|", &save); c; c = strtok_r(NULL, "|", &save))
                send_chunk(fd, c, strlen(c));
            free(copy);
            if (st->kind == STREAM_HOLD) {
                /* Until the client goes away. */
                char b[256];
                while (recv(fd, b, sizeof b, 0) > 0)
                    ;
            }
            /* STREAM_CUT: close without the last chunk: a broken stream. */
        }
        /* Half-close and drain, so that no RST discards what we sent. */
        shutdown(fd, SHUT_WR);
        char b[256];
        while (recv(fd, b, sizeof b, 0) > 0)
            ;
        close(fd);
        pthread_mutex_lock(&mu);
        steps_served = i + 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
    return NULL;
}

/* ---- the consumer side ---- */

static loop *lp;
static store *st_;
static store_watch *w_;

typedef struct ev {
    store_event_type type;
    char rv[STORE_RV_MAX];
    char holder[STORE_HOLDER_MAX];
} ev;
static ev evs[64];
static int n_evs;

static void on_watch(void *ctx, store_event_type type, const store_lease *lease)
{
    (void)ctx;
    pthread_mutex_lock(&mu);
    if (n_evs < 64) {
        evs[n_evs].type = type;
        if (lease) {
            snprintf(evs[n_evs].rv, sizeof evs[n_evs].rv, "%s", lease->resource_version);
            snprintf(evs[n_evs].holder, sizeof evs[n_evs].holder, "%s", lease->holder);
        }
        n_evs++;
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void *loop_main(void *arg)
{
    (void)arg;
    loop_run(lp);
    return NULL;
}

static void start_watch(void *arg)
{
    (void)arg;
    w_ = st_->ops->watch(st_, "ns1", "demo", on_watch, NULL);
}

static void stop_all(void *arg)
{
    (void)arg;
    st_->ops->unwatch(st_, w_);
    store_free(st_);
    loop_stop(lp);
}

static void test_kube_store_replay_bookmark_break_and_410(void **state)
{
    (void)state;
    /* The scripted server. */
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(listen_fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(listen_fd, (struct sockaddr *)&a, &al), 0);
    port = ntohs(a.sin_port);
    assert_int_equal(listen(listen_fd, 8), 0);
    assert_int_equal(pthread_create(&server_thread, NULL, server_main, NULL), 0);

    /* A kubeconfig pointing at it. */
    char dir[] = "/tmp/kl-replay-XXXXXX", kc[300], err[512];
    assert_non_null(mkdtemp(dir));
    snprintf(kc, sizeof kc, "%s/config", dir);
    FILE *f = fopen(kc, "w");
    assert_non_null(f);
    fprintf(f,
            "current-context: r\ncontexts:\n- name: r\n  context: {cluster: r, user: r}\n"
            "clusters:\n- name: r\n  cluster: {server: 'http://127.0.0.1:%d'}\n"
            "users:\n- name: r\n  user: {token: replay-token}\n",
            port);
    fclose(f);

    lp = loop_new();
    assert_non_null(lp);
    /* The replaying server speaks plain HTTP: the token may go there only
     * because the test says so. */
    store_kube_opts o = {.kubeconfig = kc, .allow_token_over_http = true};
    st_ = store_kube_new(lp, &o, err, sizeof err);
    if (!st_)
        fail_msg("store_kube_new: %s", err);
    assert_int_equal(loop_post(lp, start_watch, NULL), 0);
    assert_int_equal(pthread_create(&loop_thread, NULL, loop_main, NULL), 0);

    /* Wait until the last step (the held watch from rv 400) is being served
     * and the final SYNCED has arrived. */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 20;
    pthread_mutex_lock(&mu);
    while (!(n_evs >= 10 && steps_started == N_STEPS) && !failure[0])
        if (pthread_cond_timedwait(&cv, &mu, &dl) != 0)
            break;
    pthread_mutex_unlock(&mu);
    assert_int_equal(loop_post(lp, stop_all, NULL), 0);
    pthread_join(loop_thread, NULL);
    loop_free(lp);
    shutdown(listen_fd, SHUT_RDWR); /* a server still waiting in accept() gives up */
    pthread_join(server_thread, NULL);
    close(listen_fd);

    if (failure[0])
        fail_msg("%s", failure);
    assert_true(saw_bearer);
    assert_int_equal(steps_served, N_STEPS);
    const struct {
        store_event_type type;
        const char *rv, *holder;
    } want[] = {
        {STORE_EVENT_PUT, "90", "a"},     {STORE_EVENT_SYNCED, "", ""},
        {STORE_EVENT_PUT, "101", "b"},    {STORE_EVENT_BROKEN, "", ""},
        {STORE_EVENT_PUT, "101", "b"},    {STORE_EVENT_SYNCED, "", ""},
        {STORE_EVENT_DELETE, "101", "b"}, {STORE_EVENT_SYNCED, "", ""},
        {STORE_EVENT_PUT, "399", "c"},    {STORE_EVENT_SYNCED, "", ""},
    };
    int nw = (int)(sizeof want / sizeof want[0]);
    if (n_evs != nw) {
        for (int i = 0; i < n_evs; i++)
            fprintf(stderr, "event %d: type %d rv %s\n", i, evs[i].type, evs[i].rv);
        fail_msg("%d events, want %d", n_evs, nw);
    }
    for (int i = 0; i < nw; i++) {
        assert_int_equal(evs[i].type, want[i].type);
        assert_string_equal(evs[i].rv, want[i].rv);
        assert_string_equal(evs[i].holder, want[i].holder);
    }
    char cmd[100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kube_store_replay_bookmark_break_and_410),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
