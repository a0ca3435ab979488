"""Record batches, message format v2 (magic 2), as stored on disk and sent over the wire.

Data batches are stored as produced (unless the topic's compression.type names another codec):
on the produce and fetch paths only the 61-byte header is parsed (and the CRC checked), unless a
topic config needs the records (compaction's keys, message.timestamp.before.max.ms).
Coordinator batches are built here (``build_batch``) and read back by a hand-written iterator
over uncompressed records (``iter_key_values``, ``iter_records``): replay reads millions of
them. Compressed batches, and the per-record timestamps ListOffsets looks at, are read through
kafka-python's ``DefaultRecordBatch``.

Layout of the 61-byte header::

    0  baseOffset int64       8  batchLength int32    12 partitionLeaderEpoch int32
    16 magic int8             17 crc uint32 (CRC32C of bytes 21..end)
    21 attributes int16       23 lastOffsetDelta int32 27 baseTimestamp int64
    35 maxTimestamp int64     43 producerId int64     51 producerEpoch int16
    53 baseSequence int32     57 recordsCount int32   61 records...
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import crc32c as _crc32c
from kafka.record.default_records import DefaultRecordBatch

from kcoord.protocol.native import codecs as _native

HEADER_SIZE: Final = 61
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength: the part not counted in batchLength
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
MAX_TIMESTAMP_OFFSET: Final = 35

ATTR_COMPRESSION_MASK: Final = 0x07
ATTR_TIMESTAMP_TYPE: Final = 0x08  # set: LogAppendTime
ATTR_TRANSACTIONAL: Final = 0x10
ATTR_CONTROL: Final = 0x20

NO_PRODUCER_ID: Final = -1
NO_SEQUENCE: Final = -1

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
# The C function itself, Final (compiled, no module lookups per batch); None: the Python body.
_batch_body_c: Final = _native.batch_body if _native is not None else None
_records_problem_c: Final = _native.records_problem if _native is not None else None
_I64: Final = struct.Struct(">q")
_I32: Final = struct.Struct(">i")
_U32: Final = struct.Struct(">I")
# The structs' bound methods and the CRC function as Finals: compiled, a call through one is a
# plain vectorcall, where ``_HEADER.pack`` looked the method up on every call and
# ``_crc32c.crc32c`` the module's attribute (a coordinator's append at depth 1 made nine such calls).
_pack_header: Final = _HEADER.pack
_unpack_header_from: Final = _HEADER.unpack_from
_pack_i64: Final = _I64.pack
_pack_i64_into: Final = _I64.pack_into
_pack_i32: Final = _I32.pack
_pack_i32_into: Final = _I32.pack_into
_pack_u32_into: Final = _U32.pack_into
_crc32c_of: Final = _crc32c.crc32c


class InvalidBatch(ValueError):
    """A batch that must be refused; ``corrupt`` picks CORRUPT_MESSAGE over INVALID_RECORD."""

    def __init__(self, message: str, corrupt: bool = True) -> None:
        super().__init__(message)
        self.corrupt = corrupt


@dataclass(slots=True, init=False)
class BatchHeader:
    position: int  # where the batch starts in the buffer it was read from
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    # One per batch written or read: written out, compiled, it is C; dataclass's generated
    # __init__ is Python.
    def __init__(
        self,
        position: int,
        base_offset: int,
        batch_length: int,
        partition_leader_epoch: int,
        magic: int,
        crc: int,
        attributes: int,
        last_offset_delta: int,
        base_timestamp: int,
        max_timestamp: int,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        records_count: int,
    ) -> None:
        self.position = position
        self.base_offset = base_offset
        self.batch_length = batch_length
        self.partition_leader_epoch = partition_leader_epoch
        self.magic = magic
        self.crc = crc
        self.attributes = attributes
        self.last_offset_delta = last_offset_delta
        self.base_timestamp = base_timestamp
        self.max_timestamp = max_timestamp
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.records_count = records_count

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    if len(buf) - pos < HEADER_SIZE:
        raise InvalidBatch(f"batch header needs {HEADER_SIZE} bytes, {len(buf) - pos} left")
    base, length, epoch, magic, crc, attributes, delta, base_ts, max_ts, pid, p_epoch, seq, count = (
        _unpack_header_from(buf, pos)
    )
    return BatchHeader(
        pos, base, length, epoch, magic, crc, attributes, delta, base_ts, max_ts, pid, p_epoch, seq, count
    )


def crc_of(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    crc: int = _crc32c_of(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])
    return crc


def iter_headers(buf: bytes | bytearray | memoryview, *, partial_ok: bool = False) -> Iterator[BatchHeader]:
    """Headers of the consecutive batches in ``buf``.

    With ``partial_ok`` a truncated final batch ends the iteration silently (log recovery and
    fetch responses cut at a size limit); otherwise it raises :class:`InvalidBatch`.
    """
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < HEADER_SIZE:
            if partial_ok:
                return
            raise InvalidBatch("trailing bytes shorter than a batch header")
        h = read_header(buf, pos)
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            raise InvalidBatch(f"batch length {h.batch_length} is shorter than a v2 header")
        if pos + h.size > end:
            if partial_ok:
                return
            raise InvalidBatch("batch runs past the end of the records")
        yield h
        pos += h.size


def validate_batch(buf: bytes | bytearray | memoryview, h: BatchHeader) -> None:
    """The checks Kafka's LogValidator makes of a v2 batch from a producer."""
    if h.magic != 2:
        raise InvalidBatch(
            f"message format v{h.magic} is not supported (Kafka 4 accepts v2 only)", corrupt=False
        )
    if crc_of(buf, h.position, h.size) != h.crc:
        raise InvalidBatch("CRC32C mismatch")
    if h.records_count <= 0 or h.last_offset_delta != h.records_count - 1:
        raise InvalidBatch(
            f"{h.records_count} records but lastOffsetDelta {h.last_offset_delta}", corrupt=False
        )
    if h.is_control:
        raise InvalidBatch("Clients are not allowed to write control records", corrupt=False)


