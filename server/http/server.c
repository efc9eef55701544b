/* The HTTP server's lifecycle: the listen address, start (the shared state,
 * the timer thread, the libmicrohttpd daemons: the main one and the
 * optional ops listener) and the owner's side of shutdown (quiesce, finish,
 * stop). What each request does is in router.c and the files it calls; TLS
 * (the certificate both daemons serve) is in tls.c.
 *
 * Threads: the owner's. Shutdown flags are set under s->mu, which call.c
 * and stream.c read under the same lock; see internal.h for the whole
 * story. */
#include "http/server.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "http/auth.h"
#include "http/internal.h"

#define DEFAULT_THREADS          2
#define DEFAULT_MAX_CONNECTIONS  1024
#define DEFAULT_MAX_BODY         4096
#define DEFAULT_IDLE_TIMEOUT_S   60
#define DEFAULT_USER_TIMEOUT_MS  10000
#define DEFAULT_READ_TIMEOUT_MS  10000
#define DEFAULT_FIRST_TIMEOUT_MS 3000
/* The ops listener: probes and scrapes, a few at a time. The kubelet
 * probes from its node's address, Prometheus from its pod's, a
 * port-forward from the pod's loopback: none needs more than a few
 * connections, so one address that takes more is not served past
 * OPS_MAX_PER_IP, and kept-alive ones are closed after OPS_IDLE_TIMEOUT_S
 * (a scraper reconnects at its next scrape). */
#define OPS_MAX_CONNECTIONS 64
#define OPS_MAX_PER_IP      16
#define OPS_IDLE_TIMEOUT_S  15
/* Connections waiting for their request head in an acceptor, at most (a
 * descriptor and a few bytes each): on --ops-listen this, on --listen this
 * or as many as may be served, whichever is more. */
#define WAITING_MAX 1024

/* libmicrohttpd's memory pool per connection: the request head is read
 * into it (a head that does not fit is answered 431 and the connection
 * closed), then the response head and a stream's next bytes are written
 * from it; bodies are not (requests are taken in pieces, answers sent from
 * their own buffers). It is most of what an open stream costs, so it is
 * sized by --max-header-bytes (3 KiB: a Connect request's head with a
 * ServiceAccount token is about 1.5 KiB) plus 1 KiB for the answer, not
 * for browsers: with 10,000 holder watches kubeleased takes 92 MB instead
 * of 230 with 16 KiB (bench/scale.sh). The ops listener's few connections
 * keep a larger one. */
#define DEFAULT_MAX_HEADER    3072
#define ANSWER_MEMORY         1024
#define OPS_CONNECTION_MEMORY 16384

/* MHD hands a printf format of its own: a vprintf wrapper by nature. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char buf[256];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    log_event(LOG_DEBUG, "http", "msg=%s", log_q(buf));
}
#pragma GCC diagnostic pop

/* "ADDR:PORT" or "[V6]:PORT" into a socket address. */
static int parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *len, bool *v6,
                        char *err, size_t err_len)
{
    char host[128];
    const char *port;
    if (listen[0] == '[') {
        const char *end = strchr(listen, ']');
        if (!end || end[1] != ':' || (size_t)(end - listen - 1) >= sizeof host)
            goto bad;
        memcpy(host, listen + 1, (size_t)(end - listen - 1));
        host[end - listen - 1] = '\0';
        port = end + 2;
    } else {
        const char *colon = strrchr(listen, ':');
        if (!colon || (size_t)(colon - listen) >= sizeof host)
            goto bad;
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
        port = colon + 1;
    }
    char *end = NULL;
    long p = strtol(port, &end, 10);
    if (!*port || *end || p < 0 || p > 65535)
        goto bad;
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(*host ? host : NULL, port, &hints, &ai) != 0 || !ai)
        goto bad;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    *v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    return 0;
bad:
    snprintf(err, err_len,
             "listen address \"%s\": want ADDR:PORT with a numeric address, e.g. "
             "0.0.0.0:8080 or [::1]:8080",
             listen);
    return -1;
}

int http_listen_check(const char *listen, char *err, size_t err_len)
{
    struct sockaddr_storage ss;
    socklen_t len;
    bool v6;
    return parse_listen(listen, &ss, &len, &v6, err, err_len);
}

/* A copy of a NULL-terminated list in one allocation: the pointers, then
 * the strings they point into. NULL when out of memory. */
