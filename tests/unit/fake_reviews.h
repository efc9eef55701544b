/* A stand-in apiserver for the authorization tests: plain HTTP on
 * 127.0.0.1, answering TokenReviews from a table of tokens and
 * SubjectAccessReviews from a table of grants, counting both, with knobs
 * for failures (an HTTP status instead of an answer) and slowness (answers
 * held until released). One thread per connection; every answer closes its
 * connection. Header-only: one test program includes it.
 *
 * Tokens: "tok-NAME" is the ServiceAccount team:NAME (uid "uid-NAME");
 * "pod-NAME-POD" is team:NAME with a pod-bound token of pod POD. Anything
 * else is refused ("invalid bearer token"). Grants: "USER VERB NS" lines,
 * NS "*" for every namespace including the cluster scope, or "USER VERB
 * /PATH" for a non-resource URL ("*" does not grant those). */
#ifndef KL_TEST_FAKE_REVIEWS_H
#define KL_TEST_FAKE_REVIEWS_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#define FAKE_MAX_CONNS  256
#define FAKE_MAX_GRANTS 16

typedef struct fake_apiserver {
    int fd, port;
    pthread_t accept_thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t conns[FAKE_MAX_CONNS];
    int n_conns;
    /* the script (under mu) */
    int token_status;       /* HTTP status of TokenReviews; 201: answer */
    char revoked_token[64]; /* refused from now on, whatever its name says */
    int access_status;      /* of SubjectAccessReviews */
    int hold;               /* hold answers until released */
    char grants[FAKE_MAX_GRANTS][160];
    int n_grants;
    /* what happened (under mu) */
    int token_reviews, access_reviews, held;
    char last_audience[64];
} fake_apiserver;

static void fake_send(int fd, int status, const char *body)
{
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, strlen(body));
    if (send(fd, head, (size_t)n, MSG_NOSIGNAL) > 0)
        send(fd, body, strlen(body), MSG_NOSIGNAL);
}

/* Reads one request: the path into path, the body (malloc'd) returned. */
static char *fake_read(int fd, char *path, size_t path_len)
{
    char buf[16384];
    size_t len = 0;
    char *end = NULL;
    while (len < sizeof buf - 1 && !(end = strstr(buf, "\r\n\r\n"))) {
        ssize_t r = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (r <= 0)
            return NULL;
        len += (size_t)r;
        buf[len] = 0;
    }
    if (!end || sscanf(buf, "%*s %255s", path) != 1)
        return NULL;
    (void)path_len;
    size_t want = 0;
    const char *cl = strcasestr(buf, "Content-Length:");
    if (cl)
        want = strtoul(cl + 15, NULL, 10);
    size_t have = len - (size_t)(end + 4 - buf);
    char *body = calloc(1, want + 1);
    memcpy(body, end + 4, have < want ? have : want);
    while (have < want) {
        ssize_t r = recv(fd, body + have, want - have, 0);
        if (r <= 0)
            break;
        have += (size_t)r;
    }
    return body;
}

static const char *fake_str(const cJSON *j, const char *a, const char *b)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, a);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, b);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void fake_token_review(fake_apiserver *s, int fd, const cJSON *req)
{
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(req, "spec");
    const char *token = fake_str(req, "spec", "token");
    const cJSON *aud = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(spec, "audiences"), 0);
    pthread_mutex_lock(&s->mu);
    snprintf(s->last_audience, sizeof s->last_audience, "%s",
             cJSON_IsString(aud) ? aud->valuestring : "");
    pthread_mutex_unlock(&s->mu);
    char name[64] = "", pod[64] = "", body[1024];
    if (strncmp(token, "tok-", 4) == 0)
        snprintf(name, sizeof name, "%.60s", token + 4);
    else if (strncmp(token, "pod-", 4) == 0 && strchr(token + 4, '-'))
        sscanf(token + 4, "%63[^-]-%63s", name, pod);
    pthread_mutex_lock(&s->mu);
    bool revoked = s->revoked_token[0] && strcmp(token, s->revoked_token) == 0;
    pthread_mutex_unlock(&s->mu);
    if (!name[0] || revoked) {
        fake_send(fd, 201,
                  "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\","
                  "\"status\":{\"user\":{},\"error\":\"invalid bearer token\"}}");
        return;
    }
    char extra[160] = "";
    if (pod[0])
        snprintf(extra, sizeof extra,
                 ",\"extra\":{\"authentication.kubernetes.io/pod-name\":[\"%s\"]}", pod);
    snprintf(body, sizeof body,
             "{\"kind\":\"TokenReview\",\"apiVersion\":\"authentication.k8s.io/v1\","
             "\"status\":{\"authenticated\":true,\"user\":{\"username\":"
             "\"system:serviceaccount:team:%s\",\"uid\":\"uid-%s\",\"groups\":"
             "[\"system:serviceaccounts\",\"system:authenticated\"]%s},"
             "\"audiences\":[\"kubelease\"]}}",
             name, name, extra);
    fake_send(fd, 201, body);
}

