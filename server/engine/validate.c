/* Request validation: names, identities and durations are checked before
 * anything touches the store. The name rules are common/names.h's, which
 * the client and the stores apply too; the messages name the request's
 * field. Pure functions, any thread. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/names.h"
#include "engine/engine.h"

__attribute__((format(printf, 3, 4))) static int fail(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return -1;
}

int engine_validate_lease_ref(const char *ns, const char *name, char *msg, size_t msg_len)
{
    switch (kl__name_check_namespace(ns)) {
    case KL__NAME_OK:
        break;
    case KL__NAME_EMPTY:
        return fail(msg, msg_len, "namespace: must not be empty%s", "");
    default:
        return fail(msg, msg_len,
                    "namespace: \"%.80s\" is not a DNS-1123 label (lower-case alphanumerics "
                    "and '-', at most 63, starting and ending with an alphanumeric)",
                    ns);
    }
    switch (kl__name_check_lease(name)) {
    case KL__NAME_OK:
        return 0;
    case KL__NAME_EMPTY:
        return fail(msg, msg_len, "name: must not be empty%s", "");
    case KL__NAME_TOO_LONG:
        return fail(msg, msg_len, "name: longer than 253 bytes%s", "");
    default:
        return fail(msg, msg_len,
                    "name: \"%.80s\" is not a DNS-1123 subdomain (dot-separated lower-case "
                    "alphanumerics and '-', at most 253)",
                    name);
    }
}

int engine_validate_identity(const char *identity, char *msg, size_t msg_len)
{
    switch (kl__name_check_identity(identity, NULL)) {
    case KL__NAME_OK:
        return 0;
    case KL__NAME_EMPTY:
        return fail(msg, msg_len, "identity: must not be empty%s", "");
    case KL__NAME_TOO_LONG:
        return fail(msg, msg_len, "identity: longer than 253 bytes%s", "");
    default:
        return fail(msg, msg_len, "identity: contains a non-printable byte%s", "");
    }
}

int engine_validate_term_token(const char *token, char *msg, size_t msg_len)
{
    if (token && strnlen(token, ENGINE_TOKEN_MAX) >= ENGINE_TOKEN_MAX)
        return fail(msg, msg_len, "term_token: longer than %d bytes", ENGINE_TOKEN_MAX - 1);
    return 0;
}

int engine_validate_campaign(const engine_campaign_req *req, char *msg, size_t msg_len)
{
    if (engine_validate_lease_ref(req->ns, req->name, msg, msg_len) != 0)
        return -1;
    if (engine_validate_identity(req->identity, msg, msg_len) != 0)
        return -1;
    const int32_t lease = req->lease_duration_s, renew = req->renew_deadline_s,
                  retry = req->retry_period_s;
    char detail[96];
    snprintf(detail, sizeof detail, "%d/%d/%d", lease, renew, retry);
    if (retry < 1)
        return fail(msg, msg_len, "retry_period_seconds: must be at least 1 (lease/renew/retry %s)",
                    detail);
    if (lease > 86400)
        return fail(msg, msg_len, "lease_duration_seconds: must be at most 86400 (%s)", detail);
    if ((int64_t)renew * 10 <= (int64_t)retry * 12)
        return fail(msg, msg_len,
                    "renew_deadline_seconds: must be greater than 1.2 x retry_period_seconds "
                    "(lease/renew/retry %s)",
                    detail);
    if (lease <= renew)
        return fail(msg, msg_len,
                    "lease_duration_seconds: must be greater than renew_deadline_seconds "
                    "(lease/renew/retry %s)",
                    detail);
    if (req->resume_epoch < 0)
        return fail(msg, msg_len, "resume_epoch: must not be negative%s", "");
    if (req->grant_ms != 0 &&
        (req->grant_ms < ENGINE_GRANT_MIN_MS || (int64_t)req->grant_ms > (int64_t)retry * 1000))
        return fail(msg, msg_len,
                    "grant_ms: %d, must be 0 (the retry period) or from %d to the retry period "
                    "(%d ms)",
                    (int)req->grant_ms, ENGINE_GRANT_MIN_MS, (int)retry * 1000);
    return engine_validate_pod_label(&req->label, msg, msg_len);
}

static int is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A label name or value: at most 63 of [A-Za-z0-9-_.], alphanumeric at
 * both ends (empty allowed only where the caller says). */
static int label_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return 0;
    return 1;
}

