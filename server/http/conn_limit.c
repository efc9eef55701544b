/* Connection limits: --max-connections and --max-per-ip.
 *
 * libmicrohttpd enforces its limits by closing a connection as it is
 * accepted, which a client can only report as "connection reset". So the
 * configured limits are enforced here instead: a connection accepted over
 * them is marked, and its RPCs get a Connect resource_exhausted error
 * naming the limit (rpc.c), after which it is closed. Probes, scrapes and
 * the status page are still answered on it, so an overloaded replica still
 * tells the kubelet and Prometheus what is going on. libmicrohttpd's own
 * limits sit a little higher (http_limits_hard), as the last line of
 * defence.
 *
 * Locking: l->mu guards the counts and the peer table; it is taken by MHD
 * threads as connections open and close, and never with any other lock. */
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "core/hash.h"
#include "http/internal.h"

#define PEER_BUCKETS 256

/* The open connections from one address. */
typedef struct peer {
    struct peer *next;
    int family;
    uint8_t addr[16];
    unsigned conns;
} peer;

struct http_limits {
    pthread_mutex_t mu;
    unsigned max_conns, max_per_ip; /* the configured (soft) limits */
    unsigned n_conns;
    peer *peers[PEER_BUCKETS];
};

/* Per-connection state (MHD's socket context). */
typedef struct conn_state {
    peer *peer;     /* NULL when the address is unknown or memory ran out */
    char over[160]; /* why RPCs are refused on this connection; "" when they are not */
} conn_state;

http_limits *http_limits_new(unsigned max_conns, unsigned max_per_ip)
{
    http_limits *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    pthread_mutex_init(&l->mu, NULL);
    l->max_conns = max_conns;
    l->max_per_ip = max_per_ip;
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

/* l->mu held. Counts a new connection from sa; says in cs why it is over a
 * limit, if it is. */
static void conn_open_locked(http_limits *l, const struct sockaddr *sa, conn_state *cs)
{
    l->n_conns++;
    peer *p = peer_get(l, sa);
    if (p)
        p->conns++;
    if (!cs) {
        peer_put(l, p);
        return;
    }
    cs->peer = p;
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
}

void http_limits_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
    http_limits *l = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        conn_state *cs = calloc(1, sizeof *cs);
        pthread_mutex_lock(&l->mu);
        conn_open_locked(l, ci ? ci->client_addr : NULL, cs);
        pthread_mutex_unlock(&l->mu);
        *socket_context = cs;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_state *cs = *socket_context;
        pthread_mutex_lock(&l->mu);
        l->n_conns--;
        if (cs)
            peer_put(l, cs->peer);
        pthread_mutex_unlock(&l->mu);
        free(cs);
        *socket_context = NULL;
    }
}

const char *http_limits_over(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    const conn_state *cs = ci ? ci->socket_context : NULL;
    return cs && cs->over[0] ? cs->over : NULL;
}
