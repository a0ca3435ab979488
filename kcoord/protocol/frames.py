"""Frames and headers: the bytes around every request and response.

A frame is an int32 size followed by that many bytes. A request starts with the request
header (v1: api_key, api_version, correlation_id, client_id; v2 adds tagged fields when the
API version is flexible). A response starts with the correlation id (header v0), plus empty
tagged fields (header v1) for flexible versions, except ApiVersions which always uses v0 so
that a client can read the answer before it knows which versions the broker speaks.

Requests are read from ``bytes``: compiled, indexing and slicing ``bytes`` are C operations,
where a memoryview's are Python calls (a string read cost four times as much).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

_SIZE_CORR: Final = struct.Struct(">ii")  # frame size, correlation id


class MalformedRequest(ValueError):
    """The bytes cannot be a Kafka request; the connection is closed."""


@dataclass(slots=True, init=False)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the header's fixed part and client id end

    # One per request: written out, compiled, it is C; dataclass's generated __init__ is Python.
    def __init__(
        self, api_key: int, api_version: int, correlation_id: int, client_id: str | None, body_offset: int
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        self.body_offset = body_offset


def response_head(body_size: int, correlation_id: int, tagged: bool) -> bytes:
    """What precedes a response body of ``body_size`` bytes: the frame size, the correlation id
    and, when ``tagged`` (response header v1), empty tagged fields."""
    if tagged:
        return _SIZE_CORR.pack(body_size + 5, correlation_id) + b"\x00"
    return _SIZE_CORR.pack(body_size + 4, correlation_id)


def response_frame(body: bytes | bytearray, correlation_id: int, tagged: bool) -> bytes:
    """A response's frame: its head (:func:`response_head`), then ``body``."""
    return response_head(len(body), correlation_id, tagged) + body


def int16_at(buf: bytes, pos: int) -> int:
    """A big-endian int16 at ``pos``. Byte arithmetic, not struct: compiled, indexing ``bytes``
    is a C array read, where ``Struct.unpack_from`` is a Python call and a tuple."""
    v = buf[pos] << 8 | buf[pos + 1]
    return v - 0x10000 if v & 0x8000 else v


def int32_at(buf: bytes, pos: int) -> int:
    """A big-endian int32 at ``pos`` (see :func:`int16_at`)."""
    v = buf[pos] << 24 | buf[pos + 1] << 16 | buf[pos + 2] << 8 | buf[pos + 3]
    return v - 0x100000000 if v & 0x80000000 else v


def int64_at(buf: bytes, pos: int) -> int:
    """A big-endian int64 at ``pos`` (see :func:`int16_at`)."""
    return int32_at(buf, pos) << 32 | (
        buf[pos + 4] << 24 | buf[pos + 5] << 16 | buf[pos + 6] << 8 | buf[pos + 7]
    )


def parse_request_header(buf: bytes) -> RequestHeader:
    """Parse the part of the header that every header version shares.

    Tagged fields (header v2) are skipped separately by :func:`skip_tagged_fields` once the
    caller knows whether the API version is flexible.
    """
    if len(buf) < 10:
        raise MalformedRequest(f"request of {len(buf)} bytes is shorter than a request header")
    n = int16_at(buf, 8)
    pos = 10
    if n < 0:
        client_id = None
    else:
        if pos + n > len(buf):
            raise MalformedRequest("client_id runs past the end of the request")
        try:
            client_id = buf[pos : pos + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise MalformedRequest("client_id is not UTF-8") from e
        pos += n
    return RequestHeader(int16_at(buf, 0), int16_at(buf, 2), int32_at(buf, 4), client_id, pos)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedRequest("varint runs past the end of the request")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint longer than 5 bytes")


def skip_tagged_fields(buf: bytes, pos: int) -> int:
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedRequest("tagged field runs past the end of the request")
    return pos
