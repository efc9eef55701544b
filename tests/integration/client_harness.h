/* Test harness of the client integration tests: starts a real
 * `kubeleased --dev` on a loopback port the kernel picks and waits until it
 * is ready, stops, pauses and restarts it, and spawns kl_replica processes.
 * With $KUBELEASE_TEST_ENV (the test control plane) the service uses the real
 * apiserver instead (ServiceAccount kubeconfig, the test namespace).
 * Tests using it exit 77 (skipped) until $KUBELEASED exists and its --help
 * mentions --dev. Header-only: each test program includes it once. */
#ifndef KL_CLIENT_HARNESS_H
#define KL_CLIENT_HARNESS_H

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct server {
    pid_t pid;
    int port;
    char endpoint[64];
    char log[256];
    /* Set before h_server_start to serve HTTPS: --tls-cert-file and
     * --tls-key-file, and the CA bundle that verifies them (readiness). */
    const char *tls_cert, *tls_key, *tls_ca;
    /* Set before h_server_start: more flags (NULL-terminated, at most 4). */
    const char *args[5];
};

/* The store behind the service: the real apiserver of the test control plane
 * when $KUBELEASE_TEST_ENV is set (unless $KL_CLIENT_TEST_DEV is set), else
 * the in-memory store (--dev). h_ns is the namespace the tests use. */
static const char *h_ns = "default";
static char h_kubeconfig[512];
static char h_ns_buf[64];

/* Reads KEY from the control plane's env file into out; 0 if found. */
static inline int h_env_value(const char *dir, const char *key, char *out, size_t n)
{
    char path[512], line[1024];
    size_t kl = strlen(key);
    snprintf(path, sizeof(path), "%s/env", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int found = -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, kl) != 0 || line[kl] != '=')
            continue;
        char *v = line + kl + 1;
        v[strcspn(v, "\n")] = 0;
        size_t vl = strlen(v);
        if (vl >= 2 && v[0] == '\'' && v[vl - 1] == '\'') {
            v[vl - 1] = 0;
            v++;
        }
        snprintf(out, n, "%s", v);
        found = 0;
    }
    fclose(f);
    return found;
}

/* Chooses the store; exits 1 if the control plane's files are unusable. On
 * the control plane kubeleased authenticates its callers (--auth
 * kubernetes): the clients of this process and the kl_replica it starts get
 * the test replica's token through KUBELEASE_TOKEN_FILE. */
static inline void h_choose_store(void)
{
    char token_file[512];
    const char *dir = getenv("KUBELEASE_TEST_ENV");
    if (!dir || !*dir || getenv("KL_CLIENT_TEST_DEV"))
        return;
    if (h_env_value(dir, "KL_SA_KUBECONFIG", h_kubeconfig, sizeof(h_kubeconfig)) != 0 ||
        h_env_value(dir, "KL_TEST_NAMESPACE", h_ns_buf, sizeof(h_ns_buf)) != 0 ||
        h_env_value(dir, "KL_REPLICA_TOKEN_FILE", token_file, sizeof(token_file)) != 0) {
        fprintf(stderr, "KUBELEASE_TEST_ENV=%s: no usable env file\n", dir);
        exit(1);
    }
    setenv("KUBELEASE_TOKEN_FILE", token_file, 1);
    h_ns = h_ns_buf;
    fprintf(stderr, "using the test control plane (namespace %s)\n", h_ns);
}

static inline int64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void h_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Exits 77 unless a kubeleased with --dev is available. */
static inline void h_require_server(void)
{
    const char *bin = getenv("KUBELEASED");
    char cmd[1200], buf[4096];
    size_t n;
    if (!bin || access(bin, X_OK) != 0) {
        fprintf(stderr, "SKIP: $KUBELEASED is not an executable\n");
        exit(77);
    }
    snprintf(cmd, sizeof(cmd), "'%s' --help 2>&1", bin);
    FILE *p = popen(cmd, "r");
    n = p ? fread(buf, 1, sizeof(buf) - 1, p) : 0;
    if (p)
        pclose(p);
    buf[n] = 0;
    if (!strstr(buf, "--dev")) {
        fprintf(stderr, "SKIP: kubeleased --help does not mention --dev yet\n");
        exit(77);
    }
    h_choose_store();
}

static size_t h_discard(char *p, size_t s, size_t n, void *u)
{
    (void)p;
    (void)u;
    return s * n;
}

/* GET path (an https endpoint verified against the CA bundle ca); returns
 * the HTTP status or 0. */
static inline long h_https_get(const char *endpoint, const char *path, const char *ca)
{
    char url[256];
    long code = 0;
    CURL *h = curl_easy_init();
    snprintf(url, sizeof(url), "%s%s", endpoint, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    if (ca)
        curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 500L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, h_discard);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    return code;
}

