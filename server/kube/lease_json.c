/* Lease, LeaseList, Status and MicroTime JSON codec (pure; see lease_json.h). */
#include "kube/lease_json.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/names.h"
#include "core/base64.h"

/* ---- MicroTime ---------------------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

int kube_microtime_format(int64_t us, char out[KUBE_MICROTIME_LEN])
{
    out[0] = 0;
    /* 0000-01-01 .. 9999-12-31T23:59:59.999999Z */
    const int64_t min_us = -62167219200LL * 1000000, max_us = 253402300799999999LL;
    if (us < min_us || us > max_us)
        return -1;
    int64_t secs = us / 1000000, frac = us % 1000000;
    if (frac < 0) {
        frac += 1000000;
        secs--;
    }
    int64_t days = secs / 86400, secs_rem = secs % 86400;
    if (secs_rem < 0) {
        secs_rem += 86400;
        days--;
    }
    int64_t y;
    int m, d;
    civil_from_days(days, &y, &m, &d);
    /* Rendered into a buffer large enough for any int, then copied: a year
     * outside 0..9999 does not fit the fixed layout and is refused. */
    char tmp[96];
    int n = snprintf(tmp, sizeof tmp, "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", (int)y, m, d,
                     (int)(secs_rem / 3600), (int)(secs_rem / 60 % 60), (int)(secs_rem % 60),
                     (int)frac);
    if (n < 0 || (size_t)n >= KUBE_MICROTIME_LEN)
        return -1;
    memcpy(out, tmp, (size_t)n + 1);
    return 0;
}

/* Reads exactly n digits. */
static int digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return -1;
        v = v * 10 + (c - '0');
    }
    *p += n;
    *out = v;
    return 0;
}

static int days_in_month(int64_t y, int m)
{
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return 29;
    return dm[m - 1];
}

int kube_microtime_parse(const char *s, int64_t *us)
{
    const char *p = s;
    int y, mo, d, h, mi, se;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
        digits(&p, 2, &d) || (*p != 'T' && *p != 't'))
        return -1;
    p++;
    if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' || digits(&p, 2, &se))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 59)
        return -1;
    int64_t frac = 0;
    if (*p == '.') {
        p++;
        int n = 0;
        int64_t scale = 100000;
        while (*p >= '0' && *p <= '9') {
            if (++n > 9)
                return -1;
            frac += (*p - '0') * scale;
            scale /= 10;
            p++;
        }
        /* Go accepts "05." as zero fraction digits; so do we. */
    }
    int64_t off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1, oh, om;
        if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 23 || om > 59)
            return -1;
        off = sign * (oh * 3600 + om * 60);
    } else {
        return -1;
    }
    if (*p)
        return -1;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - off;
    *us = secs * 1000000 + frac;
    return 0;
}

/* ---- helpers ------------------------------------------------------------- */

/* Copies a JSON string member into a fixed buffer. Absent or null leaves it
 * "" (returns 0); wrong type or too long is an error. */
static int copy_str(const cJSON *obj, const char *key, const char *field, char *dst, size_t cap,
                    char *err, size_t err_len)
{
    dst[0] = 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v) || !v->valuestring) {
        snprintf(err, err_len, "%s is not a string", field);
        return -1;
    }
    size_t n = strlen(v->valuestring);
    if (n >= cap) {
        snprintf(err, err_len, "%s is longer than %zu bytes", field, cap - 1);
        return -1;
    }
    memcpy(dst, v->valuestring, n + 1);
    return 0;
}

static int get_int(const cJSON *obj, const char *key, const char *field, int64_t lo, int64_t hi,
                   int64_t *out, char *err, size_t err_len)
{
    *out = 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    double d = v->valuedouble;
    if (!cJSON_IsNumber(v) || !isfinite(d) || d != floor(d) || d < (double)lo || d > (double)hi) {
        snprintf(err, err_len, "%s is not an integer in [%lld, %lld]", field, (long long)lo,
                 (long long)hi);
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

static int get_time(const cJSON *obj, const char *key, const char *field, int64_t *out, char *err,
                    size_t err_len)
{
    *out = 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v) || !v->valuestring || kube_microtime_parse(v->valuestring, out) != 0) {
        snprintf(err, err_len, "%s is not an RFC 3339 time", field);
        return -1;
    }
    return 0;
}

