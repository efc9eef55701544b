/* What both stores share: status names and small helpers on store values.
 * Pure; any thread. */
#include "store/store.h"

#include <stdio.h>
#include <string.h>

const char *store_status_name(store_status s)
{
    static const char *const names[] = {
#define STORE_STATUS_NAME(name, text) [STORE_##name] = text,
        STORE_STATUS_MAP(STORE_STATUS_NAME)
#undef STORE_STATUS_NAME
    };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown";
}

void store_lease_absent(store_lease *l, const char *ns, const char *name)
{
    memset(l, 0, sizeof *l);
    snprintf(l->ns, sizeof l->ns, "%s", ns);
    snprintf(l->name, sizeof l->name, "%s", name);
}
