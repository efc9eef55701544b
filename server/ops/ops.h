/* The operator pages, a layer above http/ (docs/design.md, "Layers"): the
 * status page at /, /metrics, /livez, /readyz, and /leases and /terms (a
 * ListLeases and a ListTerms in JSON). http/ serves them through the hooks
 * ops_http_hooks returns, which server/service.c hands to http_server_start
 * (http_config.ops); http/ knows nothing of this layer. */
#ifndef KL_OPS_OPS_H
#define KL_OPS_OPS_H

#include <stddef.h>

#include "engine/engine.h"
#include "http/server.h"

/* The routes and the page, for http_config.ops. Static; any thread. */
const http_ops_hooks *ops_http_hooks(void);

/* GET /: renders the status page from a ListLeases reply (valid only during
 * the call), or without rows when list is NULL (its script fetches them).
 * Returns 0 with *body malloc'd and *content_type (static) set, or -1 (out
 * of memory). Any thread. */
int ops_status_page(const engine_reply *list, char **body, size_t *len, const char **content_type);

/* The Content-Security-Policy of the status page: its own script and style
 * only, fetches to its own origin only. Static; any thread. */
const char *ops_page_csp(void);

#endif
