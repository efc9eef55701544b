#!/usr/bin/env bash
# The node's images, built here without a registry (scripts/build-images.sh):
# - the archives the node imported are what build-images.sh gives now (its
#   cache is keyed by the build context), each matching its checksum; a
#   corrupt one is built again (the pause image's, the cheapest);
# - the kubeleased image is the top-level Dockerfile's: its runtime stage's
#   RUN, user, ports and entrypoint, as written;
# - the replica image is examples/Dockerfile's and runs its programs:
#   kl_replica, the C++ supervisor on the drop-in libk8s_lease_wrapper and
#   kubeleasectl (a Pod of it prints their versions and usage).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

begin_test images
work=$WORK
version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$SRC/charts/kubelease/Chart.yaml")

# --- the cache ---------------------------------------------------------------
now=$(bash "$SRC/scripts/build-images.sh" 2>"$work/build.err") || { cat "$work/build.err" >&2; fail "scripts/build-images.sh failed"; }
[ "$(echo $now)" = "$(echo $KL_IMAGES)" ] || fail "build-images.sh now gives $(echo $now), the node imported $KL_IMAGES"
[ ! -s "$work/build.err" ] || fail "build-images.sh rebuilt something with nothing changed: $(cat "$work/build.err")"
for a in $KL_IMAGES; do
  (cd "$(dirname "$a")" && sha256sum --quiet -c "$(basename "$a").sha256") || fail "$a does not match its checksum"
done
pause=$(image_archive pause)
truncate -s 1000 "$pause"
again=$(bash "$SRC/scripts/build-images.sh" 2>"$work/build.err") || { cat "$work/build.err" >&2; fail "scripts/build-images.sh failed"; }
[ "$(echo $again)" = "$(echo $KL_IMAGES)" ] || fail "after a corrupt pause archive, build-images.sh gives $(echo $again)"
grep -q 'building localhost/kubelease/pause' "$work/build.err" || fail "a corrupt pause archive was not built again"
(cd "$(dirname "$pause")" && sha256sum --quiet -c "$(basename "$pause").sha256") || fail "the rebuilt $pause does not match its checksum"
note "the archives match the build context and their checksums; a corrupt one is built again"

# --- the kubeleased image: the top-level Dockerfile, as written ---------------------
# The runtime stage's instructions, continuation lines joined.
sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$SRC/Dockerfile" | grep -v '^[[:space:]]*#' |
  awk '$1 == "FROM" { n++ } n == 2' >"$work/runtime"
tar -xOf "$(image_archive kubeleased)" manifest.json >"$work/manifest.json"
config=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["Config"])' "$work/manifest.json")
tar -xOf "$(image_archive kubeleased)" "$config" >"$KWORK/out.json"
history=$(q '[h.get("created_by", "") for h in j["history"]]' | tr -s ' ')
while read -r cmd; do
  [ -n "$cmd" ] || continue
  grep -qF -- "$(echo "$cmd" | tr -s ' ')" <<<"$history" || fail "the image's history lacks the Dockerfile's RUN $cmd"
done < <(awk '$1 == "RUN" { $1 = ""; print }' "$work/runtime")
want_user=$(awk '$1 == "USER" { print $2 }' "$work/runtime")
[ "$(q 'j["config"].get("User")')" = "$want_user" ] || fail "the image's user is not the Dockerfile's $want_user"
want_ports=$(awk '$1 == "EXPOSE" { for (i = 2; i <= NF; i++) print $i "/tcp" }' "$work/runtime" | sort)
[ "$(q 'sorted(j["config"].get("ExposedPorts", {}))')" = "$want_ports" ] || fail "the image exposes not the Dockerfile's ports"
[ "$(q 'j["config"]["Entrypoint"]')" = /usr/local/bin/kubeleased ] || fail "the image's entrypoint is not kubeleased"
note "kubeleased image: the Dockerfile's runtime stage (user $want_user, ports $(echo $want_ports))"

# --- the replica image runs its programs ----------------------------------------------
NS=images-$(test_id)
NAMESPACES=$NS
create_namespace "$NS"
kapi_json POST "/api/v1/namespaces/$NS/pods" '{
  "metadata": {"name": "programs"},
  "spec": {
    "restartPolicy": "Never",
    "automountServiceAccountToken": false,
    "containers": [{
      "name": "programs",
      "image": "localhost/kubelease/replica:'"$version"'",
      "imagePullPolicy": "Never",
      "command": ["/bin/sh", "-c", "kubeleasectl --version && kl_replica --help | head -n 1 && k8s_lease_supervisor --help 2>&1 | head -n 1"]}]}}'
kexpect 201
finished() {
  get "/api/v1/namespaces/$NS/pods/programs"
  case $(jget status.phase) in Succeeded) return 0 ;; Failed) violation "the replica image's programs failed" ;; *) return 1 ;; esac
}
wait_until 120 "the replica image's programs run" finished
kapi GET "/api/v1/namespaces/$NS/pods/programs/log"
kexpect 200
grep -q "^kubeleasectl $version" "$KWORK/out.json" || fail "kubeleasectl did not run: $(cat "$KWORK/out.json")"
grep -q '^usage: kl_replica' "$KWORK/out.json" || fail "kl_replica did not run: $(cat "$KWORK/out.json")"
grep -q '^usage: k8s_lease_supervisor' "$KWORK/out.json" || fail "k8s_lease_supervisor did not run: $(cat "$KWORK/out.json")"
note "replica image: kubeleasectl, kl_replica and k8s_lease_supervisor run"
