/* Connection limits: how many connections (--max-connections,
 * --max-per-ip) and how long a request may take to arrive
 * (--first-request-timeout-s, --read-timeout-s).
 *
 * libmicrohttpd enforces its limits by closing a connection as it is
 * accepted, which a client can only report as "connection reset". So the
 * configured limits are enforced here instead: a connection accepted over
 * them is marked, and its RPCs get a Connect resource_exhausted error
 * naming the limit (rpc.c), after which it is closed; a Confirm or a Resign
 * is served all the same (a leader keeping or ending its term is not the
 * stranger the limits are for). Probes, scrapes and
 * the status page are still answered on it, so an overloaded replica still
 * tells the kubelet and Prometheus what is going on. libmicrohttpd's own
 * limits sit a little higher (http_limits_hard), as the last line of
 * defence.
 *
 * Read deadline: libmicrohttpd's idle timeout starts again with every byte,
 * so a client trickling a byte every few seconds would hold its slot for
 * ever. Each connection is therefore in one of three phases:
 * - reading: a request is arriving, since the connection opened or, on a
 *   kept-alive connection, since its first byte came in. It must be whole,
 *   head and body, within the read timeout; the first request of a
 *   connection within the first-request timeout (shorter: a connection that
 *   never sends a request must not hold a slot for long);
 * - handling: the request is in (a call waiting for the engine, a stream):
 *   no read deadline, Connect-Timeout-Ms and the streams' own checks apply;
 * - idle: kept alive between requests: the idle timeout applies. The
 *   kernel's TCP_INFO counts the bytes received, so the timer thread
 *   notices the bytes of a new request (to within its one-second tick,
 *   counted against the client) even before its head is whole. Bytes that
 *   came in with the previous request (pipelined) are noticed with the
 *   next byte after them, or by libmicrohttpd once the head is whole.
 * The timer thread shuts down (never closes) a connection past its
 * deadline: libmicrohttpd then closes it itself, so no descriptor is ever
 * reused under it. The same goes for a connection whose accounting cannot
 * be allocated: it is shut down at once rather than left unlimited.
 *
 * Locking: l->mu guards the counts, the peer table and the connections'
 * phases; it is taken by MHD threads as connections open and close and as
 * requests start and end, and by the timer thread; never with any other
 * lock. A connection leaves l->conns (under l->mu) before libmicrohttpd
 * closes its socket, so the timer thread only ever shuts down open ones. */
#include <linux/tcp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/hash.h"
#include "core/log.h"
#include "http/internal.h"
#include "http/metrics.h"

#define PEER_BUCKETS 256
#define POLL_MS      1000 /* how often connections between requests are looked at */

/* The open connections from one address. */
typedef struct peer {
    struct peer *next;
    int family;
    uint8_t addr[16];
    unsigned conns;
} peer;

typedef enum conn_phase { PHASE_READING, PHASE_HANDLING, PHASE_IDLE, PHASE_SHUT } conn_phase;

/* Per-connection state (MHD's socket context), in l->conns. */
typedef struct conn_state {
    struct conn_state *prev, *next;
    http_limits *limits;
    peer *peer; /* NULL when the address is unknown */
    int fd;
    conn_phase phase;
    int64_t since_ms;  /* reading: when the request's time started; shut: when it was shut */
    uint64_t bytes_in; /* handling, idle: bytes received when the last request was in */
    int64_t quiet_ms;  /* handling, idle: when no byte past bytes_in had come yet */
    int64_t poll_ms;   /* handling, idle: when bytes are counted next */
    bool first;        /* reading: its first request, under the first-request timeout */
    char over[160];    /* why RPCs are refused on this connection; "" when they are not */
} conn_state;

struct http_limits {
    pthread_mutex_t mu;
    unsigned max_conns, max_per_ip; /* the configured (soft) limits */
    int64_t read_timeout_ms;        /* 0: none */
    int64_t first_timeout_ms;       /* a connection's first request */
    unsigned n_conns;
    peer *peers[PEER_BUCKETS];
    conn_state *conns;
};

http_limits *http_limits_new(unsigned max_conns, unsigned max_per_ip, unsigned read_timeout_ms,
                             unsigned first_timeout_ms)
{
    http_limits *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    pthread_mutex_init(&l->mu, NULL);
    l->max_conns = max_conns;
    l->max_per_ip = max_per_ip;
    l->read_timeout_ms = read_timeout_ms;
    l->first_timeout_ms = first_timeout_ms ? first_timeout_ms : read_timeout_ms;
    return l;
}

