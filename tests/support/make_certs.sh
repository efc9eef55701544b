#!/usr/bin/env bash
# Test certificates (openssl): make_certs.sh DIR [PREFIX [CN]]
#   DIR/PREFIXca.crt, PREFIXca.key        a CA of its own (EC P-256)
#   DIR/PREFIXserver.crt, PREFIXserver.key  a server certificate it signed, for
#                                           127.0.0.1, ::1 and localhost, with
#                                           the subject CN (default "kubeleased")
# A second call with another PREFIX makes an unrelated CA and server pair (a
# wrong CA, or the next certificate of a rotation by another issuer); calling
# it again with the same PREFIX renews the server certificate under the same
# CA, as cert-manager does. Quiet; exits non-zero when openssl fails.
set -euo pipefail
dir=$1 p=${2:-} cn=${3:-kubeleased}
mkdir -p "$dir"
cd "$dir"
if [ ! -s "${p}ca.key" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=kubelease test CA ${p:-main}" -keyout "${p}ca.key" -out "${p}ca.crt" 2>/dev/null
fi
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$cn" \
  -keyout "${p}server.key.new" -out "${p}server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"${p}ext.cnf"
openssl x509 -req -in "${p}server.csr" -CA "${p}ca.crt" -CAkey "${p}ca.key" -CAcreateserial \
  -days 2 -extfile "${p}ext.cnf" -out "${p}server.crt.new" 2>/dev/null
rm -f "${p}server.csr" "${p}ext.cnf"
# Replaced by renames, so a reader never sees half a file.
mv -f "${p}server.key.new" "${p}server.key"
mv -f "${p}server.crt.new" "${p}server.crt"
