"""Kafka's field types read at a position of a request body, for the hand-written decoders.

Each reader takes the body (a memoryview) and a position and returns the value and the position
after it. Lengths that run past the body, and negative lengths other than null's -1, raise
:class:`MalformedRequest`; a fixed-size field past the end raises ``struct.error``, which the
dispatcher turns into a closed connection like any other decoding failure.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

from kcoord.protocol.frames import MalformedRequest, read_uvarint, skip_tagged_fields

_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_UUID: Final = struct.Struct(">16s")
ZERO_UUID = bytes(16)


def null_field(field: str) -> MalformedRequest:
    """A null where the schema allows none (the message of the dispatcher's null check)."""
    return MalformedRequest(f"non-nullable field {field} was serialized as null")


def compact_length(buf: memoryview, pos: int) -> tuple[int, int]:
    """A compact string's, bytes' or array's length (-1: null); one byte in nearly every request."""
    n = buf[pos]
    if n & 0x80:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    return n - 1, pos + 1


def read_string(buf: memoryview, pos: int, flexible: bool) -> tuple[str | None, int]:
    """A (nullable) string: None for null."""
    if flexible:
        n, pos = compact_length(buf, pos)
    else:
        (n,) = _I16.unpack_from(buf, pos)
        pos += 2
    if n < 0:
        if n < -1:
            raise MalformedRequest(f"string length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise MalformedRequest("string runs past the end of the request")
    return str(buf[pos:end], "utf-8"), end


def read_bytes(buf: memoryview, pos: int, flexible: bool) -> tuple[memoryview | None, int]:
    """(Nullable) bytes or records, as a view of the body: None for null."""
    if flexible:
        n, pos = compact_length(buf, pos)
    else:
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
    if n < 0:
        if n < -1:
            raise MalformedRequest(f"bytes length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise MalformedRequest("bytes run past the end of the request")
    return buf[pos:end], end


def read_array_length(buf: memoryview, pos: int, flexible: bool) -> tuple[int, int]:
    """An array's length, -1 for null."""
    if flexible:
        return compact_length(buf, pos)
    (n,) = _I32.unpack_from(buf, pos)
    if n < -1:
        raise MalformedRequest(f"array length {n}")
    return n, pos + 4


def skip_tags(buf: memoryview, pos: int) -> int:
    """A flexible structure's tagged fields, none of which the hand-decoded requests define."""
    return pos + 1 if buf[pos] == 0 else skip_tagged_fields(buf, pos)


def read_uuid(buf: memoryview, pos: int) -> uuid.UUID | None:
    """A uuid; the zero uuid reads as None, as in kafka-python."""
    (raw,) = _UUID.unpack_from(buf, pos)
    return None if raw == ZERO_UUID else uuid.UUID(bytes=raw)
