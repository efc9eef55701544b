/* CheckEpoch: the fencing check of downstream servers. It is a GetHolder
 * read — the watch-fed cache, the negative cache for absent Leases, a Lease
 * not followed read once and followed only if it exists (request.c) — whose
 * answer is turned into "is this epoch's term the live one". So a check
 * costs what a cached read costs, and checks of made-up names cannot make
 * the service follow them or reach the apiserver more than once per name
 * every two seconds. Any thread posts; the answer runs on the engine
 * thread. */
#include <stdlib.h>

#include "engine/internal.h"

typedef struct check_call {
    int64_t epoch;
    engine_done done;
    void *ctx;
} check_call;

/* The read's answer as a check's: current only when a live holder's term
 * has the epoch asked about. An absent Lease has no term: not current,
 * epoch 0. Errors pass through. */
static void check_done(void *ctx, const engine_reply *read)
{
    check_call *k = ctx;
    engine_reply r = {.code = ENGINE_OK};
    if (read->code == ENGINE_OK) {
        r.epoch = read->epoch;
        r.current = read->holder[0] != '\0' && read->epoch == k->epoch;
    } else if (read->code != ENGINE_NOT_FOUND) {
        r = *read;
    }
    k->done(k->ctx, &r);
    free(k);
}

int engine_check_epoch(engine *e, const char *ns, const char *name, const char *caller,
                       int64_t epoch, engine_done done, void *ctx)
{
    check_call *k = malloc(sizeof *k);
    if (!k)
        return -1;
    k->epoch = epoch;
    k->done = done;
    k->ctx = ctx;
    if (engine_get_holder_owned(e, ns, name, caller, false, check_done, k, free) != 0) {
        free(k);
        return -1;
    }
    return 0;
}
