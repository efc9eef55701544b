/* The proto3 JSON mapping for any protobuf-c message, driven by its
 * descriptors: messages to cJSON and back, errors naming the field. No
 * state, no locks; any thread. */
#include "rpc/json.h"
#include "rpc/json_text.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base64.h"

#define FIELD_PTR(msg, off) ((void *)((char *)(msg) + (off)))
#define JSON_NAME_MAX       128
#define PATH_MAX_LEN        256

void rpc_json_name(const char *field_name, char *out, size_t out_len)
{
    size_t o = 0;
    bool upper = false;
    if (out_len == 0)
        return;
    for (const char *p = field_name; *p && o + 1 < out_len; p++) {
        if (*p == '_') {
            upper = true;
            continue;
        }
        char c = *p;
        if (upper && c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        upper = false;
        out[o++] = c;
    }
    out[o] = '\0';
}

/* ---- output ---------------------------------------------------------- */

static cJSON *float_to_json(double v)
{
    if (isnan(v))
        return cJSON_CreateString("NaN");
    if (isinf(v))
        return cJSON_CreateString(v > 0 ? "Infinity" : "-Infinity");
    return cJSON_CreateNumber(v);
}

/* One value of field f stored at p (an element for repeated fields). */
static cJSON *value_to_json(const ProtobufCFieldDescriptor *f, const void *p)
{
    char buf[32];
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        return cJSON_CreateNumber(*(const int32_t *)p);
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return cJSON_CreateNumber(*(const uint32_t *)p);
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(buf, sizeof buf, "%" PRId64, *(const int64_t *)p);
        return cJSON_CreateString(buf);
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        snprintf(buf, sizeof buf, "%" PRIu64, *(const uint64_t *)p);
        return cJSON_CreateString(buf);
    case PROTOBUF_C_TYPE_FLOAT:
        return float_to_json(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE:
        return float_to_json(*(const double *)p);
    case PROTOBUF_C_TYPE_BOOL:
        return cJSON_CreateBool(*(const protobuf_c_boolean *)p);
    case PROTOBUF_C_TYPE_ENUM: {
        int v = *(const int *)p;
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value((const ProtobufCEnumDescriptor *)f->descriptor, v);
        if (ev)
            return cJSON_CreateString(ev->name);
        return cJSON_CreateNumber(v);
    }
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return cJSON_CreateString(s ? s : "");
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = p;
        char *s = base64_encode(b->data, b->len);
        if (!s)
            return NULL;
        cJSON *j = cJSON_CreateString(s);
        free(s);
        return j;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)p;
        if (!sub)
            return cJSON_CreateObject();
        return rpc_json_from_message(sub);
    }
    }
    return NULL;
}

static size_t value_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        return 8;
    case PROTOBUF_C_TYPE_FLOAT:
        return 4;
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_ENUM:
        return sizeof(int);
    case PROTOBUF_C_TYPE_STRING:
        return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(ProtobufCMessage *);
    }
    return 0;
}

/* True when the singular value at p is the type's default (proto3: omitted). */
static bool value_is_default(const ProtobufCFieldDescriptor *f, const void *p)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)p;
        return !s || !*s;
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)p)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(ProtobufCMessage *const *)p == NULL;
    case PROTOBUF_C_TYPE_FLOAT:
        return *(const float *)p == 0 && !signbit(*(const float *)p);
    case PROTOBUF_C_TYPE_DOUBLE:
        return *(const double *)p == 0 && !signbit(*(const double *)p);
    default: {
        static const uint8_t zero[8];
        return memcmp(p, zero, value_size(f->type)) == 0;
    }
    }
}

