#!/usr/bin/env bash
# Fails on an include that goes up the layers. Every #include "..." in
# common/, server/, client/, wrapper/, ctl/ and examples/ is resolved the way
# the compiler does (the including file's directory first, then the target's
# include directories) and the layers of both files are compared.
#
# common/ is the bottom layer of both the service and the client library:
# pure code that includes only itself. The server's layers, bottom to top (a
# file may include its own layer and those below it):
#
#   common/ -> core/ -> kube/ -> auth/ -> store/ -> engine/ -> proto -> rpc/ -> http/ -> ops/ -> service/ and main.c
#
# proto is the code protoc-c generates (kubelease/v1/*.pb-c.h, in the build
# directory): the wire types, for rpc/ and above. The client library
# (client/) is separate: it may include its own files, common/, the public
# header (include/) and proto, nothing of the server. The Go wrapper's API
# (wrapper/) and kubeleasectl (ctl/) are built on the public header only, and
# the examples use the public headers only: include/ and the wrapper's
# libk8s_lease_wrapper.h.
# A new directory under server/ is an error until it is given its place here.
#
# Usage: scripts/check-layers.sh [ROOT]   (ROOT: the source tree; default: this one)
# Prints one line per offending include (file:line: what it includes, and the
# two layers) and exits 1 when there is any, 0 otherwise.
set -euo pipefail

root=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
cd "$root"
SERVER_LAYERS="common core kube auth store engine proto rpc http ops service"
# What each of the other directories may include (its own files among them).
CLIENT_MAY_INCLUDE="client common include proto"
WRAPPER_MAY_INCLUDE="wrapper include"
CTL_MAY_INCLUDE="ctl include"
EXAMPLES_MAY_INCLUDE="include wrapper/libk8s_lease_wrapper.h"

mapfile -t sources < <(find common server client wrapper ctl examples -type f \
  \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) | LC_ALL=C sort)

# The first input is the list of the tree's files (to resolve includes), the
# others are the sources to check.
LC_ALL=C awk -v layers="$SERVER_LAYERS" -v client_ok="$CLIENT_MAY_INCLUDE" \
  -v wrapper_ok="$WRAPPER_MAY_INCLUDE" -v ctl_ok="$CTL_MAY_INCLUDE" \
  -v examples_ok="$EXAMPLES_MAY_INCLUDE" '
BEGIN {
    n = split(layers, L, " ")
    for (i = 1; i <= n; i++)
        rank[L[i]] = i
    may["common"] = "common"
    may["client"] = client_ok
    may["wrapper"] = wrapper_ok
    may["ctl"] = ctl_ok
    may["examples"] = examples_ok
    for (d in may) {
        n = split(may[d], C, " ")
        for (i = 1; i <= n; i++)
            allowed[d, C[i]] = 1
    }
}
FNR == NR { exists[$0] = 1; next }

function dirname(p) {
    if (p !~ /\//)
        return "."
    sub(/\/[^\/]*$/, "", p)
    return p
}

# p with "." and ".." folded; "" when it leaves the tree.
function normalize(p,    parts, n, out, k, i, s) {
    n = split(p, parts, "/")
    k = 0
    for (i = 1; i <= n; i++) {
        if (parts[i] == "." || parts[i] == "")
            continue
        if (parts[i] == "..") {
            if (k == 0)
                return ""
            k--
            continue
        }
        out[++k] = parts[i]
    }
    s = ""
    for (i = 1; i <= k; i++)
        s = s (i > 1 ? "/" : "") out[i]
    return s
}

# The included file (relative to the tree), "proto", or "" when not found.
function resolve(file, inc,    roots, n, i, c) {
    n = 1
    roots[1] = dirname(file)
    if (file ~ /^server\//) {
        roots[++n] = "server"
        roots[++n] = "."
    } else if (file ~ /^client\//) {
        roots[++n] = "client"
        roots[++n] = "include"
        roots[++n] = "."
    } else if (file ~ /^common\//) {
        roots[++n] = "."
    } else if (file ~ /^wrapper\//) {
        roots[++n] = "wrapper"
        roots[++n] = "include"
    } else if (file ~ /^ctl\//) {
        roots[++n] = "include"
    } else if (file ~ /^examples\//) {
        roots[++n] = "include"
        roots[++n] = "wrapper"
    }
    for (i = 1; i <= n; i++) {
        c = normalize(roots[i] "/" inc)
        if (c != "" && (c in exists))
            return c
    }
    if (inc ~ /^kubelease\/v1\/[^\/]*\.pb-c\.h$/)
        return "proto"
    return ""
}

function layer(p,    d) {
    if (p == "proto")
        return "proto"
    if (p ~ /^server\/[^\/]+\//) {
        d = p
        sub(/^server\//, "", d)
        sub(/\/.*/, "", d)
        return (d in rank) ? d : "server/" d
    }
    if (p ~ /^server\//)
        return "service" # main.c and its peers: the top
    if (p ~ /^client\//)
        return "client"
    if (p ~ /^include\//)
        return "include"
    d = p
    sub(/\/.*/, "", d)
    return d
}

function report(msg) {
    print msg
    bad++
}

function check(file, line, inc,    target, from, to, where) {
    where = file ":" line ": "
    from = layer(file)
    target = resolve(file, inc)
    if (target == "") {
        report(where "includes \"" inc "\", which is in no known layer (not found from " from "/)")
        return
    }
    to = layer(target)
    if (from in may) {
        if (!((from, to) in allowed) && !((from, target) in allowed))
            report(where from "/ includes " to "/ (" target "): " from "/ may include only " may[from])
    } else if (!(from in rank)) {
        report(where from "/ is not a layer (give it its place in scripts/check-layers.sh)")
    } else if (!(to in rank)) {
        report(where from "/ includes " to "/ (\"" inc "\"), which is not a server layer")
    } else if (rank[to] > rank[from]) {
        report(where "upward include: " from "/ includes " to "/ (\"" inc "\"); layers, bottom to top: " layers)
    }
}

match($0, /^[ \t]*#[ \t]*include[ \t]*"[^"]*"/) {
    inc = $0
    sub(/^[^"]*"/, "", inc)
    sub(/".*/, "", inc)
    check(FILENAME, FNR, inc)
}

END {
    if (bad) {
        printf "check-layers: %d include(s) break the layering\n", bad > "/dev/stderr"
        exit 1
    }
    print "check-layers: every include in common/, server/, client/, wrapper/, ctl/ and examples/ goes down the layers"
}
' <(find common server client include wrapper ctl examples -type f | LC_ALL=C sort) "${sources[@]}"
