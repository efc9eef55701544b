/* TLS for the HTTP server: the certificate and key libmicrohttpd serves
 * (through GnuTLS), re-read when their files change, so that a certificate
 * cert-manager rotates is served to every new connection without a restart;
 * connections already open keep the one they started with.
 *
 * libmicrohttpd asks for the certificate on every handshake
 * (MHD_OPTION_HTTPS_CERT_CALLBACK2). The answer is a fresh copy of the
 * current pair, handed over for GnuTLS to free with the session
 * (GNUTLS_CERT_RETR_DEINIT_ALL), so a reload never frees what a session
 * uses. At most once a second, a handshake first looks at the files (device,
 * inode, size, times: a Kubernetes Secret volume swaps a symlink); a changed
 * pair is loaded, checked (the key matches the certificate) and then served;
 * one that does not load is logged once and the previous pair kept.
 *
 * The callback has no context argument: it finds its http_tls from the
 * session's connection, in a small registry that binds each TLS daemon's
 * listening socket (which the worker daemons of its thread pool share; a
 * connection knows only its worker) to its http_tls while the daemon is
 * being started, under the registry's lock, so that no handshake can look
 * before the binding exists.
 *
 * Threads: the callback runs on MHD threads; t->mu guards the current pair
 * and the file check. The registry has its own lock, taken before t->mu. */
#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/log.h"
#include "http/internal.h"

#define TLS_CHECK_EVERY_MS 1000
#define TLS_FILE_MAX       (1024 * 1024)
#define TLS_CHAIN_MAX      16
#define TLS_REGISTRY_MAX   16

/* What identifies a version of a file. */
typedef struct file_sig {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
    int err; /* errno of stat, 0 when it worked */
} file_sig;

struct http_tls {
    char *cert_file, *key_file;
    pthread_mutex_t mu;       /* guards everything below */
    gnutls_datum_t cert, key; /* the current pair, PEM */
    unsigned chain_len;
    file_sig cert_sig, key_sig; /* of the pair tried last */
    int64_t next_check_ms;
};

/* ---------- files ---------- */

static void sig_of(const char *path, file_sig *s)
{
    struct stat st;
    memset(s, 0, sizeof *s);
    if (stat(path, &st) != 0) {
        s->err = errno;
        return;
    }
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->size = st.st_size;
    s->mtime = st.st_mtim;
    s->ctime = st.st_ctim;
}

