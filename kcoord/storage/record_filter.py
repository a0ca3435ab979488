"""Rewriting one v2 batch with some of its records: Kafka's MemoryRecords.filterTo.

The cleaner decides which records of a batch survive; this module reads a batch's records
(decompressing them with the batch's codec) and builds the batch that holds the survivors, as
Kafka's cleaner does:

- the base offset and the last offset delta of the original batch are kept, so that the
  producer's last sequence number (base sequence + last offset delta) survives compaction and
  an idempotent producer never sees OUT_OF_ORDER_SEQUENCE afterwards; every retained record
  keeps its offset delta, so consumers see the same offsets;
- records are copied as bytes (attributes, key, value, headers untouched); only their timestamp
  delta is re-encoded when the batch's base timestamp becomes a delete horizon (KIP-534: the
  ``0x40`` attribute, the base timestamp holding the time after which the batch's tombstones
  and markers may go), so every record keeps its timestamp;
- the producer id, epoch, base sequence, transactional and control flags and timestamp type are
  kept; the records are recompressed with the batch's codec; the CRC is computed afresh;
- a batch whose records are all gone may be kept as an empty header (no records) when it is its
  producer's last batch, so that its sequence numbers survive (Kafka's RETAIN_EMPTY).
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator, Sequence
from typing import Final

import crc32c as _crc32c
import lz4.frame
import zstandard
from kafka.codec import (
    gzip_decode,
    gzip_encode,
    lz4_decode,
    lz4_encode,
    snappy_decode,
    snappy_encode,
    zstd_decode,
    zstd_encode,
)

from kcoord.protocol import records
from kcoord.protocol.native import codecs as _native
from kcoord.protocol.records import ATTR_TIMESTAMP_TYPE, HEADER_SIZE, LOG_OVERHEAD, BatchHeader

ATTR_DELETE_HORIZON: Final = 0x40  # Kafka's DELETE_HORIZON_FLAG_MASK: the base timestamp is a horizon

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_U32: Final = struct.Struct(">I")

GZIP: Final = 1
SNAPPY: Final = 2
LZ4: Final = 3
ZSTD: Final = 4


class RawRecord:
    """One record of a decoded batch: its offset and timestamp, its key, whether it is a
    tombstone, and where its bytes lie in the batch's uncompressed records (``start`` at its
    attributes, ``after_ts`` just after its timestamp delta, ``end`` after its headers).

    A plain class with its __init__ written out: one is made per record a cleaning pass reads,
    and compiled, its fields are C struct fields (a NamedTuple's are Python properties)."""

    __slots__ = ("after_ts", "end", "key", "offset", "start", "timestamp", "tombstone")

    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        tombstone: bool,
        start: int,
        after_ts: int,
        end: int,
    ) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.key = key
        self.tombstone = tombstone
        self.start = start
        self.after_ts = after_ts
        self.end = end


def delete_horizon(h: BatchHeader) -> int | None:
    """The batch's delete horizon (KIP-534), if a cleaner set one."""
    return h.base_timestamp if h.attributes & ATTR_DELETE_HORIZON else None


def records_body(batch: bytes | memoryview, h: BatchHeader) -> bytes:
    """The batch's records, uncompressed; :class:`records.InvalidBatch` when they do not
    decompress (the codecs raise errors of their own)."""
    data = bytes(memoryview(batch)[HEADER_SIZE : h.size])
    codec = h.compression
    if codec == 0:
        return data
    try:
        return _decompress(codec, data)
    except records.InvalidBatch:
        raise
    except Exception as e:
        raise records.InvalidBatch(f"cannot decompress the batch's records: {e!r}", corrupt=True) from None


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        return bytes(gzip_decode(data))
    if codec == SNAPPY:
        return bytes(snappy_decode(data))
    if codec == LZ4:
        return bytes(lz4_decode(data))
    if codec == ZSTD:
        return bytes(zstd_decode(data))
    raise records.InvalidBatch(f"unknown compression codec {codec}")


