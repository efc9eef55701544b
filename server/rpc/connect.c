/* The Connect protocol's pure parts: the code table (each code's wire name
 * and HTTP status, one row per RPC_CODE_MAP entry: the one place where a
 * Connect code becomes an HTTP status), error JSON, and the envelopes of
 * streaming calls. No state, no locks; any thread. */
#include "rpc/connect.h"

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

static const struct {
    const char *name;
    int status;
} codes[] = {
#define RPC_CODE_ROW(e, name, status) {name, status},
    RPC_CODE_MAP(RPC_CODE_ROW)
#undef RPC_CODE_ROW
};

const char *rpc_code_name(rpc_code c)
{
    if ((int)c < 0 || c >= RPC_CODE_COUNT)
        return "unknown";
    return codes[c].name;
}

int rpc_code_http_status(rpc_code c)
{
    if ((int)c < 0 || c >= RPC_CODE_COUNT)
        return 500;
    return codes[c].status;
}

int rpc_code_from_name(const char *name, rpc_code *out)
{
    for (int i = 0; i < RPC_CODE_COUNT; i++) {
        if (strcmp(codes[i].name, name) == 0) {
            *out = (rpc_code)i;
            return 0;
        }
    }
    return -1;
}

/* Messages may quote user input: keep them printable ASCII so that the JSON
 * is valid UTF-8 whatever the input was. */
static void sanitize(const char *in, char *out, size_t out_len)
{
    size_t o = 0;
    for (; *in && o + 1 < out_len; in++) {
        unsigned char ch = (unsigned char)*in;
        out[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    out[o] = '\0';
}

static cJSON *error_object(rpc_code c, const char *raw)
{
    char message[512] = "";
    if (raw)
        sanitize(raw, message, sizeof message);
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (!cJSON_AddStringToObject(o, "code", rpc_code_name(c)) ||
        (*message && !cJSON_AddStringToObject(o, "message", message))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *rpc_error_json(rpc_code c, const char *message)
{
    cJSON *o = error_object(c, message);
    if (!o)
        return NULL;
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *rpc_end_stream_json(rpc_code c, const char *message)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    if (c != RPC_OK) {
        cJSON *e = error_object(c, message);
        if (!e) {
            cJSON_Delete(o);
            return NULL;
        }
        cJSON_AddItemToObject(o, "error", e);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

void rpc_envelope_header(uint8_t flags, uint32_t len, uint8_t out[RPC_ENVELOPE_HEADER])
{
    out[0] = flags;
    out[1] = (uint8_t)(len >> 24);
    out[2] = (uint8_t)(len >> 16);
    out[3] = (uint8_t)(len >> 8);
    out[4] = (uint8_t)len;
}

uint8_t *rpc_envelope_encode(uint8_t flags, const uint8_t *msg, size_t len, size_t *out_len)
{
    if (len > UINT32_MAX)
        return NULL;
    uint8_t *buf = malloc(RPC_ENVELOPE_HEADER + len);
    if (!buf)
        return NULL;
    rpc_envelope_header(flags, (uint32_t)len, buf);
    if (len)
        memcpy(buf + RPC_ENVELOPE_HEADER, msg, len);
    *out_len = RPC_ENVELOPE_HEADER + len;
    return buf;
}

void rpc_envelope_decoder_init(rpc_envelope_decoder *d, size_t max_len)
{
    memset(d, 0, sizeof *d);
    d->max_len = max_len;
}

rpc_envelope_status rpc_envelope_decoder_feed(rpc_envelope_decoder *d, const uint8_t *data,
                                              size_t len, size_t *consumed)
{
    size_t used = 0;
    *consumed = 0;
    if (d->error)
        return d->error;
    if (d->frame_ready)
        return RPC_ENVELOPE_FRAME;
    while (d->hdr_len < RPC_ENVELOPE_HEADER && used < len)
        d->hdr[d->hdr_len++] = data[used++];
    if (d->hdr_len < RPC_ENVELOPE_HEADER) {
        *consumed = used;
        return RPC_ENVELOPE_NEED_MORE;
    }
    if (d->hdr_len == RPC_ENVELOPE_HEADER && !d->msg && d->have == 0) {
        d->flags = d->hdr[0];
        d->msg_len = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 |
                     (uint32_t)d->hdr[3] << 8 | (uint32_t)d->hdr[4];
        if (d->msg_len > d->max_len) {
            *consumed = used;
            return d->error = RPC_ENVELOPE_TOO_LARGE;
        }
        if (d->msg_len) {
            d->msg = malloc(d->msg_len);
            if (!d->msg) {
                *consumed = used;
                return d->error = RPC_ENVELOPE_NO_MEMORY;
            }
        }
    }
    size_t want = d->msg_len - d->have;
    size_t n = len - used < want ? len - used : want;
    if (n) {
        memcpy(d->msg + d->have, data + used, n);
        d->have += n;
        used += n;
    }
    *consumed = used;
    if (d->have < d->msg_len)
        return RPC_ENVELOPE_NEED_MORE;
    d->frame_ready = true;
    return RPC_ENVELOPE_FRAME;
}

void rpc_envelope_decoder_take(rpc_envelope_decoder *d, uint8_t *flags, uint8_t **msg, size_t *len)
{
    *flags = d->flags;
    *msg = d->msg;
    *len = d->msg_len;
    size_t max_len = d->max_len;
    rpc_envelope_decoder_init(d, max_len);
}

bool rpc_envelope_decoder_partial(const rpc_envelope_decoder *d)
{
    return d->hdr_len > 0;
}

void rpc_envelope_decoder_free(rpc_envelope_decoder *d)
{
    free(d->msg);
    d->msg = NULL;
    rpc_envelope_decoder_init(d, d->max_len);
}
