/* TokenReview and SubjectAccessReview bodies and answers, and JWT claims
 * (pure; see review.h). */
#include "kube/review.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/secret.h"
#include "core/base64.h"
#include "kube/config.h"

/* ---- users ---------------------------------------------------------------- */

static void free_strings(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void kube_user_clear(kube_user *u)
{
    if (!u)
        return;
    free(u->username);
    free(u->uid);
    free_strings(u->groups, u->n_groups);
    for (size_t i = 0; i < u->n_extra; i++) {
        free(u->extra[i].key);
        free_strings(u->extra[i].values, u->extra[i].n_values);
    }
    free(u->extra);
    memset(u, 0, sizeof *u);
}

const char *kube_user_extra_value(const kube_user *u, const char *key)
{
    for (size_t i = 0; i < u->n_extra; i++)
        if (strcmp(u->extra[i].key, key) == 0 && u->extra[i].n_values > 0)
            return u->extra[i].values[0];
    return NULL;
}

int kube_user_serviceaccount(const kube_user *u, char *out, size_t out_len)
{
    static const char prefix[] = "system:serviceaccount:";
    const char *name = u->username;
    if (!name || strncmp(name, prefix, sizeof prefix - 1) != 0)
        return -1;
    name += sizeof prefix - 1;
    const char *colon = strchr(name, ':');
    if (!colon || colon == name || !colon[1] || strchr(colon + 1, ':'))
        return -1;
    if ((size_t)snprintf(out, out_len, "%s", name) >= out_len)
        return -1;
    return 0;
}

/* An array of strings from a JSON array (every element a string). */
static int strings_of(const cJSON *arr, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!arr)
        return 0;
    if (!cJSON_IsArray(arr))
        return -1;
    size_t count = (size_t)cJSON_GetArraySize(arr);
    if (count == 0)
        return 0;
    char **v = calloc(count, sizeof *v);
    if (!v)
        return -1;
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        if (!cJSON_IsString(e) || !(v[i] = strdup(e->valuestring))) {
            free_strings(v, i);
            return -1;
        }
        i++;
    }
    *out = v;
    *n = count;
    return 0;
}

static int user_of(const cJSON *j, kube_user *u)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "username");
    const cJSON *uid = cJSON_GetObjectItemCaseSensitive(j, "uid");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(j, "extra");
    if (!cJSON_IsString(name) || !name->valuestring[0])
        return -1;
    u->username = strdup(name->valuestring);
    u->uid = strdup(cJSON_IsString(uid) ? uid->valuestring : "");
    if (!u->username || !u->uid ||
        strings_of(cJSON_GetObjectItemCaseSensitive(j, "groups"), &u->groups, &u->n_groups) != 0)
        return -1;
    if (!extra)
        return 0;
    if (!cJSON_IsObject(extra))
        return -1;
    size_t count = (size_t)cJSON_GetArraySize(extra);
    if (count == 0)
        return 0;
    u->extra = calloc(count, sizeof *u->extra);
    if (!u->extra)
        return -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, extra)
    {
        kube_user_extra *x = &u->extra[u->n_extra];
        if (!(x->key = strdup(e->string)))
            return -1;
        u->n_extra++;
        if (strings_of(e, &x->values, &x->n_values) != 0)
            return -1;
    }
    return 0;
}

/* ---- bodies --------------------------------------------------------------- */

void kube_review_body_free(char *body)
{
    kl__secret_free(body);
}

/* Prints j without formatting and deletes it; NULL when out of memory. */
static char *print_and_delete(cJSON *j, bool secret)
{
    char *s = j ? cJSON_PrintUnformatted(j) : NULL;
    if (secret && j) {
        /* cJSON keeps its own copy of the token: wipe it too. */
        cJSON *spec = cJSON_GetObjectItemCaseSensitive(j, "spec");
        cJSON *t = cJSON_GetObjectItemCaseSensitive(spec, "token");
        if (cJSON_IsString(t))
            memset(t->valuestring, 0, strlen(t->valuestring));
    }
    cJSON_Delete(j);
    return s;
}

