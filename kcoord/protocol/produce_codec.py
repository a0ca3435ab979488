"""Hand-written codecs for Produce (v3-v13): the request's decoder and the response's encoder.

kafka-python's decoder copies each partition's records out of the request into a new bytes
object (and builds a container per topic and partition), and the handler then copied them
once more to stamp offsets in. Here the records are a view of the request's own buffer: a large
request is read into a buffer of its own (server/connection.py), so the batch is validated, stamped and
written to the log from the bytes the socket delivered. The answer is written directly from
tuples. tests/unit/test_produce_codec.py checks both against kafka-python for every version.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from typing import Any, Final

from kcoord.protocol.fields import any_string as _string
from kcoord.protocol.fields import array_length as _count
from kcoord.protocol.frames import MalformedRequest, int16_at, int32_at
from kcoord.protocol.request_reader import (
    ZERO_UUID,
    null_field,
    read_array_length,
    read_bytes,
    read_string,
    read_uuid,
    skip_tags,
)

_I32: Final = struct.Struct(">i")
_PART: Final = struct.Struct(">ihqq")  # index, error code, base offset, log append time
_I64: Final = struct.Struct(">q")
_ZERO_I32: Final = b"\x00\x00\x00\x00"


class PartitionProduceData:
    __slots__ = ("index", "records", "records_at")

    def __init__(self, index: int, records: memoryview | None, records_at: int) -> None:
        self.index = index
        self.records = records  # a (read-only) view of the request's bytes
        # Where they start in the frame: a request read into a writable buffer of its own has its
        # batches stamped and written from there (RequestContext.frame_buffer), not copied.
        self.records_at = records_at


class TopicProduceData:
    __slots__ = ("name", "partition_data", "topic_id")

    def __init__(
        self, name: str | None, topic_id: uuid.UUID | None, partition_data: list[PartitionProduceData]
    ) -> None:
        self.name = name  # None from v13
        self.topic_id = topic_id  # v13+
        self.partition_data = partition_data


class ProduceRequest:
    __slots__ = ("acks", "timeout_ms", "topic_data", "transactional_id")

    def __init__(
        self, transactional_id: str | None, acks: int, timeout_ms: int, topic_data: list[TopicProduceData]
    ) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic_data = topic_data


def decode_produce(buf: bytes, pos: int, version: int) -> tuple[ProduceRequest, int]:
    """Produce v3-v13 from ``buf[pos:]`` (after the request header): (request, end)."""
    flexible = version >= 9
    by_id = version >= 13
    transactional_id, pos = read_string(buf, pos, flexible)
    acks = int16_at(buf, pos)
    timeout_ms = int32_at(buf, pos + 2)
    n_topics, pos = read_array_length(buf, pos + 6, flexible)
    if n_topics < 0:
        raise null_field("ProduceRequest.topic_data")
    topics = []
    for _ in range(n_topics):
        name = topic_id = None
        if by_id:
            topic_id = read_uuid(buf, pos)
            pos += 16
        else:
            name, pos = read_string(buf, pos, flexible)
            if name is None:
                raise null_field("ProduceRequest.topic_data.name")
        n_parts, pos = read_array_length(buf, pos, flexible)
        if n_parts < 0:
            raise null_field("ProduceRequest.topic_data.partition_data")
        parts = []
        for _ in range(n_parts):
            index = int32_at(buf, pos)
            records, pos = read_bytes(buf, pos + 4, flexible)
            records_at = pos - len(records) if records is not None else pos
            if flexible:
                pos = skip_tags(buf, pos)
            parts.append(PartitionProduceData(index, records, records_at))
        if flexible:
            pos = skip_tags(buf, pos)
        topics.append(TopicProduceData(name, topic_id, parts))
    if flexible:
        pos = skip_tags(buf, pos)
    if pos > len(buf):
        raise MalformedRequest("Produce request runs past its frame")
    return ProduceRequest(transactional_id, acks, timeout_ms, topics), pos


class PartitionAnswer:
    __slots__ = (
        "base_offset",
        "error_code",
        "error_message",
        "index",
        "log_append_time_ms",
        "log_start_offset",
        "record_errors",
    )

    def __init__(
        self,
        index: int,
        error_code: int,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        log_start_offset: int = -1,
        record_errors: Sequence[tuple[int, str | None]] = (),
        error_message: str | None = None,
    ) -> None:
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.record_errors = record_errors  # (batch index, message): v8+
        self.error_message = error_message  # v8+


# (name or None, topic id or None, [PartitionAnswer])
TopicAnswer = tuple[str | None, Any, list[PartitionAnswer]]


class ProduceAnswer:
    """A Produce response (v3-v13) with throttle time 0 and no tagged fields (a single broker
    never names another leader)."""

    __slots__ = ("topics",)

    def __init__(self, topics: list[TopicAnswer]) -> None:
        self.topics = topics

    def encode(self, version: int) -> bytes:
        flexible = version >= 9
        with_start = version >= 5
        with_errors = version >= 8
        out = bytearray(_count(len(self.topics), flexible))
        pack = _PART.pack
        for name, topic_id, parts in self.topics:
            if version >= 13:
                out += topic_id.bytes if topic_id is not None else ZERO_UUID
            else:
                out += _string(name, flexible)
            out += _count(len(parts), flexible)
            for p in parts:
                out += pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
                if with_start:
                    out += _I64.pack(p.log_start_offset)
                if with_errors:
                    out += _count(len(p.record_errors), flexible)
                    for batch_index, message in p.record_errors:
                        out += _I32.pack(batch_index)
                        out += _string(message, flexible)
                        if flexible:
                            out += b"\x00"
                    out += _string(p.error_message, flexible)
                if flexible:
                    out += b"\x00"
            if flexible:
                out += b"\x00"
        out += _ZERO_I32
        if flexible:
            out += b"\x00"
        return bytes(out)