static char **copy_list(const char *const *list)
{
    size_t n = 0, bytes = 0;
    for (; list[n]; n++)
        bytes += strlen(list[n]) + 1;
    char **out = malloc((n + 1) * sizeof *out + bytes);
    if (!out)
        return NULL;
    char *p = (char *)(out + n + 1);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(list[i]) + 1;
        out[i] = memcpy(p, list[i], len);
        p += len;
    }
    out[n] = NULL;
    return out;
}

/* A connection's first request must be in within this, never longer than
 * any request may take. */
static unsigned first_timeout_ms(const http_config *cfg)
{
    unsigned read_timeout = cfg->read_timeout_ms ? cfg->read_timeout_ms : DEFAULT_READ_TIMEOUT_MS;
    unsigned first =
        cfg->first_request_timeout_ms ? cfg->first_request_timeout_ms : DEFAULT_FIRST_TIMEOUT_MS;
    return first < read_timeout ? first : read_timeout;
}

/* The server object without its threads: configuration, locks, limits.
 * Fails closed: a namespace allow-list or a limit that cannot be built
 * stops the start rather than leaving the server open (NULL, with why). */
static http_server *server_new(const http_config *cfg, char *err, size_t err_len)
{
    http_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    s->engine = cfg->engine;
    s->ops = cfg->ops;
    s->clock = cfg->clock;
    s->streams_due_ms = INT64_MAX;
    s->max_body = cfg->max_body_bytes ? cfg->max_body_bytes : DEFAULT_MAX_BODY;
    s->user_timeout_ms =
        cfg->stream_user_timeout_ms ? cfg->stream_user_timeout_ms : DEFAULT_USER_TIMEOUT_MS;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &ca);
    pthread_cond_init(&s->drained, &ca);
    pthread_condattr_destroy(&ca);
    if (cfg->namespaces && !(s->namespaces = copy_list(cfg->namespaces))) {
        snprintf(err, err_len, "cannot build the namespace allow-list: out of memory");
        goto fail;
    }
    s->pod_ip_check = cfg->pod_ip_check;
    unsigned read_timeout = cfg->read_timeout_ms ? cfg->read_timeout_ms : DEFAULT_READ_TIMEOUT_MS;
    unsigned first_timeout = first_timeout_ms(cfg);
    s->limits =
        http_limits_new(cfg->max_connections ? cfg->max_connections : DEFAULT_MAX_CONNECTIONS,
                        cfg->max_per_ip, read_timeout, first_timeout);
    if (cfg->ops_listen)
        s->ops_limits =
            http_limits_new(OPS_MAX_CONNECTIONS, OPS_MAX_PER_IP, read_timeout, first_timeout);
    if (!s->limits || (cfg->ops_listen && !s->ops_limits)) {
        snprintf(err, err_len, "cannot build the connection limits: out of memory");
        goto fail;
    }
    if (cfg->auth_mode == HTTP_AUTH_KUBERNETES && !(s->auth = auth_new(&cfg->auth))) {
        snprintf(err, err_len, "cannot build the authorization state: out of memory");
        goto fail;
    }
    return s;
fail:
    http_server_stop(s);
    return NULL;
}

/* MHD's accept policy: once quiesced, a new connection is closed as soon as
 * it is accepted, so clients reconnect to another replica at once.
 * (MHD_quiesce_daemon would close the listening socket instead, but on an
 * epoll daemon with a thread pool it races with the workers' own removal of
 * that socket from their epoll sets, and libmicrohttpd 0.9.75 then aborts
 * the process: "Failed to remove listen FD from epoll set".) */
static enum MHD_Result accept_policy(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    http_server *s = cls;
    (void)addr;
    (void)addrlen;
    return atomic_load(&s->refusing) ? MHD_NO : MHD_YES;
}

/* TLS 1.2 and 1.3 only, GnuTLS's normal choices otherwise. */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* The options and flags both daemons share: the address, the log and, with
 * --tls-cert-file, TLS (the ops listener speaks it too: it serves the
 * status page, whose callers present bearer tokens). items holds 3. */
static unsigned common_flags(const http_server *s, bool v6, struct MHD_OptionItem *items)
{
    unsigned flags =
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    items[0] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    if (s->tls) {
        flags |= MHD_USE_TLS;
        items[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK2, 0,
                                           (void *)http_tls_certificate};
        items[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)TLS_PRIORITIES};
        items[2] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    }
    return flags;
}

/* The main daemon's connections open and close: counted for the limits
 * (conn_limit.c) and for the acceptor (accept.c). */
