#include "rpc/validate.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "kubelease/v1/kubelease.pb-c.h"

#define MAX_LEASE_DURATION_S 86400

static bool alnum_lower(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A DNS-1123 label of at most max bytes: [a-z0-9]([-a-z0-9]*[a-z0-9])? */
static bool is_label(const char *s, size_t len)
{
    if (len == 0 || len > 63 || !alnum_lower(s[0]) || !alnum_lower(s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++) {
        if (!alnum_lower(s[i]) && s[i] != '-')
            return false;
    }
    return true;
}

/* Shows a user-supplied value safely in a message: printable ASCII only,
 * truncated. */
static const char *show(const char *s, char *buf, size_t len)
{
    size_t o = 0;
    for (const char *p = s; *p && o + 4 < len; p++)
        buf[o++] = (*p >= 0x20 && *p < 0x7f && *p != '"') ? *p : '?';
    if (s[o] && o + 4 <= len) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

int rpc_validate_namespace(const char *ns, char *msg, size_t msg_len)
{
    char b[80];
    if (!ns || !*ns) {
        snprintf(msg, msg_len, "namespace: required");
        return -1;
    }
    if (!is_label(ns, strlen(ns))) {
        snprintf(msg, msg_len,
                 "namespace \"%s\": must be a DNS-1123 label (at most 63 lowercase letters, "
                 "digits or '-', starting and ending with a letter or digit)",
                 show(ns, b, sizeof b));
        return -1;
    }
    return 0;
}

int rpc_validate_name(const char *name, char *msg, size_t msg_len)
{
    char b[80];
    if (!name || !*name) {
        snprintf(msg, msg_len, "name: required");
        return -1;
    }
    size_t len = strlen(name);
    bool ok = len <= 253;
    for (const char *p = name; ok && *p;) {
        size_t n = strcspn(p, ".");
        ok = is_label(p, n);
        p += n;
        if (*p == '.') {
            p++;
            ok = ok && *p; /* no trailing dot */
        }
    }
    if (!ok) {
        snprintf(msg, msg_len,
                 "name \"%s\": must be a DNS-1123 subdomain (at most 253 lowercase letters, "
                 "digits, '-' or '.', each dot-separated part starting and ending with a letter "
                 "or digit)",
                 show(name, b, sizeof b));
        return -1;
    }
    return 0;
}

int rpc_validate_identity(const char *identity, char *msg, size_t msg_len)
{
    if (!identity || !*identity) {
        snprintf(msg, msg_len, "identity: required");
        return -1;
    }
    size_t len = strlen(identity);
    if (len > 253) {
        snprintf(msg, msg_len, "identity: %zu bytes long, at most 253 allowed", len);
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)identity[i];
        if (c < 0x20 || c > 0x7e) {
            snprintf(msg, msg_len, "identity: byte %zu (0x%02x) is not printable ASCII", i, c);
            return -1;
        }
    }
    return 0;
}

int rpc_validate_durations(int32_t lease, int32_t renew, int32_t retry, char *msg, size_t msg_len)
{
    if (retry < 1) {
        snprintf(msg, msg_len, "retry_period_seconds: %d, must be at least 1", (int)retry);
        return -1;
    }
    /* renew > 1.2 * retry, in integers: 5 * renew > 6 * retry. */
    if ((int64_t)renew * 5 <= (int64_t)retry * 6) {
        snprintf(msg, msg_len,
                 "renew_deadline_seconds: %d, must be greater than 1.2 x "
                 "retry_period_seconds (%d)",
                 (int)renew, (int)retry);
        return -1;
    }
    if (lease <= renew) {
        snprintf(msg, msg_len,
                 "lease_duration_seconds: %d, must be greater than renew_deadline_seconds (%d)",
                 (int)lease, (int)renew);
        return -1;
    }
    if (lease > MAX_LEASE_DURATION_S) {
        snprintf(msg, msg_len, "lease_duration_seconds: %d, at most %d allowed", (int)lease,
                 MAX_LEASE_DURATION_S);
        return -1;
    }
    return 0;
}

static int lease_ref(const char *ns, const char *name, char *msg, size_t msg_len)
{
    if (rpc_validate_namespace(ns, msg, msg_len))
        return -1;
    return rpc_validate_name(name, msg, msg_len);
}

int rpc_validate_request(rpc_method_id id, const ProtobufCMessage *req, char *msg, size_t msg_len)
{
    const rpc_method *m = rpc_method_get(id);
    if (!m || !req || req->descriptor != m->request) {
        snprintf(msg, msg_len, "internal: request of the wrong type");
        return -1;
    }
    switch (id) {
    case RPC_METHOD_CAMPAIGN: {
        const Kubelease__V1__CampaignRequest *r = (const void *)req;
        if (lease_ref(r->namespace_, r->name, msg, msg_len) ||
            rpc_validate_identity(r->identity, msg, msg_len) ||
            rpc_validate_durations(r->lease_duration_seconds, r->renew_deadline_seconds,
                                   r->retry_period_seconds, msg, msg_len))
            return -1;
        if (r->resume_epoch < 0) {
            snprintf(msg, msg_len, "resume_epoch: %lld, must not be negative",
                     (long long)r->resume_epoch);
            return -1;
        }
        return 0;
    }
    case RPC_METHOD_CONFIRM: {
        const Kubelease__V1__ConfirmRequest *r = (const void *)req;
        if (lease_ref(r->namespace_, r->name, msg, msg_len) ||
            rpc_validate_identity(r->identity, msg, msg_len))
            return -1;
        if (r->epoch <= 0) {
            snprintf(msg, msg_len, "epoch: %lld, must be the positive epoch of a term",
                     (long long)r->epoch);
            return -1;
        }
        return 0;
    }
    case RPC_METHOD_RESIGN: {
        const Kubelease__V1__ResignRequest *r = (const void *)req;
        if (lease_ref(r->namespace_, r->name, msg, msg_len))
            return -1;
        return rpc_validate_identity(r->identity, msg, msg_len);
    }
    case RPC_METHOD_GET_HOLDER: {
        const Kubelease__V1__GetHolderRequest *r = (const void *)req;
        return lease_ref(r->namespace_, r->name, msg, msg_len);
    }
    case RPC_METHOD_WATCH_HOLDER: {
        const Kubelease__V1__WatchHolderRequest *r = (const void *)req;
        return lease_ref(r->namespace_, r->name, msg, msg_len);
    }
    case RPC_METHOD_LIST_LEASES:
        return 0;
    case RPC_METHOD_COUNT:
        break;
    }
    snprintf(msg, msg_len, "internal: unknown method");
    return -1;
}

const char *rpc_request_namespace(rpc_method_id id, const ProtobufCMessage *req)
{
    switch (id) {
    case RPC_METHOD_CAMPAIGN:
        return ((const Kubelease__V1__CampaignRequest *)req)->namespace_;
    case RPC_METHOD_CONFIRM:
        return ((const Kubelease__V1__ConfirmRequest *)req)->namespace_;
    case RPC_METHOD_RESIGN:
        return ((const Kubelease__V1__ResignRequest *)req)->namespace_;
    case RPC_METHOD_GET_HOLDER:
        return ((const Kubelease__V1__GetHolderRequest *)req)->namespace_;
    case RPC_METHOD_WATCH_HOLDER:
        return ((const Kubelease__V1__WatchHolderRequest *)req)->namespace_;
    default:
        return NULL;
    }
}
