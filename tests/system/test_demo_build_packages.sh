#!/usr/bin/env bash
# The README's run command on a machine that has only the build packages:
# scripts/demo.sh configures and builds the service, the library and the
# examples from this source tree, then runs its narration to the summary.
#
# The test-only packages (scripts/setup.sh --list test) stay installed here,
# so pkg-config is pointed at a directory that holds every .pc file of this
# machine except theirs: for CMake, cmocka is then missing as on a fresh
# machine. The build goes to a directory of its own; nothing in the source
# tree changes.
set -euo pipefail
src=${KL_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
tmp=$(mktemp -d)
state=$tmp/state
stop_demo() { KL_DEMO_STATE=$state "$src/scripts/demo.sh" stop >/dev/null 2>&1 || true; }
trap 'stop_demo; rm -rf "$tmp"' EXIT
fail() {
    printf 'FAIL: %s\n' "$*" >&2
    exit 1
}
pass() { printf 'ok: %s\n' "$*"; }

# --- a pkg-config search path without the test-only packages -------------
hidden=()
while read -r pkg; do
    while read -r f; do
        [[ $f == *.pc ]] && hidden+=("$(basename "$f")")
    done < <(dpkg -L "$pkg" 2>/dev/null || true)
done < <("$src/scripts/setup.sh" --list test)
mkdir -p "$tmp/pc"
IFS=: read -ra pc_dirs <<<"$(pkg-config --variable pc_path pkg-config)"
for d in "${pc_dirs[@]}"; do
    for f in "$d"/*.pc; do
        [[ -f $f ]] || continue
        name=$(basename "$f")
        [[ " ${hidden[*]} " == *" $name "* || -e $tmp/pc/$name ]] || ln -s "$f" "$tmp/pc/$name"
    done
done
export PKG_CONFIG_LIBDIR=$tmp/pc PKG_CONFIG_PATH=
# The premise: the test-only packages are invisible, the build packages are not.
pkg-config --exists cmocka && fail "cmocka is still visible to pkg-config (hidden: ${hidden[*]})"
pkg-config --exists libprotobuf-c libmicrohttpd libcurl libcjson yaml-0.1 ||
    fail "a build package is not visible to pkg-config"
pass "pkg-config sees the build packages and not cmocka (hidden: ${hidden[*]})"

# --- asking for the tests without their packages names what to install ----
if out=$(cmake -S "$src" -B "$tmp/build-tests" -DKL_BUILD_TESTS=ON 2>&1); then
    fail "configuring with -DKL_BUILD_TESTS=ON succeeded without cmocka"
fi
grep -q 'libcmocka-dev' <<<"$out" || fail "the error does not name libcmocka-dev: $out"
pass "-DKL_BUILD_TESTS=ON without cmocka fails naming libcmocka-dev"

# --- the demo, with its own setup and build --------------------------------
rc=0
KL_BUILD_DIR=$tmp/build KL_DEMO_PORT=0 KL_DEMO_STATE=$state KL_DEMO_TIMEOUT=30 \
    timeout 900 "$src/scripts/demo.sh" >"$tmp/demo.out" 2>&1 || rc=$?
cat "$tmp/demo.out"
((rc == 0)) || fail "scripts/demo.sh exited $rc"
grep -q 'SUMMARY' "$tmp/demo.out" || fail "the demo did not reach its summary"
[[ -x $tmp/build/server/kubeleased && -x $tmp/build/examples/kl_replica ]] || fail "the demo's build lacks its programs"
[[ ! -e $tmp/build/tests ]] || fail "the demo's build configured the tests without cmocka"
pass "scripts/demo.sh built without the test packages and ran to its summary"
echo PASS