static void fake_access_review(fake_apiserver *s, int fd, const cJSON *req)
{
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(req, "spec");
    const cJSON *user = cJSON_GetObjectItemCaseSensitive(spec, "user");
    const char *verb = fake_str(spec, "resourceAttributes", "verb");
    const char *ns = fake_str(spec, "resourceAttributes", "namespace");
    const char *group = fake_str(spec, "resourceAttributes", "group");
    const char *resource = fake_str(spec, "resourceAttributes", "resource");
    /* A non-resource URL: granted by "USER VERB /path" lines only. */
    const char *path = fake_str(spec, "nonResourceAttributes", "path");
    if (path[0])
        verb = fake_str(spec, "nonResourceAttributes", "verb");
    char want[200];
    snprintf(want, sizeof want, "%s %s %s", cJSON_IsString(user) ? user->valuestring : "", verb,
             path[0] ? path : ns);
    int allowed = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_grants; i++) {
        char u[128], v[32], n[64];
        if (sscanf(s->grants[i], "%127s %31s %63s", u, v, n) != 3)
            continue;
        char g[200];
        snprintf(g, sizeof g, "%s %s %s", u, v, strcmp(n, "*") == 0 && !path[0] ? ns : n);
        if (strcmp(g, want) == 0)
            allowed = 1;
    }
    pthread_mutex_unlock(&s->mu);
    if (!path[0] && (strcmp(group, "kubelease.io") != 0 || strcmp(resource, "elections") != 0))
        allowed = 0;
    fake_send(fd, 201,
              allowed ? "{\"kind\":\"SubjectAccessReview\",\"status\":{\"allowed\":true,"
                        "\"reason\":\"RBAC: allowed\"}}"
                      : "{\"kind\":\"SubjectAccessReview\",\"status\":{\"allowed\":false}}");
}

typedef struct fake_conn_arg {
    fake_apiserver *s;
    int fd;
} fake_conn_arg;

static void *fake_conn(void *arg)
{
    fake_apiserver *s = ((fake_conn_arg *)arg)->s;
    int fd = ((fake_conn_arg *)arg)->fd;
    free(arg);
    char path[256];
    char *body = fake_read(fd, path, sizeof path);
    cJSON *req = body ? cJSON_Parse(body) : NULL;
    bool token = strstr(path, "/tokenreviews") != NULL;
    pthread_mutex_lock(&s->mu);
    if (token)
        s->token_reviews++;
    else
        s->access_reviews++;
    int status = token ? s->token_status : s->access_status;
    s->held++;
    pthread_cond_broadcast(&s->cv); /* fake_wait_held */
    while (s->hold)
        pthread_cond_wait(&s->cv, &s->mu);
    s->held--;
    pthread_mutex_unlock(&s->mu);
    if (!req)
        fake_send(fd, 400, "{}");
    else if (status != 201)
        fake_send(fd, status,
                  "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                  "\"message\":\"scripted failure\",\"reason\":\"Forbidden\"}");
    else if (token)
        fake_token_review(s, fd, req);
    else
        fake_access_review(s, fd, req);
    cJSON_Delete(req);
    free(body);
    shutdown(fd, SHUT_WR);
    char c;
    while (recv(fd, &c, 1, 0) > 0)
        ;
    close(fd);
    return NULL;
}

static void *fake_accept(void *arg)
{
    fake_apiserver *s = arg;
    for (;;) {
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0)
            return NULL;
        fake_conn_arg *a = malloc(sizeof *a);
        a->s = s;
        a->fd = fd;
        pthread_mutex_lock(&s->mu);
        if (s->n_conns == FAKE_MAX_CONNS ||
            pthread_create(&s->conns[s->n_conns], NULL, fake_conn, a) != 0) {
            close(fd);
            free(a);
        } else {
            s->n_conns++;
        }
        pthread_mutex_unlock(&s->mu);
    }
}

static int fake_start(fake_apiserver *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->token_status = s->access_status = 201;
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s->fd, (struct sockaddr *)&a, &al) != 0 || listen(s->fd, 64) != 0)
        return -1;
    s->port = ntohs(a.sin_port);
    return pthread_create(&s->accept_thread, NULL, fake_accept, s);
}

static void fake_grant(fake_apiserver *s, const char *grant)
{
    pthread_mutex_lock(&s->mu);
    snprintf(s->grants[s->n_grants++], sizeof s->grants[0], "%s", grant);
    pthread_mutex_unlock(&s->mu);
}

/* Takes back a grant given with fake_grant. */
static void fake_revoke(fake_apiserver *s, const char *grant)
{
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_grants; i++)
        if (strcmp(s->grants[i], grant) == 0)
            memcpy(s->grants[i], s->grants[--s->n_grants], sizeof s->grants[0]);
    pthread_mutex_unlock(&s->mu);
}

/* The token is refused from now on (its ServiceAccount deleted). */
static void fake_revoke_token(fake_apiserver *s, const char *token)
{
    pthread_mutex_lock(&s->mu);
    snprintf(s->revoked_token, sizeof s->revoked_token, "%s", token);
    pthread_mutex_unlock(&s->mu);
}

static void fake_script(fake_apiserver *s, int token_status, int access_status, int hold)
{
    pthread_mutex_lock(&s->mu);
    s->token_status = token_status;
    s->access_status = access_status;
    s->hold = hold;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void fake_counts(fake_apiserver *s, int *token_reviews, int *access_reviews, int *held)
{
    pthread_mutex_lock(&s->mu);
    *token_reviews = s->token_reviews;
    *access_reviews = s->access_reviews;
    if (held)
        *held = s->held;
    pthread_mutex_unlock(&s->mu);
}

/* Waits until at least n reviews are held (fake_script's hold). */
static void fake_wait_held(fake_apiserver *s, int n)
{
    pthread_mutex_lock(&s->mu);
    while (s->held < n)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static void fake_stop(fake_apiserver *s)
{
    fake_script(s, 201, 201, 0);
    shutdown(s->fd, SHUT_RDWR);
    pthread_join(s->accept_thread, NULL);
    close(s->fd);
    for (int i = 0; i < s->n_conns; i++)
        pthread_join(s->conns[i], NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

#endif
