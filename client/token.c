/* The bearer token from its file, re-read when it changes (see token.h). */
#include "token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/secret.h"
#include "kubelease.h"
#include "util.h"

static void set_header(struct kl__token *t, char *header, const char *problem)
{
    kl__secret_free(t->header);
    t->header = header;
    snprintf(t->problem, sizeof(t->problem), "%s", problem);
}

/* Reads the open file fd of st's size: the token, trimmed, must be printable
 * without spaces. Returns the header, or NULL with why filled. */
static char *read_header(int fd, const struct stat *st, char *why, size_t why_len)
{
    if (!S_ISREG(st->st_mode) || st->st_size <= 0 || st->st_size > KL__TOKEN_MAX) {
        snprintf(why, why_len, "not a regular file of 1 to %d bytes", KL__TOKEN_MAX);
        return NULL;
    }
    static const char prefix[] = "Authorization: Bearer ";
    size_t cap = sizeof(prefix) + (size_t)st->st_size;
    char *h = malloc(cap);
    if (!h) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    memcpy(h, prefix, sizeof(prefix) - 1);
    char *tok = h + sizeof(prefix) - 1;
    size_t n = 0, want = (size_t)st->st_size;
    while (n < want) {
        ssize_t r = read(fd, tok + n, want - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    tok[n] = 0;
    size_t start = 0;
    while (start < n &&
           (tok[start] == ' ' || tok[start] == '\n' || tok[start] == '\r' || tok[start] == '\t'))
        start++;
    while (n > start &&
           (tok[n - 1] == ' ' || tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == '\t'))
        n--;
    memmove(tok, tok + start, n - start);
    tok[n - start] = 0;
    for (size_t i = 0; tok[i]; i++) {
        if (tok[i] <= ' ' || tok[i] >= 0x7f) {
            kl__secret_free(h);
            snprintf(why, why_len, "holds a character no token has");
            return NULL;
        }
    }
    if (!tok[0]) {
        kl__secret_free(h);
        snprintf(why, why_len, "is empty");
        return NULL;
    }
    return h;
}

/* Looks at the file; reads it when it is not the one read last. mu held. */
static void refresh(struct kl__token *t, int64_t now)
{
    char why[160];
    struct stat st;
    t->checked_ms = now;
    t->stale = 0;
    int fd = open(t->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, sizeof(why), "token file %.100s: %s", t->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        set_header(t, NULL, why);
        t->ino = 0;
        return;
    }
    if (t->header && st.st_dev == t->dev && st.st_ino == t->ino && st.st_size == t->size &&
        st.st_mtim.tv_sec == t->mtime.tv_sec && st.st_mtim.tv_nsec == t->mtime.tv_nsec) {
        close(fd);
        return; /* the same file as before */
    }
    char detail[120] = "";
    char *h = read_header(fd, &st, detail, sizeof(detail));
    close(fd);
    if (!h)
        snprintf(why, sizeof(why), "token file %.100s %s", t->path, detail);
    set_header(t, h, h ? "" : why);
    t->dev = st.st_dev;
    t->ino = st.st_ino;
    t->size = st.st_size;
    t->mtime = st.st_mtim;
}

int kl__token_init(struct kl__token *t, const char *path)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->mu, NULL);
    if (!path || !*path)
        return KL_OK;
    t->path = strdup(path);
    if (!t->path)
        return KL_ERR_NO_MEMORY;
    refresh(t, kl__now_ms());
    return KL_OK;
}

void kl__token_cleanup(struct kl__token *t)
{
    kl__secret_free(t->header);
    free(t->path);
    pthread_mutex_destroy(&t->mu);
    memset(t, 0, sizeof(*t));
}

struct curl_slist *kl__token_add_header(struct kl__token *t, struct curl_slist *h)
{
    if (!t->path)
        return h;
    pthread_mutex_lock(&t->mu);
    int64_t now = kl__now_ms();
    if (t->stale || now - t->checked_ms >= KL__TOKEN_CHECK_MS)
        refresh(t, now);
    struct curl_slist *out = h;
    if (t->header) {
        out = curl_slist_append(h, t->header);
        if (!out)
            curl_slist_free_all(h);
    }
    pthread_mutex_unlock(&t->mu);
    return out;
}

void kl__token_refused(struct kl__token *t, char *why, size_t why_len)
{
    why[0] = 0;
    if (!t->path)
        return;
    pthread_mutex_lock(&t->mu);
    t->stale = 1;
    snprintf(why, why_len, "%s", t->problem);
    pthread_mutex_unlock(&t->mu);
}
