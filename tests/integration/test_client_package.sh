#!/usr/bin/env bash
# Packaging of libkubelease: `cmake --install` of the build tree puts the
# header, both libraries, kubelease.pc, the CMake package, kubeleased and
# kubeleasectl in a prefix; the installed programs run from it (and from wherever it moves)
# without LD_LIBRARY_PATH; a consumer project finds it with find_package(kubelease) and with
# pkg-config, links the shared and the static library, and runs; the shared
# library's SONAME is the major version and it exports only kl_* symbols.
set -euo pipefail
: "${KL_BUILD_DIR:?set by ctest}" "${KL_SOURCE_DIR:?set by ctest}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$KL_BUILD_DIR" --prefix "$prefix" >/dev/null
# A sanitizer build installs instrumented libraries: consumers link the runtime.
san=$(sed -n 's/^KL_SANITIZE:[A-Z]*=//p' "$KL_BUILD_DIR/CMakeCache.txt")
case $san in
address) san_flags=-fsanitize=address,undefined ;;
thread) san_flags=-fsanitize=thread ;;
*) san_flags= ;;
esac
pcdir=$(dirname "$(find "$prefix" -name kubelease.pc)")
libdir=$(dirname "$pcdir")
for f in include/kubelease.h bin/kubeleased bin/kl_replica bin/kubeleasectl; do
    [[ -e $prefix/$f ]] || { echo "FAIL: $f not installed"; exit 1; }
done
# Installed programs find the installed library relative to themselves
# (RUNPATH $ORIGIN/../lib), also after the whole prefix has moved.
mv "$prefix" "$tmp/moved"
prefix=$tmp/moved
pcdir=$(dirname "$(find "$prefix" -name kubelease.pc)")
libdir=$(dirname "$pcdir")
out=$(env -u LD_LIBRARY_PATH "$prefix/bin/kl_replica" --print-monotonic 2>&1) ||
    { echo "FAIL: the installed kl_replica does not run: $out"; exit 1; }
[[ $out =~ ^[0-9]+$ ]] || { echo "FAIL: installed kl_replica --print-monotonic printed: $out"; exit 1; }
readelf -d "$prefix/bin/kl_replica" | grep -q 'R.*PATH.*\$ORIGIN/' ||
    { echo "FAIL: the installed kl_replica has no \$ORIGIN-relative RUNPATH"; exit 1; }
out=$(env -u LD_LIBRARY_PATH "$prefix/bin/kubeleasectl" --version 2>&1) ||
    { echo "FAIL: the installed kubeleasectl does not run: $out"; exit 1; }
readelf -d "$prefix/bin/kubeleasectl" | grep -q 'R.*PATH.*\$ORIGIN/' ||
    { echo "FAIL: the installed kubeleasectl has no \$ORIGIN-relative RUNPATH"; exit 1; }

so=$(find "$prefix" -name 'libkubelease.so.*.*.*')
soname=$(objdump -p "$so" | awk '/SONAME/ {print $2}')
major=$(awk '/#define KL_VERSION_MAJOR/ {print $3}' "$KL_SOURCE_DIR/include/kubelease.h")
[[ $soname == "libkubelease.so.$major" ]] || { echo "FAIL: SONAME $soname"; exit 1; }
others=$(nm -D --defined-only "$so" | awk '{print $3}' | grep -v '^kl_' || true)
[[ -z $others ]] || { echo "FAIL: exported non-kl_ symbols: $others"; exit 1; }

mkdir -p "$tmp/consumer"
cat > "$tmp/consumer/main.c" <<'C'
#include <kubelease.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
    kl_error err;
    kl_client *c = kl_client_new("http://127.0.0.1:1", &err);
    if (!c)
        return 1;
    kl_client_free(c);
    printf("%s\n", kl_version());
    return strcmp(kl_strerror(KL_OK), "success") != 0;
}
C
cat > "$tmp/consumer/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(kubelease 0.1 REQUIRED)
add_executable(shared main.c)
target_link_libraries(shared PRIVATE kubelease::kubelease)
add_executable(static main.c)
target_link_libraries(static PRIVATE kubelease::kubelease_static)
C
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_EXE_LINKER_FLAGS="$san_flags" >/dev/null
cmake --build "$tmp/consumer/build" >/dev/null
LD_LIBRARY_PATH=$libdir "$tmp/consumer/build/shared" >/dev/null
"$tmp/consumer/build/static" >/dev/null
if ldd "$tmp/consumer/build/static" | grep -q libkubelease; then
    echo "FAIL: the static consumer needs libkubelease.so"
    exit 1
fi

export PKG_CONFIG_PATH=$pcdir
# shellcheck disable=SC2046
cc $san_flags "$tmp/consumer/main.c" $(pkg-config --cflags --libs kubelease) -o "$tmp/pc"
[[ $(pkg-config --modversion kubelease) == "$(LD_LIBRARY_PATH=$libdir "$tmp/pc")" ]] ||
    { echo "FAIL: pkg-config version differs from kl_version()"; exit 1; }
echo "PASS: installed package usable via find_package and pkg-config; SONAME $soname"
