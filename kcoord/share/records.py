"""Share-partition state records (KIP-932 ``SHARE_CHECKPOINT`` / ``SHARE_DELTA``).

They live in the coordinator logs beside the group records and use the same
``__consumer_offsets`` layout: key = int16 record type + key fields, value = int16 version +
fields, a null value is a tombstone. Kafka uses types 0 to about 20 in ``__consumer_offsets``;
100 and 101 are kcoord's own. All integers are big-endian.

SHARE_CHECKPOINT (the whole durable state of one share-partition; one key per share-partition,
so compaction keeps only the newest)::

    key       int16   record type = 100
              string  group_id      (int16 byte length + UTF-8)
              uuid    topic_id      (16 bytes)
              int32   partition
    value v0  int16   version = 0
              int32   checkpoint_epoch  (1 for the first checkpoint, +1 for each later one)
              int64   start_offset      (SPSO)
              int64   end_offset        (SPEO as recorded: may be below the live SPEO, see below)
              int32   count
              count x state batch

SHARE_DELTA (the ranges one state change touched; every delta has its own key, so compaction
keeps them all until the next checkpoint's write tombstones them)::

    key       int16   record type = 101
              string  group_id
              uuid    topic_id
              int32   partition
              int32   checkpoint_epoch  (the checkpoint this delta applies on top of)
              int32   delta_seq         (1, 2, ... within a checkpoint epoch)
    value v0  int16   version = 0
              int32   checkpoint_epoch  (repeated from the key)
              int64   back_offset       (log offset of the previous state record of this
                                         share-partition, -1 if unknown; the writer fills it in)
              int32   count
              count x state batch

state batch (19 bytes)::

    int64  base_offset
    int64  last_offset   (inclusive)
    int8   state          0 Available, 2 Acknowledged, 4 Archived (Kafka's RecordState ids;
                          Acquired = 1 is transient and never written)
    int16  delivery_count

Offsets in [start_offset, end_offset) that no batch covers have not been delivered yet; an
Acquired record is written as Available with its delivery count minus one (the seed's
checkpoint example), so a restart redelivers it without counting the lost delivery.

Share group metadata (the group epoch, so that epochs never go back after a restart; members
are not persisted, they rejoin)::

    key       int16   record type = 102
              string  group_id
    value v0  int16   version = 0
              int32   group_epoch

``SHARE_RECORDS`` registers the three types with the runtime. Decoding raises
``ShareRecordFormatError`` (a ValueError) for anything malformed, including the transient
Acquired state in a state batch. ``back_offset`` is written as -1 by SharePartition; the share
groups of a shard fill it in once the log offset is known (store.py, ``link``).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kcoord.runtime.records import Encoder

SHARE_CHECKPOINT_TYPE = 100
SHARE_DELTA_TYPE = 101
SHARE_RECORD_TYPES = (SHARE_CHECKPOINT_TYPE, SHARE_DELTA_TYPE)
SHARE_GROUP_KEY_TYPE = 102
VALUE_VERSION = 0

STATE_AVAILABLE = 0
STATE_ACQUIRED = 1  # in memory only
STATE_ACKNOWLEDGED = 2
STATE_ARCHIVED = 4
WRITABLE_STATES = (STATE_AVAILABLE, STATE_ACKNOWLEDGED, STATE_ARCHIVED)

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_BATCH = struct.Struct(">qqbh")
_CKPT_HEAD = struct.Struct(">hiqqi")  # version, epoch, start, end, count
_DELTA_HEAD = struct.Struct(">hiqi")  # version, epoch, back_offset, count
_KEY_TAIL = struct.Struct(">i")
_DELTA_KEY_TAIL = struct.Struct(">iii")


class ShareRecordFormatError(ValueError):
    pass


# --- the records ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StateBatch:
    base_offset: int
    last_offset: int
    state: int  # STATE_AVAILABLE / STATE_ACKNOWLEDGED / STATE_ARCHIVED
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareCheckpointKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True, slots=True)
class ShareCheckpointValue:
    checkpoint_epoch: int
    start_offset: int
    end_offset: int
    batches: tuple[StateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareDeltaKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int
    checkpoint_epoch: int
    delta_seq: int


@dataclass(frozen=True, slots=True)
class ShareDeltaValue:
    checkpoint_epoch: int
    back_offset: int
    batches: tuple[StateBatch, ...] = ()


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupValue:
    group_epoch: int


ShareKey = ShareCheckpointKey | ShareDeltaKey
ShareValue = ShareCheckpointValue | ShareDeltaValue
ShareRecord = tuple[ShareKey, ShareValue | None]


# --- writing ----------------------------------------------------------------------------------
def _key_prefix(kind: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    g = group_id.encode()
    return _H.pack(kind) + _H.pack(len(g)) + g + topic_id.bytes + _KEY_TAIL.pack(partition)


def _batches(batches: tuple[StateBatch, ...]) -> bytes:
    return b"".join(_BATCH.pack(b.base_offset, b.last_offset, b.state, b.delivery_count) for b in batches)


def encode_key(key: ShareKey) -> bytes:
    if isinstance(key, ShareCheckpointKey):
        return _key_prefix(SHARE_CHECKPOINT_TYPE, key.group_id, key.topic_id, key.partition)
    return (
        _key_prefix(SHARE_DELTA_TYPE, key.group_id, key.topic_id, key.partition)
        + _I.pack(key.checkpoint_epoch)
        + _I.pack(key.delta_seq)
    )


def encode_value(value: ShareValue | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, ShareCheckpointValue):
        head = _CKPT_HEAD.pack(
            VALUE_VERSION, value.checkpoint_epoch, value.start_offset, value.end_offset, len(value.batches)
        )
    else:
        head = _DELTA_HEAD.pack(VALUE_VERSION, value.checkpoint_epoch, value.back_offset, len(value.batches))
    return head + _batches(value.batches)


def encode_record(record: ShareRecord) -> tuple[bytes, bytes | None]:
    key, value = record
    return encode_key(key), encode_value(value)


# --- reading ----------------------------------------------------------------------------------
def record_type(key: bytes) -> int:
    if len(key) < 2:
        raise ShareRecordFormatError("record ends early")
    kind: int = _H.unpack_from(key, 0)[0]
    return kind


def _need(buf: bytes, pos: int, n: int) -> None:
    if pos + n > len(buf):
        raise ShareRecordFormatError("record ends early")


def decode_key(buf: bytes) -> ShareKey:
    kind = record_type(buf)
    if kind not in SHARE_RECORD_TYPES:
        raise ShareRecordFormatError(f"not a share record type: {kind}")
    pos = 2
    _need(buf, pos, 2)
    (n,) = _H.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise ShareRecordFormatError("null group id")
    _need(buf, pos, n + 16 + 4)
    try:
        group_id = bytes(buf[pos : pos + n]).decode()
    except UnicodeDecodeError as e:
        raise ShareRecordFormatError("group id is not UTF-8") from e
    pos += n
    topic_id = uuid.UUID(bytes=bytes(buf[pos : pos + 16]))
    pos += 16
    (partition,) = _KEY_TAIL.unpack_from(buf, pos)
    pos += 4
    if kind == SHARE_CHECKPOINT_TYPE:
        if pos != len(buf):
            raise ShareRecordFormatError("trailing bytes after the checkpoint key")
        return ShareCheckpointKey(group_id, topic_id, partition)
    _need(buf, pos, 8)
    epoch, seq = struct.unpack_from(">ii", buf, pos)
    if pos + 8 != len(buf):
        raise ShareRecordFormatError("trailing bytes after the delta key")
    return ShareDeltaKey(group_id, topic_id, partition, epoch, seq)


def _read_batches(buf: bytes, pos: int, count: int) -> tuple[StateBatch, ...]:
    if count < 0:
        raise ShareRecordFormatError("negative batch count")
    if pos + count * _BATCH.size != len(buf):
        raise ShareRecordFormatError("batch count does not match the value length")
    out = []
    for base, last, state, dc in _BATCH.iter_unpack(buf[pos:]):
        if state not in WRITABLE_STATES:
            raise ShareRecordFormatError(f"invalid record state {state} in a state batch")
        if last < base:
            raise ShareRecordFormatError("state batch with last_offset < base_offset")
        out.append(StateBatch(base, last, state, dc))
    return tuple(out)


def decode_checkpoint_value(buf: bytes) -> ShareCheckpointValue:
    _need(buf, 0, _CKPT_HEAD.size)
    version, epoch, start, end, count = _CKPT_HEAD.unpack_from(buf, 0)
    if version != VALUE_VERSION:
        raise ShareRecordFormatError(f"unknown share checkpoint value version {version}")
    return ShareCheckpointValue(epoch, start, end, _read_batches(buf, _CKPT_HEAD.size, count))


def decode_delta_value(buf: bytes) -> ShareDeltaValue:
    _need(buf, 0, _DELTA_HEAD.size)
    version, epoch, back, count = _DELTA_HEAD.unpack_from(buf, 0)
    if version != VALUE_VERSION:
        raise ShareRecordFormatError(f"unknown share delta value version {version}")
    return ShareDeltaValue(epoch, back, _read_batches(buf, _DELTA_HEAD.size, count))


def decode_value(key: ShareKey, buf: bytes | None) -> ShareValue | None:
    """The value of a record whose key is ``key`` (the key says which value layout follows)."""
    if buf is None:
        return None
    if isinstance(key, ShareCheckpointKey):
        return decode_checkpoint_value(buf)
    return decode_delta_value(buf)


def decode_share_record(key: bytes, value: bytes | None) -> ShareRecord:
    """Decode a type 100/101 record.

    Raises ShareRecordFormatError (a ValueError) for anything malformed.
    """
    k = decode_key(key)
    return k, decode_value(k, value)


def _encode_state(key: ShareKey, value: ShareValue | None) -> tuple[bytes, bytes | None]:
    return encode_key(key), encode_value(value)


def _encode_group(key: ShareGroupKey, value: ShareGroupValue | None) -> tuple[bytes, bytes | None]:
    g = key.group.encode()
    key_bytes = _H.pack(SHARE_GROUP_KEY_TYPE) + _H.pack(len(g)) + g
    return key_bytes, None if value is None else _H.pack(0) + _I.pack(value.group_epoch)


def _decode_group(key: bytes, value: bytes | None) -> tuple[ShareGroupKey, ShareGroupValue | None]:
    _need(key, 0, 4)
    (n,) = _H.unpack_from(key, 2)
    if n < 0 or 4 + n != len(key):
        raise ShareRecordFormatError("malformed share group key")
    try:
        k = ShareGroupKey(bytes(key[4:]).decode())
    except UnicodeDecodeError as e:
        raise ShareRecordFormatError("group id is not UTF-8") from e
    if value is None:
        return k, None
    _need(value, 0, 6)
    return k, ShareGroupValue(_I.unpack_from(value, 2)[0])


class ShareRecords:
    """The share groups' records, for the runtime's registry."""

    key_types = (SHARE_CHECKPOINT_TYPE, SHARE_DELTA_TYPE, SHARE_GROUP_KEY_TYPE)
    encoders: Mapping[type, Encoder] = {
        ShareCheckpointKey: _encode_state,
        ShareDeltaKey: _encode_state,
        ShareGroupKey: _encode_group,
    }

    @staticmethod
    def decode(
        key: bytes, value: bytes | None
    ) -> tuple[ShareKey | ShareGroupKey, ShareValue | ShareGroupValue | None]:
        if record_type(key) == SHARE_GROUP_KEY_TYPE:
            return _decode_group(key, value)
        return decode_share_record(key, value)


SHARE_RECORDS = ShareRecords()
