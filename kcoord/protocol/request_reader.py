"""Kafka's field types read at a position of a request body, for the hand-written decoders.

Each reader takes the frame (``bytes``, see ``frames``) and a position and returns the value and
the position after it. Lengths that run past the body, and negative lengths other than null's -1,
raise :class:`MalformedRequest`; a fixed-size field past the end raises ``IndexError`` or
``struct.error``, which the dispatcher turns into a closed connection like any other decoding
failure.
"""

from __future__ import annotations

import uuid
from typing import Final

from kcoord.protocol.frames import MalformedRequest, int16_at, int32_at, read_uvarint, skip_tagged_fields

ZERO_UUID: Final = bytes(16)


def null_field(field: str) -> MalformedRequest:
    """A null where the schema allows none (the message of the dispatcher's null check)."""
    return MalformedRequest(f"non-nullable field {field} was serialized as null")


def compact_length(buf: bytes, pos: int) -> tuple[int, int]:
    """A compact string's, bytes' or array's length (-1: null); one byte in nearly every request."""
    n = buf[pos]
    if n & 0x80:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    return n - 1, pos + 1


def read_string(buf: bytes, pos: int, flexible: bool) -> tuple[str | None, int]:
    """A (nullable) string: None for null."""
    if flexible:
        n, pos = compact_length(buf, pos)
    else:
        n = int16_at(buf, pos)
        pos += 2
    if n < 0:
        if n < -1:
            raise MalformedRequest(f"string length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise MalformedRequest("string runs past the end of the request")
    return buf[pos:end].decode("utf-8"), end


def read_bytes(buf: bytes, pos: int, flexible: bool) -> tuple[memoryview | None, int]:
    """(Nullable) bytes or records, as a view of the frame (not copied): None for null."""
    if flexible:
        n, pos = compact_length(buf, pos)
    else:
        n = int32_at(buf, pos)
        pos += 4
    if n < 0:
        if n < -1:
            raise MalformedRequest(f"bytes length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise MalformedRequest("bytes run past the end of the request")
    return memoryview(buf)[pos:end], end


def read_array_length(buf: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's length, -1 for null."""
    if flexible:
        return compact_length(buf, pos)
    n = int32_at(buf, pos)
    if n < -1:
        raise MalformedRequest(f"array length {n}")
    return n, pos + 4


def skip_tags(buf: bytes, pos: int) -> int:
    """A flexible structure's tagged fields, none of which the hand-decoded requests define."""
    return pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)


def read_uuid(buf: bytes, pos: int) -> uuid.UUID | None:
    """A uuid; the zero uuid reads as None, as in kafka-python."""
    raw = buf[pos : pos + 16]
    if len(raw) < 16:
        raise MalformedRequest("uuid runs past the end of the request")
    return None if raw == ZERO_UUID else uuid.UUID(bytes=raw)