def compress(codec: int, body: bytes, level: int | None = None) -> bytes:
    """``body`` compressed with ``codec`` (Kafka's attribute ids), at ``level`` if given (the
    topic's compression.*.level; None: the library default kafka-python's producer uses)."""
    if codec == 0:
        return body
    if codec == GZIP:
        if level is None:
            return bytes(gzip_encode(body))
        return gzip.compress(body, compresslevel=level, mtime=0)
    if codec == SNAPPY:
        return bytes(snappy_encode(body))
    if codec == LZ4:
        if level is None:
            return bytes(lz4_encode(body))
        # Kafka reads only independent blocks, as kafka-python's lz4_encode writes them.
        return bytes(lz4.frame.compress(body, compression_level=level, block_linked=False))
    if codec == ZSTD:
        if level is None:
            return bytes(zstd_encode(body))
        return bytes(zstandard.ZstdCompressor(level=level).compress(body))
    raise records.InvalidBatch(f"unknown compression codec {codec}")


def _zigzag(value: int) -> bytes:
    out = bytearray()
    v = (value << 1) ^ (value >> 63)
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def iter_raw(body: bytes, h: BatchHeader) -> Iterator[RawRecord]:
    """Every record of a batch, from its uncompressed records; :class:`records.InvalidBatch` for
    records that run past the batch or their own length, or a varint longer than Kafka reads (a
    CRC covers what a producer sent, not that it is sound). The key scan's limits
    (``keys_start_with_python``), so that the cleaner's full pass and its scan agree on what is
    corrupt."""
    records.check_records_count(h, len(body))
    pos = 0
    n = len(body)
    base, base_ts = h.base_offset, h.base_timestamp
    append_time = h.max_timestamp if h.attributes & ATTR_TIMESTAMP_TYPE else None
    for _ in range(h.records_count):
        length, pos = records.bounded_varint(body, pos, n, 5)
        if length < 0 or length > n - pos:
            raise records.InvalidBatch(_RUNS_PAST, corrupt=False)
        start = pos
        end = pos + length
        if pos >= end:  # no room for the attributes
            raise records.InvalidBatch(_RUNS_PAST, corrupt=False)
        pos += 1
        ts_delta, pos = records.bounded_varint(body, pos, end, 10)
        after_ts = pos
        off_delta, pos = records.bounded_varint(body, pos, end, 5)
        klen, pos = records.bounded_varint(body, pos, end, 5)
        if klen > end - pos:
            raise records.InvalidBatch(_RUNS_PAST, corrupt=False)
        key = None if klen < 0 else body[pos : pos + klen]
        pos += max(klen, 0)
        vlen, pos = records.bounded_varint(body, pos, end, 5)
        if vlen > end - pos:
            raise records.InvalidBatch(_RUNS_PAST, corrupt=False)
        # A long's sum, as Kafka's (it wraps), so that a rebuilt batch can hold it.
        ts = append_time if append_time is not None else records.as_long(base_ts + ts_delta)
        yield RawRecord(base + off_delta, ts, key, vlen < 0, start, after_ts, end)
        pos = end


def keys_start_with(body: bytes, h: BatchHeader, prefixes: tuple[bytes, ...]) -> bool:
    """Whether every record of a batch (its uncompressed records) has a key starting with one of
    ``prefixes``: the cleaner's check that a log gained only history. In C when the module is
    built (``_native_codecs.c``): it runs without the GIL, where this loop held it from the event
    loop for 0.2-0.9 s per pass over 1.7 M offset commits."""
    records.check_records_count(h, len(body))
    if _native is not None and type(body) is bytes:
        try:
            return _native.keys_start_with(body, h.records_count, prefixes)
        except ValueError:
            raise records.InvalidBatch(_RUNS_PAST, corrupt=False) from None
    return keys_start_with_python(body, h.records_count, prefixes)


_RUNS_PAST: Final = records.RUNS_PAST  # InvalidRecordException in Kafka (records.bounded_varint)