/* Whether a singular field is present for output. */
static bool field_present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
    const void *p = FIELD_PTR(m, f->offset);
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
        return *(const uint32_t *)FIELD_PTR(m, f->quantifier_offset) == f->id;
    if (f->label == PROTOBUF_C_LABEL_REQUIRED)
        return true;
    if (f->label == PROTOBUF_C_LABEL_OPTIONAL) {
        if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_MESSAGE)
            return *(void *const *)p != NULL;
        return *(const protobuf_c_boolean *)FIELD_PTR(m, f->quantifier_offset);
    }
    return !value_is_default(f, p);
}

cJSON *rpc_json_from_message(const ProtobufCMessage *m)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    cJSON *obj = cJSON_CreateObject();
    if (!obj)
        return NULL;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char name[JSON_NAME_MAX];
        rpc_json_name(f->name, name, sizeof name);
        cJSON *v = NULL;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)FIELD_PTR(m, f->quantifier_offset);
            if (n == 0)
                continue;
            const char *arr = *(char *const *)FIELD_PTR(m, f->offset);
            size_t sz = value_size(f->type);
            v = cJSON_CreateArray();
            if (!v)
                goto oom;
            for (size_t k = 0; k < n; k++) {
                cJSON *e = value_to_json(f, arr + k * sz);
                if (!e) {
                    cJSON_Delete(v);
                    goto oom;
                }
                cJSON_AddItemToArray(v, e);
            }
        } else {
            if (!field_present(m, f))
                continue;
            v = value_to_json(f, FIELD_PTR(m, f->offset));
            if (!v)
                goto oom;
        }
        cJSON_AddItemToObject(obj, name, v);
    }
    return obj;
oom:
    cJSON_Delete(obj);
    return NULL;
}

char *rpc_json_encode(const ProtobufCMessage *m, size_t *len)
{
    cJSON *obj = rpc_json_from_message(m);
    if (!obj)
        return NULL;
    char *s = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    if (s && len)
        *len = strlen(s);
    return s;
}

/* ---- input ----------------------------------------------------------- */

typedef struct jctx {
    char *err;
    size_t err_len;
} jctx;

