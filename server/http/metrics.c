/* The HTTP server's own counters in the registry of core/metrics.c: every
 * finished RPC by method and Connect code (and its duration, but for
 * streams), the open streams, requests too slow to arrive, connections
 * closed unserved. /metrics (server/ops/) renders the registry.
 *
 * Threads: any; the open-stream gauges behind their own mutex. */
#include "http/metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/metrics.h"

void http_metrics_rpc_done(const char *method, const char *code, double seconds)
{
    char m[64], c[64], labels[160];
    metrics_label_escape(method, m, sizeof m);
    metrics_label_escape(code, c, sizeof c);
    snprintf(labels, sizeof labels, "method=\"%s\",code=\"%s\"", m, c);
    metrics_add("kubelease_rpc_requests_total", labels, 1);
    /* Streams last as long as their clients: their duration says nothing
     * about the service's latency. */
    if (strcmp(method, "Campaign") != 0 && strcmp(method, "WatchHolder") != 0) {
        snprintf(labels, sizeof labels, "method=\"%s\"", m);
        metrics_observe("kubelease_rpc_duration_seconds", labels, seconds);
    }
}

void http_metrics_stream(const char *method, int delta)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static long campaign, watch;
    char m[64], labels[96];
    metrics_label_escape(method, m, sizeof m);
    snprintf(labels, sizeof labels, "method=\"%s\"", m);
    pthread_mutex_lock(&mu);
    long *n = strcmp(method, "Campaign") == 0 ? &campaign : &watch;
    *n += delta;
    metrics_set("kubelease_rpc_streams_open", labels, (double)*n);
    pthread_mutex_unlock(&mu);
}

void http_metrics_slow_request(void)
{
    metrics_add("kubelease_http_slow_requests_total", "", 1);
}

void http_metrics_connection_dropped(const char *listener, const char *reason)
{
    char labels[96];
    snprintf(labels, sizeof labels, "listener=\"%s\",reason=\"%s\"", listener, reason);
    metrics_add("kubelease_http_connections_dropped_total", labels, 1);
}
