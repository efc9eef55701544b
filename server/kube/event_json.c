/* The core/v1 Event codec (pure; see event_json.h). */
#include "kube/event_json.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kube/lease_json.h"

/* metav1.Time: RFC 3339 in whole seconds, "2006-01-02T15:04:05Z". */
static int format_time(int64_t us, char out[KUBE_MICROTIME_LEN])
{
    if (kube_microtime_format(us, out) != 0)
        return -1;
    out[19] = 'Z'; /* cut ".000000Z" to "Z" */
    out[20] = '\0';
    return 0;
}

static bool bounded(const char *s, size_t cap)
{
    return memchr(s, 0, cap) != NULL;
}

static bool fits(const kube_event *ev)
{
    return bounded(ev->ns, sizeof ev->ns) && bounded(ev->name, sizeof ev->name) &&
           bounded(ev->uid, sizeof ev->uid) &&
           bounded(ev->resource_version, sizeof ev->resource_version) &&
           bounded(ev->reason, sizeof ev->reason) && bounded(ev->message, sizeof ev->message) &&
           bounded(ev->component, sizeof ev->component) &&
           bounded(ev->instance, sizeof ev->instance) && ev->type && ev->ns[0] && ev->name[0];
}

/* name: value, unless value is "" (an unknown uid or resourceVersion). */
static bool add_set(cJSON *o, const char *name, const char *value)
{
    return !value[0] || cJSON_AddStringToObject(o, name, value);
}

static bool add_involved(cJSON *root, const kube_event *ev)
{
    cJSON *io = cJSON_AddObjectToObject(root, "involvedObject");
    return io && cJSON_AddStringToObject(io, "apiVersion", "coordination.k8s.io/v1") &&
           cJSON_AddStringToObject(io, "kind", "Lease") &&
           cJSON_AddStringToObject(io, "namespace", ev->ns) &&
           cJSON_AddStringToObject(io, "name", ev->name) && add_set(io, "uid", ev->uid) &&
           add_set(io, "resourceVersion", ev->resource_version);
}

char *kube_event_encode(const kube_event *ev, size_t *len)
{
    char at[KUBE_MICROTIME_LEN], prefix[KUBE_NAME_MAX + 1];
    if (!fits(ev) || format_time(ev->time_us, at) != 0)
        return NULL;
    snprintf(prefix, sizeof prefix, "%s.", ev->name);
    char *text = NULL;
    cJSON *root = cJSON_CreateObject(), *md, *src;
    if (!root || !cJSON_AddStringToObject(root, "apiVersion", "v1") ||
        !cJSON_AddStringToObject(root, "kind", "Event") ||
        !(md = cJSON_AddObjectToObject(root, "metadata")) ||
        !cJSON_AddStringToObject(md, "generateName", prefix) ||
        !cJSON_AddStringToObject(md, "namespace", ev->ns) || !add_involved(root, ev) ||
        !cJSON_AddStringToObject(root, "type", ev->type) ||
        !cJSON_AddStringToObject(root, "reason", ev->reason) ||
        !cJSON_AddStringToObject(root, "message", ev->message) ||
        !(src = cJSON_AddObjectToObject(root, "source")) ||
        !cJSON_AddStringToObject(src, "component", ev->component) ||
        !cJSON_AddStringToObject(root, "reportingComponent", ev->component) ||
        !add_set(root, "reportingInstance", ev->instance) ||
        !cJSON_AddStringToObject(root, "firstTimestamp", at) ||
        !cJSON_AddStringToObject(root, "lastTimestamp", at) ||
        !cJSON_AddNumberToObject(root, "count", 1))
        goto done;
    text = cJSON_PrintUnformatted(root);
    if (text && len)
        *len = strlen(text);
done:
    cJSON_Delete(root);
    return text;
}
