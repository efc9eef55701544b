/* kl_ask: a client of the Service that routes to the leader's Pod. It
 * connects to HOST:PORT every few ms, reads the one line kl_replica --serve
 * answers ("IDENTITY EPOCH"), and prints a line each time the answer
 * changes:
 *
 *   WALL IDENTITY EPOCH N      WALL: seconds since the epoch (CLOCK_REALTIME,
 *                              to the microsecond) of the first such answer;
 *   WALL - ERROR N             N: the attempts so far; ERROR: why no answer
 *                              came (refused, timeout, unreachable, ...)
 *
 *   kl_ask HOST PORT [TIMEOUT_MS [PAUSE_MS]]
 *
 * TIMEOUT_MS (default 200) bounds the connect and the read of each attempt,
 * so that a Pod that is gone costs one short wait, not the kernel's
 * connect timeout. PAUSE_MS (default 5) between attempts, and a close
 * with a reset (SO_LINGER 0: no TIME_WAIT), keep the connections the node's
 * conntrack table and port range hold in the hundreds: a client opening
 * thousands a second fills them, and the replicas' own new connections to
 * kubeleased are then dropped. It runs until killed. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* One attempt: the answer's line (without its newline) in buf, or an error
 * word; returns 1 for an answer, 0 for an error. */
static int ask(const struct sockaddr_in *to, int timeout_ms, char *buf, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(buf, len, "socket:%s", strerror(errno));
        return 0;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int ok = 0;
    if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) < 0 && errno != EINPROGRESS) {
        snprintf(buf, len, "connect:%s", strerror(errno));
        goto close_fd;
    }
    if (poll(&p, 1, timeout_ms) != 1) {
        snprintf(buf, len, "connect:timeout");
        goto close_fd;
    }
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
    if (soerr) {
        snprintf(buf, len, "connect:%s", strerror(soerr));
        goto close_fd;
    }
    size_t got = 0;
    p.events = POLLIN;
    while (got < len - 1) {
        if (poll(&p, 1, timeout_ms) != 1) {
            snprintf(buf, len, "read:timeout");
            goto close_fd;
        }
        ssize_t n = read(fd, buf + got, len - 1 - got);
        if (n < 0) {
            snprintf(buf, len, "read:%s", strerror(errno));
            goto close_fd;
        }
        if (n == 0)
            break;
        got += (size_t)n;
        if (memchr(buf, '\n', got))
            break;
    }
    buf[got] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    ok = buf[0] != '\0';
    if (!ok)
        snprintf(buf, len, "read:%s", got ? "empty" : "closed");
close_fd:
    /* A reset, not a FIN: the connection leaves no TIME_WAIT behind. */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &(struct linger){1, 0}, sizeof(struct linger));
    close(fd);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: kl_ask HOST PORT [TIMEOUT_MS [PAUSE_MS]]\n");
        return 2;
    }
    struct sockaddr_in to = {.sin_family = AF_INET};
    char *end = NULL;
    long port = strtol(argv[2], &end, 10);
    long timeout_ms = argc >= 4 ? strtol(argv[3], NULL, 10) : 200;
    long pause_ms = argc >= 5 ? strtol(argv[4], NULL, 10) : 5;
    if (inet_pton(AF_INET, argv[1], &to.sin_addr) != 1) {
        fprintf(stderr, "kl_ask: HOST must be an IPv4 address, not \"%s\"\n", argv[1]);
        return 2;
    }
    if (!end || *end || port < 1 || port > 65535) {
        fprintf(stderr, "kl_ask: PORT must be 1-65535, not \"%s\"\n", argv[2]);
        return 2;
    }
    if (timeout_ms < 1 || timeout_ms > 60000) {
        fprintf(stderr, "kl_ask: TIMEOUT_MS must be 1-60000\n");
        return 2;
    }
    if (pause_ms < 0 || pause_ms > 60000) {
        fprintf(stderr, "kl_ask: PAUSE_MS must be 0-60000\n");
        return 2;
    }
    struct timespec pause = {pause_ms / 1000, (pause_ms % 1000) * 1000000};
    to.sin_port = htons((uint16_t)port);
    setvbuf(stdout, NULL, _IOLBF, 0);
    char last[320] = "", buf[320], shown[330];
    for (unsigned long long n = 1;; n++) {
        int ok = ask(&to, (int)timeout_ms, buf, sizeof(buf));
        snprintf(shown, sizeof(shown), "%s%s", ok ? "" : "- ", buf);
        if (strcmp(shown, last) != 0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            printf("%lld.%06ld %s %llu\n", (long long)ts.tv_sec, ts.tv_nsec / 1000, shown, n);
            snprintf(last, sizeof(last), "%s", shown);
        }
        if (pause_ms)
            nanosleep(&pause, NULL);
    }
}
