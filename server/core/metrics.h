/* Prometheus metrics registry (text format 0.0.4). Thread-safe.
 *
 * Families are declared once (metrics_declare) with their type and help
 * text; samples are addressed by family name plus a label string already in
 * exposition form, e.g. "verb=\"get\",code=\"200\"" ("" for none). Label
 * values must be escaped with metrics_label_escape when they come from
 * users. */
#ifndef KL_CORE_METRICS_H
#define KL_CORE_METRICS_H

#include <stddef.h>

typedef enum metrics_type { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM } metrics_type;

/* Declares a family; buckets (ascending, base units) only for histograms. */
void metrics_declare(const char *name, metrics_type type, const char *help, const double *buckets,
                     size_t n_buckets);
void metrics_add(const char *name, const char *labels, double v);     /* counter */
void metrics_set(const char *name, const char *labels, double v);     /* gauge */
void metrics_observe(const char *name, const char *labels, double v); /* histogram */
/* Drops one labelled sample (a gauge for a lease that is gone). */
void metrics_remove(const char *name, const char *labels);
/* Declares every kubelease_* family; call once at start-up. */
void metrics_init(void);
/* Renders everything, process_* included; returns a malloc'd NUL-terminated
 * buffer (caller frees) or NULL when out of memory. */
char *metrics_render(size_t *len);
/* Escapes a label value (backslash, quote, newline) into out. */
void metrics_label_escape(const char *in, char *out, size_t out_len);
void metrics_free_all(void);

#endif
