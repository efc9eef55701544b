/* Status codes, their strings (from KL_STATUS_MAP) and error reporting. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define KL_STR_(x) #x
#define KL_STR(x)  KL_STR_(x)

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

const char *kl_version(void)
{
    return KL_STR(KL_VERSION_MAJOR) "." KL_STR(KL_VERSION_MINOR) "." KL_STR(KL_VERSION_PATCH);
}

void kl_free(void *p)
{
    free(p);
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
    static const struct {
        const char *name;
        int status;
    } table[] = {
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
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(code, table[i].name) == 0)
            return table[i].status;
    return KL_ERR_PROTOCOL;
}

int kl__status_from_http(long http)
{
    switch (http) {
    case 200:
        return KL_OK;
    case 400:
        return KL_ERR_INVALID_ARGUMENT;
    case 401:
    case 403:
        return KL_ERR_PERMISSION_DENIED;
    case 404:
        return KL_ERR_PROTOCOL; /* no such route: not a kubelease service? */
    case 408:
    case 504:
        return KL_ERR_TIMEOUT;
    case 409:
    case 412:
        return KL_ERR_LOST;
    case 429:
    case 502:
    case 503:
        return KL_ERR_UNAVAILABLE;
    default:
        return http >= 500 ? KL_ERR_INTERNAL : KL_ERR_PROTOCOL;
    }
}
