/* kubeconfig parsing: clusters, users and contexts, as kubectl reads them.
 * Blocking reads at start-up; no global state, any thread.
 *
 * Precedence follows client-go: -data fields win over file references, and a
 * tokenFile wins over an inline token (it is re-read when tokens rotate). */
#include "kube/kubeconfig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/secret.h"
#include "core/base64.h"

typedef struct doc {
    yaml_document_t d;
    char *err;
    size_t err_len;
} doc;

static yaml_node_t *node_get(doc *d, int id)
{
    return id ? yaml_document_get_node(&d->d, id) : NULL;
}

/* The value of key in a mapping node, or NULL. */
static yaml_node_t *map_get(doc *d, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    size_t klen = strlen(key);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = node_get(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && k->data.scalar.length == klen &&
            memcmp(k->data.scalar.value, key, klen) == 0)
            return node_get(d, p->value);
    }
    return NULL;
}

/* Copies a scalar's text. Returns 0 (with *out NULL when the node is absent
 * or an empty null-like scalar), or -1 with an error when the node is not a
 * scalar or holds a NUL byte. what names the field for the message. */
static int get_string(doc *d, yaml_node_t *map, const char *key, const char *what, char **out)
{
    *out = NULL;
    yaml_node_t *n = map_get(d, map, key);
    if (!n)
        return 0;
    if (n->type != YAML_SCALAR_NODE) {
        snprintf(d->err, d->err_len, "%s: %s is not a string", what, key);
        return -1;
    }
    const char *v = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    if (memchr(v, 0, len)) {
        snprintf(d->err, d->err_len, "%s: %s contains a NUL byte", what, key);
        return -1;
    }
    /* A plain "null", "~" or empty scalar is YAML's null: treat as absent. */
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (len == 0 || (len == 1 && v[0] == '~') || (len == 4 && memcmp(v, "null", 4) == 0)))
        return 0;
    *out = strndup(v, len);
    if (!*out) {
        snprintf(d->err, d->err_len, "out of memory");
        return -1;
    }
    return 0;
}

static int get_bool(doc *d, yaml_node_t *map, const char *key, const char *what, bool *out)
{
    char *s = NULL;
    *out = false;
    if (get_string(d, map, key, what, &s) != 0)
        return -1;
    if (!s)
        return 0;
    static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On"};
    static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off"};
    int rc = -1;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (strcmp(s, yes[i]) == 0) {
            *out = true;
            rc = 0;
        } else if (strcmp(s, no[i]) == 0) {
            rc = 0;
        }
    }
    if (rc != 0)
        snprintf(d->err, d->err_len, "%s: %s must be true or false", what, key);
    free(s);
    return rc;
}

/* Finds the entry named name in the list under list_key ("contexts", ...)
 * and returns its inner mapping (entry[inner_key]), or NULL with err set. */
static yaml_node_t *find_named(doc *d, yaml_node_t *root, const char *list_key, const char *kind,
                               const char *name, const char *inner_key)
{
    yaml_node_t *list = map_get(d, root, list_key);
    if (list && list->type != YAML_SEQUENCE_NODE) {
        snprintf(d->err, d->err_len, "%s is not a list", list_key);
        return NULL;
    }
    size_t nlen = strlen(name);
    if (list) {
        for (yaml_node_item_t *it = list->data.sequence.items.start;
             it < list->data.sequence.items.top; it++) {
            yaml_node_t *entry = node_get(d, *it);
            yaml_node_t *n = map_get(d, entry, "name");
            if (!n || n->type != YAML_SCALAR_NODE || n->data.scalar.length != nlen ||
                memcmp(n->data.scalar.value, name, nlen) != 0)
                continue;
            yaml_node_t *inner = map_get(d, entry, inner_key);
            if (!inner || inner->type != YAML_MAPPING_NODE) {
                snprintf(d->err, d->err_len, "%s \"%s\" has no %s section", kind, name, inner_key);
                return NULL;
            }
            return inner;
        }
    }
    snprintf(d->err, d->err_len, "%s \"%s\" not found", kind, name);
    return NULL;
}

