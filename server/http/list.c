/* Narrowing what ListLeases and the status page show: to the namespace the
 * request names, and, for a caller who may not list elections at the
 * cluster scope, to the namespaces where it may (auth_narrow says which).
 * The engine answers with every Lease it follows; this file drops the rows
 * the caller may not see.
 *
 * Threads: the engine thread (which runs the loop); no locks. A narrowing
 * still waiting for the apiserver when the authorizer is freed (shutdown)
 * is dropped then. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth.h"
#include "http/auth.h"

typedef struct narrowing {
    engine_reply reply; /* the engine's, its rows (in scope's namespace) copied */
    engine_lease_status *rows;
    char (*ns)[64];     /* the namespaces among the rows */
    const char **names; /* into ns */
    size_t n_names;
    http_list_done done;
    void *ctx;
} narrowing;

bool http_list_scope_narrows(const http_list_scope *scope)
{
    return scope->ns[0] || scope->subject;
}

void http_list_scope_clear(http_list_scope *scope)
{
    auth_subject_unref(scope->subject);
    scope->subject = NULL;
    scope->ns[0] = 0;
}

static void narrowing_free(void *ctx)
{
    narrowing *n = ctx;
    free(n->rows);
    free(n->ns);
    free(n->names);
    free(n);
}

static size_t name_index(const narrowing *n, const char *ns)
{
    for (size_t i = 0; i < n->n_names; i++)
        if (strcmp(n->names[i], ns) == 0)
            return i;
    return n->n_names;
}

/* Every answer is in: the rows of allowed namespaces (allowed NULL: all
 * of them) go to done. */
static void narrowed(void *ctx, auth_code code, const char *message, const bool *allowed)
{
    narrowing *n = ctx;
    engine_reply r = n->reply;
    if (code != AUTH_OK) {
        r.code = ENGINE_UNAVAILABLE;
        snprintf(r.message, sizeof r.message, "%s", message);
        r.n_leases = 0;
        r.leases = NULL;
        n->done(n->ctx, &r);
        narrowing_free(n);
        return;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n->reply.n_leases; i++)
        if (!allowed || allowed[name_index(n, n->rows[i].ns)])
            n->rows[kept++] = n->rows[i];
    r.leases = n->rows;
    r.n_leases = kept;
    n->done(n->ctx, &r);
    narrowing_free(n);
}

int http_list_narrow(http_server *s, const http_list_scope *scope, const engine_reply *r,
                     http_list_done done, void *ctx)
{
    narrowing *n = calloc(1, sizeof *n);
    size_t cap = r->n_leases ? r->n_leases : 1;
    if (!n || !(n->rows = calloc(cap, sizeof *n->rows)) || !(n->ns = calloc(cap, sizeof *n->ns)) ||
        !(n->names = calloc(cap, sizeof *n->names))) {
        if (n)
            narrowing_free(n);
        return -1;
    }
    n->reply = *r;
    n->done = done;
    n->ctx = ctx;
    size_t kept = 0;
    for (size_t i = 0; i < r->n_leases; i++) {
        const engine_lease_status *row = &r->leases[i];
        if (scope->ns[0] && strcmp(row->ns, scope->ns) != 0)
            continue;
        n->rows[kept++] = *row;
        if (name_index(n, row->ns) == n->n_names) {
            snprintf(n->ns[n->n_names], sizeof n->ns[n->n_names], "%s", row->ns);
            n->names[n->n_names] = n->ns[n->n_names];
            n->n_names++;
        }
    }
    n->reply.n_leases = kept;
    /* Without a subject, only the namespace filter applies. */
    if (!scope->subject) {
        narrowed(n, AUTH_OK, "", NULL);
        return 0;
    }
    if (auth_narrow(s->auth, scope->subject, n->names, n->n_names, narrowed, narrowing_free, n) !=
        0) {
        narrowing_free(n);
        return -1;
    }
    return 0;
}
