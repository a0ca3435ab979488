"""The records every group type shares: committed offsets and config overrides.

A record key is an int16 record type followed by the key fields; a value is an int16 version
followed by the fields of that version; a null value is a tombstone.

- type 0/1, offset commit (Kafka's OffsetCommitKey/Value): key (group, topic, partition); value
  v0 (offset, metadata, timestamp), v1 (+ expire_timestamp), v2 (no expire_timestamp, KIP-211),
  v3 (+ leader epoch), v4 (v3 as a flexible version: compact strings and tagged fields). kcoord
  writes v1 when a v2-v4 OffsetCommit carried a retention time, else v3, and reads them all.
  Written by hand: replay of large logs decodes millions of them, and every commit encodes them;
  tests/unit/test_group_records.py checks them against Kafka's JSON schemas.
- type 103, group configs (kcoord's own; Kafka keeps group configs in its metadata log, which
  kcoord does not have): key (group); value v0 (int32 count, then count x (name string, value
  string)): the group's config overrides (IncrementalAlterConfigs on a GROUP resource). A
  tombstone removes them all.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kcoord.protocol.fields import FieldReader, RecordFormatError, string
from kcoord.runtime.outcome import Record
from kcoord.runtime.records import Encoder

OFFSET_COMMIT_TYPES = (0, 1)
OFFSET_COMMIT_KEY_TYPE: Final = 1
GROUP_CONFIG_KEY_TYPE: Final = 103

OFFSET_VALUE_WITH_EXPIRY: Final = 1
OFFSET_VALUE_VERSION: Final = 3

_H: Final = struct.Struct(">h")
_I: Final = struct.Struct(">i")
_Q: Final = struct.Struct(">q")
_VALUE_V3_HEAD: Final = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length


# --- offset commits ---------------------------------------------------------------------------
# The two records of every offset commit are not frozen: a frozen dataclass's __init__ goes
# through object.__setattr__ per field (480 ns against 115 ns for these two), and an OffsetCommit
# of ten partitions makes twenty of them. Nothing mutates them; unsafe_hash keeps them usable as
# the dict keys that replay and the cleaner need.
@dataclass(slots=True, unsafe_hash=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(slots=True, unsafe_hash=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None  # only in value v1 (a retention time was given)


def commit_time(value: OffsetCommitValue) -> int:
    """An offset's retention base when its group chooses none other (KIP-211): its commit time."""
    return value.commit_timestamp


# A group commits the same topics over and over: the key up to the partition is encoded once.
@functools.lru_cache(maxsize=1 << 14)
def _offset_key_prefix(group: str, topic: str) -> bytes:
    return _H.pack(OFFSET_COMMIT_KEY_TYPE) + string(group) + string(topic)


def encode_offset_key(key: OffsetCommitKey) -> bytes:
    return _offset_key_prefix(key.group, key.topic) + _I.pack(key.partition)


def encode_offset_value(value: OffsetCommitValue) -> bytes:
    if value.expire_timestamp is not None:
        return (
            _H.pack(OFFSET_VALUE_WITH_EXPIRY)
            + _Q.pack(value.offset)
            + string(value.metadata)
            + _Q.pack(value.commit_timestamp)
            + _Q.pack(value.expire_timestamp)
        )
    metadata = value.metadata.encode()
    return b"".join(
        (
            _VALUE_V3_HEAD.pack(OFFSET_VALUE_VERSION, value.offset, value.leader_epoch, len(metadata)),
            metadata,
            _Q.pack(value.commit_timestamp),
        )
    )


def _encode_offset_commit(
    key: OffsetCommitKey, value: OffsetCommitValue | None
) -> tuple[bytes, bytes | None]:
    key_bytes = _offset_key_prefix(key.group, key.topic) + _I.pack(key.partition)
    return key_bytes, None if value is None else encode_offset_value(value)