void kube_kubeconfig_sel_clear(kube_kubeconfig_sel *s)
{
    if (!s)
        return;
    char **fields[] = {&s->context,  &s->cluster, &s->user,      &s->ns,        &s->server,
                       &s->ca_data,  &s->ca_file, &s->cert_data, &s->cert_file, &s->key_data,
                       &s->key_file, &s->token,   &s->token_file};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        kl__secret_free(*fields[i]);
    }
    memset(s, 0, sizeof *s);
}

/* The named cluster's server, CA and TLS setting. */
static int select_cluster(doc *d, yaml_node_t *root, kube_kubeconfig_sel *s)
{
    char what[300];
    yaml_node_t *cl = find_named(d, root, "clusters", "cluster", s->cluster, "cluster");
    if (!cl)
        return -1;
    snprintf(what, sizeof what, "cluster \"%s\"", s->cluster);
    if (get_string(d, cl, "server", what, &s->server) != 0 ||
        get_string(d, cl, "certificate-authority-data", what, &s->ca_data) != 0 ||
        get_string(d, cl, "certificate-authority", what, &s->ca_file) != 0 ||
        get_bool(d, cl, "insecure-skip-tls-verify", what, &s->insecure) != 0)
        return -1;
    if (!s->server || !s->server[0]) {
        snprintf(d->err, d->err_len, "cluster \"%s\" has no server", s->cluster);
        return -1;
    }
    /* As client-go: a CA says whom to trust, the skip says trust anyone. */
    if (s->insecure && (s->ca_data || s->ca_file)) {
        snprintf(d->err, d->err_len,
                 "cluster \"%s\": certificate-authority and insecure-skip-tls-verify are both "
                 "set; drop one",
                 s->cluster);
        return -1;
    }
    if (strncmp(s->server, "https://", 8) != 0 && strncmp(s->server, "http://", 7) != 0) {
        snprintf(d->err, d->err_len, "cluster \"%s\": server must start with https:// or http://",
                 s->cluster);
        return -1;
    }
    if (strpbrk(s->server, " \t\r\n?#")) {
        snprintf(d->err, d->err_len, "cluster \"%s\": server is not a valid URL", s->cluster);
        return -1;
    }
    size_t sl = strlen(s->server);
    while (sl > 0 && s->server[sl - 1] == '/')
        s->server[--sl] = 0;
    return 0;
}

/* The named user's credentials: a client certificate and key, a token or a
 * token file. */
static int select_user(doc *d, yaml_node_t *root, kube_kubeconfig_sel *s)
{
    char what[300];
    yaml_node_t *u = find_named(d, root, "users", "user", s->user, "user");
    if (!u)
        return -1;
    snprintf(what, sizeof what, "user \"%s\"", s->user);
    if (get_string(d, u, "client-certificate-data", what, &s->cert_data) != 0 ||
        get_string(d, u, "client-certificate", what, &s->cert_file) != 0 ||
        get_string(d, u, "client-key-data", what, &s->key_data) != 0 ||
        get_string(d, u, "client-key", what, &s->key_file) != 0 ||
        get_string(d, u, "token", what, &s->token) != 0 ||
        get_string(d, u, "tokenFile", what, &s->token_file) != 0)
        return -1;
    bool cert = s->cert_data || s->cert_file, key = s->key_data || s->key_file;
    if (cert != key) {
        snprintf(d->err, d->err_len, "user \"%s\": %s without %s", s->user,
                 cert ? "client-certificate" : "client-key",
                 cert ? "client-key" : "client-certificate");
        return -1;
    }
    if (!cert && !s->token && !s->token_file) {
        if (map_get(d, u, "exec") || map_get(d, u, "auth-provider"))
            snprintf(d->err, d->err_len,
                     "user \"%s\" uses exec or auth-provider credentials, which are not "
                     "supported (use a token, tokenFile or client certificate)",
                     s->user);
        else
            snprintf(d->err, d->err_len, "user \"%s\" has no credentials", s->user);
        return -1;
    }
    return 0;
}

