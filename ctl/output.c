/* What kubeleasectl prints: the Lease table, Lease objects as JSON, JSON
 * strings, durations and timestamps. Pure formatting over its arguments. */
#include <inttypes.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "ctl.h"

void ctl_json_string(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void ctl_format_duration(char *buf, size_t size, int64_t ms)
{
    int64_t s = ms / 1000;
    if (ms <= 0)
        snprintf(buf, size, "-");
    else if (ms < 1000)
        snprintf(buf, size, "%" PRId64 "ms", ms);
    else if (s < 60)
        snprintf(buf, size, "%" PRId64 ".%" PRId64 "s", s, ms % 1000 / 100);
    else if (s < 3600)
        snprintf(buf, size, "%" PRId64 "m%02" PRId64 "s", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, size, "%" PRId64 "h%02" PRId64 "m", s / 3600, s % 3600 / 60);
    else
        snprintf(buf, size, "%" PRId64 "d%02" PRId64 "h", s / 86400, s % 86400 / 3600);
}

void ctl_format_now(char *buf, size_t size)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(tv.tv_usec / 1000));
}

enum { COL_NS, COL_NAME, COL_HOLDER, COL_EPOCH, COL_SINCE, COL_VALID, COL_CAND, COL_WATCH, NCOL };

static const char *const headers[NCOL] = {"NAMESPACE", "NAME",     "HOLDER",     "EPOCH",
                                          "SINCE",     "VALIDITY", "CANDIDATES", "WATCHERS"};

/* The cells of one row: the strings point into r, the numbers into fmt. */
static void row_cells(const kl_lease_info *r, const char *cells[NCOL], char fmt[NCOL][32])
{
    cells[COL_NS] = r->ns;
    cells[COL_NAME] = r->name;
    cells[COL_HOLDER] = r->holder[0] ? r->holder : "<none>";
    /* At 2147483647 no new term can start (docs/design.md, rule 4). */
    snprintf(fmt[COL_EPOCH], 32, "%" PRId64 "%s", r->lease_transitions,
             r->lease_transitions >= CTL_EPOCH_MAX ? " (exhausted)" : "");
    ctl_format_duration(fmt[COL_SINCE], 32, r->since_transition_ms);
    ctl_format_duration(fmt[COL_VALID], 32, r->valid_for_ms);
    snprintf(fmt[COL_CAND], 32, "%d", (int)r->candidates);
    snprintf(fmt[COL_WATCH], 32, "%d", (int)r->watchers);
    for (int i = COL_EPOCH; i < NCOL; i++)
        cells[i] = fmt[i];
}

static void print_row(FILE *f, const char *const cells[NCOL], const size_t width[NCOL])
{
    for (int i = 0; i + 1 < NCOL; i++)
        fprintf(f, "%-*s   ", (int)width[i], cells[i]);
    fprintf(f, "%s\n", cells[NCOL - 1]);
}

void ctl_print_lease_table(FILE *f, const kl_lease_info *rows, size_t n)
{
    size_t width[NCOL];
    const char *cells[NCOL];
    char fmt[NCOL][32];

    for (int i = 0; i < NCOL; i++)
        width[i] = strlen(headers[i]);
    for (size_t k = 0; k < n; k++) {
        row_cells(&rows[k], cells, fmt);
        for (int i = 0; i < NCOL; i++)
            if (strlen(cells[i]) > width[i])
                width[i] = strlen(cells[i]);
    }
    print_row(f, headers, width);
    for (size_t k = 0; k < n; k++) {
        row_cells(&rows[k], cells, fmt);
        print_row(f, cells, width);
    }
}

void ctl_json_bytes(FILE *f, const void *data, size_t n)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    fputc('"', f);
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        fputc(abc[v >> 18 & 63], f);
        fputc(abc[v >> 12 & 63], f);
        fputc(i + 1 < n ? abc[v >> 6 & 63] : '=', f);
        fputc(i + 2 < n ? abc[v & 63] : '=', f);
    }
    fputc('"', f);
}

void ctl_print_value_text(FILE *f, const void *data, size_t n)
{
    const unsigned char *p = data;
    int text = 1;
    for (size_t i = 0; i < n; i++)
        text &= p[i] >= 0x20 && p[i] < 0x7f;
    if (text)
        fprintf(f, "%.*s", (int)n, (const char *)data);
    else
        fprintf(f, "<%zu bytes>", n);
}

void ctl_print_lease_json(FILE *f, const kl_lease_info *r, const void *value, size_t value_len)
{
    fputs("{\"namespace\":", f);
    ctl_json_string(f, r->ns);
    fputs(",\"name\":", f);
    ctl_json_string(f, r->name);
    fputs(",\"holder\":", f);
    ctl_json_string(f, r->holder[0] ? r->holder : NULL);
    fprintf(f,
            ",\"epoch\":%" PRId64 ",\"sinceTransitionMs\":%" PRId64 ",\"validForMs\":%" PRId64
            ",\"candidates\":%d,\"watchers\":%d,\"leaseDurationSeconds\":%d",
            r->lease_transitions, r->since_transition_ms, r->valid_for_ms, (int)r->candidates,
            (int)r->watchers, (int)r->lease_duration_s);
    if (r->lease_transitions >= CTL_EPOCH_MAX)
        fputs(",\"epochExhausted\":true", f); /* no new term can start */
    if (value_len) {                          /* proto3 JSON's bytes: base64 */
        fputs(",\"value\":", f);
        ctl_json_bytes(f, value, value_len);
    }
    fputc('}', f);
}
