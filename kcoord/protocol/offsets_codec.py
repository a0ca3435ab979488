"""Hand-written codecs for OffsetCommit and OffsetFetch: the requests' decoders and the
responses' encoders.

They are a coordinator's most frequent messages. kafka-python's schema-driven classes build a
container object per topic and partition (with its version, tags and unknown tags) and walk the
schema field by field, and the dispatcher then walks the result once more for nulls the schema
forbids. The decoders here read the bytes into plain classes with the attribute names of
kafka-python's (so handlers read either alike), refuse a forbidden null as they meet it,
and skip tagged fields, which neither request defines. The answers are written directly from
tuples and have the ``encode(version=...)`` method the dispatcher calls, so handlers return them
where they would return a kafka-python message. tests/unit/test_offsets_codec.py checks both
directions against kafka-python for every version, nulls and truncated bodies included.
"""

from __future__ import annotations

import uuid
from typing import Final

from kcoord.protocol.fields import any_string as _string
from kcoord.protocol.fields import array_length as _count
from kcoord.protocol.frames import MalformedRequest, int32_at, int64_at, response_frame
from kcoord.protocol.native import codecs as _native
from kcoord.protocol.request_reader import (
    ZERO_UUID,
    null_field,
    read_array_length,
    read_string,
    read_uuid,
    skip_tags,
)

_ZERO_I32: Final = b"\x00\x00\x00\x00"
# The C functions themselves, Final: compiled, reading a module global and then the C module's
# attribute were ~400 instructions per answer. None: the Python bodies run instead.
_commit_answer_c: Final = _native.commit_answer if _native is not None else None
_fetch_answer_c: Final = _native.fetch_answer if _native is not None else None

# (name, topic id or None, [[partition, error code]])
CommitTopic = tuple[str | None, uuid.UUID | None, list[list[int]]]
# (partition, committed offset, leader epoch, metadata or None, error code)
FetchPartition = tuple[int, int, int, str | None, int]
# (name, topic id or None, [FetchPartition])
FetchTopic = tuple[str | None, uuid.UUID | None, list[FetchPartition]]
# (group id, error code, [FetchTopic])
FetchGroup = tuple[str, int, list[FetchTopic]]


def _uuid(u: uuid.UUID | None) -> bytes:
    return u.bytes if u is not None else ZERO_UUID


class OffsetCommitAnswer:
    """An OffsetCommit response (v2-v10) with throttle time 0."""

    __slots__ = ("topics",)

    def __init__(self, topics: list[CommitTopic]) -> None:
        self.topics = topics

    # The answers are pieces of bytes joined once: compiled, bytes made by to_bytes and joined
    # are C calls, where each bytearray += or struct.pack is a Python call.
    def encode_framed(self, version: int, correlation_id: int, tagged: bool) -> bytes:
        """The response frame (header and body), written in one buffer by the C codecs."""
        if _commit_answer_c is not None:
            return _commit_answer_c(self.topics, version, correlation_id, tagged)
        return response_frame(self.encode_python(version), correlation_id, tagged)

    def encode(self, version: int) -> bytes:
        if _commit_answer_c is not None:
            return _commit_answer_c(self.topics, version)
        return self.encode_python(version)

    def encode_python(self, version: int) -> bytes:
        """The body as the C codecs' ``commit_answer`` writes it."""
        flexible = version >= 8
        tags = b"\x00" if flexible else b""
        out = [_ZERO_I32 if version >= 3 else b"", _count(len(self.topics), flexible)]
        for name, topic_id, parts in self.topics:
            out.append(_uuid(topic_id) if version >= 10 else _string(name, flexible))
            out.append(_count(len(parts), flexible))
            for part in parts:
                out.append(
                    part[0].to_bytes(4, "big", signed=True) + part[1].to_bytes(2, "big", signed=True) + tags
                )
            out.append(tags)
        out.append(tags)
        return b"".join(out)


