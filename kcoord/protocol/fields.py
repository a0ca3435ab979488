"""Kafka's schema field types, read and written by hand for coordinator records and for the
hand-written codecs of the hottest answers.

Coordinator logs hold millions of small records, and replay decodes them one by one: a reader
over the record's bytes is several times faster than kafka-python's schema-driven classes. The
types are those of Kafka's message JSON schemas: int16/32/64, (nullable) strings and bytes,
arrays, and in flexible versions compact lengths and tagged fields.
"""

from __future__ import annotations

from kcoord.protocol.frames import int16_at, int32_at, int64_at


class RecordFormatError(ValueError):
    """Bytes that do not hold the record they claim to."""


# --- writing ------------------------------------------------------------------------------------
# int.to_bytes, not struct.pack or bytes((n,)): compiled, to_bytes is a C call that makes the
# bytes directly, where the others are Python calls (a fourth of the time per field).
def string(s: str) -> bytes:
    b = s.encode("utf-8")
    return len(b).to_bytes(2, "big", signed=True) + b


def nullable_string(s: str | None) -> bytes:
    return b"\xff\xff" if s is None else string(s)


def byte_array(b: bytes) -> bytes:
    return len(b).to_bytes(4, "big", signed=True) + b


def uvarint(n: int) -> bytes:
    if n < 0x80:
        return n.to_bytes(1, "big")
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def array_length(n: int | None, flexible: bool) -> bytes:
    """An array's length (None: a null array), compact in flexible versions."""
    if n is None:
        return b"\x00" if flexible else b"\xff\xff\xff\xff"
    return uvarint(n + 1) if flexible else n.to_bytes(4, "big", signed=True)


def any_string(s: str | None, flexible: bool) -> bytes:
    """A (nullable) string, compact in flexible versions."""
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    data = s.encode("utf-8")
    n = len(data)
    return (uvarint(n + 1) if flexible else n.to_bytes(2, "big", signed=True)) + data


# --- reading ------------------------------------------------------------------------------------
class FieldReader:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes, pos: int, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = pos
        self.flexible = flexible

    def _need(self, n: int) -> None:
        if self.pos + n > len(self.buf):
            raise RecordFormatError("record ends early")

    def i16(self) -> int:
        self._need(2)
        v = int16_at(self.buf, self.pos)
        self.pos += 2
        return v

    def i32(self) -> int:
        self._need(4)
        v = int32_at(self.buf, self.pos)
        self.pos += 4
        return v

    def i64(self) -> int:
        self._need(8)
        v = int64_at(self.buf, self.pos)
        self.pos += 8
        return v

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            self._need(1)
            b = self.buf[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise RecordFormatError("varint too long")

    def nstr(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            return None
        self._need(n)
        s = self.buf[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def str(self) -> str:
        s = self.nstr()
        if s is None:
            raise RecordFormatError("null where a string is required")
        return s

    def bytes(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return b""
        self._need(n)
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(b)

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        return max(n, 0)

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                size = self.uvarint()
                self._need(size)
                self.pos += size
