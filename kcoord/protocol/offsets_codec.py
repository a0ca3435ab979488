"""Hand-written encoders for the OffsetCommit and OffsetFetch responses.

They are a coordinator's most frequent answers. kafka-python's schema-driven classes build a
container object per topic and partition and then walk the schema field by field; these write
the same bytes directly from tuples. The answers have the ``encode(version=...)`` method the
dispatcher calls, so handlers return them where they would return a kafka-python message.
tests/unit/test_offsets_codec.py checks them byte for byte against kafka-python for every
version.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

from kcoord.protocol.fields import any_string as _string
from kcoord.protocol.fields import array_length as _count

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PART_ERROR = struct.Struct(">ih")  # partition index, error code
_PART_OFFSET = struct.Struct(">iq")  # partition index, committed offset
_ZERO_I32 = b"\x00\x00\x00\x00"
_ZERO_UUID = bytes(16)

# (name, topic id or None, [(partition, error code)])
CommitTopic = tuple[str | None, Any, list[tuple[int, int]]]
# (partition, committed offset, leader epoch, metadata or None, error code)
FetchPartition = tuple[int, int, int, str | None, int]
# (name, topic id or None, [FetchPartition])
FetchTopic = tuple[str | None, Any, list[FetchPartition]]
# (group id, error code, [FetchTopic])
FetchGroup = tuple[str, int, list[FetchTopic]]


def _uuid(u: uuid.UUID | None) -> bytes:
    return u.bytes if u is not None else _ZERO_UUID


class OffsetCommitAnswer:
    """An OffsetCommit response (v2-v10) with throttle time 0."""

    __slots__ = ("topics",)

    def __init__(self, topics: list[CommitTopic]) -> None:
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
