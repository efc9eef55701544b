/* RPC benchmark against kubeleased --dev:
 *   1. GetHolder and Confirm latency (binary protobuf, one keep-alive libcurl
 *      handle; Confirm with the term's token, as the client library sends it);
 *   2. resign-to-new-leader handoff: two Campaign streams; the time from
 *      sending Resign for the leader to the standby's stream saying Elected.
 * Usage: bench_rpc [--tls] [KUBELEASED] [GETHOLDER_CALLS] [HANDOFFS]
 * (KUBELEASED defaults to $KUBELEASED, then the binary next to this build).
 * --tls: kubeleased serves HTTPS (a certificate made with
 * tests/support/make_certs.sh) and every call and stream goes over TLS.
 *
 * Authorization on vs off (docs/design.md, rule 7) needs an apiserver: with
 * $KL_BENCH_KUBECONFIG kubeleased runs against it (--kubeconfig) instead of
 * --dev, in $KL_BENCH_NAMESPACE (default "bench"), with --auth
 * $KL_BENCH_AUTH (default none), and every request carries the token in
 * $KL_BENCH_TOKEN_FILE when set. E.g. on the test control plane:
 *   KL_BENCH_KUBECONFIG=$KL_SA_KUBECONFIG KL_BENCH_NAMESPACE=kubelease-test \
 *   KL_BENCH_AUTH=kubernetes KL_BENCH_TOKEN_FILE=$KL_REPLICA_TOKEN_FILE bench_rpc */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include "common/envelope.h"
#include "kubelease/v1/kubelease.pb-c.h"

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void die(const char *msg)
{
    fprintf(stderr, "bench_rpc: %s\n", msg);
    exit(1);
}

/* ---- the server ---- */

static pid_t server_pid;
static int server_port;
static char server_log[128];
static bool tls;          /* --tls */
static char tls_dir[128]; /* certificates, when tls */
static char tls_ca[192];
static const char *bench_ns = "bench";
static char auth_header[8192]; /* "Authorization: Bearer ..." or "" */

static const char *scheme(void)
{
    return tls ? "https" : "http";
}

/* Test certificates for 127.0.0.1 in tls_dir. */
static void make_certs(void)
{
    char cmd[512];
    snprintf(tls_dir, sizeof tls_dir, "/tmp/kl-bench-tls-%d", (int)getpid());
    snprintf(tls_ca, sizeof tls_ca, "%s/ca.crt", tls_dir);
    snprintf(cmd, sizeof cmd, "bash '%s/tests/support/make_certs.sh' '%s'", KL_SOURCE_DIR, tls_dir);
    if (system(cmd) != 0)
        die("cannot make the TLS certificates (is openssl installed?)");
}

/* $KL_BENCH_TOKEN_FILE into auth_header. */
static void read_token(void)
{
    const char *path = getenv("KL_BENCH_TOKEN_FILE");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "r");
    char tok[8000] = "";
    if (!f || !fgets(tok, sizeof tok, f))
        die("cannot read $KL_BENCH_TOKEN_FILE");
    fclose(f);
    tok[strcspn(tok, "\r\n")] = 0;
    snprintf(auth_header, sizeof auth_header, "Authorization: Bearer %s", tok);
}

static void server_stop(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
        unlink(server_log);
    }
    if (tls_dir[0]) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tls_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_rpc: could not remove %s\n", tls_dir);
    }
}

