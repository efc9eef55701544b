/* Minimal operator endpoints until the observability module replaces them:
 * no /metrics (404) and a plain status page. */
#include "http/http_ops.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int http_ops_metrics(char **body, size_t *len, const char **content_type)
{
    (void)body;
    (void)len;
    (void)content_type;
    return -1;
}

/* Escapes the HTML special characters of s into out. */
static void html_escape(const char *s, char *out, size_t out_len)
{
    size_t o = 0;
    for (; *s && o + 7 < out_len; s++) {
        const char *rep = NULL;
        switch (*s) {
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '&':
            rep = "&amp;";
            break;
        case '"':
            rep = "&quot;";
            break;
        }
        if (rep) {
            size_t n = strlen(rep);
            memcpy(out + o, rep, n);
            o += n;
        } else {
            out[o++] = *s;
        }
    }
    out[o] = '\0';
}

int http_ops_status_page(const engine_reply *list, char **body, size_t *len,
                         const char **content_type)
{
    size_t cap = 1024 + list->n_leases * 2048;
    char *buf = malloc(cap);
    if (!buf)
        return -1;
    size_t o = (size_t)snprintf(buf, cap,
                                "<!doctype html><html><head><meta charset=\"utf-8\">"
                                "<title>kubelease</title></head><body><h1>kubelease</h1>"
                                "<table><tr><th>namespace</th><th>lease</th><th>holder</th>"
                                "<th>epoch</th><th>candidates</th><th>watchers</th></tr>\n");
    for (size_t i = 0; i < list->n_leases && o < cap; i++) {
        const engine_lease_status *l = &list->leases[i];
        char holder[STORE_HOLDER_MAX * 6];
        html_escape(l->holder, holder, sizeof holder);
        o += (size_t)snprintf(buf + o, cap - o,
                              "<tr><td>%s</td><td>%s</td><td>%s</td><td>%lld</td><td>%d</td>"
                              "<td>%d</td></tr>\n",
                              l->ns, l->name, holder, (long long)l->epoch, (int)l->candidates,
                              (int)l->watchers);
    }
    if (o < cap)
        o += (size_t)snprintf(buf + o, cap - o, "</table></body></html>\n");
    *body = buf;
    *len = o < cap ? o : cap - 1;
    *content_type = "text/html; charset=utf-8";
    return 0;
}

void http_ops_rpc_done(const char *method, const char *code, double seconds)
{
    (void)method;
    (void)code;
    (void)seconds;
}

void http_ops_stream(const char *method, int delta)
{
    (void)method;
    (void)delta;
}
