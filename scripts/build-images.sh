#!/usr/bin/env bash
# Builds the images of the test node without a registry and caches them as
# image archives outside the source tree, keyed by what they are built from:
#
#   debian:bookworm, debian:bookworm-slim   the Dockerfiles' base images,
#       bootstrapped with mmdebstrap from the host's Debian sources
#   localhost/kubelease/kubeleased:VERSION  the top-level Dockerfile, as written
#   localhost/kubelease/replica:VERSION     examples/Dockerfile (kl_replica, kl_ask,
#       k8s_lease_supervisor on the drop-in libk8s_lease_wrapper, kubeleasectl)
#   localhost/kubelease/pause:3.10          the Pods' sandbox (tests/cluster/pause)
#
# buildah builds them (its layer cache under the kubelease cache lets the two
# Dockerfiles share their identical build stage) with --pull=never: a base
# image not built here is never fetched. Each archive is checksummed; one that
# is missing or corrupt, or whose sources changed, is built again. VERSION is
# the chart's appVersion.
#
# Usage: scripts/build-images.sh   (prints the archives, one a line)
# Environment: KUBELEASE_CACHE (default ~/.cache/kubelease).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${KUBELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubelease}
IMAGES=$CACHE/images
STORE=$CACHE/containers
SUITE=bookworm
PAUSE=localhost/kubelease/pause:3.10

log() { printf '[images] %s\n' "$*" >&2; }
die() { printf '[images] error: %s\n' "$*" >&2; exit 1; }

for c in buildah mmdebstrap gcc sha256sum; do
  command -v "$c" >/dev/null || die "$c is not installed (scripts/setup.sh --node installs it)"
done
[ "$(id -u)" = 0 ] || die "building images needs root (mmdebstrap, buildah's overlay storage)"
mkdir -p "$IMAGES" "$STORE"

version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/charts/kubelease/Chart.yaml")
[ -n "$version" ] || die "no appVersion in charts/kubelease/Chart.yaml"

# buildah with the cache's own storage and configuration, so that its
# images and network configuration do not land in the host's.
mkdir -p "$STORE/cni" "$STORE/tmp"
printf '[network]\nnetwork_config_dir = "%s"\n' "$STORE/cni" >"$STORE/containers.conf"
export CONTAINERS_CONF=$STORE/containers.conf
B=(env TMPDIR="$STORE/tmp" buildah --root "$STORE/storage" --runroot "$STORE/run" --storage-driver overlay)

# intact FILE: true when FILE and its checksum file agree.
intact() {
  [ -f "$1" ] && [ -f "$1.sha256" ] && (cd "$(dirname "$1")" && sha256sum --quiet -c "$(basename "$1").sha256" >/dev/null 2>&1)
}

