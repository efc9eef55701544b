/* The bearer token the client presents to the service: read from a file
 * (the token_file option, default $KUBELEASE_TOKEN_FILE), normally a
 * projected ServiceAccount token that the kubelet rotates. The file is
 * read again when it changes (its device, inode, size or mtime, looked at
 * most every KL__TOKEN_CHECK_MS) and after the service refused a token
 * (HTTP 401), so a rotated token is picked up without a restart. No file:
 * no Authorization header.
 *
 * Threads. Every function is thread-safe (one mutex per token): the I/O
 * thread and threads running kl_get_holder both send requests. The token
 * is a secret: it is never in a message, and wiped when replaced. */
#ifndef KL_TOKEN_H
#define KL_TOKEN_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <curl/curl.h>

#define KL__TOKEN_CHECK_MS 2000 /* the file is looked at this often at most */
#define KL__TOKEN_MAX      (64 * 1024)

struct kl__token {
    pthread_mutex_t mu;
    char *path;   /* NULL: no token file */
    char *header; /* "Authorization: Bearer <token>"; NULL while there is no token */
    dev_t dev;    /* of the file last read */
    ino_t ino;
    off_t size;
    struct timespec mtime;
    int64_t checked_ms; /* when the file was last looked at; 0: never */
    int stale;          /* refused: look again before the next request */
    char problem[200];  /* why there is no token, "" when there is one */
};

/* Sets up t for path (NULL or "": no token) and reads it once. Returns KL_OK
 * or KL_ERR_NO_MEMORY. A file that cannot be read is not an error here: the
 * service's refusal will name the problem. */
int kl__token_init(struct kl__token *t, const char *path);
void kl__token_cleanup(struct kl__token *t);

/* Appends the Authorization header to h (after re-reading the file when
 * due). Returns the new list, h itself when there is no token, or NULL when
 * out of memory (h is then freed). */
struct curl_slist *kl__token_add_header(struct kl__token *t, struct curl_slist *h);
/* The service refused the token (HTTP 401): the file is read again before
 * the next request. Writes why there was no token into why (""
 * when there was one). */
void kl__token_refused(struct kl__token *t, char *why, size_t why_len);

#endif
