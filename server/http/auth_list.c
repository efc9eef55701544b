/* Narrowing what ListLeases and the status page show: to the namespace the
 * request names, and, for a caller who may not list elections at the
 * cluster scope, to the namespaces where it may (docs/design.md, rule 7).
 * The engine answers with every Lease it follows; this file drops the rows
 * the caller may not see, asking the apiserver about namespaces whose
 * access answer is not cached. No answer about a namespace is no access:
 * the whole call then fails with "unavailable" rather than show less or
 * more than it should.
 *
 * Threads: the engine thread (which runs the loop, so reviews start and
 * answer here); no locks. http_auth_free drops a narrowing still waiting
 * for the apiserver once the loop has stopped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/auth.h"
#include "http/auth_internal.h"

enum { NS_UNKNOWN, NS_ALLOWED, NS_DENIED };

typedef struct narrowing narrowing;

typedef struct slot {
    narrowing *n;
    char ns[64];
    int state;
} slot;

struct narrowing {
    http_auth *a;
    auth_subject *subject;
    engine_reply reply; /* the engine's, its rows copied */
    engine_lease_status *rows;
    slot *slots; /* one per namespace among the rows */
    size_t n_slots;
    size_t pending;    /* reviews in flight, plus one while starting */
    bool failed;       /* a namespace has no answer */
    char message[300]; /* why */
    http_list_done done;
    void *ctx;
};

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

static void narrowing_free(narrowing *n)
{
    auth_subject_unref(n->subject);
    free(n->rows);
    free(n->slots);
    free(n);
}

static const slot *slot_of(const narrowing *n, const char *ns)
{
    for (size_t i = 0; i < n->n_slots; i++)
        if (strcmp(n->slots[i].ns, ns) == 0)
            return &n->slots[i];
    return NULL;
}

/* Every answer is in: the rows of allowed namespaces go to done. */
static void finish(narrowing *n)
{
    engine_reply r = n->reply;
    if (n->failed) {
        r.code = ENGINE_UNAVAILABLE;
        snprintf(r.message, sizeof r.message, "%s", n->message);
        r.n_leases = 0;
        r.leases = NULL;
        n->done(n->ctx, &r);
        return;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n->reply.n_leases; i++) {
        const slot *sl = slot_of(n, n->rows[i].ns);
        if (sl && sl->state == NS_ALLOWED)
            n->rows[kept++] = n->rows[i];
    }
    r.leases = n->rows;
    r.n_leases = kept;
    n->done(n->ctx, &r);
}

static void release(narrowing *n)
{
    if (--n->pending > 0)
        return;
    finish(n);
    narrowing_free(n);
}

static void on_access(void *ctx, const auth_access_answer *acc)
{
    slot *sl = ctx;
    narrowing *n = sl->n;
    if (acc->code != RPC_OK) {
        n->failed = true;
        snprintf(n->message, sizeof n->message, "%s", acc->message);
    } else {
        sl->state = acc->allowed ? NS_ALLOWED : NS_DENIED;
    }
    release(n);
}

/* The authorizer is freed before the answer came (shutdown). */
static void on_drop(void *ctx)
{
    slot *sl = ctx;
    narrowing *n = sl->n;
    if (--n->pending == 0)
        narrowing_free(n);
}

/* Asks about slot sl: from the cache, or a review (pending + 1). */
static void ask(narrowing *n, slot *sl)
{
    auth_access_question q = {"list", sl->ns, "", NULL};
    uint8_t key[AUTH_DIGEST_LEN];
    auth_access_answer acc;
    auth_access_key(n->subject, &q, key);
    if (auth_access_lookup(n->a, key, &acc, NULL)) {
        n->pending++;
        on_access(sl, &acc);
        return;
    }
    n->pending++;
    /* Counted in the overall rate: the caller's address is not known here. */
    const auth_asker who = {.limited = true, .peer = ""};
    if (auth_review_access(n->a, n->subject, &q, &who, on_access, on_drop, sl, n->message,
                           sizeof n->message) != 0) {
        n->failed = true;
        n->pending--;
    }
}

/* Copies the rows of r in scope's namespace and finds their namespaces. */
static narrowing *narrowing_new(http_server *s, const http_list_scope *scope, const engine_reply *r)
{
    narrowing *n = calloc(1, sizeof *n);
    size_t cap = r->n_leases ? r->n_leases : 1;
    if (!n || !(n->rows = calloc(cap, sizeof *n->rows)) ||
        !(n->slots = calloc(cap, sizeof *n->slots))) {
        if (n)
            free(n->rows);
        free(n);
        return NULL;
    }
    n->a = s->auth;
    n->subject = auth_subject_ref(scope->subject);
    n->reply = *r;
    size_t kept = 0;
    for (size_t i = 0; i < r->n_leases; i++) {
        const engine_lease_status *row = &r->leases[i];
        if (scope->ns[0] && strcmp(row->ns, scope->ns) != 0)
            continue;
        n->rows[kept++] = *row;
        if (slot_of(n, row->ns))
            continue;
        slot *sl = &n->slots[n->n_slots++];
        sl->n = n;
        snprintf(sl->ns, sizeof sl->ns, "%s", row->ns);
        /* Without a subject, only the namespace filter applies. */
        sl->state = n->subject ? NS_UNKNOWN : NS_ALLOWED;
    }
    n->reply.n_leases = kept;
    return n;
}

int http_list_narrow(http_server *s, const http_list_scope *scope, const engine_reply *r,
                     http_list_done done, void *ctx)
{
    narrowing *n = narrowing_new(s, scope, r);
    if (!n)
        return -1;
    n->done = done;
    n->ctx = ctx;
    n->pending = 1; /* this call's own, so that nothing finishes inside the loop */
    for (size_t i = 0; n->subject && i < n->n_slots; i++)
        ask(n, &n->slots[i]);
    release(n);
    return 0;
}
