/* The symbols libkubelease gives an application's link: the static library
 * defines no global outside kl_ (the public API and the kl__ internals, the
 * generated protobuf-c code renamed kl__v1__), so it cannot clash with the
 * application's own names; its public kl_ symbols and the shared library's
 * exports are exactly the functions include/kubelease.h declares. Reads the
 * libraries with nm. The build directory is $KL_BUILD_DIR, else the parent
 * of this program's directory; the header is found from $KL_SOURCE_DIR, else
 * from this file's path. */
#define _GNU_SOURCE
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define MAX_NAMES 1024

struct names {
    size_t n;
    char *v[MAX_NAMES];
};

static void names_add(struct names *s, const char *name, size_t len)
{
    for (size_t i = 0; i < s->n; i++)
        if (strlen(s->v[i]) == len && strncmp(s->v[i], name, len) == 0)
            return;
    assert_true(s->n < MAX_NAMES);
    s->v[s->n++] = strndup(name, len);
}

static int names_has(const struct names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return 1;
    return 0;
}

static void names_free(struct names *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    s->n = 0;
}

static void build_path(char *out, size_t n, const char *rel)
{
    const char *dir = getenv("KL_BUILD_DIR");
    char exe[PATH_MAX];
    if (!dir || !*dir) {
        ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        assert_true(len > 0);
        exe[len] = 0;
        for (int up = 0; up < 2; up++) /* build/tests/unit_test_... -> build */
            *strrchr(exe, '/') = 0;
        dir = exe;
    }
    snprintf(out, n, "%s/%s", dir, rel);
}

static void header_path(char *out, size_t n)
{
    const char *dir = getenv("KL_SOURCE_DIR");
    if (dir && *dir) {
        snprintf(out, n, "%s/include/kubelease.h", dir);
        return;
    }
    snprintf(out, n, "%s", __FILE__); /* <source>/tests/unit/test_client_symbols.c */
    for (int up = 0; up < 3; up++)
        *strrchr(out, '/') = 0;
    strncat(out, "/include/kubelease.h", n - strlen(out) - 1);
}

/* The functions the public header declares: every "KL_EXPORT ... kl_x(". */
static void header_api(struct names *api)
{
    char path[PATH_MAX], line[512];
    header_path(path, sizeof(path));
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "KL_EXPORT ", 10) != 0)
            continue;
        char *paren = strchr(line, '(');
        assert_non_null(paren);
        char *name = paren;
        while (name > line && (name[-1] == '_' || (name[-1] >= 'a' && name[-1] <= 'z')))
            name--;
        assert_true(strncmp(name, "kl_", 3) == 0);
        names_add(api, name, (size_t)(paren - name));
    }
    fclose(f);
    assert_true(api->n >= 16); /* kl_client_new ... kl_free */
}

/* The global symbols a library defines, as nm (with args) lists them. */
static void defined_globals(const char *args, const char *lib, struct names *out)
{
    char cmd[PATH_MAX + 64], line[512];
    snprintf(cmd, sizeof(cmd), "nm %s '%s'", args, lib);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(line, sizeof(line), p)) {
        char addr[64], type[8], name[256];
        /* "address type name"; archive member headers have one field. */
        if (sscanf(line, "%63s %7s %255s", addr, type, name) == 3)
            names_add(out, name, strlen(name));
    }
    assert_int_equal(pclose(p), 0);
    assert_true(out->n > 0);
}

/* Fails listing every name of got outside want, and of want missing in got. */
static void assert_same_api(const struct names *got, const struct names *want, const char *what)
{
    int bad = 0;
    for (size_t i = 0; i < got->n; i++)
        if (!names_has(want, got->v[i])) {
            print_error("%s: %s is not in include/kubelease.h\n", what, got->v[i]);
            bad = 1;
        }
    for (size_t i = 0; i < want->n; i++)
        if (!names_has(got, want->v[i])) {
            print_error("%s: %s (include/kubelease.h) is missing\n", what, want->v[i]);
            bad = 1;
        }
    assert_false(bad);
}

/* A name the library may define: kl_..., or the ODR indicator ASan (gcc)
 * adds for such a global, "__odr_asan.kl_...". */
static int kl_name(const char *name)
{
    if (strncmp(name, "__odr_asan.", 11) == 0)
        name += 11;
    return strncmp(name, "kl_", 3) == 0;
}

static void test_static_library_defines_only_kl_globals(void **state)
{
    (void)state;
    char lib[PATH_MAX];
    struct names defs = {0};
    int bad = 0;

    build_path(lib, sizeof(lib), "client/libkubelease.a");
    defined_globals("-g --defined-only", lib, &defs);
    for (size_t i = 0; i < defs.n; i++)
        if (!kl_name(defs.v[i])) {
            print_error("libkubelease.a defines %s (not kl_ or kl__)\n", defs.v[i]);
            bad = 1;
        }
    assert_true(names_has(&defs, "kl__v1__campaign_event__unpack")); /* renamed, not absent */
    names_free(&defs);
    assert_false(bad);
}

static void test_static_library_public_symbols_are_the_header_api(void **state)
{
    (void)state;
    char lib[PATH_MAX];
    struct names defs = {0}, pub = {0}, api = {0};

    header_api(&api);
    build_path(lib, sizeof(lib), "client/libkubelease.a");
    defined_globals("-g --defined-only", lib, &defs);
    for (size_t i = 0; i < defs.n; i++)
        if (strncmp(defs.v[i], "kl_", 3) == 0 && strncmp(defs.v[i], "kl__", 4) != 0)
            names_add(&pub, defs.v[i], strlen(defs.v[i]));
    assert_same_api(&pub, &api, "libkubelease.a");
    names_free(&defs);
    names_free(&pub);
    names_free(&api);
}

static void test_shared_library_exports_only_the_header_api(void **state)
{
    (void)state;
    char lib[PATH_MAX];
    struct names exports = {0}, api = {0};

    header_api(&api);
    build_path(lib, sizeof(lib), "client/libkubelease.so");
    defined_globals("-D --defined-only", lib, &exports);
    assert_same_api(&exports, &api, "libkubelease.so");
    names_free(&exports);
    names_free(&api);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_library_defines_only_kl_globals),
        cmocka_unit_test(test_static_library_public_symbols_are_the_header_api),
        cmocka_unit_test(test_shared_library_exports_only_the_header_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
