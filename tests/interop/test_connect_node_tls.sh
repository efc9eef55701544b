#!/usr/bin/env bash
# test_connect_node.sh over TLS: kubeleased serves HTTPS (--tls-cert-file,
# --tls-key-file) and @connectrpc/connect-node trusts its CA; the same
# campaign, Confirm, Resign, handoff and watch, in JSON and in binary.
KL_TLS=1 exec bash "$(dirname "$0")/test_connect_node.sh"
