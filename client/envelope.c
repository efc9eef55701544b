/* Connect envelope decoding and Connect error JSON parsing. */
#include "envelope.h"

#include <stdlib.h>
#include <string.h>

#include "kubelease.h"

void kl__envelope_decoder_init(struct kl__envelope_decoder *d, size_t max_len)
{
    memset(d, 0, sizeof(*d));
    d->max_len = max_len;
}

void kl__envelope_decoder_free(struct kl__envelope_decoder *d)
{
    free(d->msg);
    d->msg = NULL;
    d->msg_cap = 0;
}

int kl__envelope_idle(const struct kl__envelope_decoder *d)
{
    return d->hdr_len == 0;
}

void kl__envelope_header(uint8_t out[KL__ENV_HEADER], unsigned flags, uint32_t len)
{
    out[0] = (uint8_t)flags;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

/* Delivers the envelope collected in d and resets for the next one. */
static int deliver(struct kl__envelope_decoder *d, kl__envelope_cb cb, void *ctx)
{
    unsigned flags = d->hdr[0];
    size_t len = d->msg_need;
    d->hdr_len = 0;
    d->msg_len = 0;
    d->msg_need = 0;
    if (flags & KL__ENV_END_STREAM)
        d->ended = 1;
    return cb(ctx, flags, d->msg, len);
}

/* Called once the header is complete: validates it and sizes the buffer. */
static int start_message(struct kl__envelope_decoder *d)
{
    unsigned flags = d->hdr[0];
    size_t len = ((size_t)d->hdr[1] << 24) | ((size_t)d->hdr[2] << 16) | ((size_t)d->hdr[3] << 8) |
                 (size_t)d->hdr[4];
    if (flags & KL__ENV_COMPRESSED)
        return KL_ERR_PROTOCOL;
    if (len > d->max_len)
        return KL_ERR_PROTOCOL;
    if (len + 1 > d->msg_cap) {
        uint8_t *n = realloc(d->msg, len + 1);
        if (!n)
            return KL_ERR_NO_MEMORY;
        d->msg = n;
        d->msg_cap = len + 1;
    }
    d->msg_need = len;
    d->msg_len = 0;
    return 0;
}

int kl__envelope_feed(struct kl__envelope_decoder *d, const uint8_t *data, size_t len,
                      kl__envelope_cb cb, void *ctx)
{
    size_t pos = 0;
    int rc = 0;

    if (d->error)
        return d->error;
    while (pos < len) {
        if (d->ended) {
            rc = KL_ERR_PROTOCOL;
            break;
        }
        if (d->hdr_len < KL__ENV_HEADER) {
            size_t take = KL__ENV_HEADER - d->hdr_len;
            if (take > len - pos)
                take = len - pos;
            memcpy(d->hdr + d->hdr_len, data + pos, take);
            d->hdr_len += take;
            pos += take;
            if (d->hdr_len < KL__ENV_HEADER)
                break;
            rc = start_message(d);
            if (rc != 0)
                break;
        }
        size_t take = d->msg_need - d->msg_len;
        if (take > len - pos)
            take = len - pos;
        if (take > 0) {
            memcpy(d->msg + d->msg_len, data + pos, take);
            d->msg_len += take;
            pos += take;
        }
        if (d->msg_len == d->msg_need) {
            d->msg[d->msg_len] = 0; /* JSON end frames are read as strings */
            rc = deliver(d, cb, ctx);
            if (rc != 0)
                break;
        }
    }
    if (rc != 0)
        d->error = rc;
    return rc;
}

/* --- Connect error JSON -------------------------------------------------- */

struct json_cursor {
    const char *p;
    const char *end;
};

static void skip_ws(struct json_cursor *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Reads a JSON string at j->p (which is '"') into out (may be NULL).
 * Returns 0 on success with j->p after the closing quote, -1 if malformed. */
static int read_string(struct json_cursor *j, char *out, size_t out_size)
{
    size_t n = 0;
    j->p++; /* opening quote */
    while (j->p < j->end) {
        char ch = *j->p++;
        if (ch == '"') {
            if (out && out_size)
                out[n < out_size ? n : out_size - 1] = 0;
            return 0;
        }
        if (ch == '\\') {
            if (j->p >= j->end)
                return -1;
            char e = *j->p++;
            switch (e) {
            case 'n':
                ch = '\n';
                break;
            case 't':
                ch = '\t';
                break;
            case 'r':
                ch = '\r';
                break;
            case 'b':
                ch = '\b';
                break;
            case 'f':
                ch = '\f';
                break;
            case 'u': {
                int v = 0;
                if (j->end - j->p < 4)
                    return -1;
                for (int i = 0; i < 4; i++) {
                    int h = hexval(j->p[i]);
                    if (h < 0)
                        return -1;
                    v = v * 16 + h;
                }
                j->p += 4;
                ch = (v >= 0x20 && v < 0x7f) ? (char)v : '?';
                break;
            }
            default:
                ch = e; /* \" \\ \/ and anything else verbatim */
                break;
            }
        }
        if (out && out_size && n + 1 < out_size)
            out[n++] = ch;
    }
    return -1;
}

int kl__connect_error_parse(const char *json, size_t len, char *code, size_t code_size,
                            char *message, size_t message_size)
{
    struct json_cursor j = {json, json + len};
    int found = 0;
    int got_message = 0;

    if (code && code_size)
        code[0] = 0;
    if (message && message_size)
        message[0] = 0;
    /* A flat scan: every string followed by ':' is a key; the values of keys
     * "code" and "message" are taken (the first of each). Nesting under
     * "error" needs no special case because no other object is expected. */
    while (j.p < j.end) {
        if (*j.p != '"') {
            j.p++;
            continue;
        }
        char key[16];
        if (read_string(&j, key, sizeof(key)) != 0)
            break;
        skip_ws(&j);
        if (j.p >= j.end || *j.p != ':')
            continue;
        j.p++;
        skip_ws(&j);
        if (j.p >= j.end || *j.p != '"')
            continue;
        if (strcmp(key, "code") == 0 && !found) {
            if (read_string(&j, code, code_size) != 0)
                break;
            found = 1;
        } else if (strcmp(key, "message") == 0 && !got_message) {
            if (read_string(&j, message, message_size) != 0)
                break;
            got_message = 1;
        } else if (read_string(&j, NULL, 0) != 0) {
            break;
        }
    }
    return found;
}