static int fail(jctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(jctx *c, const char *path, const char *fmt, ...)
{
    char what[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (c->err && c->err_len)
        snprintf(c->err, c->err_len, "field \"%s\": %s", path, what);
    return -1;
}

static const char *json_type_name(const cJSON *j)
{
    if (cJSON_IsString(j))
        return "a string";
    if (cJSON_IsNumber(j))
        return "a number";
    if (cJSON_IsBool(j))
        return "a boolean";
    if (cJSON_IsArray(j))
        return "an array";
    if (cJSON_IsObject(j))
        return "an object";
    if (cJSON_IsNull(j))
        return "null";
    return "an invalid value";
}

/* Parses an integer given as a JSON number or a decimal string into
 * [min, max] (signed) or [0, umax] (unsigned). */
static int parse_int(jctx *c, const char *path, const cJSON *j, bool is_unsigned, int64_t min,
                     int64_t max, uint64_t umax, int64_t *out_s, uint64_t *out_u)
{
    if (cJSON_IsNumber(j)) {
        double v = j->valuedouble;
        if (!isfinite(v) || v != floor(v))
            return fail(c, path, "expected an integer, got %g", v);
        if (is_unsigned) {
            if (v < 0 || v > (double)umax)
                return fail(c, path, "%.0f is out of range", v);
            *out_u = v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
        } else {
            if (v < (double)min || v > (double)max)
                return fail(c, path, "%.0f is out of range", v);
            *out_s = v >= 9223372036854775807.0 ? INT64_MAX : (int64_t)v;
        }
        return 0;
    }
    if (cJSON_IsString(j)) {
        const char *s = j->valuestring;
        char *end = NULL;
        errno = 0;
        /* proto3 JSON: decimal digits, '-' first for a signed type; strtoll
         * alone would also take leading whitespace and '+'. */
        const char *digits = !is_unsigned && *s == '-' ? s + 1 : s;
        if (*digits < '0' || *digits > '9')
            return fail(c, path, "expected an integer, got \"%.40s\"", s);
        if (is_unsigned) {
            unsigned long long v = strtoull(s, &end, 10);
            if (*end)
                return fail(c, path, "expected an integer, got \"%.40s\"", s);
            if (errno == ERANGE || v > umax)
                return fail(c, path, "%.40s is out of range", s);
            *out_u = v;
        } else {
            long long v = strtoll(s, &end, 10);
            if (*end)
                return fail(c, path, "expected an integer, got \"%.40s\"", s);
            if (errno == ERANGE || v < min || v > max)
                return fail(c, path, "%.40s is out of range", s);
            *out_s = v;
        }
        return 0;
    }
    return fail(c, path, "expected an integer, got %s", json_type_name(j));
}

static int parse_float(jctx *c, const char *path, const cJSON *j, double *out)
{
    if (cJSON_IsNumber(j)) {
        *out = j->valuedouble;
        return 0;
    }
    if (cJSON_IsString(j)) {
        const char *s = j->valuestring;
        if (strcmp(s, "NaN") == 0) {
            *out = NAN;
            return 0;
        }
        if (strcmp(s, "Infinity") == 0) {
            *out = INFINITY;
            return 0;
        }
        if (strcmp(s, "-Infinity") == 0) {
            *out = -INFINITY;
            return 0;
        }
        /* Decimal only: strtod would also take leading whitespace and hex. */
        const char *digits = *s == '-' ? s + 1 : s;
        bool decimal = (*digits == '.' || (*digits >= '0' && *digits <= '9')) && !strpbrk(s, "xX");
        char *end = NULL;
        *out = strtod(s, &end);
        if (decimal && !*end && isfinite(*out))
            return 0;
        return fail(c, path, "expected a number, got \"%.40s\"", s);
    }
    return fail(c, path, "expected a number, got %s", json_type_name(j));
}

static int parse_bytes(jctx *c, const char *path, const cJSON *j, ProtobufCBinaryData *out)
{
    if (!cJSON_IsString(j))
        return fail(c, path, "expected a base64 string, got %s", json_type_name(j));
    const char *s = j->valuestring;
    uint8_t *data;
    size_t len;
    int rc = base64_decode(s, strlen(s), BASE64_URL_SAFE, &data, &len);
    if (rc == BASE64_NO_MEMORY)
        return fail(c, path, "out of memory");
    if (rc != 0)
        return fail(c, path, "invalid base64");
    out->data = data;
    out->len = len;
    return 0;
}

static ProtobufCMessage *message_from_json(jctx *c, const ProtobufCMessageDescriptor *d,
                                           const cJSON *obj, const char *path);

/* An enum value by name, or by number. */
static int enum_from_json(jctx *c, const ProtobufCEnumDescriptor *ed, const cJSON *j, int *p,
                          const char *path)
{
    if (cJSON_IsString(j)) {
        const ProtobufCEnumValue *ev =
            protobuf_c_enum_descriptor_get_value_by_name(ed, j->valuestring);
        if (!ev)
            return fail(c, path, "unknown %s value \"%.60s\"", ed->name, j->valuestring);
        *p = ev->value;
        return 0;
    }
    if (cJSON_IsNumber(j)) {
        int64_t s = 0;
        uint64_t u = 0;
        if (parse_int(c, path, j, false, INT32_MIN, INT32_MAX, 0, &s, &u))
            return -1;
        *p = (int)s;
        return 0;
    }
    return fail(c, path, "expected a %s name, got %s", ed->name, json_type_name(j));
}

/* Parses one value of field f into p (an element slot for repeated fields).
 * On failure nothing was allocated into p. */
static int value_from_json(jctx *c, const ProtobufCFieldDescriptor *f, const cJSON *j, void *p,
                           const char *path)
{
    int64_t s = 0;
    uint64_t u = 0;
    double dv = 0;
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
        if (parse_int(c, path, j, false, INT32_MIN, INT32_MAX, 0, &s, &u))
            return -1;
        *(int32_t *)p = (int32_t)s;
        return 0;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if (parse_int(c, path, j, true, 0, 0, UINT32_MAX, &s, &u))
            return -1;
        *(uint32_t *)p = (uint32_t)u;
        return 0;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if (parse_int(c, path, j, false, INT64_MIN, INT64_MAX, 0, &s, &u))
            return -1;
        *(int64_t *)p = s;
        return 0;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        if (parse_int(c, path, j, true, 0, 0, UINT64_MAX, &s, &u))
            return -1;
        *(uint64_t *)p = u;
        return 0;
    case PROTOBUF_C_TYPE_FLOAT:
        if (parse_float(c, path, j, &dv))
            return -1;
        if (isfinite(dv) && (dv > 3.4028234663852886e38 || dv < -3.4028234663852886e38))
            return fail(c, path, "%g is out of range", dv);
        *(float *)p = (float)dv;
        return 0;
    case PROTOBUF_C_TYPE_DOUBLE:
        if (parse_float(c, path, j, &dv))
            return -1;
        *(double *)p = dv;
        return 0;
    case PROTOBUF_C_TYPE_BOOL:
        if (!cJSON_IsBool(j))
            return fail(c, path, "expected true or false, got %s", json_type_name(j));
        *(protobuf_c_boolean *)p = cJSON_IsTrue(j);
        return 0;
    case PROTOBUF_C_TYPE_ENUM:
        return enum_from_json(c, f->descriptor, j, p, path);
    case PROTOBUF_C_TYPE_STRING: {
        if (!cJSON_IsString(j))
            return fail(c, path, "expected a string, got %s", json_type_name(j));
        char *dup = strdup(j->valuestring);
        if (!dup)
            return fail(c, path, "out of memory");
        *(char **)p = dup;
        return 0;
    }
    case PROTOBUF_C_TYPE_BYTES:
        return parse_bytes(c, path, j, p);
    case PROTOBUF_C_TYPE_MESSAGE: {
        ProtobufCMessage *sub = message_from_json(c, f->descriptor, j, path);
        if (!sub)
            return -1;
        *(ProtobufCMessage **)p = sub;
        return 0;
    }
    }
    return fail(c, path, "unsupported field type");
}

static const ProtobufCFieldDescriptor *find_field(const ProtobufCMessageDescriptor *d,
                                                  const char *key)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, key);
    if (f)
        return f;
    for (unsigned i = 0; i < d->n_fields; i++) {
        char name[JSON_NAME_MAX];
        rpc_json_name(d->fields[i].name, name, sizeof name);
        if (strcmp(name, key) == 0)
            return &d->fields[i];
    }
    return NULL;
}