@functools.lru_cache(maxsize=1 << 14)
def _offset_key_names(prefix: bytes) -> tuple[str, str] | None:
    """(group, topic) of a key's bytes up to its partition, if laid out as kcoord writes them.

    Cached: a start-up replay decodes the key of every (group, topic, partition), and the few
    groups and topics among them then share one string each instead of one per key.
    """
    group_len = _H.unpack_from(prefix, 2)[0]
    topic_at = 4 + group_len
    if (
        group_len < 0
        or topic_at + 2 > len(prefix)
        or _H.unpack_from(prefix, topic_at)[0] != len(prefix) - topic_at - 2
    ):
        return None
    return prefix[4:topic_at].decode(), prefix[topic_at + 2 :].decode()


def decode_offset_key(buf: bytes) -> OffsetCommitKey:
    if len(buf) >= 10 and buf[:2] in _OFFSET_KEY_PREFIXES:
        names = _offset_key_names(buf[:-4])
        if names is not None:
            return OffsetCommitKey(names[0], names[1], _I.unpack_from(buf, len(buf) - 4)[0])
    r = FieldReader(buf, 0)
    kind = r.i16()
    if kind not in OFFSET_COMMIT_TYPES:
        raise RecordFormatError(f"not an offset commit record: type {kind}")
    return OffsetCommitKey(r.str(), r.str(), r.i32())


def decode_offset_value(buf: bytes) -> OffsetCommitValue:
    if len(buf) >= _VALUE_V3_HEAD.size + 8 and buf[:2] == _V3:  # what kcoord writes: no reader
        _v, offset, leader_epoch, meta_len = _VALUE_V3_HEAD.unpack_from(buf)
        end = _VALUE_V3_HEAD.size + meta_len
        if meta_len >= 0 and end + 8 == len(buf):
            metadata = buf[_VALUE_V3_HEAD.size : end].decode() if meta_len else ""
            return OffsetCommitValue(offset, leader_epoch, metadata, _Q.unpack_from(buf, end)[0], None)
    r = FieldReader(buf, 0)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown offset commit value version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.str()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else None
    r.skip_tags()
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_ts, expire_ts)


_OFFSET_KEY_PREFIXES = frozenset(_H.pack(t) for t in OFFSET_COMMIT_TYPES)
_V3 = _H.pack(3)


def decode_offset_commit(key: bytes, value: bytes | None) -> tuple[OffsetCommitKey, OffsetCommitValue | None]:
    return decode_offset_key(key), None if value is None else decode_offset_value(value)


# --- group configs --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    group: str


@dataclass(frozen=True, slots=True)
class GroupConfigValue:
    configs: tuple[tuple[str, str], ...]


def _encode_configs(key: GroupConfigKey, value: GroupConfigValue | None) -> tuple[bytes, bytes | None]:
    key_bytes = _H.pack(GROUP_CONFIG_KEY_TYPE) + string(key.group)
    if value is None:
        return key_bytes, None
    return key_bytes, (
        _H.pack(0) + _I.pack(len(value.configs)) + b"".join(string(n) + string(v) for n, v in value.configs)
    )


def _decode_configs(key: bytes, value: bytes | None) -> tuple[GroupConfigKey, GroupConfigValue | None]:
    r = FieldReader(key, 0)
    r.i16()
    k = GroupConfigKey(r.str())
    if value is None:
        return k, None
    r = FieldReader(value, 0)
    r.i16()
    return k, GroupConfigValue(tuple((r.str(), r.str()) for _ in range(r.array_len())))


class GroupRecords:
    """Records of the group layer, for the runtime's registry."""

    key_types = (*OFFSET_COMMIT_TYPES, GROUP_CONFIG_KEY_TYPE)
    encoders: Mapping[type, Encoder] = {
        OffsetCommitKey: _encode_offset_commit,
        GroupConfigKey: _encode_configs,
    }

    @staticmethod
    def decode(key: bytes, value: bytes | None) -> Record:
        if len(key) >= 2 and key[0] == 0 and key[1] in OFFSET_COMMIT_TYPES:
            return decode_offset_commit(key, value)
        if key[:2] == _H.pack(GROUP_CONFIG_KEY_TYPE):
            return _decode_configs(key, value)
        raise RecordFormatError("not a group layer record")


GROUP_RECORDS = GroupRecords()
