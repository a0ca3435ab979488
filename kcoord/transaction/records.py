"""``__transaction_state`` records, in Kafka's byte layout (TransactionLog.scala).

A key is an int16 version (0) followed by the transactional id (int16-length string); a value is
an int16 version followed by that version's fields; a null value is a tombstone (an expired
transactional id). Value v0 (not flexible): producer_id int64, producer_epoch int16,
transaction_timeout_ms int32, transaction_status int8, transaction_partitions? [topic string,
partition_ids [int32]], transaction_last_update_timestamp_ms int64,
transaction_start_timestamp_ms int64. Value v1 (flexible, Kafka 4.0+ under transaction.version 2)
adds the tagged fields [0] previous_producer_id, [1] next_producer_id, [2]
client_transaction_version. kcoord serves transaction.version 1, so it writes v0 as Kafka does at
that level, and reads both. The partitions are null in the Empty state, as Kafka writes them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.schemas.fields.codecs import EncodeBufferPool

from kcoord.protocol.fields import RecordFormatError
from kcoord.protocol.record_schemas import read_record, schema_class
from kcoord.runtime.outcome import Record
from kcoord.runtime.records import Encoder

KEY_VERSION = 0
VALUE_VERSION = 0  # what Kafka writes at transaction.version 1
_H = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class TransactionLogKey:
    transactional_id: str


@dataclass(frozen=True, slots=True)
class PartitionsSchema:
    topic: str
    partition_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: tuple[PartitionsSchema, ...] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = -1  # tag 0 (v1)
    next_producer_id: int = -1  # tag 1 (v1)
    client_transaction_version: int = 0  # tag 2 (v1)


_KEY = schema_class("TransactionLogKey")
_VALUE = schema_class("TransactionLogValue")
_encode_key = _KEY._struct.compiled_encode_into(KEY_VERSION, compact=False, tagged=False)
_decode_key = _KEY._struct.compiled_decode_from(KEY_VERSION, compact=False, tagged=False, data_class=_KEY)
_encode_value = _VALUE._struct.compiled_encode_into(VALUE_VERSION, compact=False, tagged=False)
_decode_values = tuple(
    _VALUE._struct.compiled_decode_from(v, compact=v >= 1, tagged=v >= 1, data_class=_VALUE) for v in (0, 1)
)
_KEY_PREFIX = _H.pack(KEY_VERSION)
_VALUE_PREFIX = _H.pack(VALUE_VERSION)


def encode_record(key: TransactionLogKey, value: TransactionLogValue | None) -> tuple[bytes, bytes | None]:
    with EncodeBufferPool.acquire() as out:
        out.buf[0:2] = _KEY_PREFIX
        out.pos = 2
        _encode_key(key, out)
        key_bytes = bytes(out.buf[: out.pos])
        if value is None:
            return key_bytes, None
        out.buf[0:2] = _VALUE_PREFIX
        out.pos = 2
        _encode_value(value, out)
        return key_bytes, bytes(out.buf[: out.pos])


def _value(d: Any) -> TransactionLogValue:
    parts = d.transaction_partitions
    return TransactionLogValue(
        producer_id=d.producer_id,
        producer_epoch=d.producer_epoch,
        transaction_timeout_ms=d.transaction_timeout_ms,
        transaction_status=d.transaction_status,
        transaction_partitions=None
        if parts is None
        else tuple(PartitionsSchema(p.topic, tuple(p.partition_ids or ())) for p in parts),
        transaction_last_update_timestamp_ms=d.transaction_last_update_timestamp_ms,
        transaction_start_timestamp_ms=d.transaction_start_timestamp_ms,
        previous_producer_id=d.previous_producer_id,
        next_producer_id=d.next_producer_id,
        client_transaction_version=d.client_transaction_version,
    )


def decode_record(key: bytes, value: bytes | None) -> tuple[TransactionLogKey, TransactionLogValue | None]:
    if len(key) < 2 or _H.unpack_from(key)[0] != KEY_VERSION:
        raise RecordFormatError("not a transaction log key (version 0)")
    k = read_record(_decode_key, key, 2)
    if k.transactional_id is None:
        raise RecordFormatError("a transaction log key without a transactional id")
    tkey = TransactionLogKey(k.transactional_id)
    if value is None:
        return tkey, None
    if len(value) < 2:
        raise RecordFormatError("a record value holds at least its int16 version")
    (version,) = _H.unpack_from(value)
    if version not in (0, 1):
        raise RecordFormatError(f"unknown TransactionLogValue version {version}")
    return tkey, _value(read_record(_decode_values[version], value, 2))


class TransactionRecords:
    """The record codec of ``__transaction_state`` for the runtime's registry."""

    key_types: tuple[int, ...] = (KEY_VERSION,)

    @property
    def encoders(self) -> Mapping[type, Encoder]:
        return {TransactionLogKey: encode_record}

    @staticmethod
    def decode(key: bytes, value: bytes | None) -> Record:
        return decode_record(key, value)


TRANSACTION_RECORDS = TransactionRecords()