static cJSON *review_object(const char *api_version, const char *kind, cJSON **spec)
{
    cJSON *j = cJSON_CreateObject();
    if (!j)
        return NULL;
    cJSON_AddStringToObject(j, "apiVersion", api_version);
    cJSON_AddStringToObject(j, "kind", kind);
    *spec = cJSON_AddObjectToObject(j, "spec");
    if (!*spec) {
        cJSON_Delete(j);
        return NULL;
    }
    return j;
}

char *kube_token_review_body(const char *token, const char *audience)
{
    cJSON *spec;
    cJSON *j = review_object("authentication.k8s.io/v1", "TokenReview", &spec);
    if (!j)
        return NULL;
    bool ok = cJSON_AddStringToObject(spec, "token", token) != NULL;
    if (ok && audience) {
        cJSON *aud = cJSON_AddArrayToObject(spec, "audiences");
        ok = aud && cJSON_AddItemToArray(aud, cJSON_CreateString(audience));
    }
    char *s = print_and_delete(j, true);
    if (!ok) {
        kube_review_body_free(s);
        return NULL;
    }
    return s;
}

static bool add_strings(cJSON *obj, const char *key, char **v, size_t n)
{
    cJSON *arr = cJSON_AddArrayToObject(obj, key);
    if (!arr)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!cJSON_AddItemToArray(arr, cJSON_CreateString(v[i])))
            return false;
    return true;
}

static bool add_user(cJSON *spec, const kube_user *u)
{
    if (!cJSON_AddStringToObject(spec, "user", u->username))
        return false;
    if (u->uid && u->uid[0] && !cJSON_AddStringToObject(spec, "uid", u->uid))
        return false;
    if (u->n_groups && !add_strings(spec, "groups", u->groups, u->n_groups))
        return false;
    if (!u->n_extra)
        return true;
    cJSON *extra = cJSON_AddObjectToObject(spec, "extra");
    if (!extra)
        return false;
    for (size_t i = 0; i < u->n_extra; i++)
        if (!add_strings(extra, u->extra[i].key, u->extra[i].values, u->extra[i].n_values))
            return false;
    return true;
}

char *kube_access_review_body(const kube_user *u, const kube_resource_attributes *a)
{
    cJSON *spec;
    cJSON *j = review_object("authorization.k8s.io/v1", "SubjectAccessReview", &spec);
    if (!j)
        return NULL;
    bool ok = add_user(spec, u);
    if (a->path && a->path[0]) {
        cJSON *nra = ok ? cJSON_AddObjectToObject(spec, "nonResourceAttributes") : NULL;
        ok = nra && cJSON_AddStringToObject(nra, "path", a->path) &&
             cJSON_AddStringToObject(nra, "verb", a->verb);
    } else {
        cJSON *ra = ok ? cJSON_AddObjectToObject(spec, "resourceAttributes") : NULL;
        ok = ra && cJSON_AddStringToObject(ra, "verb", a->verb) &&
             cJSON_AddStringToObject(ra, "group", a->group) &&
             cJSON_AddStringToObject(ra, "resource", a->resource);
        if (ok && a->ns && a->ns[0])
            ok = cJSON_AddStringToObject(ra, "namespace", a->ns) != NULL;
        if (ok && a->name && a->name[0])
            ok = cJSON_AddStringToObject(ra, "name", a->name) != NULL;
    }
    char *s = print_and_delete(j, false);
    if (!ok) {
        free(s);
        return NULL;
    }
    return s;
}

/* ---- answers -------------------------------------------------------------- */