def _fetch_partitions(out: list[bytes], parts: list[FetchPartition], version: int, flexible: bool) -> None:
    out.append(_count(len(parts), flexible))
    with_epoch = version >= 5
    for p, offset, epoch, metadata, error in parts:
        out.append(p.to_bytes(4, "big", signed=True) + offset.to_bytes(8, "big", signed=True))
        if with_epoch:
            out.append(epoch.to_bytes(4, "big", signed=True))
        out.append(_string(metadata, flexible))
        out.append(
            error.to_bytes(2, "big", signed=True) + b"\x00"
            if flexible
            else error.to_bytes(2, "big", signed=True)
        )


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

    def encode_framed(self, version: int, correlation_id: int, tagged: bool) -> bytes:
        """The response frame (header and body), written in one buffer by the C codecs."""
        if _fetch_answer_c is not None:
            return _fetch_answer_c(version, self.topics, self.error, self.groups, correlation_id, tagged)
        return response_frame(self.encode_python(version), correlation_id, tagged)

    def encode(self, version: int) -> bytes:
        if _fetch_answer_c is not None:
            return _fetch_answer_c(version, self.topics, self.error, self.groups)
        return self.encode_python(version)

    def encode_python(self, version: int) -> bytes:
        """The body as the C codecs' ``fetch_answer`` writes it."""
        flexible = version >= 6
        tags = b"\x00" if flexible else b""
        out = [_ZERO_I32 if version >= 3 else b""]
        if version < 8:
            out.append(_count(len(self.topics), flexible))
            for name, _topic_id, parts in self.topics:
                out.append(_string(name, flexible))
                _fetch_partitions(out, parts, version, flexible)
                out.append(tags)
            if version >= 2:
                out.append(self.error.to_bytes(2, "big", signed=True))
        else:
            out.append(_count(len(self.groups), flexible))
            for group_id, error, topics in self.groups:
                out.append(_string(group_id, flexible))
                out.append(_count(len(topics), flexible))
                for name, topic_id, parts in topics:
                    out.append(_uuid(topic_id) if version >= 10 else _string(name, flexible))
                    _fetch_partitions(out, parts, version, flexible)
                    out.append(b"\x00")
                out.append(error.to_bytes(2, "big", signed=True) + b"\x00")
        out.append(tags)
        return b"".join(out)


# --- requests ----------------------------------------------------------------------------------
# Plain classes with the attribute names of kafka-python's (so error answers read either alike).
# Compiled, their attributes are C struct fields and their __init__ C, where a NamedTuple's
# fields are Python properties and its construction a Python call.
class CommitRequestPartition:
    __slots__ = ("committed_leader_epoch", "committed_metadata", "committed_offset", "partition_index")

    def __init__(
        self,
        partition_index: int,
        committed_offset: int,
        committed_leader_epoch: int,
        committed_metadata: str | None,
    ) -> None:
        self.partition_index = partition_index
        self.committed_offset = committed_offset
        self.committed_leader_epoch = committed_leader_epoch  # -1 before v6
        self.committed_metadata = committed_metadata


class CommitRequestTopic:
    __slots__ = ("name", "partitions", "topic_id")

    def __init__(
        self, name: str | None, topic_id: uuid.UUID | None, partitions: list[CommitRequestPartition]
    ) -> None:
        self.name = name  # None from v10
        self.topic_id = topic_id  # v10+; the zero uuid reads as None, as in kafka-python
        self.partitions = partitions


class OffsetCommitRequest:
    __slots__ = (
        "generation_id_or_member_epoch",
        "group_id",
        "group_instance_id",
        "member_id",
        "retention_time_ms",
        "topics",
    )

    def __init__(
        self,
        group_id: str,
        generation_id_or_member_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        retention_time_ms: int,
        topics: list[CommitRequestTopic],
    ) -> None:
        self.group_id = group_id
        self.generation_id_or_member_epoch = generation_id_or_member_epoch
        self.member_id = member_id
        self.group_instance_id = group_instance_id  # v7+
        self.retention_time_ms = retention_time_ms  # v2-v4, else -1
        self.topics = topics


class FetchRequestTopic:
    __slots__ = ("name", "partition_indexes", "topic_id")

    def __init__(self, name: str | None, topic_id: uuid.UUID | None, partition_indexes: list[int]) -> None:
        self.name = name  # None from v10
        self.topic_id = topic_id  # v10+
        self.partition_indexes = partition_indexes


