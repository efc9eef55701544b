/* The HTTP server's counters (metrics.c): what the transport and the
 * Connect layer count of their own work, for /metrics. They must not
 * block; any thread. */
#ifndef KL_HTTP_METRICS_H
#define KL_HTTP_METRICS_H

/* Called once for every finished RPC with its method ("Confirm"), its
 * Connect code ("ok", "not_found"...) and its duration. */
void http_metrics_rpc_done(const char *method, const char *code, double seconds);

/* A stream (Campaign or WatchHolder) opened (+1) or ended (-1). */
void http_metrics_stream(const char *method, int delta);

/* A connection was shut down because its request did not arrive whole
 * within --read-timeout-s. */
void http_metrics_slow_request(void);

/* A connection was closed before it was served: listener is the flag of
 * its listener ("listen", "ops-listen"), reason why ("idle": no whole head
 * within --first-request-timeout-s; "per_ip": too many waiting from its
 * address; "evicted": closed for a newer one; "framing": an ambiguous head
 * answered 400; "out_of_memory"). */
void http_metrics_connection_dropped(const char *listener, const char *reason);

#endif