static int repeated_from_json(jctx *c, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                              const cJSON *j, const char *path)
{
    if (!cJSON_IsArray(j))
        return fail(c, path, "expected an array, got %s", json_type_name(j));
    size_t n = (size_t)cJSON_GetArraySize(j);
    if (n == 0)
        return 0;
    size_t sz = value_size(f->type);
    char *arr = calloc(n, sz);
    if (!arr)
        return fail(c, path, "out of memory");
    /* Install the array first: free_unpacked then frees whatever was parsed
     * when a later element fails. */
    *(void **)FIELD_PTR(m, f->offset) = arr;
    size_t *count = FIELD_PTR(m, f->quantifier_offset);
    *count = 0;
    const cJSON *e;
    size_t k = 0;
    cJSON_ArrayForEach(e, j)
    {
        char epath[PATH_MAX_LEN];
        snprintf(epath, sizeof epath, "%s[%zu]", path, k);
        if (cJSON_IsNull(e))
            return fail(c, epath, "null is not allowed in a list");
        if (value_from_json(c, f, e, arr + k * sz, epath))
            return -1;
        *count = ++k;
    }
    return 0;
}

static ProtobufCMessage *message_from_json(jctx *c, const ProtobufCMessageDescriptor *d,
                                           const cJSON *obj, const char *path)
{
    if (!cJSON_IsObject(obj)) {
        fail(c, *path ? path : "(message)", "expected an object, got %s", json_type_name(obj));
        return NULL;
    }
    ProtobufCMessage *m = calloc(1, d->sizeof_message);
    if (!m) {
        fail(c, path, "out of memory");
        return NULL;
    }
    d->message_init(m);
    uint8_t seen[64] = {0}; /* field index bitmap; messages here have < 512 fields */
    const cJSON *j;
    cJSON_ArrayForEach(j, obj)
    {
        const ProtobufCFieldDescriptor *f = find_field(d, j->string);
        if (!f)
            continue; /* unknown fields are ignored */
        char fpath[PATH_MAX_LEN];
        char jname[JSON_NAME_MAX];
        rpc_json_name(f->name, jname, sizeof jname);
        snprintf(fpath, sizeof fpath, "%s%s%s", path, *path ? "." : "", jname);
        unsigned idx = (unsigned)(f - d->fields);
        if (idx < sizeof seen * 8) {
            if (seen[idx / 8] & (1u << (idx % 8))) {
                fail(c, fpath, "given more than once");
                goto fail;
            }
            seen[idx / 8] |= (uint8_t)(1u << (idx % 8));
        }
        if (cJSON_IsNull(j))
            continue; /* null: the default value */
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            if (repeated_from_json(c, m, f, j, fpath))
                goto fail;
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t *which = FIELD_PTR(m, f->quantifier_offset);
            if (*which != 0) {
                fail(c, fpath, "another field of the same oneof is already set");
                goto fail;
            }
            if (value_from_json(c, f, j, FIELD_PTR(m, f->offset), fpath))
                goto fail;
            *which = f->id;
            continue;
        }
        if (value_from_json(c, f, j, FIELD_PTR(m, f->offset), fpath))
            goto fail;
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_STRING &&
            f->type != PROTOBUF_C_TYPE_MESSAGE)
            *(protobuf_c_boolean *)FIELD_PTR(m, f->quantifier_offset) = 1;
    }
    return m;
