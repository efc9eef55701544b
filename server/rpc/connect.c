/* The Connect protocol's pure parts: the code table (each code's wire name
 * and HTTP status, one row per RPC_CODE_MAP entry: the one place where a
 * Connect code becomes an HTTP status) and the error JSON. No state, no
 * locks; any thread. */
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
