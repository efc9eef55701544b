#!/usr/bin/env bash
# Sets up a fresh Debian machine and runs every test: unit, integration
# (against a real kube-apiserver + etcd on loopback), interop (third-party
# clients), chart, the nemesis (random faults, about 3 minutes), the simulator
# (seeded, about 15 s), the cluster
# suite (the chart on a one-node cluster: scripts/cluster.sh); then the
# unit, integration, nemesis and sim suites again under ASan+UBSan, unit and
# integration under TSan, the client library under valgrind, and a short
# run of every fuzzer (clang, libFuzzer).
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
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKL_BUILD_TESTS=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
}

step "build"
build build

step "tests (plain build)"
scripts/controlplane.sh run -- ctest --test-dir build --output-on-failure -LE cluster

# The plain pass only: a one-node cluster with the images built from the
# Dockerfiles, the chart installed with helm, elections through a real
# Service and kube-proxy (the binaries and images are cached after the first
# run).
step "tests on a one-node cluster (kubelet, containerd, kube-proxy; the chart with helm)"
scripts/cluster.sh run -- ctest --test-dir build --output-on-failure -L cluster

# The sanitizer passes leave out the slowest integration suite, which the
# plain pass runs: test_engine_kube spends most of its two minutes counting
# apiserver requests over 60 s windows, waiting rather than running code.
slow='^integration/test_engine_kube$'

if [ -z "${KL_TEST_QUICK:-}" ]; then
  # The simulator (label sim) too: it runs the real engine through
  # thousands of crashes (engine_free with requests still posted and reads
  # unanswered) and frees all it allocated at the end of a run, so a leak
  # or use-after-free it reports is the engine's. Both sim tests take about
  # 20 s under ASan.
  step "tests under ASan+UBSan (unit, integration, nemesis, sim)"
  build build-asan -DKL_SANITIZE=address
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    scripts/controlplane.sh run -- ctest --test-dir build-asan --output-on-failure -L 'unit|integration|nemesis|sim' -E "$slow"

  step "tests under TSan (unit, integration)"
  build build-tsan -DKL_SANITIZE=thread
  TSAN_OPTIONS=halt_on_error=1 \
    scripts/controlplane.sh run -- ctest --test-dir build-tsan --output-on-failure -L 'unit|integration' -E "$slow"

  step "the client library and common/ under valgrind (no errors, no leaks)"
  vg=(valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect)
  for t in build/tests/unit_test_client_* build/tests/unit_test_common_*; do
    "${vg[@]}" "$t" >/dev/null
  done
  KUBELEASED=$PWD/build/server/kubeleased KL_REPLICA=$PWD/build/examples/kl_replica \
    KL_CLIENT_TEST_DEV=1 "${vg[@]}" build/tests/integration_test_client_election

  fuzz_s=${KL_FUZZ_SECONDS:-20}
  step "fuzzers (clang, libFuzzer): built, then ${fuzz_s} s each from its corpus"
  cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKL_BUILD_TESTS=ON -DKL_FUZZ=ON \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
  fuzzers=$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')
  # shellcheck disable=SC2086
  cmake --build build-fuzz -j"$jobs" --target $fuzzers >/dev/null
  for f in $fuzzers; do
    # New inputs go to a scratch corpus; the checked-in one is only read.
    scratch=$(mktemp -d)
    "build-fuzz/tests/fuzz/$f" -max_total_time="$fuzz_s" -timeout=10 -print_final_stats=0 \
      "$scratch" "tests/fuzz/corpus/$f" >"build-fuzz/$f.log" 2>&1 ||
      { tail -n 40 "build-fuzz/$f.log"; rm -rf "$scratch"; echo "fuzzer $f failed (log: build-fuzz/$f.log)"; exit 1; }
    rm -rf "$scratch"
    printf '%s: %s\n' "$f" "$(grep -E "^Done [0-9]+ runs" "build-fuzz/$f.log" | tail -n 1)"
  done
fi
step "all tests passed"