/* The context (given, or the current one), then its cluster and user. */
static int select_context(doc *d, const char *context, kube_kubeconfig_sel *s)
{
    char what[300];
    yaml_node_t *root = node_get(d, 1);
    if (!root || root->type != YAML_MAPPING_NODE) {
        snprintf(d->err, d->err_len, "not a kubeconfig (the document is not a mapping)");
        return -1;
    }
    if (context) {
        s->context = strdup(context);
        if (!s->context) {
            snprintf(d->err, d->err_len, "out of memory");
            return -1;
        }
    } else {
        if (get_string(d, root, "current-context", "kubeconfig", &s->context) != 0)
            return -1;
        if (!s->context || !s->context[0]) {
            snprintf(d->err, d->err_len, "no current-context set and no context given");
            return -1;
        }
    }
    yaml_node_t *ctx = find_named(d, root, "contexts", "context", s->context, "context");
    if (!ctx)
        return -1;
    snprintf(what, sizeof what, "context \"%s\"", s->context);
    if (get_string(d, ctx, "cluster", what, &s->cluster) != 0 ||
        get_string(d, ctx, "user", what, &s->user) != 0 ||
        get_string(d, ctx, "namespace", what, &s->ns) != 0)
        return -1;
    if (!s->cluster) {
        snprintf(d->err, d->err_len, "context \"%s\" names no cluster", s->context);
        return -1;
    }
    if (!s->user) {
        snprintf(d->err, d->err_len, "context \"%s\" names no user", s->context);
        return -1;
    }
    return select_cluster(d, root, s) == 0 && select_user(d, root, s) == 0 ? 0 : -1;
}

/* A kubeconfig is a few levels deep. libyaml's scanner slows down
 * quadratically with the nesting depth (a megabyte of '[' takes minutes), so
 * a first pass over the events refuses deep documents before loading one. */
#define YAML_DEPTH_MAX 64

static int check_depth(const char *text, size_t len, char *err, size_t err_len)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    int depth = 0, rc = 0;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    for (;;) {
        if (!yaml_parser_parse(&parser, &ev)) {
            snprintf(err, err_len, "invalid YAML at line %zu: %s", parser.problem_mark.line + 1,
                     parser.problem ? parser.problem : "parse error");
            rc = -1;
            break;
        }
        yaml_event_type_t t = ev.type;
        yaml_event_delete(&ev);
        if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
            if (++depth > YAML_DEPTH_MAX) {
                snprintf(err, err_len, "nested more than %d levels deep", YAML_DEPTH_MAX);
                rc = -1;
                break;
            }
        } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (t == YAML_DOCUMENT_END_EVENT || t == YAML_STREAM_END_EVENT) {
            break; /* only the first document is read */
        }
    }
    yaml_parser_delete(&parser);
    return rc;
}

int kube_kubeconfig_parse(const char *text, size_t len, const char *context,
                          kube_kubeconfig_sel *out, char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    if (check_depth(text, len, err, err_len) != 0)
        return -1;
    yaml_parser_t parser;
    doc d = {.err = err, .err_len = err_len};
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &d.d)) {
        snprintf(err, err_len, "invalid YAML at line %zu: %s", parser.problem_mark.line + 1,
                 parser.problem ? parser.problem : "parse error");
        yaml_parser_delete(&parser);
        return -1;
    }
    yaml_parser_delete(&parser);
    int rc = 0;
    if (!yaml_document_get_root_node(&d.d)) {
        snprintf(err, err_len, "empty document");
        rc = -1;
    } else {
        rc = select_context(&d, context, out);
    }
    yaml_document_delete(&d.d);
    if (rc != 0)
        kube_kubeconfig_sel_clear(out);
    return rc;
}

/* dir/path unless path is absolute. */
static char *join_path(const char *dir, const char *path)
{
    if (path[0] == '/' || !dir || !dir[0])
        return strdup(path);
    size_t n = strlen(dir) + strlen(path) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, path);
    return p;
}

