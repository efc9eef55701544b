/* See secret.h. */
#define _DEFAULT_SOURCE /* explicit_bzero */
#include "common/secret.h"

#include <stdlib.h>
#include <string.h>

void kl__secret_wipe(void *p, size_t len)
{
    if (p && len)
        explicit_bzero(p, len);
}

void kl__secret_free(char *s)
{
    if (!s)
        return;
    kl__secret_wipe(s, strlen(s));
    free(s);
}
