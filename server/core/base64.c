/* Base64 (see base64.h). Pure: no state. */
#include "core/base64.h"

#include <stdlib.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *base64_encode(const uint8_t *data, size_t len)
{
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)data[i + 1] << 8;
        if (i + 2 < len)
            v |= data[i + 2];
        out[o++] = alphabet[(v >> 18) & 63];
        out[o++] = alphabet[(v >> 12) & 63];
        out[o++] = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? alphabet[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* The 6-bit value of ch, or -1. */
static int value(unsigned char ch, unsigned flags)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || (ch == '-' && (flags & BASE64_URL_SAFE)))
        return 62;
    if (ch == '/' || (ch == '_' && (flags & BASE64_URL_SAFE)))
        return 63;
    return -1;
}

static int is_space(unsigned char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

int base64_decode(const char *in, size_t len, unsigned flags, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (!(flags & BASE64_CANONICAL))
        while (len > 0 && in[len - 1] == '=')
            len--; /* padding, however much */
    uint8_t *buf = malloc(len / 4 * 3 + 4);
    if (!buf)
        return BASE64_NO_MEMORY;
    size_t n = 0, pad = 0, chars = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)in[i];
        if ((flags & BASE64_SKIP_SPACE) && is_space(ch))
            continue;
        if ((flags & BASE64_CANONICAL) && ch == '=') {
            pad++;
            continue;
        }
        int v = value(ch, flags);
        if (v < 0 || pad > 0) /* a bad character, or data after the padding */
            goto invalid;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        chars++;
        if (bits >= 8) {
            bits -= 8;
            buf[n++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    /* Canonical: a lone last character cannot encode a byte; padding must
     * complete the last quantum; the unused low bits must be zero. */
    if ((flags & BASE64_CANONICAL) &&
        (chars % 4 == 1 || pad > 2 || (pad > 0 && (chars + pad) % 4 != 0) || acc != 0))
        goto invalid;
    buf[n] = 0;
    *out = buf;
    *out_len = n;
    return 0;
invalid:
    free(buf);
    return BASE64_INVALID;
}