static void main_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
    http_server *s = cls;
    http_limits_notify(s->limits, conn, socket_context, code);
    if (!s->acceptor)
        return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        http_acceptor_started(s->acceptor);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        http_acceptor_closed(s->acceptor);
}

/* A main daemon. Without TLS there are two, the calls' and the streams',
 * and they accept nothing themselves: accept.c hands each its connections.
 * With TLS there is one, which listens on ss and accepts: the acceptor
 * could not read the requests, and tls.c tells the daemons apart by their
 * listening sockets. */
static struct MHD_Daemon *daemon_start(http_server *s, const http_config *cfg,
                                       const struct sockaddr_storage *ss, bool v6)
{
    struct MHD_OptionItem tls[3];
    unsigned flags = common_flags(s, v6, tls) | (s->tls ? 0 : MHD_USE_NO_LISTEN_SOCKET);
    unsigned threads = cfg->threads ? cfg->threads : DEFAULT_THREADS;
    unsigned max_conns = cfg->max_connections ? cfg->max_connections : DEFAULT_MAX_CONNECTIONS;
    unsigned hard_max = http_limits_hard(max_conns);
    unsigned hard_per_ip = cfg->max_per_ip ? http_limits_hard(cfg->max_per_ip) : 0;
    unsigned idle = cfg->idle_timeout_s ? cfg->idle_timeout_s : DEFAULT_IDLE_TIMEOUT_S;
    size_t connection_memory =
        (cfg->max_header_bytes ? cfg->max_header_bytes : DEFAULT_MAX_HEADER) + ANSWER_MEMORY;
    if (!s->tls)
        /* The acceptor stops at hard_max itself. It hands a connection over
         * as soon as another reports closing, which libmicrohttpd does
         * before it counts it out: its own limit gets room for those, or it
         * would close the new one. (The per-address limit stays exact:
         * beyond it, connections are closed at once anyway.) */
        hard_max += hard_max / 4;
    return MHD_start_daemon(
        flags, 0, accept_policy, s, http_on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
        MHD_OPTION_SOCK_ADDR, s->tls ? (const struct sockaddr *)ss : NULL,
        MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_LIMIT, hard_max,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, hard_per_ip, MHD_OPTION_CONNECTION_TIMEOUT, idle,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_memory, MHD_OPTION_NOTIFY_COMPLETED,
        http_on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, main_notify, s, MHD_OPTION_ARRAY, tls,
        MHD_OPTION_END);
}

/* The ops daemon's connections open and close: counted for its limits and
 * for its acceptor. */
static void ops_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    http_server *s = cls;
    http_limits_notify(s->ops_limits, conn, socket_context, code);
    if (!s->ops_acceptor)
        return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        http_acceptor_started(s->ops_acceptor);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        http_acceptor_closed(s->ops_acceptor);
}

/* The ops listener: one thread, a few slots of its own, operator endpoints
 * only. Without TLS it accepts nothing itself: its acceptor hands it the
 * connections whose head is in (accept.c), so idle ones never hold its
 * slots; libmicrohttpd's limit has room over the acceptor's for those
 * reported closed and not counted out yet. */
static struct MHD_Daemon *ops_daemon_start(http_server *s, const http_config *cfg,
                                           const struct sockaddr_storage *ss, bool v6)
{
    (void)cfg;
    struct MHD_OptionItem tls[3];
    unsigned flags = common_flags(s, v6, tls) | (s->tls ? 0 : MHD_USE_NO_LISTEN_SOCKET);
    unsigned max = s->tls ? OPS_MAX_CONNECTIONS : OPS_MAX_CONNECTIONS + OPS_MAX_CONNECTIONS / 4;
    return MHD_start_daemon(
        flags, 0, NULL, NULL, http_on_ops_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
        MHD_OPTION_SOCK_ADDR, s->tls ? (const struct sockaddr *)ss : NULL,
        MHD_OPTION_CONNECTION_LIMIT, max, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        http_limits_hard(OPS_MAX_PER_IP), MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)OPS_IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)OPS_CONNECTION_MEMORY, MHD_OPTION_NOTIFY_COMPLETED, http_on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, ops_notify, s, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
}

typedef struct daemon_args {
    http_server *s;
    const http_config *cfg;
    const struct sockaddr_storage *ss;
    bool v6, ops;
} daemon_args;

static struct MHD_Daemon *daemon_start_args(void *arg)
{
    daemon_args *a = arg;
    return a->ops ? ops_daemon_start(a->s, a->cfg, a->ss, a->v6)
                  : daemon_start(a->s, a->cfg, a->ss, a->v6);
}

