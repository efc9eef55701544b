#!/usr/bin/env bash
# libk8s_lease_wrapper's ABI is the Go wrapper's: the shared library exports
# exactly the wrapper's functions (nothing of its internals), the header
# declares the same ones, and the prototypes cgo generated for the Go
# wrapper's //export functions (written out below as cgo emits them) agree
# with the header in C and in C++, so the users' sources compile unchanged.
# A C++11 caller written the way the users' master processes call the
# functions builds with -Wall -Wextra -Werror -pedantic and links.
set -euo pipefail
: "${KL_BUILD_DIR:?set by ctest}" "${KL_SOURCE_DIR:?set by ctest}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lib=$KL_BUILD_DIR/wrapper/libk8s_lease_wrapper.so
header=$KL_SOURCE_DIR/wrapper/libk8s_lease_wrapper.h
[[ -e $lib ]] || { echo "FAIL: $lib not built"; exit 1; }

want="K8sLeaseCancelElection
K8sLeaseCancelWatch
K8sLeaseGetHolder
K8sLeaseInit
K8sLeaseRunElection
K8sLeaseWaitElected
K8sLeaseWaitLost
K8sLeaseWatchHolder
K8sPatchPodLabel
K8sRemovePodLabel"
got=$(nm -D --defined-only "$lib" | awk '{print $3}' | sort)
if [[ $got != "$want" ]]; then
    echo "FAIL: exported symbols differ from the Go wrapper's functions:"
    diff <(echo "$want") <(echo "$got") || true
    exit 1
fi
declared=$(sed -n 's/^KW_EXPORT int \(K8s[A-Za-z]*\)(.*/\1/p' "$header" | sort)
[[ $declared == "$want" ]] || { echo "FAIL: the header declares: $declared"; exit 1; }

