/* Logs: one logfmt line per event on stderr:
 *   ts=2026-11-29T14:00:00.123Z level=info event=term_started ns=default ...
 * Never log secrets (tokens, keys). Thread-safe. */
#ifndef KL_CORE_LOG_H
#define KL_CORE_LOG_H

typedef enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;

void log_set_level(log_level level);
/* "debug", "info", "warn" or "error"; returns 0 or -1. */
int log_parse_level(const char *s, log_level *out);
int log_enabled(log_level level);

/* fmt renders the key=value pairs after the event, e.g.
 * log_event(LOG_INFO, "term_started", "ns=%s epoch=%lld", log_q(ns), (long long)e).
 * Use log_q() for every value that may contain spaces or quotes. */
void log_event(log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Quotes a value for logfmt if it needs it. Returns a pointer into a small
 * thread-local ring of buffers: valid for the next 7 log_q() calls. */
const char *log_q(const char *s);

#endif