def assign_offset(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int = 0) -> None:
    """Stamp the broker-assigned base offset and leader epoch (neither is covered by the CRC)."""
    _pack_i64_into(buf, pos, base_offset)
    _pack_i32_into(buf, pos + 12, leader_epoch)


def stamped_start(buf: bytes | memoryview, pos: int, base_offset: int, leader_epoch: int = 0) -> bytes:
    """The first 16 bytes of the batch at ``pos`` as ``assign_offset`` would leave them: for a
    batch written from bytes that cannot be stamped in place, ahead of the rest of it."""
    return _pack_i64(base_offset) + bytes(buf[pos + 8 : pos + 12]) + _pack_i32(leader_epoch)


STAMPED_BYTES: Final = 16  # what assign_offset writes: base offset, batch length, leader epoch


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp: int) -> None:
    """Make a batch LogAppendTime: its max timestamp becomes the append time (CRC redone)."""
    (attrs,) = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attrs | ATTR_TIMESTAMP_TYPE)
    _pack_i64_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp)
    _pack_u32_into(buf, pos + CRC_OFFSET, crc_of(buf, pos, size))


def decoded_records(batch: bytes | memoryview) -> list[Any]:
    """The batch's records, decoded by kafka-python (and its codecs), or InvalidBatch for bytes
    that do not decode into records: an unknown compression type, a payload that does not
    decompress, or a stored batch whose body changed on disk since recovery checked its header.
    Each fails in its own way (kafka-python's CorruptRecordError, ZstdError, lz4's RuntimeError,
    gzip's BadGzipFile, an OSError, struct and index errors), and none may leave a read as
    anything but a corrupt batch: inside a coordinator operation it would stop the broker."""
    try:
        return list(DefaultRecordBatch(bytes(batch)))
    except Exception as e:
        raise InvalidBatch(f"records do not decode: {type(e).__name__}: {e}") from e