/* After the daemon stopped: every connection was closed, and its peer put. */
void http_limits_free(http_limits *l)
{
    if (!l)
        return;
    for (unsigned b = 0; b < PEER_BUCKETS; b++) {
        for (peer *p = l->peers[b], *next; p; p = next) {
            next = p->next;
            free(p);
        }
    }
    pthread_mutex_destroy(&l->mu);
    free(l);
}

unsigned http_limits_hard(unsigned limit)
{
    return limit + (limit / 8 > 8 ? limit / 8 : 8);
}

static bool peer_key(const struct sockaddr *sa, int *family, uint8_t addr[16])
{
    memset(addr, 0, 16);
    if (sa->sa_family == AF_INET) {
        memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    } else {
        return false;
    }
    *family = sa->sa_family;
    return true;
}

static unsigned peer_hash(const uint8_t addr[16])
{
    return hash_fnv1a(HASH_FNV1A_INIT, addr, 16) % PEER_BUCKETS;
}

/* l->mu held. The peer of that address, created with no connections. */
static peer *peer_get(http_limits *l, const struct sockaddr *sa)
{
    int family;
    uint8_t addr[16];
    if (!sa || !peer_key(sa, &family, addr))
        return NULL;
    peer **head = &l->peers[peer_hash(addr)];
    for (peer *p = *head; p; p = p->next)
        if (p->family == family && memcmp(p->addr, addr, 16) == 0)
            return p;
    peer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->family = family;
    memcpy(p->addr, addr, 16);
    p->next = *head;
    *head = p;
    return p;
}

/* l->mu held. Drops one connection of p, and p with its last. */
static void peer_put(http_limits *l, peer *p)
{
    if (!p || --p->conns > 0)
        return;
    for (peer **pp = &l->peers[peer_hash(p->addr)]; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    free(p);
}

/* l->mu held. Counts a new connection from sa into cs, and says in cs why
 * it is over a limit, if it is. Returns false when its peer cannot be
 * counted though a per-IP limit needs it. */
static bool conn_open_locked(http_limits *l, const struct sockaddr *sa, conn_state *cs)
{
    peer *p = peer_get(l, sa);
    if (!p && l->max_per_ip && sa && (sa->sa_family == AF_INET || sa->sa_family == AF_INET6))
        return false; /* out of memory */
    l->n_conns++;
    if (p)
        p->conns++;
    cs->peer = p;
    cs->next = l->conns;
    if (l->conns)
        l->conns->prev = cs;
    l->conns = cs;
    if (l->n_conns > l->max_conns)
        snprintf(cs->over, sizeof cs->over,
                 "kubeleased has %u connections open, over --max-connections %u: retry "
                 "later or on another replica",
                 l->n_conns, l->max_conns);
    else if (l->max_per_ip && p && p->conns > l->max_per_ip)
        snprintf(cs->over, sizeof cs->over,
                 "%u connections open from this address, over --max-per-ip %u: close "
                 "some or share one client",
                 p->conns, l->max_per_ip);
    return true;
}

/* l->mu held. */
static void conn_close_locked(http_limits *l, conn_state *cs)
{
    l->n_conns--;
    peer_put(l, cs->peer);
    if (cs->prev)
        cs->prev->next = cs->next;
    else
        l->conns = cs->next;
    if (cs->next)
        cs->next->prev = cs->prev;
}

/* A connection that cannot be accounted for is not served: shut down at
 * once (libmicrohttpd closes it), rather than let in past the limits. */
static void refuse(int fd, const char *why)
{
    log_event(LOG_WARN, "connection_refused", "reason=%s", log_q(why));
    if (fd >= 0)
        shutdown(fd, SHUT_RDWR);
}

void http_limits_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
    http_limits *l = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const union MHD_ConnectionInfo *fi =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        int fd = fi ? fi->connect_fd : -1;
        *socket_context = NULL;
        conn_state *cs = calloc(1, sizeof *cs);
        if (!cs) {
            refuse(fd, "out of memory for its accounting");
            return;
        }
        cs->limits = l;
        cs->fd = fd;
        cs->phase = PHASE_READING;
        cs->first = true;
        cs->since_ms = http_now_ms();
        pthread_mutex_lock(&l->mu);
        bool ok = conn_open_locked(l, ci ? ci->client_addr : NULL, cs);
        pthread_mutex_unlock(&l->mu);
        if (!ok) {
            free(cs);
            refuse(fd, "out of memory for its --max-per-ip accounting");
            return;
        }
        *socket_context = cs;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_state *cs = *socket_context;
        if (!cs)
            return;
        pthread_mutex_lock(&l->mu);
        conn_close_locked(l, cs);
        pthread_mutex_unlock(&l->mu);
        free(cs);
        *socket_context = NULL;
    }
}

