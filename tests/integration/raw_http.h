/* Test support for the integration tests that talk raw HTTP/1.1 to a real
 * `kubeleased --dev` ($KUBELEASED): start and stop it with extra flags, and
 * send requests over plain sockets, so that nothing between the test and the
 * server tidies the input up. Header-only (static inline functions): each
 * test program takes what it uses. */
#ifndef KL_TESTS_RAW_HTTP_H
#define KL_TESTS_RAW_HTTP_H

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

typedef struct server {
    pid_t pid;
    int port;     /* --listen */
    int ops_port; /* --ops-listen, 0 without */
    char log[256];
} server;

static inline int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Starts $KUBELEASED --dev on a free port with extra flags; waits for its
 * start-up line. */
static inline void server_start(server *s, const char *const *extra)
{
    const char *bin = getenv("KUBELEASED");
    if (!bin) {
        fprintf(stderr, "KUBELEASED is not set: skipping\n");
        exit(77);
    }
    snprintf(s->log, sizeof s->log, "/tmp/kl-raw-http-%d-%p.log", (int)getpid(), (void *)s);
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        int fd = open(s->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        const char *argv[16] = {bin, "--dev", "--listen", "127.0.0.1:0"};
        int n = 4;
        for (int i = 0; extra && extra[i] && n < 15; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        execv(bin, (char **)argv);
        _exit(127);
    }
    int64_t deadline = now_ms() + 10000;
    s->port = 0;
    while (!s->port && now_ms() < deadline) {
        FILE *f = fopen(s->log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            char *p = strstr(line, "event=started");
            char *q = p ? strstr(p, " port=") : NULL;
            char *o = p ? strstr(p, " ops_port=") : NULL;
            if (o)
                s->ops_port = atoi(o + 10);
            if (q)
                s->port = atoi(q + 6);
        }
        if (f)
            fclose(f);
        if (!s->port)
            usleep(20000);
    }
    if (!s->port)
        fail_msg("kubeleased did not start (log %s)", s->log);
}

static inline void server_stop(server *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGTERM);
    int status = 0;
    int64_t deadline = now_ms() + 5000;
    while (waitpid(s->pid, &status, WNOHANG) == 0) {
        if (now_ms() > deadline) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &status, 0);
            fail_msg("kubeleased did not stop within 5 s of SIGTERM");
        }
        usleep(10000);
    }
    s->pid = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("kubeleased exited with status %d after SIGTERM", status);
    unlink(s->log);
}

static inline int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        fail_msg("connect: %s", strerror(errno));
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

static inline void send_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n <= 0)
            return; /* the server may close early; its answer is what counts */
        p += n;
        len -= (size_t)n;
    }
}

typedef struct response {
    int status;
    char *body; /* NUL-terminated; owned */
    size_t body_len;
    char headers[2048];
} response;

/* Decodes a chunked body in place; returns its length. */
static inline size_t dechunk(char *body, size_t len)
{
    size_t in = 0, out = 0;
    while (in < len) {
        char *end = NULL;
        unsigned long n = strtoul(body + in, &end, 16);
        char *crlf = strstr(body + in, "\r\n");
        if (!crlf || end == body + in || n == 0)
            break;
        in = (size_t)(crlf - body) + 2;
        if (n > len - in)
            n = len - in;
        memmove(body + out, body + in, n);
        out += n;
        in += n + 2;
    }
    return out;
}

/* Reads until the peer closes; a chunked body is decoded. */
static inline void read_response(int fd, response *r)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        ssize_t n = recv(fd, buf + len, cap - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    memset(r, 0, sizeof *r);
    sscanf(buf, "HTTP/1.%*d %d", &r->status);
    char *sep = strstr(buf, "\r\n\r\n");
    if (sep) {
        size_t hl = (size_t)(sep - buf);
        snprintf(r->headers, sizeof r->headers, "%.*s", (int)(hl < 2000 ? hl : 2000), buf);
        r->body_len = len - hl - 4;
        r->body = malloc(r->body_len + 1);
        memcpy(r->body, sep + 4, r->body_len);
        if (strcasestr(r->headers, "\r\nTransfer-Encoding: chunked"))
            r->body_len = dechunk(r->body, r->body_len);
        r->body[r->body_len] = '\0';
    } else {
        r->body = strdup("");
    }
    free(buf);
}

/* One request: method, path, content type (NULL: none), body. */
static inline void request(int port, const char *method, const char *path, const char *ctype,
                           const void *body, size_t len, response *r)
{
    int fd = connect_to(port);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, ctype ? "Content-Type: " : "", ctype ? ctype : "",
                     ctype ? "\r\n" : "", len);
    send_all(fd, head, (size_t)n);
    send_all(fd, body, len);
    read_response(fd, r);
    close(fd);
}

static inline void expect(const response *r, int status, const char *body_part, const char *what)
{
    if (r->status != status || !strstr(r->body, body_part))
        fail_msg("%s: want %d with \"%s\", got %d %s", what, status, body_part, r->status, r->body);
}

#endif
