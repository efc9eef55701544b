#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build and test kubelease, and
# checks minimum versions. Idempotent: a second run installs nothing.
#
# Usage: scripts/setup.sh [--test]   (--test adds the test-only tools)
#        scripts/setup.sh --list build|test   prints those packages, one a line
set -euo pipefail

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

build_pkgs=(build-essential cmake pkg-config protobuf-c-compiler libprotobuf-c-dev
            libmicrohttpd-dev libcurl4-openssl-dev libcjson-dev libyaml-dev libssl-dev
            libgnutls28-dev)
test_pkgs=(libcmocka-dev clang libclang-rt-14-dev clang-format valgrind prometheus chromium curl
           openssl procps psmisc python3 python3-yaml faketime
           # The one-node cluster (scripts/cluster.sh): its runtime, network
           # and image builds.
           containerd runc containernetworking-plugins iptables iproute2 util-linux
           buildah mmdebstrap)

if [ "${1:-}" = "--list" ]; then
  case "${2:-}" in
  build) printf '%s\n' "${build_pkgs[@]}" ;;
  test) printf '%s\n' "${test_pkgs[@]}" ;;
  *) die "usage: scripts/setup.sh --list build|test" ;;
  esac
  exit 0
fi

pkgs=("${build_pkgs[@]}")
[ "${1:-}" = "--test" ] && pkgs+=("${test_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})"
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null || die "apt-get update failed"
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
    die "apt-get install failed for: ${missing[*]}"
fi

# version_ge A B: true when version A >= B.
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]; }
need() {
  local mod=$1 min=$2 have
  have=$(pkg-config --modversion "$mod" 2>/dev/null) || die "pkg-config cannot find $mod"
  version_ge "$have" "$min" || die "$mod $have is too old; kubelease needs >= $min"
}
need libprotobuf-c 1.4.1
need libmicrohttpd 0.9.71
need libcurl 7.68.0
need libcjson 1.7.14
need yaml-0.1 0.2.2
need libcrypto 3.0.0
need gnutls 3.6.3
# Go and Node.js are needed only by the tests (the Dockerfile's build stage runs
# this script without --test and has neither).
if [ "${1:-}" = "--test" ]; then
  command -v go >/dev/null || die "Go is not installed (needed for the test control plane and helm)"
  command -v node >/dev/null || die "Node.js is not installed (needed for the interop tests)"
fi
log "ok"