static void server_start(const char *bin)
{
    snprintf(server_log, sizeof server_log, "/tmp/kl-bench-%d.log", (int)getpid());
    server_pid = fork();
    if (server_pid == 0) {
        int fd = open(server_log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 2);
        char cert[256], key[256];
        snprintf(cert, sizeof cert, "%s/server.crt", tls_dir);
        snprintf(key, sizeof key, "%s/server.key", tls_dir);
        const char *kc = getenv("KL_BENCH_KUBECONFIG");
        const char *auth = getenv("KL_BENCH_AUTH") ? getenv("KL_BENCH_AUTH") : "none";
        const char *args[16] = {bin, "--listen", "127.0.0.1:0", "--log-level", "info"};
        int n = 5;
        if (kc && *kc) {
            args[n++] = "--kubeconfig";
            args[n++] = kc;
            args[n++] = "--auth";
            args[n++] = auth;
        } else {
            args[n++] = "--dev";
        }
        if (tls) {
            args[n++] = "--tls-cert-file";
            args[n++] = cert;
            args[n++] = "--tls-key-file";
            args[n++] = key;
        }
        execv(bin, (char *const *)args);
        _exit(127);
    }
    atexit(server_stop); /* also when we die below */
    for (int i = 0; i < 500 && !server_port; i++) {
        usleep(20000);
        FILE *f = fopen(server_log, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) {
            char *p = strstr(line, "event=started");
            char *q = p ? strstr(p, " port=") : NULL;
            if (q)
                server_port = atoi(q + 6);
        }
        if (f)
            fclose(f);
    }
    if (!server_port)
        die("kubeleased did not start (is it built? pass its path)");
}

/* kubeleased's CPU time so far (user + system), in µs: what a call costs
 * the service, whatever else the machine is doing. */
static int64_t server_cpu_us(void)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)server_pid);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(line, sizeof line, f)) {
        if (f)
            fclose(f);
        return 0;
    }
    fclose(f);
    /* Fields 14 and 15 (utime, stime) follow the ")" closing the name. */
    const char *p = strrchr(line, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (int64_t)((ut + st) * 1000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK));
}

/* ---- unary calls with libcurl ---- */

typedef struct buf {
    uint8_t data[8192];
    size_t len;
} buf;

static size_t on_body(char *p, size_t size, size_t n, void *ctx)
{
    buf *b = ctx;
    size_t len = size * n;
    if (b->len + len <= sizeof b->data) {
        memcpy(b->data + b->len, p, len);
        b->len += len;
    }
    return len;
}

/* POSTs a message to METHOD (application/proto); returns the HTTP status. */
static long unary(CURL *c, const char *method, const ProtobufCMessage *m, buf *out)
{
    uint8_t req[1024];
    size_t len = protobuf_c_message_pack(m, req);
    char url[256];
    snprintf(url, sizeof url, "%s://127.0.0.1:%d/kubelease.v1.LeaseService/%s", scheme(),
             server_port, method);
    out->len = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)req);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    if (curl_easy_perform(c) != CURLE_OK)
        die("a unary call failed at the transport level");
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return status;
}

static CURL *unary_handle(struct curl_slist **headers)
{
    CURL *c = curl_easy_init();
    *headers = curl_slist_append(NULL, "Content-Type: application/proto");
    *headers = curl_slist_append(*headers, "Expect:");
    if (auth_header[0])
        *headers = curl_slist_append(*headers, auth_header);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *headers);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    if (tls)
        curl_easy_setopt(c, CURLOPT_CAINFO, tls_ca);
    return c;
}

/* ---- Campaign streams over a raw socket (connect+json) ---- */

/* The stream's bytes go through libcurl (CURLOPT_CONNECT_ONLY), which does
 * the TCP connection and, with --tls, the TLS handshake; HTTP is ours. */
typedef struct stream {
    CURL *h;
    int fd;
    uint8_t in[65536];
    size_t in_len;
    bool headers_done;
    long chunk_left; /* bytes left in the current chunk; -1: read a size line */
    struct kl__envelope_decoder dec;
} stream;

