"""Read ``__consumer_offsets`` as a client does (Fetch) and decode its records by hand.

Independent of kcoord's own codecs on purpose: the byte layout checked here is Kafka's
(GroupCoordinator's OffsetCommitKey/Value and GroupMetadataKey/Value schemas).
"""

from __future__ import annotations

import struct
from typing import Any

from kafka.record import MemoryRecords

from tests.wire import Conn

OFFSETS_TOPIC = "__consumer_offsets"


def java_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units), as a signed 32-bit int."""
    data = s.encode("utf-16-be")
    h = 0
    for unit in struct.unpack(f">{len(data) // 2}H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition(group: str, partitions: int) -> int:
    """Kafka's partitionFor: Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions."""
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def batches(data: bytes) -> list[tuple[int, int, int]]:
    """(base offset, record count, max timestamp) of the v2 batches in ``data``."""
    out = []
    pos = 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        (max_ts,) = struct.unpack_from(">q", data, pos + 35)
        (count,) = struct.unpack_from(">i", data, pos + 57)
        out.append((base, count, max_ts))
        pos += 12 + length
    return out


def fetch_log(c: Conn, partition: int) -> bytes:
    """Every byte of a __consumer_offsets partition, as Fetch returns it from offset 0."""
    out = b""
    offset = 0
    while True:
        r = c.fetch(OFFSETS_TOPIC, partition, offset, max_bytes=1 << 22)
        assert r.error_code == 0, r
        data = bytes(r.records or b"")
        if offset >= r.high_watermark or not data:
            return out
        out += data
        base, count, _ = batches(data)[-1]
        offset = base + count


def log_records(c: Conn, partition: int) -> list[tuple[int, int, bytes, bytes | None]]:
    """(offset, timestamp, key, value) of every record in a coordinator partition."""
    records = MemoryRecords(fetch_log(c, partition))
    out = []
    while (batch := records.next_batch()) is not None:
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out


def records_for(c: Conn, group: str, key: bytes, partitions: int) -> list[tuple[int, int, bytes | None]]:
    """(offset, timestamp, value) of the records with ``key`` in the group's partition."""
    return [(o, ts, v) for o, ts, k, v in log_records(c, offsets_partition(group, partitions)) if k == key]


# --- keys and values ----------------------------------------------------------------------------
def _enc(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def offset_key(group: str, topic: str, partition: int) -> bytes:
    """Offset commit key: int16 type 1, group, topic, int32 partition."""
    return struct.pack(">h", 1) + _enc(group) + _enc(topic) + struct.pack(">i", partition)


def group_key(group: str) -> bytes:
    """Group metadata key: int16 type 2, group."""
    return struct.pack(">h", 2) + _enc(group)


def _str(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    if n < 0:
        return None, pos + 2
    return buf[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def parse_offset_value(value: bytes) -> dict[str, Any]:
    """Offset commit value v0-v3: offset, [leader_epoch v3], metadata, commit_timestamp,
    [expire_timestamp v1]. Fails if bytes are left over."""
    (version,) = struct.unpack_from(">h", value, 0)
    out: dict[str, Any] = {"version": version}
    (out["offset"],) = struct.unpack_from(">q", value, 2)
    pos = 10
    if version >= 3:
        (out["leader_epoch"],) = struct.unpack_from(">i", value, pos)
        pos += 4
    out["metadata"], pos = _str(value, pos)
    (out["commit_timestamp"],) = struct.unpack_from(">q", value, pos)
    pos += 8
    if version == 1:
        (out["expire_timestamp"],) = struct.unpack_from(">q", value, pos)
        pos += 8
    assert pos == len(value), f"{len(value) - pos} bytes left over in offset value v{version}"
    return out


def parse_group_value(value: bytes) -> dict[str, Any]:
    """Group metadata value v0-v3 (protocol_type, generation, protocol, leader,
    [current_state_timestamp v2+], members). Fails if bytes are left over."""
    (version,) = struct.unpack_from(">h", value, 0)
    out: dict[str, Any] = {"version": version}
    out["protocol_type"], pos = _str(value, 2)
    (out["generation"],) = struct.unpack_from(">i", value, pos)
    pos += 4
    out["protocol"], pos = _str(value, pos)
    out["leader"], pos = _str(value, pos)
    if version >= 2:
        (out["current_state_timestamp"],) = struct.unpack_from(">q", value, pos)
        pos += 8
    (n,) = struct.unpack_from(">i", value, pos)
    pos += 4
    members = []
    for _ in range(n):
        m: dict[str, Any] = {}
        m["member_id"], pos = _str(value, pos)
        if version >= 3:
            m["group_instance_id"], pos = _str(value, pos)
        m["client_id"], pos = _str(value, pos)
        m["client_host"], pos = _str(value, pos)
        if version >= 1:
            (m["rebalance_timeout"],) = struct.unpack_from(">i", value, pos)
            pos += 4
        (m["session_timeout"],) = struct.unpack_from(">i", value, pos)
        pos += 4
        for field in ("subscription", "assignment"):
            (size,) = struct.unpack_from(">i", value, pos)
            m[field] = value[pos + 4 : pos + 4 + size]
            pos += 4 + size
        members.append(m)
    out["members"] = members
    assert pos == len(value), f"{len(value) - pos} bytes left over in group value v{version}"
    return out
