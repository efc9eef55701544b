/* The checks on JSON text that cJSON does not make: the bytes between
 * tokens, and NULs inside strings, which cJSON would cut the string at. No
 * state, no locks; any thread. */
#include "rpc/json_text.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rpc/json.h"

#define PATH_LEN 256

typedef enum scan_result { SCAN_OK, SCAN_BAD_BYTE, SCAN_BAD_ESCAPE, SCAN_NUL } scan_result;

static bool hex4(const char *p)
{
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return false;
    }
    return true;
}

/* Walks JSON text cJSON parsed: *at is the offset of the first byte between
 * tokens that is not JSON whitespace, of the first \u escape that is not
 * four hex digits (cJSON reads those as U+0000), or of the first string
 * holding a NUL, whose ordinal among all strings (keys and values, in
 * document order) goes to *string. */
static scan_result scan(const char *text, size_t len, size_t *at, size_t *string)
{
    size_t n_strings = 0, start = 0;
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (!in_string) {
            if (c == '"') {
                in_string = true;
                start = i;
            } else if (c < 0x20 && c != ' ' && c != '\t' && c != '\r' && c != '\n') {
                *at = i;
                return SCAN_BAD_BYTE;
            }
            continue;
        }
        bool nul = c == '\0';
        if (c == '\\' && i + 1 < len) {
            if (text[i + 1] == 'u' && (i + 5 >= len || !hex4(text + i + 2))) {
                *at = i;
                return SCAN_BAD_ESCAPE;
            }
            nul =
                text[i + 1] == '\0' || (text[i + 1] == 'u' && memcmp(text + i + 2, "0000", 4) == 0);
            i++; /* the escaped byte; the hex digits of \u pass as plain bytes */
        } else if (c == '"') {
            in_string = false;
            n_strings++;
        }
        if (nul) {
            *at = start;
            *string = n_strings;
            return SCAN_NUL;
        }
    }
    return SCAN_OK;
}

typedef struct find {
    size_t left;         /* strings still to pass */
    bool key;            /* the string found is a key */
    char path[PATH_LEN]; /* where it is */
} find;

/* Counts the strings of j in document order down to the one wanted;
 * returns true once found, with its path in f. */
static bool find_string(const cJSON *j, const char *path, find *f)
{
    if (cJSON_IsString(j)) {
        if (f->left-- > 0)
            return false;
        snprintf(f->path, sizeof f->path, "%s", path);
        return true;
    }
    if (!cJSON_IsObject(j) && !cJSON_IsArray(j))
        return false;
    size_t i = 0;
    for (const cJSON *c = j->child; c; c = c->next, i++) {
        char sub[PATH_LEN];
        if (cJSON_IsObject(j)) {
            char name[128];
            rpc_json_name(c->string ? c->string : "", name, sizeof name);
            snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", name);
            if (f->left-- == 0) {
                snprintf(f->path, sizeof f->path, "%s", sub);
                f->key = true;
                return true;
            }
        } else {
            snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        }
        if (find_string(c, sub, f))
            return true;
    }
    return false;
}

int rpc_json_text_check(const char *text, size_t len, const cJSON *root, char *err, size_t err_len)
{
    size_t at = 0, string = 0;
    if (!err)
        err_len = 0;
    switch (scan(text, len, &at, &string)) {
    case SCAN_OK:
        return 0;
    case SCAN_BAD_BYTE:
        snprintf(err, err_len, "malformed JSON: byte 0x%02x at byte %zu is not JSON whitespace",
                 (unsigned char)text[at], at);
        return -1;
    case SCAN_BAD_ESCAPE:
        snprintf(err, err_len, "malformed JSON: invalid \\u escape at byte %zu", at);
        return -1;
    case SCAN_NUL:
        break;
    }
    find f = {.left = string};
    if (!find_string(root, "", &f))
        snprintf(err, err_len, "malformed JSON: the string at byte %zu contains a NUL", at);
    else if (f.key)
        snprintf(err, err_len, "field \"%s\": its name contains a NUL (\\u0000)", f.path);
    else
        snprintf(err, err_len, "field \"%s\": contains a NUL (\\u0000)",
                 *f.path ? f.path : "(message)");
    return -1;
}