# seal TMP FILE: moves TMP to FILE (STEM-KEY.tar) with its checksum file,
# and drops the archives of other keys of the same STEM.
seal() {
  local tmp=$1 file=$2 stem=${2%-*} old
  for old in "$stem"-*.tar; do
    if [[ ${old#"$stem"-} =~ ^[0-9a-f]{16}\.tar$ ]]; then rm -f "$old" "$old.sha256"; fi
  done
  mv "$tmp" "$file"
  (cd "$(dirname "$file")" && sha256sum "$(basename "$file")" >"$(basename "$file").sha256")
}

# key WORDS...: a short digest of its arguments and standard input.
key() { { printf '%s\n' "$@"; cat; } | sha256sum | cut -c1-16; }

# run_logged LOG CMD...: runs CMD with its output in LOG, showing the tail
# when it fails.
run_logged() {
  local logf=$1; shift
  if ! "$@" >>"$logf" 2>&1; then
    tail -n 30 "$logf" >&2
    die "'$*' failed (full log: $logf)"
  fi
}

# The host's apt sources for the suite: the bases' apt reads the same archive.
sources=()
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && grep -v '^[[:space:]]*#' "$f" | grep -qw "$SUITE" && sources+=("$f")
done
[ ${#sources[@]} -gt 0 ] || die "no apt source for $SUITE in /etc/apt (the base images are bootstrapped from it)"

# base NAME SLIM: bootstraps debian:NAME (a minbase system with merged /usr)
# and commits it to buildah's storage; SLIM=1 leaves out documentation, man
# pages and locales, and tells dpkg to leave them out later, as Debian's slim
# images do. The rootfs tarball is cached; buildah's copy is made from it
# whenever the storage lacks it.
base() {
  # apt as in Debian's own images: downloaded packages and the binary caches
  # removed after each run, no translations; no Valid-Until check, so that a
  # snapshot mirror serves too.
  local clean='"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true";'
  local name=$1 slim=$2 opts=(--variant=minbase --format=tar --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
    --aptopt="DPkg::Post-Invoke { $clean };" --aptopt="APT::Update::Post-Invoke { $clean };"
    --aptopt='Dir::Cache::pkgcache "";' --aptopt='Dir::Cache::srcpkgcache "";'
    --aptopt='Acquire::Languages "none";' --aptopt='Acquire::Check-Valid-Until "false";')
  if [ "$slim" = 1 ]; then
    local d
    for d in doc man info locale groff lintian; do
      opts+=(--dpkgopt="path-exclude=/usr/share/$d/*")
    done
    opts+=(--dpkgopt='path-include=/usr/share/doc/*/copyright')
  fi
  local k; k=$(cat "${sources[@]}" | key "$name" "${opts[@]}" "$(mmdebstrap --version)")
  local tar=$IMAGES/base-$name-$k.tar
  if ! intact "$tar"; then
    log "bootstrapping debian:$name with mmdebstrap (about a minute)"
    local logf=$IMAGES/base-$name.log; : >"$logf"
    run_logged "$logf" nice mmdebstrap "${opts[@]}" "$SUITE" "$tar.tmp" "${sources[@]}"
    seal "$tar.tmp" "$tar"
  fi
  # The image records the tarball's key; another key means another tarball.
  if [ "$("${B[@]}" inspect --type image --format '{{index .ImageAnnotations "io.kubelease.base-key"}}' "debian:$name" 2>/dev/null)" != "$k" ]; then
    local ctr; ctr=$("${B[@]}" from scratch)
    "${B[@]}" add --quiet "$ctr" "$tar" / >/dev/null
    "${B[@]}" config --cmd bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --annotation "io.kubelease.base-key=$k" "$ctr"
    "${B[@]}" commit --quiet --rm "$ctr" "debian:$name" >/dev/null
  fi
  base_keys+="$name=$k "
}

# context_key: a digest of the build context — the files git tracks or
# would track, less those .dockerignore leaves out — by name and content.
context_key() {
  cd "$root"
  git rev-parse --git-dir >/dev/null 2>&1 || die "the image cache keys on the git tree: run from a git checkout"
  git ls-files -co --exclude-standard -z | python3 -c '
import fnmatch, hashlib, os, sys
pats = [l.strip() for l in open(".dockerignore") if l.strip() and not l.startswith("#")]
def matches(pat, path):
    # As the builders match: from the top of the context, segment by segment
    # (a "*" stays within one), the pattern naming the path or a directory
    # above it.
    ps, fs = pat.strip("/").split("/"), path.split("/")
    return len(ps) <= len(fs) and all(fnmatch.fnmatchcase(f, p) for p, f in zip(ps, fs))
def ignored(path):
    out = False
    for p in pats:
        if p.startswith("!"):
            out = out and not matches(p[1:], path)
        elif matches(p, path):
            out = True
    return out
h = hashlib.sha256()
for f in sorted(sys.stdin.read().split("\0")):
    if f and os.path.isfile(f) and not ignored(f):
        h.update(f.encode() + b"\0" + hashlib.sha256(open(f, "rb").read()).digest())
print(h.hexdigest())
' | key context
}

# image NAME DOCKERFILE: builds localhost/kubelease/NAME:VERSION from
# DOCKERFILE with the repository as context, into IMAGES/NAME-KEY.tar.
image() {
  local name=$1 file=$2 ref=localhost/kubelease/$1:$version
  local k; k=$(printf '%s\n' "$ctx" "$base_keys" | key "$ref" "$file")
  local tar=$IMAGES/$name-$k.tar
  if ! intact "$tar"; then
    log "building $ref from $file (log: $IMAGES/$name.log)"
    local logf=$IMAGES/$name.log; : >"$logf"
    # --network host: the build stage's apt-get reaches the Debian archive.
    run_logged "$logf" nice "${B[@]}" build --pull=never --layers --network host \
      -f "$root/$file" -t "$ref" "$root"
    rm -f "$tar.tmp"
    run_logged "$logf" "${B[@]}" push --quiet "$ref" "docker-archive:$tar.tmp:$ref"
    seal "$tar.tmp" "$tar"
  fi
  echo "$tar"
}

# The sandbox image: the static pause program, alone.
pause_image() {
  local src=$root/tests/cluster/pause/pause.c
  local k; k=$(key "$PAUSE" "$(gcc --version | head -n 1)" <"$src")
  local tar=$IMAGES/pause-$k.tar
  if ! intact "$tar"; then
    log "building $PAUSE"
    local work; work=$(mktemp -d "${TMPDIR:-/tmp}/kubelease-pause.XXXXXX")
    gcc -static -Os -s -Wall -Wextra -Werror -o "$work/pause" "$src" || die "compiling $src failed"
    local ctr; ctr=$("${B[@]}" from scratch)
    "${B[@]}" copy --quiet "$ctr" "$work/pause" /pause >/dev/null
    "${B[@]}" config --entrypoint '["/pause"]' --user 65535:65535 "$ctr"
    "${B[@]}" commit --quiet --rm "$ctr" "$PAUSE" >/dev/null
    rm -f "$tar.tmp"
    "${B[@]}" push --quiet "$PAUSE" "docker-archive:$tar.tmp:$PAUSE" || die "exporting $PAUSE failed"
    rm -rf "$work"
    seal "$tar.tmp" "$tar"
  fi
  echo "$tar"
}

# One build at a time per cache: concurrent runs wait for the first.
exec 9>"$IMAGES/.build.lock"
flock 9

base_keys=
base "$SUITE" 0
base "$SUITE-slim" 1
ctx=$(context_key)
pause_image
image kubeleased Dockerfile
image replica examples/Dockerfile
