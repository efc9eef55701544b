/* Hooks for the operator endpoints that the observability module fills in:
 * /metrics, the status page at /, and per-RPC accounting. The HTTP server
 * calls them; they must not block. */
#ifndef KL_HTTP_HTTP_OPS_H
#define KL_HTTP_HTTP_OPS_H

#include <stddef.h>

#include "engine/engine.h"

/* GET /metrics. Returns 0 with *body malloc'd (the server frees it), *len
 * and *content_type (static) set; or -1 to answer 404. Any HTTP thread. */
int http_ops_metrics(char **body, size_t *len, const char **content_type);

/* GET /: renders the status page from a ListLeases reply (valid only during
 * the call), or without rows when list is NULL (its script fetches them).
 * Returns 0 with *body malloc'd, or -1 (500). Any thread. */
int http_ops_status_page(const engine_reply *list, char **body, size_t *len,
                         const char **content_type);
/* The Content-Security-Policy of the status page: its own script and style
 * only, fetches to its own origin only. Static; any thread. */
const char *http_ops_page_csp(void);

/* Called once for every finished RPC with its method ("Confirm"), its
 * Connect code ("ok", "not_found"...) and its duration. Any thread. */
void http_ops_rpc_done(const char *method, const char *code, double seconds);

/* A stream (Campaign or WatchHolder) opened (+1) or ended (-1). Any thread. */
void http_ops_stream(const char *method, int delta);

/* A connection was shut down because its request did not arrive whole
 * within --read-timeout-s. Any thread. */
void http_ops_slow_request(void);

/* A connection was closed before it was served: listener is the flag of
 * its listener ("listen", "ops-listen"), reason why ("idle": no whole head
 * within --first-request-timeout-s; "per_ip": too many waiting from its
 * address; "evicted": closed for a newer one; "framing": an ambiguous head
 * answered 400; "out_of_memory"). Any thread. */
void http_ops_connection_dropped(const char *listener, const char *reason);

#endif