/* Fills b from base64 data (preferred) or a file; what names the field. */
static int load_blob(const char *data, const char *file, const char *dir, const char *what,
                     kube_blob *b, char *err, size_t err_len)
{
    if (data) {
        uint8_t *raw;
        size_t len;
        unsigned rules = BASE64_SKIP_SPACE | BASE64_CANONICAL;
        if (base64_decode(data, strlen(data), rules, &raw, &len) != 0 || len == 0) {
            free(raw);
            snprintf(err, err_len, "%s-data is not valid base64", what);
            return -1;
        }
        b->data = raw;
        b->len = len;
        return 0;
    }
    if (!file)
        return 0;
    char *p = join_path(dir, file);
    if (!p) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    char e[512];
    int rc = kube_read_file(p, KUBE_FILE_MAX, b, e, sizeof e);
    if (rc != 0)
        snprintf(err, err_len, "%s: %s", what, e);
    free(p);
    return rc;
}

int kube_kubeconfig_resolve(const kube_kubeconfig_sel *sel, const char *dir, kube_config *out,
                            char *err, size_t err_len)
{
    memset(out, 0, sizeof *out);
    out->server = strdup(sel->server);
    if (!out->server || (sel->ns && !(out->ns = strdup(sel->ns)))) {
        snprintf(err, err_len, "out of memory");
        goto fail;
    }
    out->insecure = sel->insecure;
    if (load_blob(sel->ca_data, sel->ca_file, dir, "certificate-authority", &out->ca, err,
                  err_len) != 0 ||
        load_blob(sel->cert_data, sel->cert_file, dir, "client-certificate", &out->client_cert, err,
                  err_len) != 0 ||
        load_blob(sel->key_data, sel->key_file, dir, "client-key", &out->client_key, err,
                  err_len) != 0)
        goto fail;
    if (sel->token_file) {
        out->token_file = join_path(dir, sel->token_file);
        if (!out->token_file) {
            snprintf(err, err_len, "out of memory");
            goto fail;
        }
        char e[512];
        if (kube_config_token_refresh(out, e, sizeof e) != 0) {
            snprintf(err, err_len, "tokenFile: %s", e);
            goto fail;
        }
    } else if (sel->token) {
        out->token = strdup(sel->token);
        if (!out->token) {
            snprintf(err, err_len, "out of memory");
            goto fail;
        }
    }
    return 0;
fail:
    kube_config_clear(out);
    return -1;
}

int kube_kubeconfig_load(const char *path, const char *context, kube_config *out, char *err,
                         size_t err_len)
{
    memset(out, 0, sizeof *out);
    kube_blob text = {0};
    kube_kubeconfig_sel sel = {0};
    char e[512];
    char *dir = NULL;
    int rc = -1;
    if (kube_read_file(path, KUBE_FILE_MAX, &text, e, sizeof e) != 0) {
        snprintf(err, err_len, "kubeconfig %s", e);
        return -1;
    }
    if (kube_kubeconfig_parse((const char *)text.data, text.len, context, &sel, e, sizeof e) != 0) {
        snprintf(err, err_len, "kubeconfig %s: %s", path, e);
        goto done;
    }
    const char *slash = strrchr(path, '/');
    dir = slash ? strndup(path, (size_t)(slash - path) + (slash == path)) : strdup(".");
    if (!dir) {
        snprintf(err, err_len, "kubeconfig %s: out of memory", path);
        goto done;
    }
    if (kube_kubeconfig_resolve(&sel, dir, out, e, sizeof e) != 0) {
        snprintf(err, err_len, "kubeconfig %s: user \"%s\", cluster \"%s\": %s", path, sel.user,
                 sel.cluster, e);
        goto done;
    }
    size_t n = strlen(path) + 16;
    out->source = malloc(n);
    if (!out->source) {
        kube_config_clear(out);
        snprintf(err, err_len, "kubeconfig %s: out of memory", path);
        goto done;
    }
    snprintf(out->source, n, "kubeconfig %s", path);
    rc = 0;
done:
    free(dir);
    kube_kubeconfig_sel_clear(&sel);
    kube_blob_free(&text);
    return rc;
}
