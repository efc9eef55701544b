/* Strict request framing; see framing.h. */
#include "http/framing.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* RFC 9110 section 5.6.2: the characters of a field name. */
static bool is_tchar(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool name_is(const char *line, size_t name_len, const char *name)
{
    return name_len == strlen(name) && strncasecmp(line, name, name_len) == 0;
}

static http_head_verdict bad(char *why, size_t why_len, const char *what)
{
    snprintf(why, why_len, "%s", what);
    return HTTP_HEAD_BAD;
}

http_head_verdict http_head_check(const char *buf, size_t len, size_t *head_len, char *why,
                                  size_t why_len)
{
    size_t pos = 0;
    while (pos + 1 < len && buf[pos] == '\r' && buf[pos + 1] == '\n')
        pos += 2;
    bool request_line = true;
    unsigned content_length = 0, transfer_encoding = 0;
    for (;;) {
        const char *line = buf + pos;
        const char *lf = memchr(line, '\n', len - pos);
        if (!lf) {
            /* A CR that is not followed by LF ends nothing: refused now,
             * rather than waited on. */
            const char *cr = memchr(line, '\r', len - pos);
            if (cr && cr + 1 < buf + len)
                return bad(why, why_len, "CR without LF in the request head");
            return HTTP_HEAD_INCOMPLETE;
        }
        if (lf == line || lf[-1] != '\r')
            return bad(why, why_len, "bare LF line end (want CRLF)");
        size_t n = (size_t)(lf - 1 - line); /* without its CRLF */
        if (memchr(line, '\r', n))
            return bad(why, why_len, "CR without LF in the request head");
        pos = (size_t)(lf + 1 - buf);
        if (n == 0) {
            if (request_line)
                return bad(why, why_len, "empty request line");
            break;
        }
        if (request_line) {
            request_line = false;
            continue;
        }
        if (line[0] == ' ' || line[0] == '\t')
            return bad(why, why_len, "obs-folded header line (a line starting with white space)");
        size_t name_len = 0;
        while (name_len < n && is_tchar((unsigned char)line[name_len]))
            name_len++;
        if (name_len == 0 || name_len == n || line[name_len] != ':')
            return bad(why, why_len, "malformed header line (want a field name, then a colon)");
        if (name_is(line, name_len, "Content-Length"))
            content_length++;
        else if (name_is(line, name_len, "Transfer-Encoding"))
            transfer_encoding++;
    }
    if (content_length > 1)
        return bad(why, why_len, "two Content-Length headers");
    if (content_length && transfer_encoding)
        return bad(why, why_len, "Content-Length with Transfer-Encoding");
    *head_len = pos;
    return HTTP_HEAD_OK;
}
