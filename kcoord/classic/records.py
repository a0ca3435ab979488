"""``__consumer_offsets`` records in Kafka's exact byte layout.

A record key is an int16 record type followed by the key fields; a value is an int16 version
followed by the fields of that version; a null value is a tombstone.

- type 0/1, offset commit: key (group, topic, partition); value v0 (offset, metadata,
  timestamp), v1 (+ expire_timestamp), v2 (no expire_timestamp, KIP-211), v3 (+ leader epoch),
  v4 (v3 as a flexible version: compact strings and tagged fields);
- type 2, group metadata: key (group); value v0 (protocol type, generation, protocol, leader,
  members: id, client id, host, session timeout, subscription, assignment), v1 (+ member
  rebalance timeout), v2 (+ current_state_timestamp, KIP-211), v3 (+ group.instance.id),
  v4 (flexible).

kcoord writes offset commit v1 when a v2-v4 OffsetCommit carried a retention time, else v3, and
group metadata v3; it reads every version above. These codecs are written by hand because
replay of large logs decodes millions of them; the unit tests check them against the JSON
schemas of Kafka's group coordinator. ``CLASSIC_RECORDS`` registers them with the runtime.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from kcoord.protocol.fields import FieldReader, RecordFormatError, byte_array, nullable_string, string
from kcoord.runtime.records import Encoder

__all__ = ["RecordFormatError"]

OFFSET_COMMIT_TYPES = (0, 1)
OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2

OFFSET_VALUE_WITH_EXPIRY = 1
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_VALUE_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length


# --- the records ------------------------------------------------------------------------------
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


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...] = field(default_factory=tuple)


Key = OffsetCommitKey | GroupMetadataKey
Value = OffsetCommitValue | GroupMetadataValue


# --- writing ----------------------------------------------------------------------------------
# A group commits the same topics over and over: the key up to the partition is encoded once.
@functools.lru_cache(maxsize=1 << 14)
def _offset_key_prefix(group: str, topic: str) -> bytes:
    return _H.pack(OFFSET_COMMIT_KEY_TYPE) + string(group) + string(topic)


def encode_key(key: Key) -> bytes:
    if type(key) is OffsetCommitKey:
        return _offset_key_prefix(key.group, key.topic) + _I.pack(key.partition)
    return _H.pack(GROUP_METADATA_KEY_TYPE) + string(key.group)


def encode_value(value: Value | None) -> bytes | None:
    if value is None:
        return None
    if type(value) is OffsetCommitValue:
        return _offset_value(value)
    return _group_value(value)  # type: ignore[arg-type]


def _offset_value(value: OffsetCommitValue) -> bytes:
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


def _group_value(value: GroupMetadataValue) -> bytes:
    out = [
        _H.pack(GROUP_VALUE_VERSION),
        string(value.protocol_type),
        _I.pack(value.generation),
        nullable_string(value.protocol),
        nullable_string(value.leader),
        _Q.pack(value.current_state_timestamp),
        _I.pack(len(value.members)),
    ]
    for m in value.members:
        out += [
            string(m.member_id),
            nullable_string(m.group_instance_id),
            string(m.client_id),
            string(m.client_host),
            _I.pack(m.rebalance_timeout),
            _I.pack(m.session_timeout),
            byte_array(m.subscription),
            byte_array(m.assignment),
        ]
    return b"".join(out)


def _encode_offset_commit(
    key: OffsetCommitKey, value: OffsetCommitValue | None
) -> tuple[bytes, bytes | None]:
    key_bytes = _offset_key_prefix(key.group, key.topic) + _I.pack(key.partition)
    return key_bytes, None if value is None else _offset_value(value)


def _encode_group_metadata(
    key: GroupMetadataKey, value: GroupMetadataValue | None
) -> tuple[bytes, bytes | None]:
    return _H.pack(GROUP_METADATA_KEY_TYPE) + string(key.group), None if value is None else _group_value(
        value
    )


# --- reading ----------------------------------------------------------------------------------
def decode_key(buf: bytes) -> Key:
    r = FieldReader(buf, 0)
    kind = r.i16()
    if kind in OFFSET_COMMIT_TYPES:
        return OffsetCommitKey(r.str(), r.str(), r.i32())
    if kind == GROUP_METADATA_KEY_TYPE:
        return GroupMetadataKey(r.str())
    raise RecordFormatError(f"unknown record type {kind}")


def decode_offset_value(buf: bytes) -> OffsetCommitValue:
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


def decode_group_value(buf: bytes) -> GroupMetadataValue:
    r = FieldReader(buf, 0)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    r.flexible = version >= 4
    protocol_type = r.str()
    generation = r.i32()
    protocol = r.nstr()
    leader = r.nstr()
    current_state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.str()
        instance_id = r.nstr() if version >= 3 else None
        client_id = r.str()
        client_host = r.str()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes()
        assignment = r.bytes()
        r.skip_tags()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(
            MemberMetadata(
                member_id,
                instance_id,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, current_state_ts, tuple(members))


def decode_record(key: bytes, value: bytes | None) -> tuple[Key, Value | None]:
    k = decode_key(key)
    if value is None:
        return k, None
    if isinstance(k, OffsetCommitKey):
        return k, decode_offset_value(value)
    return k, decode_group_value(value)


class ClassicRecords:
    """The classic group coordinator's records, for the runtime's registry."""

    key_types = (*OFFSET_COMMIT_TYPES, GROUP_METADATA_KEY_TYPE)
    encoders: Mapping[type, Encoder] = {
        OffsetCommitKey: _encode_offset_commit,
        GroupMetadataKey: _encode_group_metadata,
    }

    @staticmethod
    def decode(key: bytes, value: bytes | None) -> tuple[Key, Value | None]:
        return decode_record(key, value)


CLASSIC_RECORDS = ClassicRecords()


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ``consumer`` protocol subscription (ConsumerProtocolSubscription, any version).

    Topics is the first field of every version, so newer versions than this code knows parse too.
    Returns None if the bytes are not a consumer subscription.
    """
    try:
        r = FieldReader(subscription, 0)
        r.i16()  # version
        return {r.str() for _ in range(r.array_len())}
    except (RecordFormatError, UnicodeDecodeError):
        return None