/* ---- Status -------------------------------------------------------------- */

static void copy_cut(const cJSON *obj, const char *key, char *dst, size_t cap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    dst[0] = 0;
    if (cJSON_IsString(v) && v->valuestring)
        snprintf(dst, cap, "%s", v->valuestring);
}

int kube_status_from_json(const cJSON *obj, kube_status *out)
{
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(obj))
        return -1;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(obj, "code");
    if (cJSON_IsNumber(code) && code->valuedouble >= 0 && code->valuedouble < 1000)
        out->code = (int)code->valuedouble;
    copy_cut(obj, "reason", out->reason, sizeof out->reason);
    copy_cut(obj, "message", out->message, sizeof out->message);
    if (!out->code && !out->reason[0] && !out->message[0])
        return -1;
    return 0;
}

int kube_status_decode(const char *buf, size_t len, kube_status *out)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(buf, len);
    if (!root)
        return -1;
    int rc = kube_status_from_json(root, out);
    cJSON_Delete(root);
    return rc;
}

/* ---- Lease ----------------------------------------------------------------- */

static bool base64url(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_'))
            return false;
    return true;
}

/* The string value of annotation key in ann (metadata.annotations, or NULL
 * when the Lease has none), or NULL when it is absent or not a string. */
static const char *annotation(const cJSON *ann, const char *key)
{
    const cJSON *v = cJSON_IsObject(ann) ? cJSON_GetObjectItemCaseSensitive(ann, key) : NULL;
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : NULL;
}

/* The term-nonce annotation, when it is one kubelease could have written. */
static void get_term_nonce(const cJSON *ann, char *dst, size_t cap)
{
    const char *v = annotation(ann, KUBE_TERM_NONCE_ANNOTATION);
    dst[0] = 0;
    if (v && strlen(v) < cap && base64url(v))
        snprintf(dst, cap, "%s", v);
}

/* A strategy kubelease can carry: 1 to KUBE_STRATEGY_MAX - 1 printable
 * ASCII bytes without spaces (Kubernetes allows qualified names). */
static bool strategy_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n >= KUBE_STRATEGY_MAX)
        return false;
    for (; *s; s++)
        if (*s <= ' ' || *s > '~')
            return false;
    return true;
}

static bool preferred_ok(const char *s)
{
    return kl__name_check_identity(s, NULL) == KL__NAME_OK;
}

/* spec.preferredHolder and spec.strategy, when they are values kubelease
 * could act on; anything else (another type, too long, a byte an identity
 * cannot hold) is read as absent. They are others' fields, never patched by
 * kubelease, so a stray value must not make the Lease unreadable. */
static void get_coordinated(const cJSON *spec, kube_lease *out)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(spec, "preferredHolder");
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(spec, "strategy");
    if (cJSON_IsString(p) && p->valuestring && preferred_ok(p->valuestring))
        snprintf(out->preferred_holder, sizeof out->preferred_holder, "%s", p->valuestring);
    if (cJSON_IsString(s) && s->valuestring && strategy_ok(s->valuestring))
        snprintf(out->strategy, sizeof out->strategy, "%s", s->valuestring);
}

/* An epoch as the handed-to annotation writes it: 1 to INT32_MAX in
 * decimal digits; 0 for anything else. */
static int64_t epoch_of(const char *s)
{
    int64_t v = 0;
    if (!*s || *s == '0')
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        v = v * 10 + (*s - '0');
        if (v > INT32_MAX)
            return 0;
    }
    return v;
}

/* The handoff annotations, when they are values kubelease could have
 * written (an identity, an epoch); anything else is read as unset, so that
 * a stray value cannot make the Lease unreadable nor ask for anything. */
