/* The kube store's watch logic on recorded apiserver responses, replayed by
 * a scripted HTTP server on 127.0.0.1: bookmarks move the resume point, a
 * stream cut mid-event is reported BROKEN and resumed from the last
 * resourceVersion with the state re-reported, and 410 Gone — as a watch
 * ERROR event and as an HTTP status — leads to a relist that reports
 * deletions. Watches of one namespace share one list and one stream, each
 * consumer hearing what concerns it, and the stream stops with the last
 * consumer. (The real apiserver is exercised by the integration test.) */
#include <arpa/inet.h>
#include <fcntl.h>
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

#define NAMED(name, rv, holder)                                                                    \
    "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":\"" name \
    "\",\"namespace\":\"ns1\",\"resourceVersion\":\"" rv "\"},\"spec\":{"                          \
    "\"holderIdentity\":\"" holder "\",\"leaseDurationSeconds\":15,\"leaseTransitions\":1}}"
#define LEASE(rv, holder) NAMED("demo", rv, holder)
/* A Lease whose spec cannot be decoded. */
#define UNDECODABLE(name, rv)                                                                      \
    "{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1\",\"metadata\":{\"name\":\"" name \
    "\",\"namespace\":\"ns1\",\"resourceVersion\":\"" rv "\"},\"spec\":{"                          \
    "\"leaseDurationSeconds\":\"fifteen\"}}"
#define EVENT(type, lease) "{\"type\":\"" type "\",\"object\":" lease "}\n"
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

#define LIST_NS1 "GET /apis/coordination.k8s.io/v1/namespaces/ns1/leases HTTP"

static const step break_script[] = {
    {LIST_NS1, BODY, 200, LIST("100", LEASE("90", "a"))},
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
    {LIST_NS1, BODY, 200, LIST("300", "")},
    {"resourceVersion=300&", BODY, 410,
     "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
     "\"message\":\"too old resource version\",\"reason\":\"Expired\",\"code\":410}"},
    {LIST_NS1, BODY, 200, LIST("400", LEASE("399", "c"))},
    {"resourceVersion=400&", STREAM_HOLD, 200, ""},
};

/* One list and one stream for every consumer of ns1. */
static const step shared_script[] = {
    {LIST_NS1, BODY, 200,
     LIST("100", LEASE("90", "a") "," NAMED("other", "91", "x") "," NAMED(
                     "zed", "92", "z") "," UNDECODABLE("bad", "93"))},
    {"resourceVersion=100&", STREAM_HOLD, 200,
     EVENT("MODIFIED", LEASE("101", "b")) EVENT("MODIFIED", NAMED("other", "102", "y"))
         EVENT("DELETED", NAMED("zed", "103", "z")) EVENT("ADDED", NAMED("new", "104", "n"))},
};

static const step *script;
static int N_STEPS;

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
static char dir[64];

/* Consumers are numbered; ctx is the number. */
enum { C_DEMO, C_OTHER, C_ABSENT, C_BAD, C_ALL, C_LATE, N_CONSUMERS };
static store_watch *watches[N_CONSUMERS];

typedef struct ev {
    int consumer;
    store_event_type type;
    char name[STORE_NAME_MAX];
    char rv[STORE_RV_MAX];
    char holder[STORE_HOLDER_MAX];
} ev;
static ev evs[64];
static int n_evs;

