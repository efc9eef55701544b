/* Kubernetes name checks (see names.h). Pure functions, no state. */
#include "common/names.h"

#include <stdbool.h>
#include <string.h>

static bool lower_alnum(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

/* One DNS-1123 label: the n bytes at s. */
static bool label_ok(const char *s, size_t n)
{
    if (n == 0 || n > KL__NAME_NAMESPACE_MAX || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

kl__name_verdict kl__name_check_namespace(const char *ns)
{
    if (!ns || !*ns)
        return KL__NAME_EMPTY;
    size_t n = strlen(ns);
    if (n > KL__NAME_NAMESPACE_MAX)
        return KL__NAME_TOO_LONG;
    return label_ok(ns, n) ? KL__NAME_OK : KL__NAME_INVALID;
}

kl__name_verdict kl__name_check_lease(const char *name)
{
    if (!name || !*name)
        return KL__NAME_EMPTY;
    size_t n = strlen(name);
    if (n > KL__NAME_LEASE_MAX)
        return KL__NAME_TOO_LONG;
    for (size_t start = 0; start <= n;) {
        const char *dot = memchr(name + start, '.', n - start);
        size_t end = dot ? (size_t)(dot - name) : n;
        if (!label_ok(name + start, end - start))
            return KL__NAME_INVALID;
        start = end + 1;
    }
    return KL__NAME_OK;
}

kl__name_verdict kl__name_check_identity(const char *identity, size_t *bad)
{
    if (!identity || !*identity)
        return KL__NAME_EMPTY;
    size_t n = strlen(identity);
    if (n > KL__NAME_IDENTITY_MAX)
        return KL__NAME_TOO_LONG;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)identity[i];
        if (ch < 0x20 || ch > 0x7e) {
            if (bad)
                *bad = i;
            return KL__NAME_INVALID;
        }
    }
    return KL__NAME_OK;
}