static void get_handoff(const cJSON *ann, kube_lease *out)
{
    const char *to = annotation(ann, KUBE_HANDOFF_TO_ANNOTATION);
    const char *at = annotation(ann, KUBE_HANDED_TO_ANNOTATION);
    if (to && preferred_ok(to))
        snprintf(out->handoff_to, sizeof out->handoff_to, "%s", to);
    if (at)
        out->handed_to = epoch_of(at);
}

/* The leader value, when it is base64 of at most KUBE_VALUE_MAX bytes;
 * anything else is read as unset (a stray value is not an error). */
static void get_value(const cJSON *ann, kube_lease *out)
{
    const char *v = annotation(ann, KUBE_VALUE_ANNOTATION);
    uint8_t *raw = NULL;
    size_t n = 0;
    if (!v || base64_decode(v, strlen(v), BASE64_CANONICAL, &raw, &n) != 0)
        return;
    if (n <= sizeof out->value) {
        memcpy(out->value, raw, n);
        out->value_len = (uint16_t)n;
    }
    free(raw);
}

/* The write id, when it is 16 lowercase hex digits and not zero; anything
 * else is read as unset (a stray value is not an error). */
static void get_write_id(const cJSON *ann, kube_lease *out)
{
    const char *v = annotation(ann, KUBE_WRITE_ID_ANNOTATION);
    if (!v || strlen(v) != 16)
        return;
    uint64_t id = 0;
    for (const char *p = v; *p; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (d < 0)
            return;
        id = id << 4 | (uint64_t)d;
    }
    out->write_id = id;
}

int kube_lease_from_json(const cJSON *obj, kube_lease *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    if (!cJSON_IsObject(obj)) {
        snprintf(err, err_len, "Lease is not a JSON object");
        return -1;
    }
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(obj, "kind");
    if (cJSON_IsString(kind) && kind->valuestring && strcmp(kind->valuestring, "Lease") != 0) {
        snprintf(err, err_len, "object is a %.64s, not a Lease", kind->valuestring);
        return -1;
    }
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
    if (!cJSON_IsObject(md)) {
        snprintf(err, err_len, "Lease has no metadata");
        return -1;
    }
    if (copy_str(md, "name", "metadata.name", out->name, sizeof out->name, err, err_len) ||
        copy_str(md, "namespace", "metadata.namespace", out->ns, sizeof out->ns, err, err_len) ||
        copy_str(md, "resourceVersion", "metadata.resourceVersion", out->resource_version,
                 sizeof out->resource_version, err, err_len) ||
        copy_str(md, "uid", "metadata.uid", out->uid, sizeof out->uid, err, err_len))
        goto fail;
    if (!out->name[0] || !out->ns[0]) {
        snprintf(err, err_len, "Lease has no %s",
                 out->name[0] ? "metadata.namespace" : "metadata.name");
        goto fail;
    }
    const cJSON *ann = cJSON_GetObjectItemCaseSensitive(md, "annotations");
    get_term_nonce(ann, out->term_nonce, sizeof out->term_nonce);
    get_handoff(ann, out);
    get_value(ann, out);
    get_write_id(ann, out);
    if (cJSON_IsObject(ann) && copy_str(ann, KUBE_POD_LABEL_ANNOTATION,
                                        "metadata.annotations[\"" KUBE_POD_LABEL_ANNOTATION "\"]",
                                        out->pod_label, sizeof out->pod_label, err, err_len))
        goto fail;
    const cJSON *spec = cJSON_GetObjectItemCaseSensitive(obj, "spec");
    if (!spec || cJSON_IsNull(spec))
        return 0;
    if (!cJSON_IsObject(spec)) {
        snprintf(err, err_len, "spec is not an object");
        goto fail;
    }
    int64_t dur, trans;
    if (copy_str(spec, "holderIdentity", "spec.holderIdentity", out->holder_identity,
                 sizeof out->holder_identity, err, err_len) ||
        get_int(spec, "leaseDurationSeconds", "spec.leaseDurationSeconds", INT32_MIN, INT32_MAX,
                &dur, err, err_len) ||
        get_int(spec, "leaseTransitions", "spec.leaseTransitions", INT32_MIN, INT32_MAX, &trans,
                err, err_len) ||
        get_time(spec, "acquireTime", "spec.acquireTime", &out->acquire_time_us, err, err_len) ||
        get_time(spec, "renewTime", "spec.renewTime", &out->renew_time_us, err, err_len))
        goto fail;
    out->lease_duration_seconds = (int32_t)dur;
    out->lease_transitions = (int32_t)trans;
    get_coordinated(spec, out);
    return 0;
fail:
    memset(out, 0, sizeof *out);
    return -1;
}

