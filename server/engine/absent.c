/* The negative cache: Leases a read found absent, remembered for
 * ENGINE_ABSENT_TTL_MS so that polling a name that does not exist does not
 * reach the store every time. It holds at most ENGINE_ABSENT_MAX names (an
 * expired slot is reused first; with every slot live they are replaced in
 * turn) and nothing else: an absent Lease nobody campaigns on or watches
 * has no lease_state and no store watch, so reads of made-up names cannot
 * make the service follow them.
 * Only reads of Leases the engine does not follow consult it; once a Lease
 * is followed its watch is the truth (engine_lease_get drops the entry).
 * Engine thread only. */
#include <string.h>

#include "engine/internal.h"

static int find(const engine *e, const char *ns, const char *name)
{
    for (int i = 0; i < ENGINE_ABSENT_MAX; i++)
        if (e->absent[i].until_ms && strcmp(e->absent[i].ns, ns) == 0 &&
            strcmp(e->absent[i].name, name) == 0)
            return i;
    return -1;
}

bool engine_absent_has(engine *e, const char *ns, const char *name, int64_t now)
{
    int i = find(e, ns, name);
    if (i < 0)
        return false;
    if (e->absent[i].until_ms > now)
        return true;
    e->absent[i].until_ms = 0; /* expired: the slot is free again */
    return false;
}

void engine_absent_add(engine *e, const char *ns, const char *name, int64_t now)
{
    int i = find(e, ns, name);
    for (int k = 0; i < 0 && k < ENGINE_ABSENT_MAX; k++)
        if (!e->absent[k].until_ms || e->absent[k].until_ms <= now)
            i = k;
    if (i < 0) {
        i = (int)(e->absent_next % ENGINE_ABSENT_MAX);
        e->absent_next++;
    }
    engine_copy_str(e->absent[i].ns, sizeof e->absent[i].ns, ns);
    engine_copy_str(e->absent[i].name, sizeof e->absent[i].name, name);
    e->absent[i].until_ms = now + ENGINE_ABSENT_TTL_MS;
}

void engine_absent_drop(engine *e, const char *ns, const char *name)
{
    int i = find(e, ns, name);
    if (i >= 0)
        e->absent[i].until_ms = 0;
}