class FetchRequestGroup:
    __slots__ = ("group_id", "member_epoch", "member_id", "topics")

    def __init__(
        self, group_id: str, member_id: str | None, member_epoch: int, topics: list[FetchRequestTopic] | None
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id  # v9+
        self.member_epoch = member_epoch  # v9+, else -1
        self.topics = topics


class OffsetFetchRequest:
    __slots__ = ("group_id", "groups", "require_stable", "topics")

    def __init__(
        self,
        group_id: str | None,
        topics: list[FetchRequestTopic] | None,
        groups: list[FetchRequestGroup],
        require_stable: bool,
    ) -> None:
        self.group_id = group_id  # v1-v7
        self.topics = topics  # v1-v7 (nullable from v2)
        self.groups = groups  # v8+
        self.require_stable = require_stable  # v7+


def _topic(
    buf: bytes, pos: int, version: int, flexible: bool, field: str
) -> tuple[str | None, uuid.UUID | None, int]:
    """A topic named by name (v0-v9) or by id (v10+): (name, topic id, end)."""
    if version >= 10:
        return None, read_uuid(buf, pos), pos + 16
    name, pos = read_string(buf, pos, flexible)
    if name is None:
        raise null_field(field)
    return name, None, pos


def decode_offset_commit(buf: bytes, pos: int, version: int) -> tuple[OffsetCommitRequest, int]:
    """OffsetCommit v2-v10 from ``buf[pos:]`` (after the request header): (request, end)."""
    flexible = version >= 8
    group_id, pos = read_string(buf, pos, flexible)
    if group_id is None:
        raise null_field("OffsetCommitRequest.group_id")
    generation = int32_at(buf, pos)
    member_id, pos = read_string(buf, pos + 4, flexible)
    if member_id is None:
        raise null_field("OffsetCommitRequest.member_id")
    instance = None
    if version >= 7:
        instance, pos = read_string(buf, pos, flexible)
    retention = -1
    if version <= 4:
        retention = int64_at(buf, pos)
        pos += 8
    n_topics, pos = read_array_length(buf, pos, flexible)
    if n_topics < 0:
        raise null_field("OffsetCommitRequest.topics")
    with_epoch = version >= 6
    topics = []
    for _ in range(n_topics):
        name, topic_id, pos = _topic(buf, pos, version, flexible, "OffsetCommitRequest.topics.name")
        n_parts, pos = read_array_length(buf, pos, flexible)
        if n_parts < 0:
            raise null_field("OffsetCommitRequest.topics.partitions")
        parts = []
        for _ in range(n_parts):
            index = int32_at(buf, pos)
            offset = int64_at(buf, pos + 4)
            epoch = -1
            pos += 12
            if with_epoch:
                epoch = int32_at(buf, pos)
                pos += 4
            metadata, pos = read_string(buf, pos, flexible)
            if flexible:
                pos = skip_tags(buf, pos)
            parts.append(CommitRequestPartition(index, offset, epoch, metadata))
        if flexible:
            pos = skip_tags(buf, pos)
        topics.append(CommitRequestTopic(name, topic_id, parts))
    if flexible:
        pos = skip_tags(buf, pos)
    if pos > len(buf):
        raise MalformedRequest("OffsetCommit request runs past its frame")
    return OffsetCommitRequest(group_id, generation, member_id, instance, retention, topics), pos


def _fetch_topics(
    buf: bytes, pos: int, version: int, flexible: bool
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
        indexes = [int32_at(buf, at) for at in range(pos, end, 4)]
        pos = end
        if flexible:
            pos = skip_tags(buf, pos)
        topics.append(FetchRequestTopic(name, topic_id, indexes))
    return topics, pos


def decode_offset_fetch(buf: bytes, pos: int, version: int) -> tuple[OffsetFetchRequest, int]:
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
                epoch = int32_at(buf, pos)
                pos += 4
            group_topics, pos = _fetch_topics(buf, pos, version, flexible)
            pos = skip_tags(buf, pos)
            groups.append(FetchRequestGroup(gid, member_id, epoch, group_topics))
    require_stable = False
    if version >= 7:
        require_stable = buf[pos] != 0
        pos += 1
    if flexible:
        pos = skip_tags(buf, pos)
    if pos > len(buf):
        raise MalformedRequest("OffsetFetch request runs past its frame")
    return OffsetFetchRequest(group_id, topics, groups, require_stable), pos
