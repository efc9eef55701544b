#!/usr/bin/env bash
# Packaging of libk8s_lease_wrapper: `cmake --install` puts its header,
# library (SONAME from the major version, exporting only the Go wrapper's
# functions), k8s_lease_wrapper.pc, its CMake package and the example
# supervisor in the prefix. After the prefix moved, a C++ consumer written
# against the Go wrapper's API builds with pkg-config and with
# find_package(k8s_lease_wrapper), and runs an election through a kubeleased
# --dev without LD_LIBRARY_PATH (the library finds libkubelease next to
# itself); the installed supervisor runs too.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${KL_BUILD_DIR:?set by ctest}" "${KL_SOURCE_DIR:?set by ctest}"
export KL_CLIENT_TEST_DEV=1 # the store does not matter here
source "$here/client_lib.sh"
kl_require_server
prefix=$KL_TMP/prefix

cmake --install "$KL_BUILD_DIR" --prefix "$prefix" >/dev/null
san=$(sed -n 's/^KL_SANITIZE:[A-Z]*=//p' "$KL_BUILD_DIR/CMakeCache.txt")
case $san in
address) san_flags=-fsanitize=address,undefined ;;
thread) san_flags=-fsanitize=thread ;;
*) san_flags= ;;
esac
mv "$prefix" "$KL_TMP/moved"
prefix=$KL_TMP/moved
pc=$(find "$prefix" -name k8s_lease_wrapper.pc)
[[ -n $pc ]] || { echo "FAIL: k8s_lease_wrapper.pc not installed"; exit 1; }
pcdir=$(dirname "$pc")
libdir=$(dirname "$pcdir")
for f in include/libk8s_lease_wrapper.h bin/k8s_lease_supervisor; do
    [[ -e $prefix/$f ]] || { echo "FAIL: $f not installed"; exit 1; }
done
for f in libk8s_lease_wrapper.so cmake/k8s_lease_wrapper/k8s_lease_wrapperConfig.cmake \
    cmake/k8s_lease_wrapper/k8s_lease_wrapperConfigVersion.cmake; do
    [[ -e $libdir/$f ]] || { echo "FAIL: $libdir/$f not installed"; exit 1; }
done
so=$(find "$libdir" -name 'libk8s_lease_wrapper.so.*.*.*')
soname=$(objdump -p "$so" | awk '/SONAME/ {print $2}')
major=$(awk '/#define KL_VERSION_MAJOR/ {print $3}' "$KL_SOURCE_DIR/include/kubelease.h")
[[ $soname == "libk8s_lease_wrapper.so.$major" ]] || { echo "FAIL: SONAME $soname"; exit 1; }
others=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^K8sLease\|^K8sPatchPodLabel$\|^K8sRemovePodLabel$' || true)
[[ -z $others ]] || { echo "FAIL: exported symbols not of the Go wrapper: $others"; exit 1; }
out=$(env -u LD_LIBRARY_PATH "$prefix/bin/k8s_lease_supervisor" --help 2>&1) ||
    { echo "FAIL: the installed supervisor does not run: $out"; exit 1; }

mkdir -p "$KL_TMP/consumer"
cat >"$KL_TMP/consumer/main.cpp" <<'C'
// A master process's election, as written for the Go wrapper.
#include <libk8s_lease_wrapper.h>
#include <cstdio>
#include <string>
int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    char *err = nullptr, *holder = nullptr;
    long long transitions = 0, seen = 0;
    if (K8sLeaseInit(&err) != 0 ||
        K8sLeaseRunElection(argv[1], argv[2], argv[2], 15, 10, 2, &err) != 0 ||
        K8sLeaseWaitElected(argv[1], argv[2], 10, &transitions, &err) != 0 ||
        K8sLeaseGetHolder(argv[1], argv[2], &holder, &seen, &err) != 0) {
        std::fprintf(stderr, "%s\n", err ? err : "(no message)");
        free(err);
        return 1;
    }
    int ok = holder && std::string(holder) == argv[2] && seen == transitions;
    free(holder);
    K8sLeaseCancelElection(argv[1], argv[2], &err);
    K8sLeaseWaitLost(argv[1], argv[2], &err);
    std::printf("%s %lld\n", ok ? "elected" : "wrong-holder", transitions);
    return ok ? 0 : 1;
}
C
cat >"$KL_TMP/consumer/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.18)
project(consumer CXX)
find_package(k8s_lease_wrapper 0.1 REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE k8s_lease_wrapper::k8s_lease_wrapper)
C
cmake -S "$KL_TMP/consumer" -B "$KL_TMP/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_EXE_LINKER_FLAGS="$san_flags" >/dev/null
cmake --build "$KL_TMP/consumer/build" >/dev/null
export PKG_CONFIG_PATH=$pcdir
# shellcheck disable=SC2046
c++ -std=c++11 -Wall -Wextra -Werror -pedantic $san_flags "$KL_TMP/consumer/main.cpp" \
    $(pkg-config --cflags --libs k8s_lease_wrapper) -Wl,-rpath,"$libdir" -o "$KL_TMP/pc"
[[ $(pkg-config --modversion k8s_lease_wrapper) == "$(pkg-config --modversion kubelease)" ]] ||
    { echo "FAIL: k8s_lease_wrapper.pc and kubelease.pc disagree on the version"; exit 1; }

kl_start_server
export KUBELEASE_ENDPOINT=$KL_ENDPOINT
for bin in "$KL_TMP/consumer/build/consumer" "$KL_TMP/pc"; do
    lease=pkg-$(basename "$bin")
    out=$(env -u LD_LIBRARY_PATH "$bin" "$KL_NS" "$lease" 2>&1) ||
        { echo "FAIL: $bin: $out"; exit 1; }
    [[ $out =~ ^elected\ [0-9]+$ ]] || { echo "FAIL: $bin printed: $out"; exit 1; }
    libs=$(env -u LD_LIBRARY_PATH ldd "$bin")
    grep -q "$libdir/libkubelease.so" <<<"$libs" ||
        { echo "FAIL: $bin does not load the installed libkubelease: $libs"; exit 1; }
done
echo "PASS: installed libk8s_lease_wrapper usable via find_package and pkg-config; SONAME $soname"