def first_offset_at_or_after(
    batch: bytes | memoryview, h: BatchHeader, timestamp: int, min_offset: int = 0
) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of the batch with timestamp >= ``timestamp`` and
    offset >= ``min_offset`` (the log start offset, which may fall inside a batch)."""
    if h.last_offset < min_offset:
        return None
    if h.attributes & ATTR_TIMESTAMP_TYPE:
        # LogAppendTime: every record carries the batch's max timestamp.
        if h.max_timestamp < timestamp:
            return None
        return max(h.base_offset, min_offset), h.max_timestamp
    if h.max_timestamp < timestamp:
        return None
    for record in decoded_records(batch):
        if record.timestamp >= timestamp and record.offset >= min_offset:
            return record.offset, record.timestamp
    return None


def max_timestamp_offset(batch: bytes | memoryview, h: BatchHeader) -> int:
    """Offset of the record holding the batch's max timestamp (the first one, as Kafka picks)."""
    if h.attributes & ATTR_TIMESTAMP_TYPE:
        return h.base_offset
    for record in decoded_records(batch):
        if record.timestamp == h.max_timestamp:
            offset: int = record.offset
            return offset
    return h.last_offset


# --- building and iterating uncompressed batches (coordinator logs) ---------------------------
def _zigzag_varint(value: int, out: bytearray) -> None:
    v = (value << 1) ^ (value >> 63)
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _varint_bytes(n: int) -> bytes:
    out = bytearray()
    _zigzag_varint(n, out)
    return bytes(out)


# Zigzag varints of the small non-negative numbers a coordinator batch is made of (offset deltas,
# key and value lengths, record sizes), encoded once: building a batch is on every commit's path.
_SMALL_VARINTS = tuple(_varint_bytes(n) for n in range(4096))


def batch_body_python(entries: Sequence[tuple[bytes | None, bytes | None]]) -> bytes:
    """The records of :func:`build_batch`: all share its timestamp (delta 0) and their offset
    delta is their index, so each is joined from pre-encoded varints instead of encoded field by
    field."""
    small = _SMALL_VARINTS
    limit = len(small)
    parts: list[bytes] = []
    append = parts.append
    for i, (key, value) in enumerate(entries):
        # a null key or value is length -1: zigzag 1
        klen = b"\x01" if key is None else small[len(key)] if len(key) < limit else _varint_bytes(len(key))
        if value is None:
            vlen = b"\x01"
        else:
            vlen = small[len(value)] if len(value) < limit else _varint_bytes(len(value))
        rec = b"".join(
            (
                b"\x00\x00",  # attributes, timestamp delta
                small[i] if i < limit else _varint_bytes(i),
                klen,
                key or b"",
                vlen,
                value or b"",
                b"\x00",  # no headers
            )
        )
        n = len(rec)
        append(small[n] if n < limit else _varint_bytes(n))
        append(rec)
    return b"".join(parts)


def build_batch(
    entries: Sequence[tuple[bytes | None, bytes | None]],
    timestamp: int,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    attributes: int = 0,
) -> bytearray:
    """An uncompressed v2 batch of (key, value) records at consecutive offsets, all stamped
    ``timestamp`` (what the coordinators append); the same bytes as :func:`build_batch_at`.
    A transactional batch (``attributes`` ATTR_TRANSACTIONAL, with its producer) has no sequence
    numbers, as Kafka's coordinators write theirs."""
    batch = bytearray()
    append_batch(batch, entries, timestamp, base_offset, producer_id, producer_epoch, attributes)
    return batch


def append_batch(
    data: bytearray,
    entries: Sequence[tuple[bytes | None, bytes | None]],
    timestamp: int,
    base_offset: int = 0,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    attributes: int = 0,
) -> BatchHeader:
    """Append :func:`build_batch`'s batch to ``data``; its header, as :func:`read_header` would
    read it there (a coordinator's append: no batch of its own to copy, no header to parse)."""
    start = len(data)
    body = _batch_body_c(entries) if _batch_body_c is not None else batch_body_python(entries)
    count = len(entries)
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    data += _pack_header(
        base_offset,
        length,
        -1,
        2,
        0,
        attributes,
        count - 1,
        timestamp,
        timestamp,
        producer_id,
        producer_epoch,
        NO_SEQUENCE,
        count,
    )
    data += body
    crc: int = _crc32c_of(memoryview(data)[start + ATTRIBUTES_OFFSET :])
    _pack_u32_into(data, start + CRC_OFFSET, crc)
    return BatchHeader(
        start,
        base_offset,
        length,
        -1,
        2,
        crc,
        attributes,
        count - 1,
        timestamp,
        timestamp,
        producer_id,
        producer_epoch,
        NO_SEQUENCE,
        count,
    )


