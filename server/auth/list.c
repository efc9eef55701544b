/* Narrowing a listing (docs/design.md, rule 7): which of a set of
 * namespaces a subject may list elections in, for a caller who may not
 * list them at the cluster scope. The caller hands over the names and
 * drops the rows itself; namespaces whose access answer is not cached are
 * asked about. No answer about a namespace is no access: the whole
 * narrowing then fails with AUTH_UNAVAILABLE rather than say less or more
 * than it should.
 *
 * Threads: the loop thread; no locks. auth_free drops a narrowing still
 * waiting for the apiserver once the loop has stopped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/internal.h"

typedef struct narrowing narrowing;

typedef struct slot {
    narrowing *n;
    char ns[64];
} slot;

struct narrowing {
    auth_ctx *a;
    auth_subject *subject;
    slot *slots;
    bool *allowed; /* one per slot */
    size_t n_slots;
    size_t pending;    /* reviews in flight, plus one while starting */
    auth_code failed;  /* AUTH_OK, or why a namespace has no answer */
    char message[300]; /* why */
    auth_narrow_done done;
    void (*drop)(void *ctx);
    void *ctx;
};

static void narrowing_free(narrowing *n)
{
    auth_subject_unref(n->subject);
    free(n->slots);
    free(n->allowed);
    free(n);
}

static void release(narrowing *n)
{
    if (--n->pending > 0)
        return;
    if (n->failed != AUTH_OK)
        n->done(n->ctx, n->failed, n->message, NULL);
    else
        n->done(n->ctx, AUTH_OK, "", n->allowed);
    narrowing_free(n);
}

static void on_access(void *ctx, const auth_access_answer *acc)
{
    slot *sl = ctx;
    narrowing *n = sl->n;
    if (acc->code != AUTH_OK) {
        n->failed = acc->code;
        snprintf(n->message, sizeof n->message, "%s", acc->message);
    } else {
        n->allowed[sl - n->slots] = acc->allowed;
    }
    release(n);
}

/* The authorizer is freed before the answer came (shutdown). */
static void on_drop(void *ctx)
{
    slot *sl = ctx;
    narrowing *n = sl->n;
    if (--n->pending > 0)
        return;
    if (n->drop)
        n->drop(n->ctx);
    narrowing_free(n);
}

/* Asks about slot sl: from the cache, or a review (pending + 1). */
static void ask(narrowing *n, slot *sl)
{
    auth_access_question q = {"list", sl->ns, "", NULL};
    uint8_t key[AUTH_DIGEST_LEN];
    auth_access_answer acc;
    auth_access_key(n->subject, &q, key);
    n->pending++;
    if (auth_access_lookup(n->a, key, &acc, NULL)) {
        on_access(sl, &acc);
        return;
    }
    /* Counted in the overall rate: the caller's address is not known here. */
    const auth_asker who = {.limited = true, .peer = ""};
    if (auth_review_access(n->a, n->subject, &q, &who, on_access, on_drop, sl, n->message,
                           sizeof n->message) != 0) {
        n->failed = AUTH_UNAVAILABLE;
        n->pending--;
    }
}

int auth_narrow(auth_ctx *a, auth_subject *subject, const char *const *names, size_t count,
                auth_narrow_done done, void (*drop)(void *ctx), void *ctx)
{
    narrowing *n = calloc(1, sizeof *n);
    size_t cap = count ? count : 1;
    if (!n || !(n->slots = calloc(cap, sizeof *n->slots)) ||
        !(n->allowed = calloc(cap, sizeof *n->allowed))) {
        if (n)
            free(n->slots);
        free(n);
        return -1;
    }
    n->a = a;
    n->subject = auth_subject_ref(subject);
    n->n_slots = count;
    n->done = done;
    n->drop = drop;
    n->ctx = ctx;
    for (size_t i = 0; i < count; i++) {
        n->slots[i].n = n;
        snprintf(n->slots[i].ns, sizeof n->slots[i].ns, "%s", names[i]);
    }
    n->pending = 1; /* this call's own, so that nothing finishes inside the loop */
    for (size_t i = 0; i < count; i++)
        ask(n, &n->slots[i]);
    release(n);
    return 0;
}
