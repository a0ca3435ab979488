"""``meta.properties``: the data directory's cluster id and node id, in Kafka's format."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from kcoord.storage.atomic import atomic_write


def _random_kafka_uuid() -> str:
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


def read_properties(path: Path) -> dict[str, str]:
    props = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, _, v = line.partition("=")
            props[k.strip()] = v.strip()
    return props


def load_or_create_meta(data_dir: Path, node_id: int) -> dict[str, str]:
    """Read meta.properties, creating it on first start; refuse another node's directory."""
    path = data_dir / "meta.properties"
    if path.exists():
        props = read_properties(path)
        if props.get("node.id") != str(node_id):
            raise SystemExit(
                f"{path} belongs to node.id {props.get('node.id')}, not {node_id}; "
                "use another log.dirs or the same node.id"
            )
        return props
    props = {
        "cluster.id": _random_kafka_uuid(),
        "directory.id": _random_kafka_uuid(),
        "node.id": str(node_id),
        "version": "1",
    }
    text = "#kcoord\n" + "".join(f"{k}={v}\n" for k, v in props.items())
    atomic_write(path, text.encode())
    return props