/* Starts one of the daemons; with TLS, bound to its certificate before any
 * handshake can ask for it. */
static struct MHD_Daemon *start_one(http_server *s, const http_config *cfg,
                                    const struct sockaddr_storage *ss, bool v6, bool ops)
{
    daemon_args da = {s, cfg, ss, v6, ops};
    return s->tls ? http_tls_start(s->tls, daemon_start_args, &da) : daemon_start_args(&da);
}

static uint16_t bound_port(struct MHD_Daemon *d)
{
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    return di ? di->port : 0;
}

/* The main daemons, the listening socket and, without TLS, the thread that
 * accepts on it. Returns 0, or -1 with why. */
static int main_start(http_server *s, const http_config *cfg, const struct sockaddr_storage *ss,
                      socklen_t sslen, bool v6, char *err, size_t err_len)
{
    if (s->tls) {
        s->daemon = start_one(s, cfg, ss, v6, false);
        if (!s->daemon) {
            snprintf(err, err_len, "cannot listen on %s: %s", cfg->listen,
                     errno ? strerror(errno) : "libmicrohttpd refused to start");
            return -1;
        }
        s->port = bound_port(s->daemon);
        return 0;
    }
    char why[128];
    int fd = http_listen_socket((const struct sockaddr *)ss, sslen, why, sizeof why);
    if (fd < 0) {
        snprintf(err, err_len, "cannot listen on %s: %s", cfg->listen, why);
        return -1;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
        s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                    : ((struct sockaddr_in *)&bound)->sin_port);
    s->daemon = start_one(s, cfg, ss, v6, false);
    if (s->daemon)
        s->stream_daemon = start_one(s, cfg, ss, v6, false);
    if (!s->daemon || !s->stream_daemon) {
        snprintf(err, err_len, "cannot serve %s: libmicrohttpd refused to start", cfg->listen);
        close(fd);
        return -1;
    }
    unsigned max_conns = cfg->max_connections ? cfg->max_connections : DEFAULT_MAX_CONNECTIONS;
    unsigned hard_max = http_limits_hard(max_conns);
    http_acceptor_config ac = {
        .calls = s->daemon,
        .streams = s->stream_daemon,
        .listen_fd = fd,
        .classify = true,
        .threads = cfg->threads ? cfg->threads : DEFAULT_THREADS,
        .max = hard_max,
        .urgent_room = hard_max / 4, /* the room daemon_start gives libmicrohttpd */
        .max_waiting = hard_max > WAITING_MAX ? hard_max : WAITING_MAX,
        .max_per_ip = cfg->max_per_ip,
        .first_timeout_ms = first_timeout_ms(cfg),
        .max_head = cfg->max_header_bytes ? cfg->max_header_bytes : DEFAULT_MAX_HEADER,
        .name = "listen",
    };
    s->acceptor = http_acceptor_new(&ac);
    if (!s->acceptor)
        close(fd);
    if (!s->acceptor || http_acceptor_run(s->acceptor) != 0) {
        snprintf(err, err_len, "cannot start the thread accepting on %s", cfg->listen);
        return -1; /* the caller frees the acceptor with the server */
    }
    return 0;
}

/* The ops daemon and, without TLS, its listening socket and acceptor.
 * Returns 0, or -1 with why. */
static int ops_start(http_server *s, const http_config *cfg, const struct sockaddr_storage *ss,
                     socklen_t sslen, bool v6, char *err, size_t err_len)
{
    if (s->tls) {
        s->ops_daemon = start_one(s, cfg, ss, v6, true);
        if (!s->ops_daemon) {
            snprintf(err, err_len, "cannot listen on %s (--ops-listen): %s", cfg->ops_listen,
                     errno ? strerror(errno) : "libmicrohttpd refused to start");
            return -1;
        }
        s->ops_port = bound_port(s->ops_daemon);
        return 0;
    }
    char why[128];
    int fd = http_listen_socket((const struct sockaddr *)ss, sslen, why, sizeof why);
    if (fd < 0) {
        snprintf(err, err_len, "cannot listen on %s (--ops-listen): %s", cfg->ops_listen, why);
        return -1;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0)
        s->ops_port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                        : ((struct sockaddr_in *)&bound)->sin_port);
    s->ops_daemon = start_one(s, cfg, ss, v6, true);
    if (!s->ops_daemon) {
        snprintf(err, err_len, "cannot serve %s (--ops-listen): libmicrohttpd refused to start",
                 cfg->ops_listen);
        close(fd);
        return -1;
    }
    http_acceptor_config ac = {
        .calls = s->ops_daemon,
        .streams = s->ops_daemon,
        .listen_fd = fd,
        .threads = 1,
        .max = OPS_MAX_CONNECTIONS,
        .max_waiting = WAITING_MAX,
        .max_per_ip = OPS_MAX_PER_IP,
        .first_timeout_ms = first_timeout_ms(cfg),
        .max_head = OPS_CONNECTION_MEMORY / 2, /* and as much for the answer */
        .name = "ops-listen",
    };
    s->ops_acceptor = http_acceptor_new(&ac);
    if (!s->ops_acceptor)
        close(fd);
    if (!s->ops_acceptor || http_acceptor_run(s->ops_acceptor) != 0) {
        snprintf(err, err_len, "cannot start the thread accepting on %s (--ops-listen)",
                 cfg->ops_listen);
        return -1;
    }
    return 0;
}

