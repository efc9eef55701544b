/* Status codes, their strings (from KL_STATUS_MAP), error reporting, and the
 * tables that map the service's answers to statuses. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kubelease/v1/kubelease.pb-c.h"

/* Connect error code -> status: the one table for it. A code not listed
 * (none is missing today) is a protocol error. */
static const struct {
    const char *code;
    int status;
} connect_codes[] = {
    {"canceled", KL_ERR_CANCELLED},
    {"unknown", KL_ERR_INTERNAL},
    {"invalid_argument", KL_ERR_INVALID_ARGUMENT},
    {"deadline_exceeded", KL_ERR_TIMEOUT},
    {"not_found", KL_NOT_FOUND},
    {"already_exists", KL_ERR_ALREADY_RUNNING},
    {"permission_denied", KL_ERR_PERMISSION_DENIED},
    {"resource_exhausted", KL_ERR_UNAVAILABLE},
    {"failed_precondition", KL_ERR_LOST},
    {"aborted", KL_ERR_UNAVAILABLE},
    {"out_of_range", KL_ERR_INVALID_ARGUMENT},
    {"unimplemented", KL_ERR_PROTOCOL},
    {"internal", KL_ERR_INTERNAL},
    {"unavailable", KL_ERR_UNAVAILABLE},
    {"data_loss", KL_ERR_INTERNAL},
    {"unauthenticated", KL_ERR_PERMISSION_DENIED},
};

/* HTTP status without a Connect error body -> status (a proxy or something
 * that is not a kubelease service answered). Other statuses: 5xx is an
 * internal error, anything else a protocol error. */
static const struct {
    long http;
    int status;
} http_statuses[] = {
    {200, KL_OK},
    {400, KL_ERR_INVALID_ARGUMENT},
    {401, KL_ERR_PERMISSION_DENIED},
    {403, KL_ERR_PERMISSION_DENIED},
    {404, KL_ERR_PROTOCOL}, /* no such route: not a kubelease service? */
    {408, KL_ERR_TIMEOUT},
    {409, KL_ERR_LOST},
    {412, KL_ERR_LOST},
    {429, KL_ERR_UNAVAILABLE},
    {502, KL_ERR_UNAVAILABLE},
    {503, KL_ERR_UNAVAILABLE},
    {504, KL_ERR_TIMEOUT},
};

#define KL__COUNT(a) (sizeof(a) / sizeof((a)[0]))

const char *kl_strerror(int code)
{
    switch (code) {
#define KL_STATUS_CASE(name, value, text)                                                          \
    case value:                                                                                    \
        return text;
        KL_STATUS_MAP(KL_STATUS_CASE)
#undef KL_STATUS_CASE
    }
    return "unknown status code";
}

int kl__seterr(kl_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return code;
}

void kl__clearerr(kl_error *err)
{
    if (err) {
        err->code = KL_OK;
        err->message[0] = 0;
    }
}

int kl__status_from_connect(const char *code)
{
    for (size_t i = 0; i < KL__COUNT(connect_codes); i++)
        if (strcmp(code, connect_codes[i].code) == 0)
            return connect_codes[i].status;
    return KL_ERR_PROTOCOL;
}

int kl__status_from_http(long http)
{
    for (size_t i = 0; i < KL__COUNT(http_statuses); i++)
        if (http_statuses[i].http == http)
            return http_statuses[i].status;
    return http >= 500 ? KL_ERR_INTERNAL : KL_ERR_PROTOCOL;
}

/* kubelease.v1.LostReason -> its label (as the service's metrics and
 * kl_term_info.end_reason spell it) and what it says in a message: the one
 * table for it, indexed by the enum's value. */
static const struct {
    int reason;
    const char *label, *text;
} lost_reasons[] = {
    {KUBELEASE__V1__LOST_REASON__LOST_REASON_UNSPECIFIED, "", "unspecified reason"},
    {KUBELEASE__V1__LOST_REASON__LOST_REASON_RESIGNED, "resigned", "resigned"},
    {KUBELEASE__V1__LOST_REASON__LOST_REASON_RENEW_FAILED, "renew_failed",
     "the service could not renew the Lease"},
    {KUBELEASE__V1__LOST_REASON__LOST_REASON_SUPERSEDED, "superseded",
     "another writer changed the Lease"},
    {KUBELEASE__V1__LOST_REASON__LOST_REASON_DELETED, "deleted", "the Lease was deleted"},
    {KUBELEASE__V1__LOST_REASON__LOST_REASON_RESUME_FAILED, "resume_failed",
     "the term could not be resumed"},
    {KUBELEASE__V1__LOST_REASON__LOST_REASON_SHUTDOWN, "shutdown", "the service is shutting down"},
    {KUBELEASE__V1__LOST_REASON__LOST_REASON_EXPIRED, "expired",
     "the campaign expired or was replaced"},
    {KUBELEASE__V1__LOST_REASON__LOST_REASON_HANDED_OFF, "handed_off", "handed off"},
};

/* The row of reason; row 0 (UNSPECIFIED) for values this library does not know. */
static size_t lost_reason_row(int reason)
{
    for (size_t i = 0; i < sizeof lost_reasons / sizeof lost_reasons[0]; i++)
        if (lost_reasons[i].reason == reason)
            return i;
    return 0;
}

const char *kl__lost_reason_label(int reason)
{
    return lost_reasons[lost_reason_row(reason)].label;
}

const char *kl__lost_reason_name(int reason)
{
    return lost_reasons[lost_reason_row(reason)].text;
}