# The declarations cgo generated for the Go wrapper (go tool cgo
# -exportheader), after including the header: a conflicting type is an error.
cat >"$tmp/cgo_decls.h" <<'C'
#include <libk8s_lease_wrapper.h>
#ifdef __cplusplus
extern "C" {
#endif
extern int K8sLeaseInit(char** errMsg);
extern int K8sLeaseRunElection(char* ns, char* leaseName, char* identity, int leaseDurationSec, int renewDeadlineSec, int retryPeriodSec, char** errMsg);
extern int K8sLeaseWaitElected(char* ns, char* leaseName, int timeoutSec, long long int* leaseTransitions, char** errMsg);
extern int K8sLeaseWaitLost(char* ns, char* leaseName, char** errMsg);
extern int K8sLeaseCancelElection(char* ns, char* leaseName, char** errMsg);
extern int K8sLeaseGetHolder(char* ns, char* leaseName, char** holderIdentity, long long int* leaseTransitions, char** errMsg);
extern int K8sLeaseWatchHolder(char* ns, char* leaseName, void* callbackCtx, holder_change_cb_t callbackFunc, char** errMsg);
extern int K8sLeaseCancelWatch(char* ns, char* leaseName, char** errMsg);
extern int K8sPatchPodLabel(char* ns, char* pod, char* key, char* value, char** errMsg);
extern int K8sRemovePodLabel(char* ns, char* pod, char* key, char** errMsg);
typedef void (*holder_change_cb_t)(void* ctx, const char* holder, size_t holderSize, int64_t leaseTransitions);
#ifdef __cplusplus
}
#endif
C
cat >"$tmp/caller.c" <<'C'
#include "cgo_decls.h"
#include <stdio.h>
static void on_change(void *ctx, const char *holder, size_t n, int64_t t)
{
    (void)ctx;
    printf("%.*s %lld\n", (int)n, holder ? holder : "", (long long)t);
}
int main(void)
{
    char ns[] = "default", lease[] = "kv-master", id[] = "node-1:8080";
    char *err = NULL, *holder = NULL;
    long long transitions = 0;
    if (K8sLeaseInit(&err) != 0 ||
        K8sLeaseRunElection(ns, lease, id, 15, 10, 2, &err) != 0 ||
        K8sLeaseWaitElected(ns, lease, 30, &transitions, &err) != 0 ||
        K8sLeaseGetHolder(ns, lease, &holder, &transitions, &err) < 0 ||
        K8sLeaseWatchHolder(ns, lease, NULL, on_change, &err) != 0) {
        fprintf(stderr, "%s\n", err ? err : "");
        free(err);
        return 1;
    }
    free(holder);
    char pod[] = "kv-0", key[] = "example.com/role", value[] = "leader";
    K8sPatchPodLabel(ns, pod, key, value, &err);
    K8sLeaseWaitLost(ns, lease, &err);
    K8sRemovePodLabel(ns, pod, key, &err);
    K8sLeaseCancelElection(ns, lease, &err);
    return K8sLeaseCancelWatch(ns, lease, &err);
}
C
# The users' C++: std::string arguments through const_cast, GoInt-free.
cat >"$tmp/caller.cpp" <<'C'
#include "cgo_decls.h"
#include <cstdio>
#include <string>
namespace {
struct Watcher {
    std::string holder;
    long long transitions = 0;
};
void onChange(void *ctx, const char *holder, size_t holderSize, int64_t leaseTransitions)
{
    Watcher *w = static_cast<Watcher *>(ctx);
    w->holder.assign(holder ? holder : "", holderSize);
    w->transitions = leaseTransitions;
}
int check(int rc, char *err)
{
    if (rc < 0) {
        std::fprintf(stderr, "%s\n", err ? err : "");
        free(err);
    }
    return rc;
}
} // namespace
int main()
{
    std::string ns = "default", lease = "kv-master", id = "node-1:8080";
    char *err = nullptr;
    char *holder = nullptr;
    long long transitions = 0;
    Watcher w;
    holder_change_cb_t cb = onChange;
    char *n = const_cast<char *>(ns.c_str()), *l = const_cast<char *>(lease.c_str());
    if (check(K8sLeaseInit(&err), err) != 0 ||
        check(K8sLeaseWatchHolder(n, l, &w, cb, &err), err) != 0 ||
        check(K8sLeaseRunElection(n, l, const_cast<char *>(id.c_str()), 15, 10, 2, &err), err) != 0)
        return 1;
    if (K8sLeaseWaitElected(n, l, 30, &transitions, &err) == 0) {
        K8sLeaseGetHolder(n, l, &holder, &transitions, &err);
        free(holder);
        K8sLeaseWaitLost(n, l, &err);
    }
    K8sLeaseCancelElection(n, l, &err);
    K8sLeaseCancelWatch(n, l, &err);
    return 0;
}
C
san=$(sed -n 's/^KL_SANITIZE:[A-Z]*=//p' "$KL_BUILD_DIR/CMakeCache.txt")
case $san in
address) san_flags=-fsanitize=address,undefined ;;
thread) san_flags=-fsanitize=thread ;;
*) san_flags= ;;
esac
inc=(-I"$KL_SOURCE_DIR/wrapper" -I"$tmp")
link=(-L"$KL_BUILD_DIR/wrapper" -lk8s_lease_wrapper -Wl,-rpath-link,"$KL_BUILD_DIR/client")
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror -pedantic $san_flags "${inc[@]}" "$tmp/caller.c" "${link[@]}" -o "$tmp/c"
# shellcheck disable=SC2086
c++ -std=c++11 -Wall -Wextra -Werror -pedantic $san_flags "${inc[@]}" "$tmp/caller.cpp" "${link[@]}" \
    -o "$tmp/cxx"
# A declaration that differs from cgo's (const) must not compile: the check bites.
printf '#include "cgo_decls.h"\nextern "C" int K8sLeaseWaitLost(const char *ns, char *leaseName, char **errMsg);\n' \
    >"$tmp/bad.cpp"
if out=$(c++ -std=c++11 -fsyntax-only "${inc[@]}" "$tmp/bad.cpp" 2>&1) ||
    ! grep -qi conflicting <<<"$out"; then
    echo "FAIL: a conflicting declaration was not refused as such; the check proves nothing: $out"
    exit 1
fi
echo "PASS: exports exactly the Go wrapper's 8 functions; cgo's prototypes agree in C and C++"
