/* Local argument checks, mirroring the service's rules (see validate.h): the
 * name rules are common/names.h's, which the service applies too. */
#include <string.h>

#include "validate.h"

#include "common/names.h"
#include "status.h"

int kl__check_namespace(const char *ns, kl_error *err)
{
    if (!ns)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "ns (the namespace) is NULL");
    if (kl__name_check_namespace(ns) != KL__NAME_OK)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "ns \"%.63s\" is not a valid namespace: a DNS-1123 label of 1-63 "
                          "lowercase letters, digits and '-', starting and ending alphanumeric",
                          ns);
    return KL_OK;
}

static int check_lease_name(const char *lease, kl_error *err)
{
    if (!lease)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "lease (the Lease name) is NULL");
    if (kl__name_check_lease(lease) != KL__NAME_OK)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "lease \"%.63s\" is not a valid Lease name: a DNS-1123 subdomain of "
                          "1-253 characters (lowercase letters, digits, '-' and '.')",
                          lease);
    return KL_OK;
}

int kl__check_identity(const char *identity, kl_error *err)
{
    if (!identity)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "identity is NULL");
    size_t bad = 0;
    switch (kl__name_check_identity(identity, &bad)) {
    case KL__NAME_OK:
        return KL_OK;
    case KL__NAME_EMPTY:
    case KL__NAME_TOO_LONG:
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "identity must be 1 to 253 bytes long, not %zu", strlen(identity));
    default:
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "identity must be printable ASCII (byte %zu is 0x%02x)", bad,
                          (unsigned char)identity[bad]);
    }
}

int kl__check_durations(int lease_duration_s, int renew_deadline_s, int retry_period_s,
                        kl_error *err)
{
    if (retry_period_s < 1)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "retry_period_s must be at least 1 second, not %d", retry_period_s);
    if ((int64_t)renew_deadline_s * 10 <= (int64_t)retry_period_s * 12)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "renew_deadline_s (%d) must be greater than 1.2 x retry_period_s (%d)",
                          renew_deadline_s, retry_period_s);
    if (lease_duration_s <= renew_deadline_s)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "lease_duration_s (%d) must be greater than renew_deadline_s (%d)",
                          lease_duration_s, renew_deadline_s);
    if (lease_duration_s > 3600)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "lease_duration_s (%d) must be at most 3600 seconds", lease_duration_s);
    return KL_OK;
}

int kl__check_endpoint(const char *endpoint, kl_error *err)
{
    size_t len = strlen(endpoint);
    const char *host = NULL;
    if (strncmp(endpoint, "http://", 7) == 0)
        host = endpoint + 7;
    else if (strncmp(endpoint, "https://", 8) == 0)
        host = endpoint + 8;
    if (!host || *host == 0 || *host == '/' || len > 1024)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                          "endpoint \"%.128s\" is not a URL like http://127.0.0.1:8080", endpoint);
    for (const char *p = endpoint; *p; p++)
        if ((unsigned char)*p <= 0x20 || *p == 0x7f)
            return kl__seterr(err, KL_ERR_INVALID_ARGUMENT,
                              "endpoint \"%.128s\" contains a space or control character",
                              endpoint);
    return KL_OK;
}

int kl__check_call(const kl_client *c, const char *ns, const char *lease, kl_error *err)
{
    kl__clearerr(err);
    if (!c)
        return kl__seterr(err, KL_ERR_INVALID_ARGUMENT, "c (the client) is NULL");
    if (kl__check_namespace(ns, err) != KL_OK)
        return KL_ERR_INVALID_ARGUMENT;
    return check_lease_name(lease, err);
}