int kube_lease_decode(const char *buf, size_t len, kube_lease *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(buf, len);
    if (!root) {
        snprintf(err, err_len, "Lease is not valid JSON");
        return -1;
    }
    int rc = kube_lease_from_json(root, out, err, err_len);
    cJSON_Delete(root);
    return rc;
}

static bool bounded(const char *s, size_t cap)
{
    return memchr(s, 0, cap) != NULL;
}

/* Adds name: value, or name: null when the value is unset and nulls is set
 * (a merge patch deletes a field it sets to null). */
static bool add_string(cJSON *o, const char *name, const char *value, bool nulls)
{
    if (value)
        return cJSON_AddStringToObject(o, name, value) != NULL;
    return !nulls || cJSON_AddNullToObject(o, name) != NULL;
}

static bool add_number(cJSON *o, const char *name, double value, bool set, bool nulls)
{
    if (set)
        return cJSON_AddNumberToObject(o, name, value) != NULL;
    return !nulls || cJSON_AddNullToObject(o, name) != NULL;
}

/* metadata.annotations: the term nonce when l has one, and the pod label,
 * the handoff annotations, the leader value and the write id when set; a
 * patch removes an unset pod label, handoff annotation, value or write id
 * (null) and leaves every other annotation as it is. */
static bool add_annotations(cJSON *md, const kube_lease *l, bool patch)
{
    if (!l->term_nonce[0] && !l->pod_label[0] && !l->handoff_to[0] && !l->handed_to &&
        !l->value_len && !l->write_id && !patch)
        return true;
    char at[24], id[17];
    snprintf(at, sizeof at, "%lld", (long long)l->handed_to);
    snprintf(id, sizeof id, "%016llx", (unsigned long long)l->write_id);
    char *value = l->value_len ? base64_encode(l->value, l->value_len) : NULL;
    if (l->value_len && !value)
        return false;
    cJSON *ann = cJSON_AddObjectToObject(md, "annotations");
    bool ok =
        ann &&
        (!l->term_nonce[0] ||
         cJSON_AddStringToObject(ann, KUBE_TERM_NONCE_ANNOTATION, l->term_nonce)) &&
        add_string(ann, KUBE_POD_LABEL_ANNOTATION, l->pod_label[0] ? l->pod_label : NULL, patch) &&
        add_string(ann, KUBE_HANDOFF_TO_ANNOTATION, l->handoff_to[0] ? l->handoff_to : NULL,
                   patch) &&
        add_string(ann, KUBE_HANDED_TO_ANNOTATION, l->handed_to ? at : NULL, patch) &&
        add_string(ann, KUBE_VALUE_ANNOTATION, value, patch) &&
        add_string(ann, KUBE_WRITE_ID_ANNOTATION, l->write_id ? id : NULL, patch);
    free(value);
    return ok;
}

/* spec.preferredHolder and spec.strategy, in the whole object only: a patch
 * leaves them as others wrote them. */
static bool add_coordinated(cJSON *spec, const kube_lease *l, bool patch)
{
    if (patch)
        return true;
    return (!l->preferred_holder[0] ||
            cJSON_AddStringToObject(spec, "preferredHolder", l->preferred_holder)) &&
           (!l->strategy[0] || cJSON_AddStringToObject(spec, "strategy", l->strategy));
}

