#!/usr/bin/env bash
# Certificates for docker-compose.sasl-ssl.yml (or any test setup): a CA and kcoord's key and
# certificate for the names kcoord, localhost and 127.0.0.1. Nothing here is for production: use
# your organisation's CA there.
#
#   docker/make-certs.sh [DIR]      (default docker/certs)
#
# DIR/ca.pem: the CA clients trust (ssl.truststore.location, ssl.ca.location, ssl_cafile);
# DIR/kcoord.pem: the broker's key and certificate chain (ssl.keystore.location, PEM).
set -euo pipefail
dir=${1:-"$(dirname "$0")/certs"}
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj "/CN=kcoord example CA" \
    -keyout ca.key -out ca.pem 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=kcoord" -keyout kcoord.key -out kcoord.csr 2>/dev/null
printf 'subjectAltName=DNS:kcoord,DNS:localhost,IP:127.0.0.1\n' > kcoord.ext
openssl x509 -req -in kcoord.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
    -extfile kcoord.ext -out kcoord.crt 2>/dev/null
cat kcoord.key kcoord.crt > kcoord.pem
# The image runs kcoord as uid 10001: the key must be readable by it in the mounted directory.
chmod 644 kcoord.pem ca.pem
rm -f kcoord.csr kcoord.ext ca.srl
echo "certificates in $dir: ca.pem (trust this), kcoord.pem (the broker's key and chain)"
