"""Docker HEALTHCHECK for kcoord.

With $KCOORD_HEALTHCHECK_URL (the image sets http://127.0.0.1:9644/health): healthy when the
broker's /health answers 200, i.e. its logs are replayed and its listeners are up (503 before).
Without it (a broker run with http.listeners empty): healthy when the broker answers ApiVersions
without error on $KCOORD_HEALTHCHECK_ADDRESS (host:port), default 127.0.0.1:9092.

Standard library only (urllib: the image has no curl). Exit 0 healthy, 1 unhealthy (as Docker
expects).
"""

from __future__ import annotations

import os
import socket
import struct
import sys
import urllib.error
import urllib.request

API_VERSIONS = 18


def http_health_ok(url: str, timeout: float = 3.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except urllib.error.HTTPError:  # 503 while starting or stopping
        return False


def api_versions_ok(host: str, port: int, timeout: float = 3.0) -> bool:
    client_id = b"kcoord-healthcheck"
    correlation_id = 0x6B636F64
    # Request header v1 (key, version, correlation id, client id) + an empty ApiVersions v0 body.
    body = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _read(sock, 4))[0]
        frame = _read(sock, size)
    got_id, error_code = struct.unpack_from(">ih", frame, 0)
    return got_id == correlation_id and error_code == 0


def _read(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def main() -> int:
    url = os.environ.get("KCOORD_HEALTHCHECK_URL")
    if url:
        try:
            ok = http_health_ok(url)
        except (OSError, ValueError) as e:
            print(f"unhealthy: {url}: {e}", file=sys.stderr)
            return 1
        if not ok:
            print(f"unhealthy: {url}: not ready", file=sys.stderr)
        return 0 if ok else 1
    address = os.environ.get("KCOORD_HEALTHCHECK_ADDRESS", "127.0.0.1:9092")
    host, _, port = address.rpartition(":")
    try:
        ok = api_versions_ok(host.strip("[]") or "127.0.0.1", int(port))
    except (OSError, ValueError, struct.error) as e:
        print(f"unhealthy: {address}: {e}", file=sys.stderr)
        return 1
    if not ok:
        print(f"unhealthy: {address}: ApiVersions answered with an error", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
