#!/usr/bin/env bash
# Fails on an include that goes up the layers. Every #include "..." in
# server/ and client/ is resolved the way the compiler does (the including
# file's directory first, then the target's include directories) and the
# layers of both files are compared.
#
# The server's layers, bottom to top (a file may include its own layer and
# those below it):
#
#   core/ -> kube/ -> store/ -> engine/ -> proto -> rpc/ -> http/ -> service/ and main.c
#
# proto is the code protoc-c generates (kubelease/v1/*.pb-c.h, in the build
# directory): the wire types, for rpc/ and above. The client library
# (client/) is separate: it may include its own files, the public header
# (include/) and proto, nothing of the server. A new directory under server/
# is an error until it is given its place here.
#
# Usage: scripts/check-layers.sh [ROOT]   (ROOT: the source tree; default: this one)
# Prints one line per offending include (file:line: what it includes, and the
# two layers) and exits 1 when there is any, 0 otherwise.
set -euo pipefail

root=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
cd "$root"
SERVER_LAYERS="core kube store engine proto rpc http service"
# What client/ may include besides itself (shared pure code, when there is some).
CLIENT_MAY_INCLUDE="client include proto"

mapfile -t sources < <(find server client -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort)

# The first input is the list of the tree's files (to resolve includes), the
# others are the sources to check.
LC_ALL=C awk -v layers="$SERVER_LAYERS" -v client_ok="$CLIENT_MAY_INCLUDE" '
BEGIN {
    n = split(layers, L, " ")
    for (i = 1; i <= n; i++)
        rank[L[i]] = i
    n = split(client_ok, C, " ")
    for (i = 1; i <= n; i++)
        allowed[C[i]] = 1
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
    if (file ~ /^server\//)
        roots[++n] = "server"
    else if (file ~ /^client\//) {
        roots[++n] = "client"
        roots[++n] = "include"
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
    if (from == "client") {
        if (!(to in allowed))
            report(where "client/ includes " to "/ (\"" inc "\"): the client library may include only " client_ok)
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
    print "check-layers: every include in server/ and client/ goes down the layers"
}
' <(find server client include -type f | LC_ALL=C sort) "${sources[@]}"