static void stream_open(stream *s, const char *identity)
{
    memset(s, 0, sizeof *s);
    s->chunk_left = -1;
    kl__envelope_decoder_init(&s->dec, 65536);
    char url[128];
    snprintf(url, sizeof url, "%s://127.0.0.1:%d/", scheme(), server_port);
    s->h = curl_easy_init();
    curl_easy_setopt(s->h, CURLOPT_URL, url);
    curl_easy_setopt(s->h, CURLOPT_CONNECT_ONLY, 1L);
    curl_easy_setopt(s->h, CURLOPT_TCP_NODELAY, 1L);
    if (tls)
        curl_easy_setopt(s->h, CURLOPT_CAINFO, tls_ca);
    curl_socket_t sock = CURL_SOCKET_BAD;
    if (curl_easy_perform(s->h) != CURLE_OK ||
        curl_easy_getinfo(s->h, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK)
        die("connect");
    s->fd = (int)sock;
    char json[512];
    int jl = snprintf(json, sizeof json,
                      "{\"namespace\":\"%s\",\"name\":\"handoff\",\"identity\":\"%s\","
                      "\"leaseDurationSeconds\":15,\"renewDeadlineSeconds\":10,"
                      "\"retryPeriodSeconds\":2}",
                      bench_ns, identity);
    char req[10240];
    int hl = snprintf(req, sizeof req,
                      "POST /kubelease.v1.LeaseService/Campaign HTTP/1.1\r\nHost: x\r\n%s%s"
                      "Content-Type: application/connect+json\r\nContent-Length: %d\r\n\r\n",
                      auth_header, auth_header[0] ? "\r\n" : "", jl + 5);
    kl__envelope_header((uint8_t *)req + hl, 0, (uint32_t)jl);
    memcpy(req + hl + 5, json, (size_t)jl);
    size_t len = (size_t)hl + 5 + (size_t)jl, off = 0;
    while (off < len) {
        size_t n = 0;
        CURLcode rc = curl_easy_send(s->h, req + off, len - off, &n);
        if (rc == CURLE_AGAIN) {
            struct pollfd p = {.fd = s->fd, .events = POLLOUT};
            poll(&p, 1, 1000);
            continue;
        }
        if (rc != CURLE_OK)
            die("send");
        off += n;
    }
}

static void stream_close(stream *s)
{
    curl_easy_cleanup(s->h); /* closes the connection */
    kl__envelope_decoder_free(&s->dec);
}

/* Reads what the connection has (waiting for it); <= 0 at its end. */
static ssize_t stream_recv(stream *s)
{
    for (;;) {
        size_t n = 0;
        CURLcode rc = curl_easy_recv(s->h, s->in + s->in_len, sizeof s->in - s->in_len, &n);
        if (rc == CURLE_AGAIN) {
            struct pollfd p = {.fd = s->fd, .events = POLLIN};
            poll(&p, 1, 1000);
            continue;
        }
        return rc == CURLE_OK ? (ssize_t)n : -1;
    }
}

/* Next message of the stream (JSON text in out); -1 at the end. */
static int stream_next(stream *s, char *out, size_t out_len)
{
    for (;;) {
        /* Whatever is buffered: headers, chunk framing, envelope bytes. */
        if (!s->headers_done) {
            uint8_t *e = memmem(s->in, s->in_len, "\r\n\r\n", 4);
            if (e) {
                size_t n = (size_t)(e - s->in) + 4;
                memmove(s->in, s->in + n, s->in_len - n);
                s->in_len -= n;
                s->headers_done = true;
            }
        }
        while (s->headers_done && s->in_len) {
            if (s->chunk_left < 0) {
                uint8_t *e = memmem(s->in, s->in_len, "\r\n", 2);
                if (!e)
                    break;
                long size = strtol((char *)s->in, NULL, 16);
                size_t n = (size_t)(e - s->in) + 2;
                memmove(s->in, s->in + n, s->in_len - n);
                s->in_len -= n;
                if (size == 0)
                    return -1;
                s->chunk_left = size;
            }
            size_t take = s->in_len < (size_t)s->chunk_left ? s->in_len : (size_t)s->chunk_left;
            size_t used;
            kl__envelope_status st = kl__envelope_decoder_feed(&s->dec, s->in, take, &used);
            memmove(s->in, s->in + used, s->in_len - used);
            s->in_len -= used;
            s->chunk_left -= (long)used;
            if (s->chunk_left == 0) {
                if (s->in_len < 2)
                    break; /* wait for the CRLF after the chunk */
                memmove(s->in, s->in + 2, s->in_len - 2);
                s->in_len -= 2;
                s->chunk_left = -1;
            }
            if (st == KL__ENVELOPE_FRAME) {
                unsigned flags;
                uint8_t *msg;
                size_t len;
                kl__envelope_decoder_take(&s->dec, &flags, &msg, &len);
                snprintf(out, out_len, "%.*s", (int)len, msg ? (char *)msg : "");
                free(msg);
                return flags & KL__ENVELOPE_FLAG_END_STREAM ? -1 : 0;
            }
            if (st != KL__ENVELOPE_NEED_MORE)
                die("bad envelope");
        }
        ssize_t n = stream_recv(s);
        if (n <= 0)
            return -1;
        s->in_len += (size_t)n;
    }
}

/* Reads until a message containing what; returns 0, or -1 at end of stream. */
static char last_msg[4096]; /* the message stream_wait stopped at */

static int stream_wait(stream *s, const char *what)
{
    while (stream_next(s, last_msg, sizeof last_msg) == 0)
        if (strstr(last_msg, what))
            return 0;
    return -1;
}

/* The term token of the Elected message last_msg holds (a base64url string). */
static void elected_token(char *out, size_t n)
{
    const char *t = strstr(last_msg, "\"termToken\":\"");
    size_t len =
        t ? strspn(t + 13, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") : 0;
    if (!len || len >= n)
        die("no term token in Elected");
    snprintf(out, n, "%.*s", (int)len, t + 13);
}

/* ---- statistics ---- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, int64_t *us, int n)
{
    qsort(us, (size_t)n, sizeof *us, cmp_i64);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += (double)us[i];
    printf("%-34s n=%-6d p50=%8.3f ms  p99=%8.3f ms  max=%8.3f ms  mean=%8.3f ms\n", what, n,
           (double)us[n / 2] / 1000, (double)us[(n * 99) / 100] / 1000, (double)us[n - 1] / 1000,
           sum / n / 1000);
}

/* GetHolder latency, and Confirm of bench-a's term (epoch, token) every
 * tenth call: the client library's rule-2 round trip, which also keeps the
 * term alive (the engine ends unconfirmed terms). */
static void bench_unary(CURL *c, int calls, int64_t epoch, char *token)
{
    buf out;
    Kubelease__V1__ConfirmRequest cf = KUBELEASE__V1__CONFIRM_REQUEST__INIT;
    cf.namespace_ = (char *)bench_ns;
    cf.name = "handoff";
    cf.identity = "bench-a";
    cf.epoch = epoch;
    cf.term_token = token;
    Kubelease__V1__GetHolderRequest g = KUBELEASE__V1__GET_HOLDER_REQUEST__INIT;
    g.namespace_ = (char *)bench_ns;
    g.name = "handoff";
    int64_t *lat = calloc((size_t)calls, sizeof *lat);
    int64_t *clat = calloc((size_t)calls / 10 + 1, sizeof *clat);
    int n_confirm = 0;
    long conns = 0;               /* new connections during the measured calls */
    for (int i = 0; i < 200; i++) /* warm-up */
        unary(c, "GetHolder", &g.base, &out);
    int64_t cpu0 = server_cpu_us();
    for (int i = 0; i < calls; i++) {
        int64_t t0 = now_us();
        long st = unary(c, "GetHolder", &g.base, &out);
        lat[i] = now_us() - t0;
        if (st != 200)
            die("GetHolder did not answer 200");
        long n = 0;
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &n);
        conns += n;
        if (i % 10 == 0) {
            t0 = now_us();
            if (unary(c, "Confirm", &cf.base, &out) != 200)
                die("Confirm did not answer 200");
            clat[n_confirm++] = now_us() - t0;
        }
    }
    int64_t cpu = server_cpu_us() - cpu0;
    report(tls ? "GetHolder (proto, keep-alive, TLS)" : "GetHolder (proto, keep-alive)", lat,
           calls);
    report(tls ? "Confirm (proto, keep-alive, TLS)" : "Confirm (proto, keep-alive)", clat,
           n_confirm);
    printf("kubeleased CPU time: %.1f us per call (%d GetHolder + %d Confirm)\n",
           (double)cpu / (calls + n_confirm), calls, n_confirm);
    printf("(GetHolder opened %ld new connection(s) in %d calls; kubeleased %s, --auth %s, on "
           "loopback%s)\n",
           conns, calls, getenv("KL_BENCH_KUBECONFIG") ? "on an apiserver" : "--dev",
           getenv("KL_BENCH_AUTH") ? getenv("KL_BENCH_AUTH") : "none", tls ? ", TLS" : "");
    free(lat);
    free(clat);
}

/* Handoffs: the leader resigns (with its term's token), the standby must be
 * elected; then the old leader stands by again. a leads, b is opened here. */
static void bench_handoffs(CURL *c, int handoffs, stream *a, stream *b, char tokens[2][64])
{
    buf out;
    int64_t *hand = calloc((size_t)handoffs, sizeof *hand);
    stream *leader = a, *standby = b;
    const char *ids[2] = {"bench-a", "bench-b"};
    int leader_id = 0;
    stream_open(b, ids[1]);
    if (stream_wait(b, "\"candidate\"") != 0)
        die("bench-b is not a candidate");
    Kubelease__V1__ResignRequest r = KUBELEASE__V1__RESIGN_REQUEST__INIT;
    r.namespace_ = (char *)bench_ns;
    r.name = "handoff";
    for (int i = 0; i < handoffs; i++) {
        r.identity = (char *)ids[leader_id];
        r.term_token = tokens[leader_id];
        int64_t t0 = now_us();
        if (unary(c, "Resign", &r.base, &out) != 200)
            die("Resign failed");
        if (stream_wait(standby, "\"elected\"") != 0)
            die("the standby was never elected");
        hand[i] = now_us() - t0;
        elected_token(tokens[leader_id ^ 1], 64);
        /* The old leader's stream ends; it campaigns again as the standby. */
        stream_wait(leader, "\"never\"");
        stream_close(leader);
        stream_open(leader, ids[leader_id]);
        if (stream_wait(leader, "\"candidate\"") != 0)
            die("the old leader did not stand by again");
        stream *t = leader;
        leader = standby;
        standby = t;
        leader_id ^= 1;
    }
    report("resign -> new leader Elected", hand, handoffs);
    free(hand);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--tls") == 0) {
        tls = true;
        argv++;
        argc--;
    }
    const char *bin = argc > 1 ? argv[1] : getenv("KUBELEASED");
#ifdef KUBELEASED_PATH
    if (!bin)
        bin = KUBELEASED_PATH;
#endif
    if (!bin)
        die("usage: bench_rpc [--tls] KUBELEASED [GETHOLDER_CALLS] [HANDOFFS]");
    int calls = argc > 2 ? atoi(argv[2]) : 5000;
    int handoffs = argc > 3 ? atoi(argv[3]) : 100;
    if (calls < 1 || handoffs < 1)
        die("counts must be positive");
    signal(SIGPIPE, SIG_IGN);
    if (getenv("KL_BENCH_NAMESPACE") && *getenv("KL_BENCH_NAMESPACE"))
        bench_ns = getenv("KL_BENCH_NAMESPACE");
    read_token();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (tls)
        make_certs();
    server_start(bin);

    struct curl_slist *hdrs;
    CURL *c = unary_handle(&hdrs);
    /* A lease with a holder, so that GetHolder has something to say. */
    stream a, b;
    stream_open(&a, "bench-a");
    if (stream_wait(&a, "\"elected\"") != 0)
        die("bench-a was never elected");
    const char *ep = strstr(last_msg, "\"epoch\":\"");
    int64_t epoch = ep ? strtoll(ep + 9, NULL, 10) : 0;
    if (epoch <= 0)
        die("no epoch in Elected");
    char tokens[2][64]; /* the term tokens of bench-a and bench-b */
    elected_token(tokens[0], sizeof tokens[0]);
    bench_unary(c, calls, epoch, tokens[0]);
    bench_handoffs(c, handoffs, &a, &b, tokens);

    stream_close(&a);
    stream_close(&b);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    curl_global_cleanup();
    return 0;
}
