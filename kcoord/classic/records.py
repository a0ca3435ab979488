"""The classic group's record in Kafka's exact byte layout: group metadata (type 2).

Key (group); value v0 (protocol type, generation, protocol, leader, members: id, client id,
host, session timeout, subscription, assignment), v1 (+ member rebalance timeout), v2
(+ current_state_timestamp, KIP-211), v3 (+ group.instance.id), v4 (flexible). kcoord writes v3
and reads every version; the unit tests check the codec against the JSON schema of Kafka's group
coordinator. ``CLASSIC_RECORDS`` registers it with the runtime. (Offset commits are the group
layer's: kcoord/groups/records.py.)
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

from kcoord.protocol.fields import FieldReader, RecordFormatError, byte_array, nullable_string, string
from kcoord.runtime.records import Encoder

__all__ = ["RecordFormatError"]

GROUP_METADATA_KEY_TYPE = 2
GROUP_VALUE_VERSION = 3

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")


# --- the records ------------------------------------------------------------------------------
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


Key = GroupMetadataKey
Value = GroupMetadataValue


# --- writing ----------------------------------------------------------------------------------
def encode_key(key: GroupMetadataKey) -> bytes:
    return _H.pack(GROUP_METADATA_KEY_TYPE) + string(key.group)


def encode_value(value: GroupMetadataValue | None) -> bytes | None:
    return None if value is None else _group_value(value)


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


def _encode_group_metadata(
    key: GroupMetadataKey, value: GroupMetadataValue | None
) -> tuple[bytes, bytes | None]:
    return _H.pack(GROUP_METADATA_KEY_TYPE) + string(key.group), None if value is None else _group_value(
        value
    )


# --- reading ----------------------------------------------------------------------------------
def decode_key(buf: bytes) -> GroupMetadataKey:
    r = FieldReader(buf, 0)
    kind = r.i16()
    if kind == GROUP_METADATA_KEY_TYPE:
        return GroupMetadataKey(r.str())
    raise RecordFormatError(f"not a group metadata record: type {kind}")


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


def decode_record(key: bytes, value: bytes | None) -> tuple[GroupMetadataKey, GroupMetadataValue | None]:
    return decode_key(key), None if value is None else decode_group_value(value)


class ClassicRecords:
    """The classic group coordinator's records, for the runtime's registry."""

    key_types = (GROUP_METADATA_KEY_TYPE,)
    encoders: Mapping[type, Encoder] = {GroupMetadataKey: _encode_group_metadata}

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