static void on_watch(void *ctx, store_event_type type, const store_lease *lease)
{
    pthread_mutex_lock(&mu);
    if (n_evs < 64) {
        ev *e = &evs[n_evs++];
        memset(e, 0, sizeof *e);
        e->consumer = (int)(intptr_t)ctx;
        e->type = type;
        if (lease) {
            snprintf(e->name, sizeof e->name, "%s", lease->name);
            snprintf(e->rv, sizeof e->rv, "%s", lease->resource_version);
            snprintf(e->holder, sizeof e->holder, "%s", lease->holder);
        }
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

/* Serves sc on 127.0.0.1 and makes a kube store for it, its loop running. */
static void start(const step *sc, int n)
{
    script = sc;
    N_STEPS = n;
    steps_served = steps_started = n_evs = 0;
    failure[0] = 0;
    saw_bearer = true;
    memset(watches, 0, sizeof watches);
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
    char kc[300], err[512];
    snprintf(dir, sizeof dir, "/tmp/kl-replay-XXXXXX");
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
    assert_int_equal(pthread_create(&loop_thread, NULL, loop_main, NULL), 0);
}

/* Waits until pred() holds (under mu), for at most 20 s. */
static bool wait_for(bool (*pred)(void))
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 20;
    pthread_mutex_lock(&mu);
    bool ok;
    while (!(ok = pred()) && !failure[0])
        if (pthread_cond_timedwait(&cv, &mu, &dl) != 0)
            break;
    pthread_mutex_unlock(&mu);
    return ok;
}

static void stop_all(void *arg)
{
    (void)arg;
    for (int i = 0; i < N_CONSUMERS; i++)
        st_->ops->unwatch(st_, watches[i]);
    store_free(st_);
    loop_stop(lp);
}

/* Stops the store and the server; fails on what the server saw wrong. */
static void finish(void)
{
    assert_int_equal(loop_post(lp, stop_all, NULL), 0);
    pthread_join(loop_thread, NULL);
    loop_free(lp);
    shutdown(listen_fd, SHUT_RDWR); /* a server still waiting in accept() gives up */
    pthread_join(server_thread, NULL);
    close(listen_fd);
    char cmd[100];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    if (failure[0])
        fail_msg("%s", failure);
    assert_true(saw_bearer);
}

typedef struct want {
    int consumer;
    store_event_type type;
    const char *name, *rv, *holder;
} want;

/* The events of consumer c are exactly w[0..n). */
static void expect_events(int c, const want *w, int n)
{
    int k = 0;
    for (int i = 0; i < n_evs; i++) {
        if (evs[i].consumer != c)
            continue;
        if (k >= n || evs[i].type != w[k].type || strcmp(evs[i].rv, w[k].rv) != 0 ||
            strcmp(evs[i].holder, w[k].holder) != 0 ||
            (w[k].name && strcmp(evs[i].name, w[k].name) != 0)) {
            for (int j = 0; j < n_evs; j++)
                fprintf(stderr, "event %d: consumer %d type %d name %s rv %s holder %s\n", j,
                        evs[j].consumer, evs[j].type, evs[j].name, evs[j].rv, evs[j].holder);
            fail_msg("consumer %d: event %d is not the one wanted", c, k);
        }
        k++;
    }
    if (k != n)
        fail_msg("consumer %d: %d events, want %d", c, k, n);
}

static void start_demo_watch(void *arg)
{
    (void)arg;
    watches[C_DEMO] = st_->ops->watch(st_, "ns1", "demo", on_watch, (void *)(intptr_t)C_DEMO);
}

static bool break_script_done(void)
{
    return n_evs >= 10 && steps_started == N_STEPS;
}

static void test_kube_store_replay_bookmark_break_and_410(void **state)
{
    (void)state;
    start(break_script, (int)(sizeof break_script / sizeof break_script[0]));
    assert_int_equal(loop_post(lp, start_demo_watch, NULL), 0);
    /* Until the last step (the held watch from rv 400) is being served and
     * the final SYNCED has arrived. */
    wait_for(break_script_done);
    finish();
    assert_int_equal(steps_served, N_STEPS);
    const want w[] = {
        {C_DEMO, STORE_EVENT_PUT, NULL, "90", "a"},     {C_DEMO, STORE_EVENT_SYNCED, NULL, "", ""},
        {C_DEMO, STORE_EVENT_PUT, NULL, "101", "b"},    {C_DEMO, STORE_EVENT_BROKEN, NULL, "", ""},
        {C_DEMO, STORE_EVENT_PUT, NULL, "101", "b"},    {C_DEMO, STORE_EVENT_SYNCED, NULL, "", ""},
        {C_DEMO, STORE_EVENT_DELETE, NULL, "101", "b"}, {C_DEMO, STORE_EVENT_SYNCED, NULL, "", ""},
        {C_DEMO, STORE_EVENT_PUT, NULL, "399", "c"},    {C_DEMO, STORE_EVENT_SYNCED, NULL, "", ""},
    };
    expect_events(C_DEMO, w, (int)(sizeof w / sizeof w[0]));
}

static void start_shared_watches(void *arg)
{
    (void)arg;
    static const char *names[] = {[C_DEMO] = "demo",
                                  [C_OTHER] = "other",
                                  [C_ABSENT] = "nope",
                                  [C_BAD] = "bad",
                                  [C_ALL] = NULL};
    for (int c = C_DEMO; c <= C_ALL; c++)
        watches[c] = st_->ops->watch(st_, "ns1", names[c], on_watch, (void *)(intptr_t)c);
}

static void start_late_watch(void *arg)
{
    (void)arg;
    watches[C_LATE] = st_->ops->watch(st_, "ns1", "demo", on_watch, (void *)(intptr_t)C_LATE);
}

static void unwatch_all(void *arg)
{
    (void)arg;
    for (int i = 0; i < N_CONSUMERS; i++) {
        st_->ops->unwatch(st_, watches[i]);
        watches[i] = NULL;
    }
}

static int count_events(int c)
{
    int n = 0;
    for (int i = 0; i < n_evs; i++)
        n += evs[i].consumer == c;
    return n;
}

static bool stream_delivered(void)
{
    return count_events(C_ALL) >= 8;
}

static bool late_synced(void)
{
    return count_events(C_LATE) >= 2;
}

static bool stream_closed(void)
{
    return steps_served == N_STEPS;
}

static void test_kube_store_replay_one_watch_per_namespace(void **state)
{
    (void)state;
    start(shared_script, (int)(sizeof shared_script / sizeof shared_script[0]));
    assert_int_equal(loop_post(lp, start_shared_watches, NULL), 0);
    assert_true(wait_for(stream_delivered));
    /* A consumer that comes once the namespace is watched gets the state
     * from what the watch has seen: no request. */
    assert_int_equal(loop_post(lp, start_late_watch, NULL), 0);
    assert_true(wait_for(late_synced));
    /* The stream ends with the last consumer. */
    assert_int_equal(loop_post(lp, unwatch_all, NULL), 0);
    assert_true(wait_for(stream_closed));
    fcntl(listen_fd, F_SETFL, O_NONBLOCK);
    int extra = accept(listen_fd, NULL, NULL);
    assert_int_equal(steps_started, N_STEPS);
    finish();
    if (extra >= 0)
        fail_msg("a third request came: the namespace's watch was not shared");

    const want demo[] = {
        {C_DEMO, STORE_EVENT_PUT, "demo", "90", "a"},
        {C_DEMO, STORE_EVENT_SYNCED, "", "", ""},
        {C_DEMO, STORE_EVENT_PUT, "demo", "101", "b"},
    };
    expect_events(C_DEMO, demo, 3);
    const want other[] = {
        {C_OTHER, STORE_EVENT_PUT, "other", "91", "x"},
        {C_OTHER, STORE_EVENT_SYNCED, "", "", ""},
        {C_OTHER, STORE_EVENT_PUT, "other", "102", "y"},
    };
    expect_events(C_OTHER, other, 3);
    /* A Lease that does not exist is reported absent; one that cannot be
     * decoded neither absent nor present. */
    const want absent[] = {
        {C_ABSENT, STORE_EVENT_DELETE, "nope", "", ""},
        {C_ABSENT, STORE_EVENT_SYNCED, "", "", ""},
    };
    expect_events(C_ABSENT, absent, 2);
    const want bad[] = {{C_BAD, STORE_EVENT_SYNCED, "", "", ""}};
    expect_events(C_BAD, bad, 1);
    const want all[] = {
        {C_ALL, STORE_EVENT_PUT, "demo", "90", "a"},
        {C_ALL, STORE_EVENT_PUT, "other", "91", "x"},
        {C_ALL, STORE_EVENT_PUT, "zed", "92", "z"},
        {C_ALL, STORE_EVENT_SYNCED, "", "", ""},
        {C_ALL, STORE_EVENT_PUT, "demo", "101", "b"},
        {C_ALL, STORE_EVENT_PUT, "other", "102", "y"},
        {C_ALL, STORE_EVENT_DELETE, "zed", "103", "z"},
        {C_ALL, STORE_EVENT_PUT, "new", "104", "n"},
    };
    expect_events(C_ALL, all, 8);
    const want late[] = {
        {C_LATE, STORE_EVENT_PUT, "demo", "101", "b"},
        {C_LATE, STORE_EVENT_SYNCED, "", "", ""},
    };
    expect_events(C_LATE, late, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kube_store_replay_bookmark_break_and_410),
        cmocka_unit_test(test_kube_store_replay_one_watch_per_namespace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