static bool sig_same(const file_sig *a, const file_sig *b)
{
    return a->err == b->err && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

/* Reads a whole (small) file into d (gnutls_malloc'd, NUL-terminated). */
static int read_file(const char *path, gnutls_datum_t *d, char *err, size_t err_len)
{
    FILE *f = fopen(path, "rb");
    d->data = NULL;
    d->size = 0;
    if (!f) {
        snprintf(err, err_len, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    unsigned char *buf = gnutls_malloc(TLS_FILE_MAX + 1);
    size_t n = buf ? fread(buf, 1, TLS_FILE_MAX + 1, f) : 0;
    bool bad = ferror(f) || n > TLS_FILE_MAX;
    fclose(f);
    if (!buf || bad || n == 0) {
        snprintf(err, err_len, "cannot read %s: %s", path,
                 !buf               ? "out of memory"
                 : n > TLS_FILE_MAX ? "larger than 1 MiB"
                                    : "empty or unreadable");
        gnutls_free(buf);
        return -1;
    }
    buf[n] = '\0';
    d->data = buf;
    d->size = (unsigned)n;
    return 0;
}

/* ---------- loading a pair ---------- */

/* The certificate's expiry, for the log ("" when it cannot be read). */
static void not_after(const gnutls_datum_t *cert, char *out, size_t n)
{
    gnutls_x509_crt_t crt;
    out[0] = '\0';
    if (gnutls_x509_crt_init(&crt) < 0)
        return;
    if (gnutls_x509_crt_import(crt, cert, GNUTLS_X509_FMT_PEM) >= 0) {
        time_t t = gnutls_x509_crt_get_expiration_time(crt);
        struct tm tm;
        if (t != (time_t)-1 && gmtime_r(&t, &tm))
            strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    gnutls_x509_crt_deinit(crt);
}

/* Checks a pair: the chain parses and the key is the first certificate's.
 * Returns the chain's length, or -1 with a reason. */
static int check_pair(const gnutls_datum_t *cert, const gnutls_datum_t *key, char *err,
                      size_t err_len)
{
    gnutls_certificate_credentials_t cred;
    gnutls_pcert_st chain[TLS_CHAIN_MAX];
    unsigned n = TLS_CHAIN_MAX;
    int rc = gnutls_pcert_list_import_x509_raw(chain, &n, cert, GNUTLS_X509_FMT_PEM,
                                               GNUTLS_X509_CRT_LIST_IMPORT_FAIL_IF_EXCEED);
    if (rc < 0) {
        snprintf(err, err_len, "the certificate file: %s", gnutls_strerror(rc));
        return -1;
    }
    for (unsigned i = 0; i < n; i++)
        gnutls_pcert_deinit(&chain[i]);
    if (gnutls_certificate_allocate_credentials(&cred) < 0) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    rc = gnutls_certificate_set_x509_key_mem2(cred, cert, key, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(cred);
    if (rc < 0) {
        snprintf(err, err_len, "%s", gnutls_strerror(rc));
        return -1;
    }
    return (int)n;
}

/* Loads the pair the files hold now. t->mu held (or t not shared yet).
 * Returns 0 (the pair is current), or -1 with a reason (nothing changed). */
static int load_locked(http_tls *t, char *err, size_t err_len)
{
    gnutls_datum_t cert, key;
    if (read_file(t->cert_file, &cert, err, err_len) != 0)
        return -1;
    if (read_file(t->key_file, &key, err, err_len) != 0) {
        gnutls_free(cert.data);
        return -1;
    }
    int n = check_pair(&cert, &key, err, err_len);
    if (n < 0) {
        gnutls_free(cert.data);
        gnutls_memset(key.data, 0, key.size);
        gnutls_free(key.data);
        return -1;
    }
    gnutls_free(t->cert.data);
    if (t->key.data)
        gnutls_memset(t->key.data, 0, t->key.size);
    gnutls_free(t->key.data);
    t->cert = cert;
    t->key = key;
    t->chain_len = (unsigned)n;
    char expiry[32];
    not_after(&cert, expiry, sizeof expiry);
    log_event(LOG_INFO, "tls_certificate_loaded", "cert=%s key=%s chain=%d not_after=%s",
              log_q(t->cert_file), log_q(t->key_file), n, expiry[0] ? expiry : "unknown");
    return 0;
}

/* Looks at the files at most once a second; loads them when they changed. */
static void refresh_locked(http_tls *t)
{
    int64_t now = http_now_ms();
    if (now < t->next_check_ms)
        return;
    t->next_check_ms = now + TLS_CHECK_EVERY_MS;
    file_sig c, k;
    sig_of(t->cert_file, &c);
    sig_of(t->key_file, &k);
    if (sig_same(&c, &t->cert_sig) && sig_same(&k, &t->key_sig))
        return;
    t->cert_sig = c;
    t->key_sig = k;
    char err[256];
    if (load_locked(t, err, sizeof err) != 0)
        log_event(LOG_WARN, "tls_certificate_reload_failed", "cert=%s key=%s error=%s (%s)",
                  log_q(t->cert_file), log_q(t->key_file), log_q(err),
                  "still serving the previous certificate");
}

/* ---------- life ---------- */

http_tls *http_tls_new(const char *cert_file, const char *key_file, char *err, size_t err_len)
{
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES ||
        MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK2) != MHD_YES) {
        snprintf(err, err_len, "this libmicrohttpd was built without TLS (GnuTLS 3.6.3 or later)");
        return NULL;
    }
    http_tls *t = calloc(1, sizeof *t);
    if (t)
        pthread_mutex_init(&t->mu, NULL);
    if (!t || !(t->cert_file = strdup(cert_file)) || !(t->key_file = strdup(key_file))) {
        snprintf(err, err_len, "out of memory");
        http_tls_free(t);
        return NULL;
    }
    sig_of(t->cert_file, &t->cert_sig);
    sig_of(t->key_file, &t->key_sig);
    t->next_check_ms = http_now_ms() + TLS_CHECK_EVERY_MS;
    char why[256];
    if (load_locked(t, why, sizeof why) != 0) {
        snprintf(err, err_len, "certificate %s and key %s: %s", cert_file, key_file, why);
        http_tls_free(t);
        return NULL;
    }
    return t;
}

void http_tls_free(http_tls *t)
{
    if (!t)
        return;
    pthread_mutex_destroy(&t->mu);
    gnutls_free(t->cert.data);
    if (t->key.data)
        gnutls_memset(t->key.data, 0, t->key.size);
    gnutls_free(t->key.data);
    free(t->cert_file);
    free(t->key_file);
    free(t);
}

int http_tls_check(const char *cert_file, const char *key_file, char *err, size_t err_len)
{
    http_tls *t = http_tls_new(cert_file, key_file, err, err_len);
    int rc = t ? 0 : -1;
    http_tls_free(t);
    return rc;
}

/* ---------- the registry: daemon -> http_tls ---------- */

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    const struct MHD_Daemon *daemon; /* the master daemon; NULL: a free slot */
    MHD_socket listen_fd;
    http_tls *tls;
} registry[TLS_REGISTRY_MAX];

static MHD_socket listen_fd_of(struct MHD_Daemon *d)
{
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
    return di ? di->listen_fd : MHD_INVALID_SOCKET;
}

struct MHD_Daemon *http_tls_start(http_tls *t, struct MHD_Daemon *(*start)(void *arg), void *arg)
{
    pthread_mutex_lock(&registry_mu);
    size_t slot = 0;
    while (slot < TLS_REGISTRY_MAX && registry[slot].daemon)
        slot++;
    struct MHD_Daemon *d = slot < TLS_REGISTRY_MAX ? start(arg) : NULL;
    if (d) {
        registry[slot].daemon = d;
        registry[slot].listen_fd = listen_fd_of(d);
        registry[slot].tls = t;
    }
    pthread_mutex_unlock(&registry_mu);
    return d;
}

void http_tls_stopped(const struct MHD_Daemon *d)
{
    pthread_mutex_lock(&registry_mu);
    for (size_t i = 0; i < TLS_REGISTRY_MAX; i++)
        if (registry[i].daemon == d)
            registry[i].daemon = NULL, registry[i].tls = NULL;
    pthread_mutex_unlock(&registry_mu);
}

/* ---------- the handshake ---------- */

/* A copy of the current pair for one session (GnuTLS frees it). */
static int copy_pair_locked(const http_tls *t, gnutls_pcert_st **certs, unsigned *n,
                            gnutls_privkey_t *key)
{
    gnutls_pcert_st *chain = gnutls_malloc(t->chain_len * sizeof *chain);
    unsigned len = t->chain_len;
    gnutls_privkey_t pk = NULL;
    if (!chain)
        return -1;
    if (gnutls_pcert_list_import_x509_raw(chain, &len, &t->cert, GNUTLS_X509_FMT_PEM, 0) < 0) {
        gnutls_free(chain);
        return -1;
    }
    if (gnutls_privkey_init(&pk) < 0 ||
        gnutls_privkey_import_x509_raw(pk, &t->key, GNUTLS_X509_FMT_PEM, NULL, 0) < 0) {
        if (pk)
            gnutls_privkey_deinit(pk);
        for (unsigned i = 0; i < len; i++)
            gnutls_pcert_deinit(&chain[i]);
        gnutls_free(chain);
        return -1;
    }
    *certs = chain;
    *n = len;
    *key = pk;
    return 0;
}

int http_tls_certificate(gnutls_session_t session, const struct gnutls_cert_retr_st *info,
                         gnutls_pcert_st **certs, unsigned int *certs_length,
                         gnutls_ocsp_data_st **ocsp, unsigned int *ocsp_length,
                         gnutls_privkey_t *privkey, unsigned int *flags)
{
    (void)info;
    *certs = NULL;
    *certs_length = 0;
    *ocsp = NULL;
    *ocsp_length = 0;
    *privkey = NULL;
    struct MHD_Connection *conn = gnutls_session_get_ptr(session);
    const union MHD_ConnectionInfo *ci =
        conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON) : NULL;
    MHD_socket fd = ci ? listen_fd_of(ci->daemon) : MHD_INVALID_SOCKET;
    int rc = -1;
    pthread_mutex_lock(&registry_mu);
    for (size_t i = 0; fd != MHD_INVALID_SOCKET && i < TLS_REGISTRY_MAX; i++) {
        if (!registry[i].daemon || registry[i].listen_fd != fd)
            continue;
        http_tls *t = registry[i].tls;
        pthread_mutex_lock(&t->mu);
        refresh_locked(t);
        rc = copy_pair_locked(t, certs, certs_length, privkey);
        pthread_mutex_unlock(&t->mu);
        break;
    }
    pthread_mutex_unlock(&registry_mu);
    if (rc == 0)
        *flags = GNUTLS_CERT_RETR_DEINIT_ALL;
    return rc;
}
