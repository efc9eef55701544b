/* Connect error JSON parsing (see connect_error.h). */
#include "connect_error.h"

#include <string.h>

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

/* Decodes the escape after a backslash at j->p into *ch. Returns 0, or -1
 * when it is cut off or a malformed \u. */
static int read_escape(struct json_cursor *j, char *ch)
{
    if (j->p >= j->end)
        return -1;
    char e = *j->p++;
    switch (e) {
    case 'n':
        *ch = '\n';
        return 0;
    case 't':
        *ch = '\t';
        return 0;
    case 'r':
        *ch = '\r';
        return 0;
    case 'b':
        *ch = '\b';
        return 0;
    case 'f':
        *ch = '\f';
        return 0;
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
        *ch = (v >= 0x20 && v < 0x7f) ? (char)v : '?';
        return 0;
    }
    default:
        *ch = e; /* \" \\ \/ and anything else verbatim */
        return 0;
    }
}

/* Reads a JSON string at j->p (which is '"') into out (may be NULL), always
 * NUL-terminated: when the string is malformed, out holds what came before.
 * Returns 0 on success with j->p after the closing quote, -1 if malformed. */
static int read_string(struct json_cursor *j, char *out, size_t out_size)
{
    size_t n = 0;
    int rc = -1;
    j->p++; /* opening quote */
    while (j->p < j->end) {
        char ch = *j->p++;
        if (ch == '"') {
            rc = 0;
            break;
        }
        if (ch == '\\' && read_escape(j, &ch) != 0)
            break;
        if (out && out_size && n + 1 < out_size)
            out[n++] = ch;
    }
    if (out && out_size)
        out[n] = 0;
    return rc;
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