static conn_state *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

const char *http_limits_over(struct MHD_Connection *conn, bool urgent)
{
    const conn_state *cs = conn_of(conn);
    return cs && cs->over[0] && !urgent ? cs->over : NULL;
}

/* ---------- request phases and the read deadline ---------- */

/* The bytes received on fd so far (TCP_INFO): which of them belong to the
 * next request is told by counting, as times would be too coarse for a
 * request sent the moment the last answer arrived. 0 when unknown (a
 * kernel before 4.1): new requests are then noticed only once their head
 * is whole. */
static uint64_t bytes_received(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    memset(&ti, 0, sizeof ti);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
        return 0;
    return ti.tcpi_bytes_received;
}

void http_conn_request_begin(struct MHD_Connection *conn)
{
    conn_state *cs = conn_of(conn);
    if (!cs)
        return;
    pthread_mutex_lock(&cs->limits->mu);
    /* A request the timer had not noticed yet: its time runs from when the
     * connection was last seen quiet. */
    if (cs->phase == PHASE_IDLE) {
        cs->phase = PHASE_READING;
        cs->since_ms = cs->quiet_ms;
    }
    pthread_mutex_unlock(&cs->limits->mu);
}

void http_conn_request_read(struct MHD_Connection *conn)
{
    conn_state *cs = conn_of(conn);
    if (!cs)
        return;
    uint64_t bytes = bytes_received(cs->fd);
    pthread_mutex_lock(&cs->limits->mu);
    if (cs->phase == PHASE_READING) {
        cs->phase = PHASE_HANDLING;
        cs->first = false;
        cs->bytes_in = bytes; /* every byte of this request, and maybe more */
        cs->quiet_ms = http_now_ms();
    }
    pthread_mutex_unlock(&cs->limits->mu);
}

void http_conn_request_done(struct MHD_Connection *conn)
{
    conn_state *cs = conn_of(conn);
    if (!cs)
        return;
    uint64_t bytes = bytes_received(cs->fd);
    pthread_mutex_lock(&cs->limits->mu);
    if (cs->phase == PHASE_READING) { /* answered before its body was in */
        cs->first = false;
        cs->bytes_in = bytes;
        cs->quiet_ms = http_now_ms();
    }
    if (cs->phase != PHASE_SHUT)
        cs->phase = PHASE_IDLE;
    pthread_mutex_unlock(&cs->limits->mu);
}

/* l->mu held. Moves cs on at now; returns when it next needs a look
 * (INT64_MAX: not before its phase changes). */
static int64_t conn_check_locked(http_limits *l, conn_state *cs, int64_t now)
{
    bool between = cs->phase == PHASE_HANDLING || cs->phase == PHASE_IDLE;
    if (between && now < cs->poll_ms)
        return cs->poll_ms;
    if (between) {
        cs->poll_ms = now + POLL_MS;
        if (bytes_received(cs->fd) <= cs->bytes_in)
            cs->quiet_ms = now;
        else if (cs->phase == PHASE_IDLE) {
            cs->phase = PHASE_READING; /* its first byte came after the last quiet look */
            cs->since_ms = cs->quiet_ms;
        }
    }
    if (cs->phase == PHASE_HANDLING || cs->phase == PHASE_IDLE)
        return cs->poll_ms;
    if (cs->phase != PHASE_READING)
        return INT64_MAX;
    int64_t timeout = cs->first ? l->first_timeout_ms : l->read_timeout_ms;
    int64_t deadline = cs->since_ms + timeout;
    if (now < deadline)
        return deadline;
    log_event(LOG_DEBUG, "slow_request", "waited_ms=%lld timeout_ms=%lld first=%s",
              (long long)(now - cs->since_ms), (long long)timeout, cs->first ? "true" : "false");
    http_metrics_slow_request();
    cs->phase = PHASE_SHUT;
    cs->since_ms = now;
    shutdown(cs->fd, SHUT_RDWR);
    return INT64_MAX;
}

int64_t http_limits_enforce(http_limits *l, int64_t now)
{
    int64_t wake = INT64_MAX;
    if (!l || !l->read_timeout_ms)
        return wake;
    pthread_mutex_lock(&l->mu);
    for (conn_state *cs = l->conns; cs; cs = cs->next) {
        int64_t next = conn_check_locked(l, cs, now);
        if (next < wake)
            wake = next;
    }
    pthread_mutex_unlock(&l->mu);
    return wake;
}