/* The object (patch false) or a JSON merge patch (patch true) for l. */
static char *encode(const kube_lease *l, bool with_rv, bool patch, size_t *len)
{
    char acq[KUBE_MICROTIME_LEN], ren[KUBE_MICROTIME_LEN];
    char *text = NULL;
    if (!bounded(l->ns, sizeof l->ns) || !bounded(l->name, sizeof l->name) ||
        !bounded(l->holder_identity, sizeof l->holder_identity) ||
        !bounded(l->resource_version, sizeof l->resource_version) ||
        !bounded(l->uid, sizeof l->uid) || !bounded(l->term_nonce, sizeof l->term_nonce) ||
        !base64url(l->term_nonce) || !bounded(l->pod_label, sizeof l->pod_label) ||
        !bounded(l->preferred_holder, sizeof l->preferred_holder) ||
        (l->preferred_holder[0] && !preferred_ok(l->preferred_holder)) ||
        !bounded(l->strategy, sizeof l->strategy) ||
        (l->strategy[0] && !strategy_ok(l->strategy)) ||
        !bounded(l->handoff_to, sizeof l->handoff_to) ||
        (l->handoff_to[0] && !preferred_ok(l->handoff_to)) || l->handed_to < 0 ||
        l->handed_to > INT32_MAX || l->lease_transitions < 0 || l->lease_duration_seconds < 0 ||
        l->value_len > sizeof l->value || (patch && !l->resource_version[0]))
        return NULL;
    if ((l->acquire_time_us && kube_microtime_format(l->acquire_time_us, acq) != 0) ||
        (l->renew_time_us && kube_microtime_format(l->renew_time_us, ren) != 0))
        return NULL;
    cJSON *root = cJSON_CreateObject(), *md, *spec;
    if (!root ||
        (!patch && (!cJSON_AddStringToObject(root, "apiVersion", "coordination.k8s.io/v1") ||
                    !cJSON_AddStringToObject(root, "kind", "Lease"))) ||
        !(md = cJSON_AddObjectToObject(root, "metadata")) ||
        (!patch && (!cJSON_AddStringToObject(md, "name", l->name) ||
                    !cJSON_AddStringToObject(md, "namespace", l->ns))) ||
        (with_rv && !cJSON_AddStringToObject(md, "resourceVersion", l->resource_version)) ||
        /* the object's identity: an update of a Lease deleted and created
         * again since is then refused, as a stale resourceVersion is */
        (!patch && l->uid[0] && !cJSON_AddStringToObject(md, "uid", l->uid)) ||
        !add_annotations(md, l, patch) || !(spec = cJSON_AddObjectToObject(root, "spec")) ||
        !cJSON_AddStringToObject(spec, "holderIdentity", l->holder_identity) ||
        !add_number(spec, "leaseDurationSeconds", l->lease_duration_seconds,
                    l->lease_duration_seconds > 0, patch) ||
        !cJSON_AddNumberToObject(spec, "leaseTransitions", (double)l->lease_transitions) ||
        !add_string(spec, "acquireTime", l->acquire_time_us ? acq : NULL, patch) ||
        !add_string(spec, "renewTime", l->renew_time_us ? ren : NULL, patch) ||
        !add_coordinated(spec, l, patch))
        goto done;
    text = cJSON_PrintUnformatted(root);
    if (text && len)
        *len = strlen(text);
done:
    cJSON_Delete(root);
    return text;
}

char *kube_lease_encode(const kube_lease *l, bool with_rv, size_t *len)
{
    return encode(l, with_rv, false, len);
}

char *kube_lease_merge_patch(const kube_lease *l, size_t *len)
{
    return encode(l, true, true, len);
}

/* ---- LeaseList ------------------------------------------------------------- */

void kube_lease_list_clear(kube_lease_list *l)
{
    if (!l)
        return;
    free(l->items);
    free(l->bad_names);
    memset(l, 0, sizeof *l);
}

