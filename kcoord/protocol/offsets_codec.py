"""Hand-written codecs for OffsetCommit and OffsetFetch: the requests' decoders and the
responses' encoders.

They are a coordinator's most frequent messages. kafka-python's schema-driven classes build a
container object per topic and partition (with its version, tags and unknown tags) and walk the
schema field by field, and the dispatcher then walks the result once more for nulls the schema
forbids. The decoders here read the bytes into named tuples with the attribute names of
kafka-python's classes (so handlers read either alike), refuse a forbidden null as they meet it,
and skip tagged fields, which neither request defines. The answers are written directly from
tuples and have the ``encode(version=...)`` method the dispatcher calls, so handlers return them
where they would return a kafka-python message. tests/unit/test_offsets_codec.py checks both
directions against kafka-python for every version, nulls and truncated bodies included.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from kcoord.protocol.fields import any_string as _string
from kcoord.protocol.fields import array_length as _count
from kcoord.protocol.frames import MalformedRequest, skip_tagged_fields
from kcoord.protocol.request_reader import (
    ZERO_UUID,
    null_field,
    read_array_length,
    read_string,
    read_uuid,
    skip_tags,
)

_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")
_PART_ERROR: Final = struct.Struct(">ih")  # partition index, error code
_PART_OFFSET: Final = struct.Struct(">iq")  # partition index, committed offset
_ZERO_I32: Final = b"\x00\x00\x00\x00"

# (name, topic id or None, [(partition, error code)])
CommitTopic = tuple[str | None, Any, Sequence[Sequence[int]]]
# (partition, committed offset, leader epoch, metadata or None, error code)
FetchPartition = tuple[int, int, int, str | None, int]
# (name, topic id or None, [FetchPartition])
FetchTopic = tuple[str | None, Any, list[FetchPartition]]
# (group id, error code, [FetchTopic])
FetchGroup = tuple[str, int, list[FetchTopic]]


def _uuid(u: uuid.UUID | None) -> bytes:
    return u.bytes if u is not None else ZERO_UUID


class OffsetCommitAnswer:
    """An OffsetCommit response (v2-v10) with throttle time 0."""

    __slots__ = ("topics",)

    def __init__(self, topics: Sequence[CommitTopic]) -> None:
        self.topics = topics

    def encode(self, version: int) -> bytes:
        flexible = version >= 8
        out = bytearray(_ZERO_I32 if version >= 3 else b"")
        out += _count(len(self.topics), flexible)
        pack = _PART_ERROR.pack
        for name, topic_id, parts in self.topics:
            out += _uuid(topic_id) if version >= 10 else _string(name, flexible)
            out += _count(len(parts), flexible)
            if flexible:
                for p, e in parts:
                    out += pack(p, e)
                    out += b"\x00"
                out += b"\x00"
            else:
                for p, e in parts:
                    out += pack(p, e)
        if flexible:
            out += b"\x00"
        return bytes(out)


def _fetch_partitions(out: bytearray, parts: list[FetchPartition], version: int, flexible: bool) -> None:
    out += _count(len(parts), flexible)
    pack = _PART_OFFSET.pack
    with_epoch = version >= 5
    for p, offset, epoch, metadata, error in parts:
        out += pack(p, offset)
        if with_epoch:
            out += _I32.pack(epoch)
        out += _string(metadata, flexible)
        out += _I16.pack(error)
        if flexible:
            out += b"\x00"


class OffsetFetchAnswer:
    """An OffsetFetch response (v1-v10) with throttle time 0.

    v1-v7 answer one group: ``topics`` and the top-level ``error`` (v2+); v8+ answer ``groups``.
    """

    __slots__ = ("error", "groups", "topics")

    def __init__(
        self,
        topics: list[FetchTopic] | None = None,
        error: int = 0,
        groups: list[FetchGroup] | None = None,
    ) -> None:
        self.topics = topics or []
        self.error = error
        self.groups = groups or []

    def encode(self, version: int) -> bytes:
        flexible = version >= 6
        out = bytearray(_ZERO_I32 if version >= 3 else b"")
        if version < 8:
            out += _count(len(self.topics), flexible)
            for name, _topic_id, parts in self.topics:
                out += _string(name, flexible)
                _fetch_partitions(out, parts, version, flexible)
                if flexible:
                    out += b"\x00"
            if version >= 2:
                out += _I16.pack(self.error)
        else:
            out += _count(len(self.groups), flexible)
            for group_id, error, topics in self.groups:
                out += _string(group_id, flexible)
                out += _count(len(topics), flexible)
                for name, topic_id, parts in topics:
                    out += _uuid(topic_id) if version >= 10 else _string(name, flexible)
                    _fetch_partitions(out, parts, version, flexible)
                    out += b"\x00"
                out += _I16.pack(error)
                out += b"\x00"
        if flexible:
            out += b"\x00"
        return bytes(out)


# --- requests ----------------------------------------------------------------------------------
class CommitRequestPartition(NamedTuple):
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int  # -1 before v6
    committed_metadata: str | None


class CommitRequestTopic(NamedTuple):
    name: str | None  # None from v10
    topic_id: uuid.UUID | None  # v10+; the zero uuid reads as None, as in kafka-python
    partitions: list[CommitRequestPartition]


class OffsetCommitRequest(NamedTuple):
    group_id: str
    generation_id_or_member_epoch: int
    member_id: str
    group_instance_id: str | None  # v7+
    retention_time_ms: int  # v2-v4, else -1
    topics: list[CommitRequestTopic]


class FetchRequestTopic(NamedTuple):
    name: str | None  # None from v10
    topic_id: uuid.UUID | None  # v10+
    partition_indexes: list[int]


class FetchRequestGroup(NamedTuple):
    group_id: str
    member_id: str | None  # v9+
    member_epoch: int  # v9+, else -1
    topics: list[FetchRequestTopic] | None


class OffsetFetchRequest(NamedTuple):
    group_id: str | None  # v1-v7
    topics: list[FetchRequestTopic] | None  # v1-v7 (nullable from v2)
    groups: list[FetchRequestGroup]  # v8+
    require_stable: bool  # v7+


_new = tuple.__new__
_I64: Final = struct.Struct(">q")
_PART_V2: Final = struct.Struct(">iq")  # partition index, committed offset
_PART_V6: Final = struct.Struct(">iqi")  # ... and committed leader epoch


def _topic(
    buf: memoryview, pos: int, version: int, flexible: bool, field: str
) -> tuple[str | None, Any, int]:
    """A topic named by name (v0-v9) or by id (v10+): (name, topic id, end)."""
    if version >= 10:
        return None, read_uuid(buf, pos), pos + 16
    name, pos = read_string(buf, pos, flexible)
    if name is None:
        raise null_field(field)
    return name, None, pos


def decode_offset_commit(buf: memoryview, pos: int, version: int) -> tuple[OffsetCommitRequest, int]:
    """OffsetCommit v2-v10 from ``buf[pos:]`` (after the request header): (request, end)."""
    flexible = version >= 8
    group_id, pos = read_string(buf, pos, flexible)
    if group_id is None:
        raise null_field("OffsetCommitRequest.group_id")
    (generation,) = _I32.unpack_from(buf, pos)
    member_id, pos = read_string(buf, pos + 4, flexible)
    if member_id is None:
        raise null_field("OffsetCommitRequest.member_id")
    instance = None
    if version >= 7:
        instance, pos = read_string(buf, pos, flexible)
    retention = -1
    if version <= 4:
        (retention,) = _I64.unpack_from(buf, pos)
        pos += 8
    n_topics, pos = read_array_length(buf, pos, flexible)
    if n_topics < 0:
        raise null_field("OffsetCommitRequest.topics")
    with_epoch = version >= 6
    part = _PART_V6 if with_epoch else _PART_V2
    part_size = part.size
    unpack = part.unpack_from
    topics = []
    for _ in range(n_topics):
        name, topic_id, pos = _topic(buf, pos, version, flexible, "OffsetCommitRequest.topics.name")
        n_parts, pos = read_array_length(buf, pos, flexible)
        if n_parts < 0:
            raise null_field("OffsetCommitRequest.topics.partitions")
        parts = []
        for _ in range(n_parts):
            fixed = unpack(buf, pos)
            metadata, pos = read_string(buf, pos + part_size, flexible)
            if flexible:
                pos = pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)
            fields = (*fixed, metadata) if with_epoch else (*fixed, -1, metadata)
            parts.append(_new(CommitRequestPartition, fields))
        if flexible:
            pos = skip_tags(buf, pos)
        topics.append(_new(CommitRequestTopic, (name, topic_id, parts)))
    if flexible:
        pos = skip_tags(buf, pos)
    if pos > len(buf):
        raise MalformedRequest("OffsetCommit request runs past its frame")
    return _new(OffsetCommitRequest, (group_id, generation, member_id, instance, retention, topics)), pos


def _fetch_topics(
    buf: memoryview, pos: int, version: int, flexible: bool
) -> tuple[list[FetchRequestTopic] | None, int]:
    n_topics, pos = read_array_length(buf, pos, flexible)
    if n_topics < 0:
        # Nullable from v2 (KIP-88: all the group's offsets); the handler refuses it in v1.
        return None, pos
    topics = []
    for _ in range(n_topics):
        name, topic_id, pos = _topic(buf, pos, version, flexible, "OffsetFetchRequest.topics.name")
        n, pos = read_array_length(buf, pos, flexible)
        if n < 0:
            raise null_field("OffsetFetchRequest.topics.partition_indexes")
        end = pos + 4 * n
        if end > len(buf):
            raise MalformedRequest("partition indexes run past the end of the request")
        indexes = list(struct.unpack_from(f">{n}i", buf, pos))
        pos = end
        if flexible:
            pos = skip_tags(buf, pos)
        topics.append(_new(FetchRequestTopic, (name, topic_id, indexes)))
    return topics, pos


def decode_offset_fetch(buf: memoryview, pos: int, version: int) -> tuple[OffsetFetchRequest, int]:
    """OffsetFetch v1-v10 from ``buf[pos:]`` (after the request header): (request, end)."""
    flexible = version >= 6
    group_id = None
    topics = None
    groups = []
    if version < 8:
        group_id, pos = read_string(buf, pos, flexible)
        if group_id is None:
            raise null_field("OffsetFetchRequest.group_id")
        topics, pos = _fetch_topics(buf, pos, version, flexible)
    else:
        n_groups, pos = read_array_length(buf, pos, flexible)
        if n_groups < 0:
            raise null_field("OffsetFetchRequest.groups")
        for _ in range(n_groups):
            gid, pos = read_string(buf, pos, flexible)
            if gid is None:
                raise null_field("OffsetFetchRequest.groups.group_id")
            member_id, epoch = None, -1
            if version >= 9:
                member_id, pos = read_string(buf, pos, flexible)
                (epoch,) = _I32.unpack_from(buf, pos)
                pos += 4
            group_topics, pos = _fetch_topics(buf, pos, version, flexible)
            pos = skip_tags(buf, pos)
            groups.append(_new(FetchRequestGroup, (gid, member_id, epoch, group_topics)))
    require_stable = False
    if version >= 7:
        require_stable = buf[pos] != 0
        pos += 1
    if flexible:
        pos = skip_tags(buf, pos)
    if pos > len(buf):
        raise MalformedRequest("OffsetFetch request runs past its frame")
    return _new(OffsetFetchRequest, (group_id, topics, groups, require_stable)), pos
