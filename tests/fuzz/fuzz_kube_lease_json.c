/* Fuzzes the Lease codec: decode never crashes; whatever decodes and encodes
 * again decodes to the same Lease; its merge patch is valid JSON; MicroTime
 * round-trips. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "kube/lease_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    char err[256];
    kube_lease l;
    if (kube_lease_decode(buf, size, &l, err, sizeof err) == 0) {
        size_t len;
        char *json = kube_lease_encode(&l, true, &len);
        if (json) {
            kube_lease again;
            if (kube_lease_decode(json, len, &again, err, sizeof err) != 0 ||
                memcmp(&l, &again, sizeof l) != 0)
                abort();
            free(json);
        }
        /* The update's merge patch is valid JSON, and only ever conditional. */
        char *patch = kube_lease_merge_patch(&l, &len);
        if (patch) {
            cJSON *p = cJSON_ParseWithLength(patch, len);
            if (!p || !l.resource_version[0])
                abort();
            cJSON_Delete(p);
            free(patch);
        }
    }
    kube_lease_list list;
    if (kube_lease_list_decode(buf, size, &list, err, sizeof err) == 0)
        kube_lease_list_clear(&list);
    kube_status st;
    kube_status_decode(buf, size, &st);

    /* MicroTime: parse a NUL-terminated copy; a parsed time formats and parses back. */
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = 0;
    int64_t us, back;
    char out[KUBE_MICROTIME_LEN];
    if (kube_microtime_parse(s, &us) == 0 && kube_microtime_format(us, out) == 0) {
        if (kube_microtime_parse(out, &back) != 0 || back != us || strlen(out) != 27)
            abort();
    }
    free(s);
    return 0;
}
