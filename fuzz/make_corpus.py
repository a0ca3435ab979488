"""Seed the dispatcher target's corpus: one valid request per served API and version, with the
fields kafka-python's classes default to (fuzz/corpus/dispatcher/<api>-v<version>)."""

from __future__ import annotations

import sys
from pathlib import Path

from kcoord.protocol.messages import ApiKey
from kcoord.server.api_table import build_table
from tests.wire import request_header

out = Path(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus/dispatcher")
out.mkdir(parents=True, exist_ok=True)
table = build_table()
made = 0
for spec in table:
    for version in range(spec.min_version, spec.max_version + 1):
        flexible = spec.request_cls.flexible_version_q(version)
        try:
            body = spec.request_cls().encode(version=version)
        except Exception:
            body = b""
        header = request_header(
            spec.key, version, 7, "fuzz", flexible=flexible and spec.key != ApiKey.ApiVersions
        )
        (out / f"{spec.name}-v{version}").write_bytes(header + body)
        made += 1
print(f"{made} seeds in {out}")