/* GET path; returns the HTTP status or 0. */
static inline long h_http_get(const char *endpoint, const char *path)
{
    return h_https_get(endpoint, path, NULL);
}

static inline void h_dump_log(const char *path)
{
    char buf[4096];
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    fprintf(stderr, "---- %s\n", path);
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, stderr);
    fclose(f);
}

static inline pid_t h_spawn(char *const argv[], const char *log)
{
    posix_spawn_file_actions_t fa;
    pid_t pid;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        fprintf(stderr, "spawn %s: %s\n", argv[0], strerror(rc));
        exit(1);
    }
    return pid;
}

/* Reads the port kubeleased wrote to path (0 while it is not there yet). */
static inline int h_read_port(const char *path)
{
    int port = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%d", &port) != 1)
            port = 0;
        fclose(f);
    }
    return port;
}

/* Starts kubeleased (--dev, or on the test control plane) and waits for
 * /readyz to answer 200 (10 s at most, else the test fails). With port 0 the
 * kernel picks a free one (read back from --port-file), so parallel tests
 * never race for a port; a restart passes s->port to keep the endpoint the
 * clients know. */
static inline void h_server_start(struct server *s, int port)
{
    char listen[64], port_file[300];
    const char *bin = getenv("KUBELEASED");
    if (!s->log[0]) {
        snprintf(s->log, sizeof(s->log), "%s/kl-test-server-%d.log",
                 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
        unlink(s->log);
    }
    snprintf(port_file, sizeof(port_file), "%s.port", s->log);
    unlink(port_file);
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    char *dev_argv[] = {(char *)bin, (char *)"--dev",       (char *)"--listen",
                        listen,      (char *)"--port-file", port_file,
                        NULL};
    char *kube_argv[] = {(char *)bin, (char *)"--kubeconfig", h_kubeconfig, (char *)"--listen",
                         listen,      (char *)"--port-file",  port_file,    NULL};
    char **base = h_kubeconfig[0] ? kube_argv : dev_argv, *argv[16];
    int n = 0;
    while (base[n]) {
        argv[n] = base[n];
        n++;
    }
    if (s->tls_cert) {
        argv[n++] = (char *)"--tls-cert-file";
        argv[n++] = (char *)s->tls_cert;
        argv[n++] = (char *)"--tls-key-file";
        argv[n++] = (char *)s->tls_key;
    }
    for (int i = 0; i < 4 && s->args[i]; i++)
        argv[n++] = (char *)s->args[i];
    argv[n] = NULL;
    const char *scheme = s->tls_cert ? "https" : "http";
    s->pid = h_spawn(argv, s->log);
    s->port = 0;
    int64_t until = h_now_ms() + 10000;
    for (;;) {
        int st;
        if (!s->port && (s->port = h_read_port(port_file)) != 0)
            snprintf(s->endpoint, sizeof(s->endpoint), "%s://127.0.0.1:%d", scheme, s->port);
        if (s->port && h_https_get(s->endpoint, "/readyz", s->tls_ca) == 200)
            break;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid || h_now_ms() > until) {
            fprintf(stderr, "kubeleased did not become ready (port %d)\n", port);
            h_dump_log(s->log);
            exit(1);
        }
        h_sleep_ms(20);
    }
    unlink(port_file);
}

static inline void h_server_signal(struct server *s, int sig)
{
    if (s->pid > 0)
        kill(s->pid, sig);
}

/* SIGKILL (hard = 1) or SIGTERM, then reap. */
static inline void h_server_stop(struct server *s, int hard)
{
    int st;
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGCONT);
    kill(s->pid, hard ? SIGKILL : SIGTERM);
    int64_t until = h_now_ms() + 10000;
    while (waitpid(s->pid, &st, WNOHANG) == 0) {
        if (h_now_ms() > until) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            break;
        }
        h_sleep_ms(10);
    }
    s->pid = 0;
}

static inline void h_server_cleanup(struct server *s)
{
    h_server_stop(s, 0);
    if (getenv("KL_KEEP_LOGS"))
        fprintf(stderr, "server log kept: %s\n", s->log);
    else
        unlink(s->log);
}

/* Starts kl_replica with the given extra arguments (NULL-terminated list,
 * at most 16) against s; its output goes to log. */
static inline pid_t h_replica(struct server *s, const char *identity, const char *lease,
                              const char *log, const char *const *extra)
{
    const char *bin = getenv("KL_REPLICA");
    const char *argv[32];
    int n = 0;
    if (!bin) {
        fprintf(stderr, "KL_REPLICA is not set\n");
        exit(1);
    }
    argv[n++] = bin;
    argv[n++] = "--endpoint";
    argv[n++] = s->endpoint;
    argv[n++] = "--lease";
    argv[n++] = lease;
    argv[n++] = "--identity";
    argv[n++] = identity;
    argv[n++] = "--namespace";
    argv[n++] = h_ns;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    return h_spawn((char *const *)argv, log);
}

#endif