http_server *http_server_start(const http_config *cfg, char *err, size_t err_len)
{
    struct sockaddr_storage ss, ops_ss;
    socklen_t sslen, ops_sslen = 0;
    bool v6, ops_v6 = false;
    if (parse_listen(cfg->listen, &ss, &sslen, &v6, err, err_len) != 0)
        return NULL;
    if (cfg->ops_listen &&
        parse_listen(cfg->ops_listen, &ops_ss, &ops_sslen, &ops_v6, err, err_len) != 0)
        return NULL;
    http_server *s = server_new(cfg, err, err_len);
    if (!s)
        return NULL;
    if (cfg->tls_cert_file) {
        s->tls = http_tls_new(cfg->tls_cert_file, cfg->tls_key_file, err, err_len);
        if (!s->tls)
            goto fail;
    }
    if (main_start(s, cfg, &ss, sslen, v6, err, err_len) != 0)
        goto fail;
    if (cfg->ops_listen && ops_start(s, cfg, &ops_ss, ops_sslen, ops_v6, err, err_len) != 0)
        goto fail;
    if (http_timer_start(s) != 0) {
        snprintf(err, err_len, "cannot start the timer thread");
        goto fail;
    }
    return s;
fail:
    http_server_stop(s);
    return NULL;
}

uint16_t http_server_port(const http_server *s)
{
    return s->port;
}

uint16_t http_server_ops_port(const http_server *s)
{
    return s->ops_port;
}

bool http_server_ready(http_server *s, char *why, size_t why_len)
{
    bool ready;
    pthread_mutex_lock(&s->mu);
    if (s->stopping) {
        ready = false;
        snprintf(why, why_len, "shutting down");
    } else {
        ready = engine_ready(s->engine, why, why_len);
    }
    pthread_mutex_unlock(&s->mu);
    return ready;
}

void http_server_quiesce(http_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    s->gone = true;
    pthread_mutex_unlock(&s->mu);
    atomic_store(&s->refusing, true);
}

int http_server_finish(http_server *s, int timeout_ms)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = s->gone = true;
    http_calls_end_locked(s);
    http_auth_tickets_fail_locked(s);
    http_streams_end_locked(s);
    pthread_mutex_unlock(&s->mu);
    return http_streams_drain(s, timeout_ms);
}

void http_server_stop(http_server *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = s->gone = true;
    http_calls_fail_locked(s);
    http_auth_tickets_fail_locked(s);
    http_streams_abort_locked(s); /* and resumed: MHD_stop_daemon wants none suspended */
    pthread_mutex_unlock(&s->mu);
    http_acceptor_stop(s->acceptor); /* no connection is handed over from here on */
    http_acceptor_stop(s->ops_acceptor);
    http_timer_stop(s);
    if (s->ops_daemon)
        MHD_stop_daemon(s->ops_daemon);
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    if (s->stream_daemon)
        MHD_stop_daemon(s->stream_daemon);
    if (s->tls) {
        if (s->ops_daemon)
            http_tls_stopped(s->ops_daemon);
        if (s->daemon)
            http_tls_stopped(s->daemon);
    }
    http_acceptor_free(s->acceptor);
    http_acceptor_free(s->ops_acceptor);
    http_tls_free(s->tls);
    free(s->namespaces);
    /* The loop has stopped (or never reviewed anything); tickets it never
     * answered are dropped under s->mu. */
    auth_free(s->auth);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->drained);
    pthread_mutex_destroy(&s->mu);
    http_limits_free(s->limits); /* every connection was closed with the daemons */
    http_limits_free(s->ops_limits);
    free(s);
}