# Kafka's EndTransactionMarker: the one record of a control batch. Key: int16 version 0, int16
# ControlRecordType (ABORT 0, COMMIT 1); value: int16 version 0, int32 coordinator epoch.
CONTROL_ABORT: Final = 0
CONTROL_COMMIT: Final = 1
_CONTROL_KEY: Final = struct.Struct(">hh")
_MARKER_VALUE: Final = struct.Struct(">hi")


def build_marker_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp: int
) -> bytearray:
    """A COMMIT or ABORT control batch ending ``producer_id``'s transaction in a partition."""
    batch = bytearray()
    append_marker_batch(batch, producer_id, producer_epoch, commit, coordinator_epoch, timestamp)
    return batch


def append_marker_batch(
    data: bytearray,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp: int,
) -> BatchHeader:
    """Append :func:`build_marker_batch`'s batch to ``data``; its header (see append_batch)."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    return append_batch(
        data,
        [(key, value)],
        timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        attributes=ATTR_TRANSACTIONAL | ATTR_CONTROL,
    )


def read_marker(batch: bytes | bytearray, h: BatchHeader) -> tuple[bool, int]:
    """(commit, coordinator epoch) of a control batch's end-transaction marker.

    Raises InvalidBatch for a control record that is not one (Kafka's other control types, e.g.
    KRaft's, never appear in a coordinator or data partition of this broker).
    """
    for _offset, key, value in iter_key_values(batch, h):
        if key is None or len(key) < _CONTROL_KEY.size:
            raise InvalidBatch("control record without a valid key")
        _version, kind = _CONTROL_KEY.unpack_from(key)
        if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
            raise InvalidBatch(f"control record of type {kind} is not a transaction marker")
        epoch = _MARKER_VALUE.unpack_from(value)[1] if value is not None and len(value) >= 6 else -1
        return kind == CONTROL_COMMIT, epoch
    raise InvalidBatch("control batch without records")


def build_batch_at(
    entries: Sequence[tuple[int, int, bytes | None, bytes | None]],
    *,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = NO_SEQUENCE,
    attributes: int = 0,
) -> bytearray:
    """An uncompressed v2 batch of (offset, timestamp, key, value) records whose offsets increase
    but may have gaps (the cleaner's output keeps every record's offset and timestamp, and the
    producer fields of the batch it came from)."""
    base_offset, base_ts = entries[0][0], min(e[1] for e in entries)
    body = bytearray()
    rec = bytearray()
    for offset, ts, key, value in entries:
        rec.clear()
        rec.append(0)  # attributes
        _zigzag_varint(ts - base_ts, rec)
        _zigzag_varint(offset - base_offset, rec)
        if key is None:
            rec.append(1)  # -1
        else:
            _zigzag_varint(len(key), rec)
            rec += key
        if value is None:
            rec.append(1)
        else:
            _zigzag_varint(len(value), rec)
            rec += value
        rec.append(0)  # no headers
        _zigzag_varint(len(rec), body)
        body += rec
    header = _pack_header(
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(body),
        -1,
        2,
        0,
        attributes,
        entries[-1][0] - base_offset,
        base_ts,
        max(e[1] for e in entries),
        producer_id,
        producer_epoch,
        base_sequence,
        len(entries),
    )
    batch = bytearray(header) + body
    _pack_u32_into(batch, CRC_OFFSET, _crc32c_of(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return batch


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


# The smallest record: its length, attributes, timestamp and offset deltas, key and value lengths
# and header count, one byte each.
MIN_RECORD_SIZE: Final = 7

RUNS_PAST: Final = "a record runs past the end of its batch"
_INT_MASK: Final = (1 << 32) - 1
_LONG_MASK: Final = (1 << 64) - 1


def bounded_varint(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint of at most ``max_bytes`` bytes that ends by ``end`` (InvalidBatch else): a
    varint (5 bytes) cut to 32 bits and a varlong (10) to 64, as Kafka's ByteUtils reads them into
    an int or a long. A record Kafka's DefaultRecord.readFrom cannot read is InvalidRecordException
    there, INVALID_RECORD to a producer (corrupt=False); CORRUPT_MESSAGE would have the Java client
    retry the batch until its delivery timeout."""
    result = 0
    for i in range(max_bytes):
        if pos >= end:
            break
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            result &= _INT_MASK if max_bytes == 5 else _LONG_MASK
            return (result >> 1) ^ -(result & 1), pos
    raise InvalidBatch(RUNS_PAST, corrupt=False)


def as_long(value: int) -> int:
    """``value`` as a Java long holds it: a sum past 64 bits wraps, as Kafka's does."""
    return ((value + (1 << 63)) & _LONG_MASK) - (1 << 63)


def records_problem(data: bytes | bytearray | memoryview, h: BatchHeader) -> str | None:
    """What Kafka's DefaultRecord.readFrom would refuse in the uncompressed batch ``h`` of
    ``data`` (Kafka's LogValidator reads every record a producer sends), or None. In C when the
    module is built: 1.1 us per 100-record batch."""
    start, end = h.position + HEADER_SIZE, h.position + h.size
    if _records_problem_c is not None:
        return _records_problem_c(data, start, end, h.records_count)
    return records_problem_python(bytes(data[start:end]), h.records_count)


def records_problem_python(body: bytes, count: int) -> str | None:
    """``records_problem``'s walk over a batch's records, in Python (the C module mirrors it):
    every field within its record's length, key and value lengths of -1 (any negative) null, a
    header count the record can hold, header keys not null, the records filling the batch."""
    structure = "Found invalid record structure"
    pos = 0
    n = len(body)
    try:
        for _ in range(count):
            length, pos = bounded_varint(body, pos, n, 5)
            if length < 0 or length > n - pos:
                return "Invalid record size: the record runs past its batch"
            end = pos + length
            if pos >= end:
                return structure
            pos += 1
            _ts, pos = bounded_varint(body, pos, end, 10)
            _off, pos = bounded_varint(body, pos, end, 5)
            for _field in range(2):
                size, pos = bounded_varint(body, pos, end, 5)
                if size > end - pos:
                    return structure
                pos += max(size, 0)
            headers, pos = bounded_varint(body, pos, end, 5)
            if headers < 0 or headers > (end - pos) // 2:
                return "Found invalid number of record headers"
            for _header in range(headers):
                size, pos = bounded_varint(body, pos, end, 5)
                if size < 0:
                    return "Invalid negative header key size"
                if size > end - pos:
                    return structure
                pos += size
                size, pos = bounded_varint(body, pos, end, 5)
                if size > end - pos:
                    return structure
                pos += max(size, 0)
            if pos != end:
                return "Invalid record size: the record's fields do not fill its length"
    except InvalidBatch:
        return structure
    if pos != n:
        return "Incorrect declared batch size, records still remaining in file"
    return None


def check_records_count(h: BatchHeader, records_bytes: int) -> None:
    """InvalidBatch unless ``records_bytes`` of records can hold the batch's record count: a
    CRC-valid header claiming millions of records in a few bytes would otherwise keep a reader
    going round the same bytes for as many (a CRC covers what was written, not that it is sound)."""
    if h.records_count < 0 or h.records_count * MIN_RECORD_SIZE > records_bytes:
        # INVALID_RECORD to a producer, as Kafka's record iterator's "invalid record structure".
        raise InvalidBatch(f"{h.records_count} records cannot fit in {records_bytes} bytes", corrupt=False)


def iter_key_values(
    data: bytes | bytearray, h: BatchHeader
) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of a batch that starts at byte 0: iter_records for
    replay, which reads millions of records and needs no timestamps. Coordinator records have
    small lengths and deltas, so one-byte varints are decoded inline."""
    # Keys and values are bytes: a batch just built (a bytearray) is read from a copy.
    batch = data if isinstance(data, bytes) else bytes(data)
    if h.compression:
        for r in decoded_records(batch):
            yield r.offset, r.key, r.value
        return
    check_records_count(h, h.size - HEADER_SIZE)
    pos = HEADER_SIZE
    base = h.base_offset
    rv = _read_varint
    for _ in range(h.records_count):
        b = batch[pos]
        if b < 0x80:
            length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            length, pos = rv(batch, pos)
        end = pos + length
        pos += 1  # attributes
        if batch[pos] < 0x80:  # timestamp delta, not needed
            pos += 1
        else:
            _, pos = rv(batch, pos)
        b = batch[pos]
        if b < 0x80:
            off_delta = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            off_delta, pos = rv(batch, pos)
        b = batch[pos]
        if b < 0x80:
            klen = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            klen, pos = rv(batch, pos)
        if klen < 0:
            key = None
        else:
            key = bytes(batch[pos : pos + klen])
            pos += klen
        b = batch[pos]
        if b < 0x80:
            vlen = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            vlen, pos = rv(batch, pos)
        value = None if vlen < 0 else bytes(batch[pos : pos + vlen])
        pos = end  # headers are not used by coordinator records
        yield base + off_delta, key, value


def iter_records(batch: bytes, h: BatchHeader) -> Iterator[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record of a batch that starts at byte 0."""
    if h.compression:
        for r in decoded_records(batch):
            yield r.offset, r.timestamp, r.key, r.value
        return
    check_records_count(h, h.size - HEADER_SIZE)
    pos = HEADER_SIZE
    base, base_ts = h.base_offset, h.base_timestamp
    rv = _read_varint
    for _ in range(h.records_count):
        length, pos = rv(batch, pos)
        end = pos + length
        pos += 1  # attributes
        ts_delta, pos = rv(batch, pos)
        off_delta, pos = rv(batch, pos)
        klen, pos = rv(batch, pos)
        if klen < 0:
            key = None
        else:
            key = bytes(batch[pos : pos + klen])
            pos += klen
        vlen, pos = rv(batch, pos)
        value = None if vlen < 0 else bytes(batch[pos : pos + vlen])
        pos = end  # headers are not used by coordinator records
        yield base + off_delta, base_ts + ts_delta, key, value


# --- transaction markers (Kafka's EndTransactionMarker and ControlRecordType) ----------------------


def build_end_txn_marker(
    producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, timestamp: int
) -> bytearray:
    """A COMMIT or ABORT control batch, as the transaction coordinator's WriteTxnMarkers has a
    partition leader append it: transactional and control, one record, no sequence."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _MARKER_VALUE.pack(0, coordinator_epoch)
    batch = build_batch([(key, value)], timestamp)
    struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, ATTR_TRANSACTIONAL | ATTR_CONTROL)
    _pack_i64_into(batch, 43, producer_id)
    struct.pack_into(">h", batch, 51, producer_epoch)
    _pack_u32_into(batch, CRC_OFFSET, _crc32c_of(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return batch


def read_end_txn_marker(batch: bytes | bytearray, h: BatchHeader) -> tuple[bool, int] | None:
    """(commit, coordinator epoch) of a control batch holding a transaction marker; None for an
    empty control batch or another control type (Kafka's LEADER_CHANGE and KRaft records)."""
    for _offset, key, value in iter_key_values(batch, h):
        if key is None or len(key) < _CONTROL_KEY.size:
            return None
        _version, kind = _CONTROL_KEY.unpack_from(key)
        if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
            return None
        if value is None or len(value) < _MARKER_VALUE.size:
            raise InvalidBatch(f"end transaction marker value of {len(value or b'')} bytes, needs 6")
        version, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
        if version < 0:
            raise InvalidBatch(f"end transaction marker version {version}")
        return kind == CONTROL_COMMIT, coordinator_epoch
    return None
