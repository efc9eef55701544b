/* logfmt lines on stderr, one write() each so lines from several threads
 * never interleave. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

static atomic_int min_level = LOG_INFO;
static const char *const level_names[] = {"debug", "info", "warn", "error"};

void log_set_level(log_level level)
{
    atomic_store(&min_level, (int)level);
}

int log_parse_level(const char *s, log_level *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (log_level)i;
            return 0;
        }
    }
    return -1;
}

int log_enabled(log_level level)
{
    return (int)level >= atomic_load(&min_level);
}

void log_event(log_level level, const char *event, const char *fmt, ...)
{
    if (!log_enabled(level))
        return;
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s event=%s",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, level_names[level], event);
    if (fmt && *fmt && n > 0 && (size_t)n < sizeof line - 1) {
        line[n++] = ' ';
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        va_end(ap);
        if (m > 0)
            n += m;
        else
            n--; /* no fields after all: no trailing space */
    }
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t ignored = write(STDERR_FILENO, line, (size_t)n);
    (void)ignored;
}

const char *log_q(const char *s)
{
    static _Thread_local char ring[8][600];
    static _Thread_local unsigned next;
    char *out = ring[next++ % 8];
    if (!s)
        s = "";
    int plain = *s != '\0';
    for (const char *p = s; *p; p++) {
        if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || (unsigned char)*p >= 0x7f) {
            plain = 0;
            break;
        }
    }
    if (plain) {
        snprintf(out, 600, "%s", s);
        return out;
    }
    size_t o = 0;
    out[o++] = '"';
    for (const char *p = s; *p && o < 590; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
        } else if (c < ' ' || c == 0x7f) {
            o += (size_t)snprintf(out + o, 600 - o, "\\x%02x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
    return out;
}
