/* The client's bearer token (client/token.c): read from token_file, or
 * from $KUBELEASE_TOKEN_FILE, sent as "Authorization: Bearer" with every
 * request; re-read when the file changes — at once after the service
 * refused a token (401), else within the check interval; no file, no
 * header, and a refusal names the file's problem. A tiny HTTP server on
 * 127.0.0.1 records the Authorization header of each request and answers
 * GetHolder (epoch 1, no holder), or 401 while told to. */
#define _GNU_SOURCE
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

#include "kubelease.h"

static int listen_fd, port;
static pthread_t accept_thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char last_auth[512]; /* "" when the last request had none */
static int requests;
static int refuse; /* answer 401 */

static void *accept_main(void *arg)
{
    (void)arg;
    for (;;) {
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
        pthread_mutex_lock(&mu);
        const char *a = strcasestr(req, "\r\nAuthorization: ");
        last_auth[0] = 0;
        if (a)
            sscanf(a + 2, "%511[^\r]", last_auth);
        requests++;
        int no = refuse;
        pthread_mutex_unlock(&mu);
        /* A GetHolderResponse with epoch 1 (field 2, varint). */
        const char *ok = "HTTP/1.1 200 OK\r\nContent-Type: application/proto\r\n"
                         "Content-Length: 2\r\nConnection: close\r\n\r\n\x10\x01";
        const char *body = "{\"code\":\"unauthenticated\",\"message\":\"the token is invalid\"}";
        char denied[512];
        snprintf(denied, sizeof denied,
                 "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                 strlen(body), body);
        const char *out = no ? denied : ok;
        send(fd, out, strlen(out), MSG_NOSIGNAL);
        shutdown(fd, SHUT_WR);
        char c;
        while (recv(fd, &c, 1, 0) > 0)
            ;
        close(fd);
    }
}

static int server_up(void **state)
{
    (void)state;
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(listen_fd, (struct sockaddr *)&a, &al) != 0 || listen(listen_fd, 16) != 0)
        return -1;
    port = ntohs(a.sin_port);
    return pthread_create(&accept_thread, NULL, accept_main, NULL) == 0 ? 0 : -1;
}

static int server_down(void **state)
{
    (void)state;
    shutdown(listen_fd, SHUT_RDWR);
    pthread_join(accept_thread, NULL);
    close(listen_fd);
    return 0;
}

static void endpoint(char *out, size_t len)
{
    snprintf(out, len, "http://127.0.0.1:%d", port);
}

/* Writes token into path atomically (a new file renamed over it: a new
 * inode, as the kubelet's projected volumes do). */
static void write_token(const char *path, const char *token)
{
    char tmp[300];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fprintf(f, "%s\n", token);
    fclose(f);
    assert_int_equal(rename(tmp, path), 0);
}

/* One GetHolder; returns its status and the Authorization header it sent. */
static int get(kl_client *c, char *auth, size_t auth_len, kl_error *err)
{
    char *holder = NULL;
    int rc = kl_get_holder(c, "default", "x", &holder, NULL, err);
    kl_free(holder);
    pthread_mutex_lock(&mu);
    snprintf(auth, auth_len, "%s", last_auth);
    pthread_mutex_unlock(&mu);
    return rc;
}

static void set_refuse(int v)
{
    pthread_mutex_lock(&mu);
    refuse = v;
    pthread_mutex_unlock(&mu);
}

static void test_client_token_file_is_sent_and_reread_when_it_changes(void **state)
{
    (void)state;
    char dir[] = "/tmp/kl-token-XXXXXX", path[300], ep[64], auth[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/token", dir);
    write_token(path, "first-token");
    endpoint(ep, sizeof ep);
    kl_client_options o;
    kl_client_options_init(&o);
    o.token_file = path;
    kl_error err;
    kl_client *c = kl_client_new_opts(ep, &o, &err);
    assert_non_null(c);
    assert_int_equal(get(c, auth, sizeof auth, &err), KL_OK);
    assert_string_equal(auth, "Authorization: Bearer first-token");

    /* Rotated, then refused: the very next request has the new token. */
    write_token(path, "second-token");
    set_refuse(1);
    assert_int_equal(get(c, auth, sizeof auth, &err), KL_ERR_PERMISSION_DENIED);
    set_refuse(0);
    assert_int_equal(get(c, auth, sizeof auth, &err), KL_OK);
    assert_string_equal(auth, "Authorization: Bearer second-token");

    /* Rotated without a refusal: picked up within the check interval. */
    write_token(path, "third-token");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 500 && strcmp(auth, "Authorization: Bearer third-token") != 0; i++) {
        assert_int_equal(get(c, auth, sizeof auth, &err), KL_OK);
        usleep(10000);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_string_equal(auth, "Authorization: Bearer third-token");
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    printf("the rotated token was used %ld ms after the file changed\n", ms);

    /* The file goes: no header, and the refusal says why. */
    unlink(path);
    set_refuse(1);
    assert_int_equal(get(c, auth, sizeof auth, &err), KL_ERR_PERMISSION_DENIED);
    assert_int_equal(get(c, auth, sizeof auth, &err), KL_ERR_PERMISSION_DENIED);
    assert_string_equal(auth, "");
    assert_non_null(strstr(err.message, "unauthenticated: the token is invalid"));
    assert_non_null(strstr(err.message, path));
    assert_non_null(strstr(err.message, "No such file"));
    set_refuse(0);
    kl_client_free(c);
    rmdir(dir);
}

static void test_client_token_file_from_the_environment(void **state)
{
    (void)state;
    char dir[] = "/tmp/kl-token-XXXXXX", path[300], ep[64], auth[512];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/token", dir);
    write_token(path, "  env-token \n");
    endpoint(ep, sizeof ep);
    setenv("KUBELEASE_ENDPOINT", ep, 1);
    setenv("KUBELEASE_TOKEN_FILE", path, 1);
    kl_error err;
    kl_client *c = kl_client_new(NULL, &err);
    assert_non_null(c);
    assert_int_equal(get(c, auth, sizeof auth, &err), KL_OK);
    assert_string_equal(auth, "Authorization: Bearer env-token");
    kl_client_free(c);

    /* Neither option nor variable: no Authorization header at all. */
    unsetenv("KUBELEASE_TOKEN_FILE");
    c = kl_client_new(NULL, &err);
    assert_non_null(c);
    assert_int_equal(get(c, auth, sizeof auth, &err), KL_OK);
    assert_string_equal(auth, "");
    kl_client_free(c);

    /* A token file holding something no token is: no header either. */
    write_token(path, "two words");
    kl_client_options o;
    kl_client_options_init(&o);
    o.token_file = path;
    c = kl_client_new_opts(NULL, &o, &err);
    assert_non_null(c);
    assert_int_equal(get(c, auth, sizeof auth, &err), KL_OK);
    assert_string_equal(auth, "");
    kl_client_free(c);
    unsetenv("KUBELEASE_ENDPOINT");
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_token_file_is_sent_and_reread_when_it_changes),
        cmocka_unit_test(test_client_token_file_from_the_environment),
    };
    return cmocka_run_group_tests(tests, server_up, server_down);
}
