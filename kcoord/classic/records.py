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

kcoord's own record types (Kafka's __consumer_offsets types stop below 100):

- type 100/101, SHARE_CHECKPOINT / SHARE_DELTA: share-partition state (kcoord/share/records.py);
- type 102, share group metadata: key (group); value v0 (group epoch int32). Written whenever the
  epoch moves, so epochs never go back after a restart; members are not persisted (they rejoin);
- type 103, group configs: key (group); value v0 (int32 count, then name string, value string):
  the group's config overrides (IncrementalAlterConfigs on a GROUP resource).

kcoord writes offset commit v1 when a v2-v4 OffsetCommit carried a retention time, else v3, and
group metadata v3; it reads every version above. These codecs are written by hand because
replay of large logs decodes millions of them; the unit tests check them against the JSON
schemas of Kafka's group coordinator.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass, field
from typing import Any

OFFSET_COMMIT_TYPES = (0, 1)
OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2
SHARE_RECORD_TYPES = (100, 101)
SHARE_GROUP_KEY_TYPE = 102
GROUP_CONFIG_KEY_TYPE = 103

OFFSET_VALUE_WITH_EXPIRY = 1
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_VALUE_V3_HEAD = struct.Struct(">hqih")  # version, offset, leader epoch, metadata length


class RecordFormatError(ValueError):
    pass


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


@dataclass(frozen=True, slots=True)
class ShareGroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class ShareGroupValue:
    group_epoch: int


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    group: str


@dataclass(frozen=True, slots=True)
class GroupConfigValue:
    configs: tuple[tuple[str, str], ...]


Key = OffsetCommitKey | GroupMetadataKey | ShareGroupKey | GroupConfigKey | Any
Value = OffsetCommitValue | GroupMetadataValue | ShareGroupValue | GroupConfigValue | Any


# --- writing ----------------------------------------------------------------------------------
def _str(s: str) -> bytes:
    b = s.encode()
    return _H.pack(len(b)) + b


def _nstr(s: str | None) -> bytes:
    return _H.pack(-1) if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return _I.pack(len(b)) + b


# A group commits the same topics over and over: the key up to the partition is encoded once.
@functools.lru_cache(maxsize=1 << 14)
def _offset_key_prefix(group: str, topic: str) -> bytes:
    return _H.pack(OFFSET_COMMIT_KEY_TYPE) + _str(group) + _str(topic)


def encode_key(key: Key) -> bytes:
    if type(key) is OffsetCommitKey:
        return _offset_key_prefix(key.group, key.topic) + _I.pack(key.partition)
    if isinstance(key, GroupMetadataKey):
        return _H.pack(GROUP_METADATA_KEY_TYPE) + _str(key.group)
    if isinstance(key, ShareGroupKey):
        return _H.pack(SHARE_GROUP_KEY_TYPE) + _str(key.group)
    if isinstance(key, GroupConfigKey):
        return _H.pack(GROUP_CONFIG_KEY_TYPE) + _str(key.group)
    from kcoord.share import records as share_records

    return share_records.encode_key(key)


def encode_value(value: Value | None) -> bytes | None:
    if value is None:
        return None
    if type(value) is OffsetCommitValue and value.expire_timestamp is None:
        metadata = value.metadata.encode()
        return b"".join(
            (
                _VALUE_V3_HEAD.pack(OFFSET_VALUE_VERSION, value.offset, value.leader_epoch, len(metadata)),
                metadata,
                _Q.pack(value.commit_timestamp),
            )
        )
    if isinstance(value, ShareGroupValue):
        return _H.pack(0) + _I.pack(value.group_epoch)
    if isinstance(value, GroupConfigValue):
        return (
            _H.pack(0) + _I.pack(len(value.configs)) + b"".join(_str(n) + _str(v) for n, v in value.configs)
        )
    if not isinstance(value, OffsetCommitValue | GroupMetadataValue):
        from kcoord.share import records as share_records

        return share_records.encode_value(value)
    if isinstance(value, OffsetCommitValue):
        if value.expire_timestamp is not None:
            return (
                _H.pack(OFFSET_VALUE_WITH_EXPIRY)
                + _Q.pack(value.offset)
                + _str(value.metadata)
                + _Q.pack(value.commit_timestamp)
                + _Q.pack(value.expire_timestamp)
            )
        return (
            _H.pack(OFFSET_VALUE_VERSION)
            + _Q.pack(value.offset)
            + _I.pack(value.leader_epoch)
            + _str(value.metadata)
            + _Q.pack(value.commit_timestamp)
        )
    out = [
        _H.pack(GROUP_VALUE_VERSION),
        _str(value.protocol_type),
        _I.pack(value.generation),
        _nstr(value.protocol),
        _nstr(value.leader),
        _Q.pack(value.current_state_timestamp),
        _I.pack(len(value.members)),
    ]
    for m in value.members:
        out += [
            _str(m.member_id),
            _nstr(m.group_instance_id),
            _str(m.client_id),
            _str(m.client_host),
            _I.pack(m.rebalance_timeout),
            _I.pack(m.session_timeout),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(out)


# --- reading ----------------------------------------------------------------------------------
class _Reader:
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
        (v,) = _H.unpack_from(self.buf, self.pos)
        self.pos += 2
        return v

    def i32(self) -> int:
        self._need(4)
        (v,) = _I.unpack_from(self.buf, self.pos)
        self.pos += 4
        return v

    def i64(self) -> int:
        self._need(8)
        (v,) = _Q.unpack_from(self.buf, self.pos)
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


def decode_key(buf: bytes) -> Key:
    r = _Reader(buf, 0)
    kind = r.i16()
    if kind in OFFSET_COMMIT_TYPES:
        return OffsetCommitKey(r.str(), r.str(), r.i32())
    if kind == GROUP_METADATA_KEY_TYPE:
        return GroupMetadataKey(r.str())
    if kind == SHARE_GROUP_KEY_TYPE:
        return ShareGroupKey(r.str())
    if kind == GROUP_CONFIG_KEY_TYPE:
        return GroupConfigKey(r.str())
    if kind in SHARE_RECORD_TYPES:
        from kcoord.share import records as share_records

        return share_records.decode_key(buf)
    raise RecordFormatError(f"unknown record type {kind}")


def decode_offset_value(buf: bytes) -> OffsetCommitValue:
    r = _Reader(buf, 0)
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
    r = _Reader(buf, 0)
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
    if isinstance(k, GroupMetadataKey):
        return k, decode_group_value(value)
    r = _Reader(value, 0)
    if isinstance(k, ShareGroupKey):
        r.i16()
        return k, ShareGroupValue(r.i32())
    if isinstance(k, GroupConfigKey):
        r.i16()
        return k, GroupConfigValue(tuple((r.str(), r.str()) for _ in range(r.array_len())))
    from kcoord.share import records as share_records

    return k, share_records.decode_value(k, value)


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a ``consumer`` protocol subscription (ConsumerProtocolSubscription, any version).

    Topics is the first field of every version, so newer versions than this code knows parse too.
    Returns None if the bytes are not a consumer subscription.
    """
    try:
        r = _Reader(subscription, 0)
        r.i16()  # version
        return {r.str() for _ in range(r.array_len())}
    except (RecordFormatError, UnicodeDecodeError):
        return None