/* The status object of a review answer, or NULL with err set. */
static const cJSON *status_of(const cJSON *root, const char *kind, char *err, size_t err_len)
{
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(root, "kind");
    if (!cJSON_IsObject(root) || !cJSON_IsString(k) || strcmp(k->valuestring, kind) != 0) {
        snprintf(err, err_len, "the answer is not a %s", kind);
        return NULL;
    }
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(root, "status");
    if (!cJSON_IsObject(st)) {
        snprintf(err, err_len, "the %s has no status", kind);
        return NULL;
    }
    return st;
}

static void copy_string(const cJSON *j, const char *key, char *out, size_t out_len)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    snprintf(out, out_len, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

int kube_token_review_parse(const char *body, size_t len, kube_token_review *out, char *err,
                            size_t err_len)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) {
        snprintf(err, err_len, "the TokenReview answer is not JSON");
        return -1;
    }
    int rc = -1;
    const cJSON *st = status_of(root, "TokenReview", err, err_len);
    if (!st)
        goto done;
    out->authenticated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "authenticated"));
    copy_string(st, "error", out->error, sizeof out->error);
    if (out->authenticated &&
        user_of(cJSON_GetObjectItemCaseSensitive(st, "user"), &out->user) != 0) {
        kube_user_clear(&out->user);
        snprintf(err, err_len, "the TokenReview authenticates a user without a username");
        goto done;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

void kube_token_review_clear(kube_token_review *r)
{
    if (r)
        kube_user_clear(&r->user);
}

int kube_access_review_parse(const char *body, size_t len, kube_access_review *out, char *err,
                             size_t err_len)
{
    memset(out, 0, sizeof *out);
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!root) {
        snprintf(err, err_len, "the SubjectAccessReview answer is not JSON");
        return -1;
    }
    const cJSON *st = status_of(root, "SubjectAccessReview", err, err_len);
    if (st) {
        /* "denied" only short-cuts other authorizers; not allowed is a no. */
        out->allowed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "allowed"));
        copy_string(st, "reason", out->reason, sizeof out->reason);
        copy_string(st, "evaluationError", out->evaluation_error, sizeof out->evaluation_error);
    }
    cJSON_Delete(root);
    return st ? 0 : -1;
}

/* ---- JWT claims ------------------------------------------------------------ */

static void add_audience(kube_jwt_claims *c, const char *a)
{
    size_t n = strlen(c->aud);
    snprintf(c->aud + n, sizeof c->aud - n, "%s%s", n ? "," : "", a);
}

int kube_jwt_peek(const char *token, kube_jwt_claims *out)
{
    memset(out, 0, sizeof *out);
    const char *p1 = strchr(token, '.');
    const char *p2 = p1 ? strchr(p1 + 1, '.') : NULL;
    if (!p2 || strchr(p2 + 1, '.') || p2 - p1 - 1 > 16384)
        return -1;
    /* The payload: base64url, unpadded. */
    uint8_t *payload = NULL;
    size_t payload_len = 0;
    if (base64_decode(p1 + 1, (size_t)(p2 - p1 - 1), BASE64_URL_SAFE, &payload, &payload_len) != 0)
        return -1;
    cJSON *j = cJSON_ParseWithLength((const char *)payload, payload_len);
    free(payload);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return -1;
    }
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(j, "exp");
    if (cJSON_IsNumber(exp) && isfinite(exp->valuedouble) && exp->valuedouble > 0 &&
        exp->valuedouble < 1e15)
        out->exp = (int64_t)exp->valuedouble;
    const cJSON *aud = cJSON_GetObjectItemCaseSensitive(j, "aud");
    if (cJSON_IsString(aud)) {
        add_audience(out, aud->valuestring);
    } else if (cJSON_IsArray(aud)) {
        const cJSON *a;
        cJSON_ArrayForEach(a, aud) if (cJSON_IsString(a)) add_audience(out, a->valuestring);
    }
    cJSON_Delete(j);
    return 0;
}

bool kube_jwt_has_audience(const kube_jwt_claims *c, const char *audience)
{
    size_t n = strlen(audience);
    for (const char *p = c->aud; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, audience, n) == 0)
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}