int kube_lease_list_decode(const char *buf, size_t len, kube_lease_list *out, char *err,
                           size_t err_len)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(buf, len);
    if (!root) {
        snprintf(err, err_len, "LeaseList is not valid JSON");
        return -1;
    }
    int rc = -1;
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(md)) {
        snprintf(err, err_len, "LeaseList has no metadata");
        goto done;
    }
    if (copy_str(md, "resourceVersion", "metadata.resourceVersion", out->resource_version,
                 sizeof out->resource_version, err, err_len) != 0)
        goto done;
    if (!out->resource_version[0]) {
        snprintf(err, err_len, "LeaseList has no metadata.resourceVersion");
        goto done;
    }
    if (items && !cJSON_IsNull(items) && !cJSON_IsArray(items)) {
        snprintf(err, err_len, "LeaseList items is not a list");
        goto done;
    }
    int n = items ? cJSON_GetArraySize(items) : 0;
    if (n > 0) {
        out->items = calloc((size_t)n, sizeof *out->items);
        out->bad_names = calloc((size_t)n, sizeof *out->bad_names);
        if (!out->items || !out->bad_names) {
            snprintf(err, err_len, "out of memory");
            goto done;
        }
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, items)
    {
        char e[200];
        if (kube_lease_from_json(it, &out->items[out->n], e, sizeof e) == 0) {
            out->n++;
            continue;
        }
        if (out->n_bad++ == 0)
            snprintf(out->bad_reason, sizeof out->bad_reason, "%s", e);
        const cJSON *imd = cJSON_GetObjectItemCaseSensitive(it, "metadata");
        char *name = out->bad_names[out->n_bad_names];
        if (cJSON_IsObject(imd) &&
            copy_str(imd, "name", "metadata.name", name, KUBE_NAME_MAX, e, sizeof e) == 0 &&
            name[0])
            out->n_bad_names++;
    }
    rc = 0;
done:
    if (rc != 0)
        kube_lease_list_clear(out);
    cJSON_Delete(root);
    return rc;
}

/* ---- Pods ------------------------------------------------------------------ */

char *kube_pod_label_patch(const char *key, const char *value, size_t *len)
{
    char *text = NULL;
    cJSON *root = cJSON_CreateObject(), *md, *labels;
    if (!root || !(md = cJSON_AddObjectToObject(root, "metadata")) ||
        !(labels = cJSON_AddObjectToObject(md, "labels")) || !add_string(labels, key, value, true))
        goto done;
    text = cJSON_PrintUnformatted(root);
    if (text && len)
        *len = strlen(text);
done:
    cJSON_Delete(root);
    return text;
}

int kube_pod_decode(const char *buf, size_t len, char ips[KUBE_POD_IPS_MAX], char *err,
                    size_t err_len)
{
    char ip[KUBE_IP_MAX];
    ips[0] = ip[0] = 0;
    cJSON *root = cJSON_ParseWithLength(buf, len);
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        snprintf(err, err_len, "Pod is not a JSON object");
        goto done;
    }
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
    if (cJSON_IsString(kind) && kind->valuestring && strcmp(kind->valuestring, "Pod") != 0) {
        snprintf(err, err_len, "object is a %.64s, not a Pod", kind->valuestring);
        goto done;
    }
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(root, "status");
    rc = cJSON_IsObject(status)
             ? copy_str(status, "podIP", "status.podIP", ip, KUBE_IP_MAX, err, err_len)
             : 0;
    if (rc != 0)
        goto done;
    snprintf(ips, KUBE_POD_IPS_MAX, "%s", ip);
    const cJSON *list =
        cJSON_IsObject(status) ? cJSON_GetObjectItemCaseSensitive(status, "podIPs") : NULL;
    const cJSON *item;
    if (!cJSON_IsArray(list))
        list = NULL;
    cJSON_ArrayForEach(item, list)
    {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(item, "ip");
        size_t used = strlen(ips);
        if (!cJSON_IsString(v) || !v->valuestring || !v->valuestring[0] ||
            strcmp(v->valuestring, ip) == 0 ||
            used + 1 + strlen(v->valuestring) >= KUBE_POD_IPS_MAX)
            continue;
        snprintf(ips + used, KUBE_POD_IPS_MAX - used, "%s%s", used ? " " : "", v->valuestring);
    }
done:
    cJSON_Delete(root);
    return rc;
}
