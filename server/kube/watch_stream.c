/* Watch-stream framing (pure; each parser is owned by one caller; see watch_stream.h). */
#include "kube/watch_stream.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/lease_json.h"

void kube_watch_parser_init(kube_watch_parser *p, size_t line_max)
{
    memset(p, 0, sizeof *p);
    p->line_max = line_max ? line_max : KUBE_WATCH_LINE_MAX_DEFAULT;
}

void kube_watch_parser_reset(kube_watch_parser *p)
{
    kl__buf_reset(&p->buf);
    p->overflow = 0;
}

void kube_watch_parser_free(kube_watch_parser *p)
{
    kl__buf_free(&p->buf);
}

size_t kube_watch_parser_pending(const kube_watch_parser *p)
{
    return p->buf.len;
}

int kube_watch_event_decode(const char *line, size_t len, kube_watch_event *ev, char *err,
                            size_t err_len)
{
    memset(ev, 0, sizeof *ev);
    cJSON *root = cJSON_ParseWithLength(line, len);
    if (!root) {
        snprintf(err, err_len, "watch event is not valid JSON");
        return -1;
    }
    int rc = -1;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "type");
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(root, "object");
    if (!cJSON_IsString(type) || !type->valuestring || !cJSON_IsObject(obj)) {
        snprintf(err, err_len, "watch event has no type or object");
        goto done;
    }
    const char *t = type->valuestring;
    if (strcmp(t, "ADDED") == 0) {
        ev->type = KUBE_WATCH_ADDED;
    } else if (strcmp(t, "MODIFIED") == 0) {
        ev->type = KUBE_WATCH_MODIFIED;
    } else if (strcmp(t, "DELETED") == 0) {
        ev->type = KUBE_WATCH_DELETED;
    } else if (strcmp(t, "BOOKMARK") == 0) {
        ev->type = KUBE_WATCH_BOOKMARK;
    } else if (strcmp(t, "ERROR") == 0) {
        ev->type = KUBE_WATCH_ERROR;
    } else {
        snprintf(err, err_len, "watch event has unknown type \"%.32s\"", t);
        goto done;
    }
    if (ev->type == KUBE_WATCH_ERROR) {
        if (kube_status_from_json(obj, &ev->status) != 0) {
            snprintf(err, err_len, "watch ERROR event carries no Status");
            goto done;
        }
    } else if (ev->type == KUBE_WATCH_BOOKMARK) {
        const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        const cJSON *rv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
        if (!cJSON_IsString(rv) || !rv->valuestring || !rv->valuestring[0] ||
            strlen(rv->valuestring) >= sizeof ev->lease.resource_version) {
            snprintf(err, err_len, "watch BOOKMARK has no valid metadata.resourceVersion");
            goto done;
        }
        strcpy(ev->lease.resource_version, rv->valuestring);
    } else {
        char e[200];
        if (kube_lease_from_json(obj, &ev->lease, e, sizeof e) != 0) {
            ev->type = KUBE_WATCH_INVALID;
            snprintf(ev->status.message, sizeof ev->status.message, "%s", e);
            const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
            const cJSON *rv = cJSON_GetObjectItemCaseSensitive(md, "resourceVersion");
            if (cJSON_IsString(rv) && rv->valuestring &&
                strlen(rv->valuestring) < sizeof ev->lease.resource_version)
                strcpy(ev->lease.resource_version, rv->valuestring);
        }
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

/* Decodes and delivers one line; blank lines are skipped. */
static int deliver(const char *line, size_t len, kube_watch_event_cb cb, void *ctx, char *err,
                   size_t err_len)
{
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
        i++;
    if (i == len)
        return 0;
    kube_watch_event ev;
    if (kube_watch_event_decode(line, len, &ev, err, err_len) != 0)
        return -1;
    return cb(ctx, &ev) ? 1 : 0;
}

int kube_watch_parser_feed(kube_watch_parser *p, const char *data, size_t len,
                           kube_watch_event_cb cb, void *ctx, char *err, size_t err_len)
{
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t take = nl ? (size_t)(nl - data) : len;
        if (p->buf.len + take > p->line_max) {
            p->overflow = 1;
            snprintf(err, err_len, "watch event longer than %zu bytes", p->line_max);
            return -1;
        }
        if (!nl) {
            if (kl__buf_append(&p->buf, data, take) != KL__BUF_OK) {
                snprintf(err, err_len, "out of memory");
                return -1;
            }
            return 0;
        }
        int rc;
        if (p->buf.len == 0) {
            /* The whole line is in this chunk: no copy. */
            rc = deliver(data, take, cb, ctx, err, err_len);
        } else {
            if (kl__buf_append(&p->buf, data, take) != KL__BUF_OK) {
                snprintf(err, err_len, "out of memory");
                return -1;
            }
            rc = deliver(p->buf.data, p->buf.len, cb, ctx, err, err_len);
            kl__buf_reset(&p->buf);
        }
        data += take + 1;
        len -= take + 1;
        if (rc != 0)
            return rc;
    }
    return 0;
}
