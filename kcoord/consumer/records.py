"""KIP-848 consumer group records in ``__consumer_offsets``, in Kafka's byte layout.

A key is an int16 record type followed by the key's fields (int16-length strings); a value is an
int16 version followed by that version's fields; a null value is a tombstone. Every value here has
one version, 0, and it is flexible: compact strings and arrays (unsigned varint length + 1) and a
tagged-field section closing every struct, where Kafka adds fields without a new version. The
layouts (``?`` nullable, ``[n]`` tagged field n, written only when it differs from its default):

- 3 ConsumerGroupMetadata, key (group_id): epoch int32, [0] metadata_hash int64 (4.1+, KIP-1101),
  [1] creation_time_ms int64 (after 4.3);
- 4 ConsumerGroupPartitionMetadata, key (group_id): topics [topic_id uuid, topic_name,
  num_partitions int32, partition_metadata [partition int32, racks [string]]] (deprecated by
  KIP-1101: Kafka 4.1+ writes only its tombstone, deleting what 3.8-4.0 wrote);
- 5 ConsumerGroupMemberMetadata, key (group_id, member_id): instance_id?, rack_id?, client_id,
  client_host, subscribed_topic_names [string], subscribed_topic_regex?, rebalance_timeout_ms
  int32, server_assignor?, [0] classic_member_metadata? (session_timeout_ms int32,
  supported_protocols [name, metadata bytes]);
- 6 ConsumerGroupTargetAssignmentMetadata, key (group_id): assignment_epoch int32,
  [0] assignment_timestamp int64 (4.3, KIP-1263);
- 7 ConsumerGroupTargetAssignmentMember, key (group_id, member_id): topic_partitions [topic_id
  uuid, partitions [int32]];
- 8 ConsumerGroupCurrentMemberAssignment, key (group_id, member_id): member_epoch int32,
  previous_member_epoch int32, state int8, assigned_partitions and partitions_pending_revocation
  [topic_id uuid, partitions [int32], [0] assignment_epochs? [int32] (4.3, KIP-1251)];
- 16 ConsumerGroupRegularExpression, key (group_id, regular_expression): topics [string],
  version int64, timestamp int64.

kcoord writes value version 0 with the tagged fields Kafka 4.3 fills (metadata_hash,
assignment_timestamp, assignment_epochs, and classic_member_metadata for members that joined with
the classic protocol); creation_time_ms stays at its default, so it is not written, as in 4.3.
Readers accept version 0 with or without any tagged field, so what 3.8 to 4.3 wrote, and skip
tags they do not know (a later Kafka's). What Kafka 3.7 wrote is not read: KIP-848 was early
access there, and types 4, 5, 7 and 8 changed layout in 3.8 within version 0 (Kafka 3.8+ cannot
read them either).

The bytes are made by kafka-python from Kafka's JSON schemas (kcoord/protocol/schemas/records/):
its ``ApiData`` classes, through the codecs it compiles from a schema (what its own request and
response classes use; ``ApiData.encode``/``decode`` walk the schema field by field, 4x slower:
about 80 us against 21 us to write and read back a current-assignment record of 10 partitions,
36 us with the assignment epochs 4.3 writes). Where kafka-python differs from Kafka's generated
code, this module corrects it: kafka-python reads a JSON ``"default": null`` of an array field as
``[]`` (so a null ``AssignmentEpochs`` would be written and an empty one left out), so the loaded
schemas spell it ``"null"``; it decodes the zero uuid as None, mapped back here; its decoders take
the version they are given, so a value's version is checked first. Bytes left after a record and
nulls in non-nullable fields are refused: anything malformed raises ``RecordFormatError`` (a
ValueError). ``CONSUMER_RECORDS`` registers the types with the runtime's record registry.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from kafka.protocol.schemas.fields.codecs import EncodeBufferPool

from kcoord.protocol.fields import RecordFormatError
from kcoord.protocol.record_schemas import read_record, schema_class
from kcoord.runtime.outcome import Record
from kcoord.runtime.records import Encoder

__all__ = ["CONSUMER_RECORDS", "RecordFormatError"]

CONSUMER_GROUP_METADATA_TYPE = 3
CONSUMER_GROUP_PARTITION_METADATA_TYPE = 4
CONSUMER_GROUP_MEMBER_METADATA_TYPE = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_TYPE = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE = 8
CONSUMER_GROUP_REGULAR_EXPRESSION_TYPE = 16
CONSUMER_RECORD_TYPES = (3, 4, 5, 6, 7, 8, 16)

VALUE_VERSION = 0  # the one version of every value; what Kafka 4.3 writes

# MemberState (the ``state`` of a current member assignment), Kafka's byte values.
MEMBER_STATE_STABLE = 0
MEMBER_STATE_UNREVOKED_PARTITIONS = 1
MEMBER_STATE_UNRELEASED_PARTITIONS = 2
MEMBER_STATE_UNKNOWN = 127

ZERO_UUID = uuid.UUID(int=0)
_H = struct.Struct(">h")
_VALUE_VERSION_BYTES = _H.pack(VALUE_VERSION)


# --- the records ------------------------------------------------------------------------------
# Field names are Kafka's, in snake case: kafka-python reads nested structs by these names, so the
# nested dataclasses below are handed to it as they are.
@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadataValue:
    epoch: int
    metadata_hash: int = 0  # tag 0, KIP-1101 (4.1+): hash of the subscribed topics' metadata
    creation_time_ms: int = -1  # tag 1, after 4.3: when the group was created; -1 unknown


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    partition: int
    racks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int
    partition_metadata: tuple[PartitionMetadata, ...] = ()  # empty since 4.0


@dataclass(frozen=True, slots=True)
class ConsumerGroupPartitionMetadataValue:
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member of a consumer group that speaks the classic protocol (JoinGroup) brought."""

    session_timeout_ms: int
    supported_protocols: tuple[ClassicProtocol, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_member_metadata: ClassicMemberMetadata | None = None  # tag 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    assignment_epoch: int
    assignment_timestamp: int = 0  # tag 0, KIP-1263 (4.3): when the assignment was computed


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class AssignedTopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]
    # tag 0, KIP-1251 (4.3): the member epoch at which each partition was assigned, aligned with
    # ``partitions``; None where the writer kept none (before 4.3).
    assignment_epochs: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # MEMBER_STATE_*
    assigned_partitions: tuple[AssignedTopicPartitions, ...]
    partitions_pending_revocation: tuple[AssignedTopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionKey:
    group_id: str
    regular_expression: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupRegularExpressionValue:
    topics: tuple[str, ...]  # the topics the expression resolved to
    version: int  # the metadata image version it was resolved against
    timestamp: int  # when it was resolved (ms)


ConsumerKey = (
    ConsumerGroupMetadataKey
    | ConsumerGroupPartitionMetadataKey
    | ConsumerGroupMemberMetadataKey
    | ConsumerGroupTargetAssignmentMetadataKey
    | ConsumerGroupTargetAssignmentMemberKey
    | ConsumerGroupCurrentMemberAssignmentKey
    | ConsumerGroupRegularExpressionKey
)
ConsumerValue = (
    ConsumerGroupMetadataValue
    | ConsumerGroupPartitionMetadataValue
    | ConsumerGroupMemberMetadataValue
    | ConsumerGroupTargetAssignmentMetadataValue
    | ConsumerGroupTargetAssignmentMemberValue
    | ConsumerGroupCurrentMemberAssignmentValue
    | ConsumerGroupRegularExpressionValue
)


# --- reading helpers --------------------------------------------------------------------------
def _str(s: str | None) -> str:
    if s is None:
        raise RecordFormatError("null where the schema has a string")
    return s


def _seq(items: Iterable[Any] | None) -> list[Any]:
    if items is None:
        raise RecordFormatError("null where the schema has an array")
    return list(items)


def _bytes(b: bytes | None) -> bytes:
    if b is None:
        raise RecordFormatError("null where the schema has bytes")
    return bytes(b)


def _uuid(u: uuid.UUID | None) -> uuid.UUID:
    return ZERO_UUID if u is None else u  # kafka-python decodes the zero uuid as None


def _ints(items: Iterable[int] | None) -> tuple[int, ...]:
    return tuple(_seq(items))


def _strs(items: Iterable[str | None] | None) -> tuple[str, ...]:
    return tuple(_str(s) for s in _seq(items))


def _metadata_value(d: Any) -> ConsumerGroupMetadataValue:
    return ConsumerGroupMetadataValue(d.epoch, d.metadata_hash, d.creation_time_ms)


def _partition_metadata_value(d: Any) -> ConsumerGroupPartitionMetadataValue:
    return ConsumerGroupPartitionMetadataValue(
        tuple(
            TopicMetadata(
                _uuid(t.topic_id),
                _str(t.topic_name),
                t.num_partitions,
                tuple(PartitionMetadata(p.partition, _strs(p.racks)) for p in _seq(t.partition_metadata)),
            )
            for t in _seq(d.topics)
        )
    )


def _member_metadata_value(d: Any) -> ConsumerGroupMemberMetadataValue:
    c = d.classic_member_metadata
    classic = (
        None
        if c is None
        else ClassicMemberMetadata(
            c.session_timeout_ms,
            tuple(ClassicProtocol(_str(p.name), _bytes(p.metadata)) for p in _seq(c.supported_protocols)),
        )
    )
    return ConsumerGroupMemberMetadataValue(
        d.instance_id,
        d.rack_id,
        _str(d.client_id),
        _str(d.client_host),
        _strs(d.subscribed_topic_names),
        d.subscribed_topic_regex,
        d.rebalance_timeout_ms,
        d.server_assignor,
        classic,
    )


def _target_metadata_value(d: Any) -> ConsumerGroupTargetAssignmentMetadataValue:
    return ConsumerGroupTargetAssignmentMetadataValue(d.assignment_epoch, d.assignment_timestamp)


def _target_member_value(d: Any) -> ConsumerGroupTargetAssignmentMemberValue:
    return ConsumerGroupTargetAssignmentMemberValue(
        tuple(TopicPartitions(_uuid(t.topic_id), _ints(t.partitions)) for t in _seq(d.topic_partitions))
    )


def _assigned(items: Any) -> tuple[AssignedTopicPartitions, ...]:
    return tuple(
        AssignedTopicPartitions(
            _uuid(t.topic_id),
            _ints(t.partitions),
            None if t.assignment_epochs is None else tuple(t.assignment_epochs),
        )
        for t in _seq(items)
    )


def _current_assignment_value(d: Any) -> ConsumerGroupCurrentMemberAssignmentValue:
    return ConsumerGroupCurrentMemberAssignmentValue(
        d.member_epoch,
        d.previous_member_epoch,
        d.state,
        _assigned(d.assigned_partitions),
        _assigned(d.partitions_pending_revocation),
    )


def _regex_value(d: Any) -> ConsumerGroupRegularExpressionValue:
    return ConsumerGroupRegularExpressionValue(_strs(d.topics), d.version, d.timestamp)


# --- the codec --------------------------------------------------------------------------------
class _Spec:
    """One record type: its key and value classes, their schemas' compiled codecs, and how a
    decoded value becomes the value class."""

    __slots__ = (
        "_key_data",
        "_value_data",
        "decode_key_fields",
        "decode_value_fields",
        "encode_key_fields",
        "encode_value_fields",
        "key_class",
        "key_fields",
        "key_prefix",
        "read_value",
        "record_type",
        "value_class",
        "value_versions",
    )

    def __init__(
        self,
        record_type: int,
        key_class: type,
        value_class: type,
        schema: str,
        read_value: Callable[[Any], Any],
    ) -> None:
        self.record_type = record_type
        self.key_class = key_class
        self.value_class = value_class
        self.read_value = read_value
        self.key_prefix = _H.pack(record_type)
        self.key_fields = tuple(f.name for f in fields(key_class))
        # kafka-python's compiled codecs of the schemas (what its ApiMessage uses for requests):
        # ApiData's own encode/decode walk the schema per field, 4x slower. They read and write
        # the dataclasses above directly, by field name.
        self._key_data = schema_class(schema + "Key")
        self._value_data = value_data = schema_class(schema + "Value")
        self.value_versions = range(value_data.max_version + 1)
        # Compiled on first use (a broker without KIP-848 groups never needs them; compiling all
        # of them was 5% of the broker's imports): each of these compiles every codec of the
        # type, puts the compiled ones in their place and calls its own.
        self.encode_key_fields: Callable[..., Any] = lambda *a: self._compile().encode_key_fields(*a)
        self.decode_key_fields: Callable[..., Any] = lambda *a: self._compile().decode_key_fields(*a)
        self.encode_value_fields: Callable[..., Any] = lambda *a: self._compile().encode_value_fields(*a)
        self.decode_value_fields: tuple[Callable[..., Any], ...] = tuple(
            (lambda *a, v=v: self._compile().decode_value_fields[v](*a)) for v in self.value_versions
        )

    def _compile(self) -> _Spec:
        key_data, value_data = self._key_data, self._value_data
        # A key is not flexible and has one version: 0 in Kafka 4.x's schemas, the record type in
        # the older ones (before KAFKA-18301) that some of the copied files still are.
        key_version = key_data.max_version
        self.encode_key_fields = key_data._struct.compiled_encode_into(
            key_version, compact=False, tagged=False
        )
        self.decode_key_fields = key_data._struct.compiled_decode_from(
            key_version, compact=False, tagged=False, data_class=key_data
        )
        flexible = [value_data.flexible_version_q(v) for v in self.value_versions]
        self.encode_value_fields = value_data._struct.compiled_encode_into(
            VALUE_VERSION, compact=flexible[VALUE_VERSION], tagged=flexible[VALUE_VERSION]
        )
        self.decode_value_fields = tuple(
            value_data._struct.compiled_decode_from(v, compact=f, tagged=f, data_class=value_data)
            for v, f in zip(self.value_versions, flexible, strict=True)
        )
        return self

    def encode(self, key: Any, value: Any) -> tuple[bytes, bytes | None]:
        with EncodeBufferPool.acquire() as out:
            out.buf[0:2] = self.key_prefix
            out.pos = 2
            self.encode_key_fields(key, out)
            key_bytes = bytes(out.buf[: out.pos])
            if value is None:
                return key_bytes, None
            if type(value) is not self.value_class:
                raise TypeError(f"a {type(key).__name__} holds a {self.value_class.__name__}, not {value!r}")
            out.buf[0:2] = _VALUE_VERSION_BYTES
            out.pos = 2
            self.encode_value_fields(value, out)
            return key_bytes, bytes(out.buf[: out.pos])

    def decode_key(self, buf: bytes) -> Any:
        d = read_record(self.decode_key_fields, buf, 2)
        return self.key_class(*(_str(getattr(d, n)) for n in self.key_fields))

    def decode_value(self, buf: bytes) -> Any:
        if len(buf) < 2:
            raise RecordFormatError("a record value holds at least its int16 version")
        (version,) = _H.unpack_from(buf)
        if version not in self.value_versions:
            raise RecordFormatError(f"unknown {self.value_class.__name__} version {version}")
        return self.read_value(read_record(self.decode_value_fields[version], buf, 2))


_SPECS = (
    _Spec(
        CONSUMER_GROUP_METADATA_TYPE,
        ConsumerGroupMetadataKey,
        ConsumerGroupMetadataValue,
        "ConsumerGroupMetadata",
        _metadata_value,
    ),
    _Spec(
        CONSUMER_GROUP_PARTITION_METADATA_TYPE,
        ConsumerGroupPartitionMetadataKey,
        ConsumerGroupPartitionMetadataValue,
        "ConsumerGroupPartitionMetadata",
        _partition_metadata_value,
    ),
    _Spec(
        CONSUMER_GROUP_MEMBER_METADATA_TYPE,
        ConsumerGroupMemberMetadataKey,
        ConsumerGroupMemberMetadataValue,
        "ConsumerGroupMemberMetadata",
        _member_metadata_value,
    ),
    _Spec(
        CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_TYPE,
        ConsumerGroupTargetAssignmentMetadataKey,
        ConsumerGroupTargetAssignmentMetadataValue,
        "ConsumerGroupTargetAssignmentMetadata",
        _target_metadata_value,
    ),
    _Spec(
        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_TYPE,
        ConsumerGroupTargetAssignmentMemberKey,
        ConsumerGroupTargetAssignmentMemberValue,
        "ConsumerGroupTargetAssignmentMember",
        _target_member_value,
    ),
    _Spec(
        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE,
        ConsumerGroupCurrentMemberAssignmentKey,
        ConsumerGroupCurrentMemberAssignmentValue,
        "ConsumerGroupCurrentMemberAssignment",
        _current_assignment_value,
    ),
    _Spec(
        CONSUMER_GROUP_REGULAR_EXPRESSION_TYPE,
        ConsumerGroupRegularExpressionKey,
        ConsumerGroupRegularExpressionValue,
        "ConsumerGroupRegularExpression",
        _regex_value,
    ),
)
_BY_TYPE = {s.record_type: s for s in _SPECS}
_BY_KEY_CLASS = {s.key_class: s for s in _SPECS}


def encode_record(key: ConsumerKey, value: ConsumerValue | None) -> tuple[bytes, bytes | None]:
    spec = _BY_KEY_CLASS.get(type(key))
    if spec is None:
        raise TypeError(f"not a consumer group record key: {key!r}")
    return spec.encode(key, value)


def decode_record(key: bytes, value: bytes | None) -> tuple[ConsumerKey, ConsumerValue | None]:
    if len(key) < 2:
        raise RecordFormatError("a record key holds at least its int16 type")
    (t,) = _H.unpack_from(key)
    spec = _BY_TYPE.get(t)
    if spec is None:
        raise RecordFormatError(f"not a consumer group record type: {t}")
    k = spec.decode_key(key)
    return k, None if value is None else spec.decode_value(value)


class ConsumerRecords:
    """The consumer groups' records, for the runtime's registry."""

    key_types = CONSUMER_RECORD_TYPES
    encoders: Mapping[type, Encoder] = {s.key_class: s.encode for s in _SPECS}

    @staticmethod
    def decode(key: bytes, value: bytes | None) -> Record:
        return decode_record(key, value)


CONSUMER_RECORDS = ConsumerRecords()