fail:
    protobuf_c_message_free_unpacked(m, NULL);
    return NULL;
}

ProtobufCMessage *rpc_json_to_message(const ProtobufCMessageDescriptor *d, const cJSON *obj,
                                      char *err, size_t err_len)
{
    jctx c = {err, err_len};
    if (err && err_len)
        err[0] = '\0';
    if (!cJSON_IsObject(obj)) {
        if (err && err_len)
            snprintf(err, err_len, "the request must be a JSON object, not %s",
                     json_type_name(obj));
        return NULL;
    }
    return message_from_json(&c, d, obj, "");
}

ProtobufCMessage *rpc_json_decode(const ProtobufCMessageDescriptor *d, const char *text, size_t len,
                                  char *err, size_t err_len)
{
    const char *end = NULL;
    cJSON *obj = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!obj) {
        if (err && err_len) {
            size_t at = end && end >= text ? (size_t)(end - text) : 0;
            snprintf(err, err_len, "malformed JSON at byte %zu", at);
        }
        return NULL;
    }
    /* Only whitespace may follow the value (not even NUL bytes). */
    for (const char *p = end; p && p < text + len; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n') {
            cJSON_Delete(obj);
            if (err && err_len)
                snprintf(err, err_len, "malformed JSON: trailing data at byte %zu",
                         (size_t)(p - text));
            return NULL;
        }
    }
    if (rpc_json_text_check(text, len, obj, err, err_len) != 0) {
        cJSON_Delete(obj);
        return NULL;
    }
    ProtobufCMessage *m = rpc_json_to_message(d, obj, err, err_len);
    cJSON_Delete(obj);
    return m;
}
