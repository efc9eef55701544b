/* Test support: one HTTP request with libcurl, its answer's body kept (up
 * to 64 KiB). Header-only (static functions), as the other support files. */
#ifndef KL_TESTS_HTTP_CALL_H
#define KL_TESTS_HTTP_CALL_H

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

typedef struct http_body {
    char data[65536];
    size_t len;
} http_body;

static size_t http_body_add(char *p, size_t size, size_t n, void *ctx)
{
    http_body *b = ctx;
    size_t len = size * n;
    if (b->len + len < sizeof b->data) {
        memcpy(b->data + b->len, p, len);
        b->len += len;
        b->data[b->len] = '\0';
    }
    return len;
}

/* One request to base followed by path: a POST of data[0..len) when data is
 * not NULL, with a Content-Type of ctype and the whole header line header
 * when they are not NULL. Returns the HTTP status, or -1 without an answer. */
static inline long http_call(const char *base, const char *path, const char *ctype,
                             const char *header, const void *data, size_t len, http_body *out)
{
    CURL *c = curl_easy_init();
    char url[256], ct[128];
    snprintf(url, sizeof url, "%s%s", base, path);
    struct curl_slist *h = NULL;
    if (ctype) {
        snprintf(ct, sizeof ct, "Content-Type: %s", ctype);
        h = curl_slist_append(h, ct);
    }
    if (header)
        h = curl_slist_append(h, header);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (data) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)data);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    memset(out, 0, sizeof *out);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, http_body_add);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return rc == CURLE_OK ? status : -1;
}

#endif