def keys_start_with_python(body: bytes, count: int, prefixes: tuple[bytes, ...]) -> bool:
    """``keys_start_with``'s loop, in Python (the C module mirrors it): a null key is not history;
    a record whose length, fields or key run past the body or its own end is InvalidBatch, as is
    a varint longer than Kafka's ByteUtils reads (5 bytes, 10 for the timestamp delta)."""
    pos = 0
    n = len(body)
    for _ in range(count):
        length, pos = records.bounded_varint(body, pos, n, 5)
        if length < 0 or length > n - pos:
            raise records.InvalidBatch(_RUNS_PAST, corrupt=False)
        end = pos + length
        if pos >= end:  # no room for the attributes
            raise records.InvalidBatch(_RUNS_PAST, corrupt=False)
        pos += 1
        _ts_delta, pos = records.bounded_varint(body, pos, end, 10)
        _off_delta, pos = records.bounded_varint(body, pos, end, 5)
        klen, pos = records.bounded_varint(body, pos, end, 5)
        if klen < 0:
            return False
        if klen > end - pos:
            raise records.InvalidBatch(_RUNS_PAST, corrupt=False)
        if not body.startswith(prefixes, pos, pos + klen):
            return False
        pos = end
    return True


def rebuild(h: BatchHeader, body: bytes, kept: Sequence[RawRecord], horizon: int | None = None) -> bytearray:
    """The batch ``h`` holding only ``kept`` (records of ``body``, in order), with ``horizon``
    as its delete horizon if given (else the batch's own, if it has one). With nothing kept it
    is the empty batch Kafka keeps for a producer's last batch."""
    attributes = h.attributes
    if horizon is None:
        horizon = delete_horizon(h)
    if not kept:
        # Kafka's writeEmptyHeader: no records, no compression, both timestamps the batch's max.
        attributes &= ~(records.ATTR_COMPRESSION_MASK | ATTR_DELETE_HORIZON)
        return _finish(h, attributes, h.max_timestamp, h.max_timestamp, b"", 0)
    append_time = bool(attributes & ATTR_TIMESTAMP_TYPE)
    if horizon is not None:
        attributes |= ATTR_DELETE_HORIZON
        base_ts = horizon
    else:
        base_ts = h.base_timestamp
    parts: list[bytes] = []
    for r in kept:
        if base_ts == h.base_timestamp:
            rec = body[r.start : r.end]
        else:
            rec = b"".join(
                (
                    body[r.start : r.start + 1],
                    _zigzag((h.max_timestamp if append_time else r.timestamp) - base_ts),
                    body[r.after_ts : r.end],
                )
            )
        parts.append(_zigzag(len(rec)))
        parts.append(rec)
    max_ts = h.max_timestamp if append_time else max(r.timestamp for r in kept)
    payload = compress(h.compression, b"".join(parts))
    return _finish(h, attributes, base_ts, max_ts, payload, len(kept))


def recompress(batch: bytes | memoryview, h: BatchHeader, codec: int, level: int | None = None) -> bytearray:
    """The batch ``h`` (``batch`` holds just it) with its records compressed by ``codec``: what
    Kafka's LogValidator stores when the topic's compression.type differs from the producer's.

    Records are copied as bytes, so every record keeps its offset delta, timestamp, key, value
    and headers; the producer id, epoch, base sequence, leader epoch, transactional flag and
    timestamp type are kept (an idempotent producer's duplicates are still recognised); only the
    codec bits, the length and the CRC change."""
    body = records_body(batch, h)
    attributes = (h.attributes & ~records.ATTR_COMPRESSION_MASK) | codec
    payload = compress(codec, body, level)
    return _finish(h, attributes, h.base_timestamp, h.max_timestamp, payload, h.records_count)


def _finish(
    h: BatchHeader, attributes: int, base_ts: int, max_ts: int, payload: bytes, count: int
) -> bytearray:
    header = _HEADER.pack(
        h.base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        h.partition_leader_epoch,
        2,
        0,
        attributes,
        h.last_offset_delta,
        base_ts,
        max_ts,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        count,
    )
    batch = bytearray(header)
    batch += payload
    _U32.pack_into(batch, records.CRC_OFFSET, _crc32c.crc32c(memoryview(batch)[records.ATTRIBUTES_OFFSET :]))
    return batch
