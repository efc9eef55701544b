#!/usr/bin/env bash
# test_buf_curl.sh over TLS: kubeleased serves HTTPS (--tls-cert-file,
# --tls-key-file), buf curl and curl trust its CA (--cacert); every call and
# stream of that test, unchanged.
KL_TLS=1 exec bash "$(dirname "$0")/test_buf_curl.sh"