int engine_validate_pod_label(const engine_pod_label *l, char *msg, size_t msg_len)
{
    const char *pod = l->pod, *key = l->key, *value = l->value;
    if (!*pod && !*key && !*value && !l->ns[0])
        return 0;
    if (!*pod)
        return fail(msg, msg_len, "pod_name: must not be empty when pod_label_key is set%s", "");
    if (!*key)
        return fail(msg, msg_len, "pod_label_key: must not be empty when pod_name is set%s", "");
    if (engine_validate_lease_ref(l->ns, "x", msg, msg_len) != 0) {
        char inner[200];
        snprintf(inner, sizeof inner, "%s", msg);
        return fail(msg, msg_len, "pod_%s", inner); /* "namespace: ..." -> "pod_namespace: ..." */
    }
    char detail[128];
    if (engine_validate_lease_ref("x", pod, detail, sizeof detail) != 0)
        return fail(msg, msg_len,
                    "pod_name: \"%.80s\" is not a DNS-1123 subdomain (dot-separated lower-case "
                    "alphanumerics and '-', at most 253)",
                    pod);
    const char *slash = strchr(key, '/');
    const char *name = slash ? slash + 1 : key;
    if (slash == key)
        return fail(msg, msg_len, "pod_label_key: \"%.80s\" has an empty prefix", key);
    if (slash) {
        char prefix[256];
        size_t n = (size_t)(slash - key);
        if (n > 253)
            return fail(msg, msg_len, "pod_label_key: the prefix is longer than 253 bytes%s", "");
        snprintf(prefix, sizeof prefix, "%.*s", (int)n, key);
        if (engine_validate_lease_ref("x", prefix, detail, sizeof detail) != 0)
            return fail(msg, msg_len, "pod_label_key: prefix \"%.80s\" is not a DNS-1123 subdomain",
                        prefix);
    }
    if (!label_name_ok(name, strlen(name)))
        return fail(msg, msg_len,
                    "pod_label_key: \"%.80s\" is not a label key ([prefix/]name: the name at "
                    "most 63 of alphanumerics, '-', '_', '.', alphanumeric at both ends)",
                    key);
    if (*value && !label_name_ok(value, strlen(value)))
        return fail(msg, msg_len,
                    "pod_label_value: \"%.80s\" is not a label value (at most 63 of "
                    "alphanumerics, '-', '_', '.', alphanumeric at both ends)",
                    value);
    return 0;
}

/* The lengths of the label fields, before they are copied. */
static int label_lengths(const engine_request_view *v, char *msg, size_t msg_len)
{
    const struct {
        const char *field, *value;
        size_t max;
    } f[] = {
        {"pod_namespace", v->pod_ns, STORE_NS_MAX - 1},
        {"pod_name", v->pod, STORE_NAME_MAX - 1},
        {"pod_label_key", v->label_key, STORE_LABEL_KEY_MAX - 1},
        {"pod_label_value", v->label_value, STORE_LABEL_VAL_MAX - 1},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].value && strlen(f[i].value) > f[i].max)
            return fail(msg, msg_len, "%s: longer than %zu bytes", f[i].field, f[i].max);
    }
    return 0;
}

/* Handoff: by the holder (identity and term_token, both) or by someone
 * else (neither). */
static int holder_pair(const engine_request_view *v, char *msg, size_t msg_len)
{
    bool has_identity = v->identity && v->identity[0],
         has_token = v->term_token && v->term_token[0];
    if (has_identity != has_token)
        return fail(msg, msg_len, "%s",
                    has_identity ? "term_token: required with identity (the holder's handoff)"
                                 : "identity: required with term_token (the holder's handoff)");
    return has_identity ? engine_validate_identity(v->identity, msg, msg_len) : 0;
}

static int to_identity(const char *to, char *msg, size_t msg_len)
{
    if (!to || !to[0] || engine_validate_identity(to, msg, msg_len) == 0)
        return 0;
    char inner[256];
    snprintf(inner, sizeof inner, "%s", msg);
    return fail(msg, msg_len, "to_%s", inner); /* "identity: ..." -> "to_identity: ..." */
}

static int check_one(engine_check c, const engine_request_view *v, char *msg, size_t msg_len)
{
    switch (c) {
    case ENGINE_CHECK_END:
        return 0;
    case ENGINE_CHECK_LEASE:
        return engine_validate_lease_ref(v->ns, v->name, msg, msg_len);
    case ENGINE_CHECK_NAMESPACE:
        return v->ns && v->ns[0] ? engine_validate_lease_ref(v->ns, "x", msg, msg_len) : 0;
    case ENGINE_CHECK_IDENTITY:
        return engine_validate_identity(v->identity, msg, msg_len);
    case ENGINE_CHECK_TOKEN:
        return engine_validate_term_token(v->term_token, msg, msg_len);
    case ENGINE_CHECK_TOKEN_NEEDED:
        if (v->term_token && v->term_token[0])
            return 0;
        return fail(msg, msg_len, "term_token: required (only the holder proclaims)%s", "");
    case ENGINE_CHECK_HOLDER:
        return holder_pair(v, msg, msg_len);
    case ENGINE_CHECK_TO_IDENTITY:
        return to_identity(v->to_identity, msg, msg_len);
    case ENGINE_CHECK_LABEL_LENGTHS:
        return label_lengths(v, msg, msg_len);
    case ENGINE_CHECK_VALUE:
        if (v->value_len <= STORE_VALUE_MAX)
            return 0;
        return fail(msg, msg_len, "value: %zu bytes, more than the %d a leader value may have",
                    v->value_len, STORE_VALUE_MAX);
    case ENGINE_CHECK_EPOCH:
        if (v->epoch > 0)
            return 0;
        return fail(msg, msg_len, "epoch: %lld, must be the positive epoch of a term",
                    (long long)v->epoch);
    case ENGINE_CHECK_CAMPAIGN:
        return engine_validate_campaign(v->campaign, msg, msg_len);
    case ENGINE_CHECK_LABEL:
        return engine_validate_pod_label(v->label, msg, msg_len);
    }
    return fail(msg, msg_len, "internal: unknown check %d", (int)c);
}

int engine_validate_request(const engine_check *checks, const engine_request_view *v, char *msg,
                            size_t msg_len)
{
    for (const engine_check *c = checks; *c != ENGINE_CHECK_END; c++) {
        if (check_one(*c, v, msg, msg_len) != 0)
            return -1;
    }
    return 0;
}
