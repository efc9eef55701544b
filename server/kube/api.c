/* Names and messages of the Kubernetes API's vocabulary (pure; see api.h). */
#include "kube/api.h"

#include <stdio.h>

const char *kube_verb_name(kube_verb v)
{
    static const char *const names[] = {
        [KUBE_VERB_GET] = "get",       [KUBE_VERB_CREATE] = "create", [KUBE_VERB_PATCH] = "patch",
        [KUBE_VERB_DELETE] = "delete", [KUBE_VERB_LIST] = "list",
    };
    return (unsigned)v < sizeof names / sizeof names[0] ? names[v] : "other";
}

/* The reason phrases of the HTTP codes the apiserver answers with. */
static const char *http_reason(long code)
{
    static const struct {
        long code;
        const char *reason;
    } reasons[] = {
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {409, "Conflict"},
        {410, "Gone"},
        {422, "Unprocessable Entity"},
        {429, "Too Many Requests"},
        {500, "Internal Server Error"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
    };
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].code == code)
            return reasons[i].reason;
    return "Error";
}

void kube_status_message(long code, const kube_status *st, char *out, size_t out_len)
{
    const char *reason = st && st->reason[0] ? st->reason : http_reason(code);
    if (st && st->message[0])
        snprintf(out, out_len, "apiserver: %ld %s: %s", code, reason, st->message);
    else
        snprintf(out, out_len, "apiserver: %ld %s", code, reason);
}
