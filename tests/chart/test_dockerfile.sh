#!/usr/bin/env bash
# The Dockerfile, checked without a container engine (none runs here):
# - the builder stage's build command, run as written (into a scratch
#   directory), builds and installs kubeleased where the runtime stage copies
#   it from;
# - the runtime stage installs exactly the packages that provide the shared
#   libraries kubeleased links (its NEEDED entries, mapped with dpkg on this
#   machine), besides the C library, plus ca-certificates; libcrypto
#   (libssl3) among them;
# - both stages use this machine's Debian release, whose package names those
#   are;
# - the image's user is the numeric non-root UID the chart runs it as.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
DOCKERFILE=$SRC/Dockerfile
[ -f "$DOCKERFILE" ] || fail "no Dockerfile at the top of the tree"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The Dockerfile's instructions, continuation lines joined.
sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$DOCKERFILE" | grep -v '^[[:space:]]*#' >"$work/instructions"

# --- base images: this machine's release -----------------------------------
. /etc/os-release
mapfile -t bases < <(awk '$1 == "FROM" { print $2 }' "$work/instructions")
[ "${#bases[@]}" = 2 ] || fail "expected a builder and a runtime stage, got FROM ${bases[*]}"
for b in "${bases[@]}"; do
  case $b in
    debian:"$VERSION_CODENAME" | debian:"$VERSION_CODENAME"-slim) ;;
    *) fail "FROM $b: the package names here are those of debian:$VERSION_CODENAME" ;;
  esac
done
note "both stages are debian:$VERSION_CODENAME"

# --- the builder stage's build, as written ----------------------------------
build_cmd=$(awk '$1 == "RUN" && /cmake --build/ { $1 = ""; print; exit }' "$work/instructions")
[ -n "$build_cmd" ] || fail "no RUN with the cmake build in the builder stage"
dest=$(awk '$1 == "COPY" && /--from=build/ { print $3; exit }' "$work/instructions")
[ -n "$dest" ] || fail "the runtime stage copies nothing from the build stage"
# Same command, with its build tree and its install root in the scratch dir
# (DESTDIR keeps the /usr/local prefix it asks for).
cmd=${build_cmd//-B build/-B $work/build}
cmd=${cmd//--build build/--build $work/build -j2}
cmd=${cmd//--install build/--install $work/build}
note "builder: $cmd (DESTDIR=$work/root)"
(cd "$SRC" && DESTDIR=$work/root bash -c "$cmd") >"$work/build.log" 2>&1 || {
  tail -n 30 "$work/build.log" >&2
  fail "the Dockerfile's build command failed"
}
bin=$work/root$dest
[ -x "$bin" ] || fail "the build installed no $dest (the runtime stage copies it from there)"
"$bin" --version >/dev/null || fail "$dest --version fails"

# --- runtime packages: what the binary needs, nothing more ------------------
# The words after "install" up to "&&", options left out, are the packages.
mapfile -t runtime < <(awk '$1 == "RUN" && /apt-get install/ {
    n = split($0, w, /[[:space:]]+/); on = 0
    for (i = 1; i <= n; i++) {
      if (w[i] == "install") { on = 1; continue }
      if (w[i] == "&&") on = 0
      if (on && w[i] != "" && w[i] !~ /^-/) print w[i]
    }
  }' "$work/instructions")
[ "${#runtime[@]}" -gt 0 ] || fail "the runtime stage installs no packages"
note "runtime packages: ${runtime[*]}"
declare -A want=()
for lib in $(readelf -d "$bin" | awk '/NEEDED/ { gsub(/[][]/, "", $5); print $5 }'); do
  pkg=$(dpkg -S "*/$lib" 2>/dev/null | cut -d: -f1 | grep -v -- '-i386$\|-x32$' | sort -u | head -n 1)
  [ -n "$pkg" ] || fail "no Debian package on this machine provides $lib (NEEDED by kubeleased)"
  [ "$pkg" = libc6 ] && continue # part of every Debian image
  want[$pkg]=$lib
done
for pkg in "${!want[@]}"; do
  [[ " ${runtime[*]} " == *" $pkg "* ]] ||
    fail "the runtime stage lacks $pkg (it provides ${want[$pkg]}, which kubeleased needs)"
done
for pkg in "${runtime[@]}"; do
  [ "$pkg" = ca-certificates ] && continue # the system CA store, for HTTPS
  [ -n "${want[$pkg]:-}" ] || fail "the runtime stage installs $pkg, which kubeleased does not link"
done
# OpenSSL's libcrypto: the authorization caches key tokens by SHA-256.
[ -n "${want[libssl3]:-}" ] || fail "kubeleased does not link libcrypto.so.3 (libssl3), which --auth kubernetes needs"
note "kubeleased needs ${!want[*]} (+ libc6): all installed, nothing else"

# --- the user: numeric, non-root, the chart's -------------------------------
user=$(awk '$1 == "USER" { print $2 }' "$work/instructions" | tail -n 1)
[[ $user =~ ^([0-9]+)(:([0-9]+))?$ ]] || fail "USER '$user' is not numeric (runAsNonRoot needs a UID)"
uid=${BASH_REMATCH[1]}
[ "$uid" != 0 ] || fail "the image runs as root"
chart_uid=$(awk '/runAsUser:/ { print $2; exit }' "$CHART/values.yaml")
[ "$uid" = "$chart_uid" ] || fail "the image runs as UID $uid, the chart as $chart_uid"
echo "PASS"
