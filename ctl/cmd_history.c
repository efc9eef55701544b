/* `history NS/NAME`: the last terms of a Lease (kl_list_terms), as a table
 * or as JSON. Main thread only. */
#include <getopt.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "ctl.h"

/* Unix ms as "2006-01-02T15:04:05Z" (UTC); "-" for 0. */
static void format_time(char *buf, size_t size, int64_t unix_ms)
{
    time_t t = (time_t)(unix_ms / 1000);
    struct tm tm;
    if (unix_ms <= 0 || !gmtime_r(&t, &tm)) {
        snprintf(buf, size, "-");
        return;
    }
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The gap before a term: "-" when unknown, "0ms" when there was none. */
static void format_gap(char *buf, size_t size, int64_t gap_ms)
{
    if (gap_ms < 0)
        snprintf(buf, size, "-");
    else if (gap_ms == 0)
        snprintf(buf, size, "0ms");
    else
        ctl_format_duration(buf, size, gap_ms);
}

enum { COL_HOLDER, COL_EPOCH, COL_START, COL_DURATION, COL_END, COL_GAP, COL_REPLICA, NCOL };

static void cells_of(const kl_term_info *t, int64_t now_unix_ms, char fmt[NCOL][64])
{
    snprintf(fmt[COL_HOLDER], 64, "%.63s", t->holder);
    snprintf(fmt[COL_EPOCH], 64, "%" PRId64, t->epoch);
    format_time(fmt[COL_START], 64, t->start_unix_ms);
    int64_t end = t->end_unix_ms ? t->end_unix_ms : now_unix_ms;
    ctl_format_duration(fmt[COL_DURATION], 64, end - t->start_unix_ms);
    snprintf(fmt[COL_END], 64, "%s", t->end_unix_ms ? t->end_reason : "(leading)");
    if (t->end_unix_ms && !t->end_reason[0])
        snprintf(fmt[COL_END], 64, "unknown");
    format_gap(fmt[COL_GAP], 64, t->gap_before_ms);
    snprintf(fmt[COL_REPLICA], 64, "%s", t->replica[0] ? t->replica : "-");
}

static void print_table(FILE *f, const kl_term_info *rows, size_t n, const kl_terms_state *st)
{
    static const char *const head[NCOL] = {"HOLDER", "EPOCH",      "START",  "DURATION",
                                           "END",    "GAP BEFORE", "REPLICA"};
    size_t width[NCOL];
    char fmt[NCOL][64];
    for (int i = 0; i < NCOL; i++)
        width[i] = strlen(head[i]);
    for (size_t r = 0; r < n; r++) {
        cells_of(&rows[r], st->now_unix_ms, fmt);
        for (int i = 0; i < NCOL; i++)
            width[i] = strlen(fmt[i]) > width[i] ? strlen(fmt[i]) : width[i];
        if (strlen(rows[r].holder) > width[COL_HOLDER])
            width[COL_HOLDER] = strlen(rows[r].holder);
    }
    for (int i = 0; i + 1 < NCOL; i++)
        fprintf(f, "%-*s  ", (int)width[i], head[i]);
    fprintf(f, "%s\n", head[NCOL - 1]);
    for (size_t r = 0; r < n; r++) {
        cells_of(&rows[r], st->now_unix_ms, fmt);
        fprintf(f, "%-*s  ", (int)width[COL_HOLDER], rows[r].holder); /* whole, however long */
        for (int i = COL_EPOCH; i + 1 < NCOL; i++)
            fprintf(f, "%-*s  ", (int)width[i], fmt[i]);
        fprintf(f, "%s\n", fmt[NCOL - 1]);
    }
    char d[32];
    if (st->leaderless_since_unix_ms) {
        ctl_format_duration(d, sizeof d, st->now_unix_ms - st->leaderless_since_unix_ms);
        fprintf(f, "Leaderless for %s (lease duration %ds).\n", d, (int)st->lease_duration_seconds);
    } else if (st->valid_for_ms > 0) {
        ctl_format_duration(d, sizeof d, st->valid_for_ms);
        fprintf(f, "The current term's grant is valid for %s more.\n", d);
    }
}

static void print_json(FILE *f, const char *ns, const char *name, const kl_term_info *rows,
                       size_t n, const kl_terms_state *st)
{
    fputs("{\"namespace\":", f);
    ctl_json_string(f, ns);
    fputs(",\"name\":", f);
    ctl_json_string(f, name);
    fprintf(f,
            ",\"nowUnixMs\":%" PRId64 ",\"leaderlessSinceUnixMs\":%" PRId64
            ",\"validForMs\":%" PRId64 ",\"leaseDurationSeconds\":%d,\"terms\":[",
            st->now_unix_ms, st->leaderless_since_unix_ms, st->valid_for_ms,
            (int)st->lease_duration_seconds);
    for (size_t i = 0; i < n; i++) {
        const kl_term_info *t = &rows[i];
        fputs(i ? ",{\"holder\":" : "{\"holder\":", f);
        ctl_json_string(f, t->holder);
        fprintf(f,
                ",\"epoch\":%" PRId64 ",\"startUnixMs\":%" PRId64 ",\"endUnixMs\":%" PRId64
                ",\"endReason\":",
                t->epoch, t->start_unix_ms, t->end_unix_ms);
        ctl_json_string(f, t->end_reason[0] ? t->end_reason : NULL);
        fprintf(f, ",\"gapBeforeMs\":%" PRId64 ",\"replica\":", t->gap_before_ms);
        ctl_json_string(f, t->replica[0] ? t->replica : NULL);
        fputc('}', f);
    }
    fputs("]}\n", f);
}

int ctl_history(const struct ctl_command *cmd, int argc, char **argv, struct ctl_opts *o)
{
    kl_term_info *rows = NULL;
    size_t n = 0;
    kl_terms_state st;
    kl_error err;
    char ns[64], name[254];
    int rc;
    kl_client *c = ctl_open_one_ref(cmd, argc, argv, o, ns, sizeof(ns), name, sizeof(name), &rc);
    if (!c)
        return rc;
    rc = kl_list_terms(c, ns, name, &rows, &n, &st, &err);
    kl_client_free(c);
    if (rc != KL_OK)
        return ctl_fail(rc, &err);
    if (o->output == CTL_OUT_JSON)
        print_json(stdout, ns, name, rows, n, &st);
    else if (n == 0)
        fprintf(stderr, "No terms of %s/%s seen by this service replica yet.\n", ns, name);
    else
        print_table(stdout, rows, n, &st);
    kl_free(rows);
    return CTL_EXIT_OK;
}
