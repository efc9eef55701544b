#!/usr/bin/env bash
# Sets up a fresh Debian machine and runs every test: unit, integration
# (against a real kube-apiserver + etcd on loopback), interop (third-party
# clients), chart; then the unit and integration suites again under
# ASan+UBSan and the unit suite under TSan.
#
# Usage: scripts/test.sh            everything
#        KL_TEST_QUICK=1 scripts/test.sh   the plain build only (no sanitizer passes)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

step() { printf '\n==> %s\n' "$*"; }

step "setup (Debian packages)"
scripts/setup.sh --test

step "control plane (kube-apiserver + etcd from their Go modules; cached after the first run)"
scripts/build-control-plane.sh >/dev/null

# build DIR [cmake args...]
build() {
  local dir=$1; shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
}

step "build"
build build

step "tests (plain build)"
scripts/controlplane.sh run -- ctest --test-dir build --output-on-failure

if [ -z "${KL_TEST_QUICK:-}" ]; then
  step "tests under ASan+UBSan (unit, integration)"
  build build-asan -DKL_SANITIZE=address
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    scripts/controlplane.sh run -- ctest --test-dir build-asan --output-on-failure -L 'unit|integration'

  step "tests under TSan (unit)"
  build build-tsan -DKL_SANITIZE=thread
  TSAN_OPTIONS=halt_on_error=1 ctest --test-dir build-tsan --output-on-failure -L unit
fi
step "all tests passed"
