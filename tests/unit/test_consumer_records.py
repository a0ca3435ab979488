"""KIP-848 consumer group records (types 3-8, 16): kcoord's codecs against Kafka's layout.

The expected bytes are packed by hand here, following the JSON schemas in
kcoord/protocol/schemas/records/ (independently of kafka-python, which kcoord's codecs use), so
the layout is pinned; round trips, every shape of value older Kafkas wrote, and malformed bytes.
"""

from __future__ import annotations

import contextlib
import json
import re
import struct
import uuid
from collections.abc import Callable
from importlib import resources
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.classic.records import CLASSIC_RECORDS
from kcoord.consumer import records as C
from kcoord.groups.records import GROUP_RECORDS
from kcoord.protocol.fields import RecordFormatError
from kcoord.runtime.records import RecordRegistry
from kcoord.share.records import SHARE_RECORDS

T1 = uuid.UUID("5f1a3e4c-0000-4000-8000-00000000a001")
T2 = uuid.UUID("5f1a3e4c-0000-4000-8000-00000000a002")


# --- Kafka's encodings, by hand ---------------------------------------------------------------
def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def s16(s: str) -> bytes:
    """A non-flexible string (keys): int16 length + UTF-8."""
    b = s.encode()
    return i16(len(b)) + b


def uv(n: int) -> bytes:
    """An unsigned varint."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cs(s: str | None) -> bytes:
    """A compact (nullable) string: unsigned varint length + 1, 0 for null."""
    if s is None:
        return uv(0)
    b = s.encode()
    return uv(len(b) + 1) + b


def cb(b: bytes) -> bytes:
    return uv(len(b) + 1) + b


def carr(items: list[bytes] | None) -> bytes:
    """A compact array of already encoded elements; None is a null array."""
    return uv(0) if items is None else uv(len(items) + 1) + b"".join(items)


def tags(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section: count, then (tag, size, payload) in tag order."""
    return uv(len(fields)) + b"".join(uv(t) + uv(len(p)) + p for t, p in fields)


NO_TAGS = tags()


def key(record_type: int, *strings: str) -> bytes:
    return i16(record_type) + b"".join(s16(s) for s in strings)


def v0(*fields: bytes) -> bytes:
    """A value of version 0: the int16 version, then the fields (tags included by the caller)."""
    return i16(0) + b"".join(fields)


def topic_partitions(topic: uuid.UUID, partitions: list[int], epochs: list[int] | None = None) -> bytes:
    epoch_tag = () if epochs is None else ((0, carr([i32(e) for e in epochs])),)
    return topic.bytes + carr([i32(p) for p in partitions]) + tags(*epoch_tag)


def roundtrip(k: Any, v: Any) -> tuple[bytes, bytes | None]:
    kb, vb = C.CONSUMER_RECORDS.encoders[type(k)](k, v)
    assert C.CONSUMER_RECORDS.decode(kb, vb) == (k, v)
    return kb, vb


# --- the schemas ------------------------------------------------------------------------------
SCHEMA_OF_TYPE = {
    3: "ConsumerGroupMetadata",
    4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata",
    6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember",
    8: "ConsumerGroupCurrentMemberAssignment",
    16: "ConsumerGroupRegularExpression",
}


def schema(name: str) -> dict[str, Any]:
    text = resources.files("kcoord.protocol.schemas.records").joinpath(name + ".json").read_text()
    return dict(json.loads(re.sub(r"(?m)^\s*//.*$", "", text)))


@pytest.mark.parametrize("record_type", sorted(SCHEMA_OF_TYPE))
def test_the_copied_schemas_name_the_record_types(record_type: int) -> None:
    """Kafka 4.x's key schemas carry the type as apiKey; the older ones as their one version."""
    k, v = schema(SCHEMA_OF_TYPE[record_type] + "Key"), schema(SCHEMA_OF_TYPE[record_type] + "Value")
    assert k.get("apiKey", int(k["validVersions"])) == record_type
    assert v.get("apiKey", record_type) == record_type
    assert (v["validVersions"], v["flexibleVersions"]) == ("0", "0+")
    assert record_type in C.CONSUMER_RECORDS.key_types


# --- exact bytes, one example per type --------------------------------------------------------
def test_consumer_group_metadata_layout() -> None:
    k = C.ConsumerGroupMetadataKey("grp")
    kb, vb = roundtrip(k, C.ConsumerGroupMetadataValue(epoch=7, metadata_hash=0x0102030405060708))
    assert kb == bytes.fromhex("0003 0003 677270".replace(" ", ""))
    assert vb == v0(i32(7), tags((0, i64(0x0102030405060708))))
    # defaults are not written, as Kafka's writer leaves out tagged fields equal to their default
    assert roundtrip(k, C.ConsumerGroupMetadataValue(epoch=7))[1] == v0(i32(7), NO_TAGS)
    _, vb = roundtrip(k, C.ConsumerGroupMetadataValue(7, 0, 1_700_000_000_000))
    assert vb == v0(i32(7), tags((1, i64(1_700_000_000_000))))


def test_consumer_group_partition_metadata_layout() -> None:
    k = C.ConsumerGroupPartitionMetadataKey("grp")
    value = C.ConsumerGroupPartitionMetadataValue(
        (
            C.TopicMetadata(T1, "orders", 3, (C.PartitionMetadata(0, ("r1", "r2")),)),
            C.TopicMetadata(T2, "audit", 1),
        )
    )
    kb, vb = roundtrip(k, value)
    assert kb == key(4, "grp")
    rack = i32(0) + carr([cs("r1"), cs("r2")]) + NO_TAGS
    assert vb == v0(
        carr(
            [
                T1.bytes + cs("orders") + i32(3) + carr([rack]) + NO_TAGS,
                T2.bytes + cs("audit") + i32(1) + carr([]) + NO_TAGS,
            ]
        ),
        NO_TAGS,
    )


def test_consumer_group_member_metadata_layout() -> None:
    k = C.ConsumerGroupMemberMetadataKey("grp", "m-1")
    consumer = C.ConsumerGroupMemberMetadataValue(
        instance_id=None,
        rack_id="rack-a",
        client_id="cli",
        client_host="/10.0.0.1",
        subscribed_topic_names=("audit", "orders"),
        subscribed_topic_regex=None,
        rebalance_timeout_ms=45000,
        server_assignor="uniform",
    )
    kb, vb = roundtrip(k, consumer)
    assert kb == key(5, "grp", "m-1")
    untagged = (
        cs(None) + cs("rack-a") + cs("cli") + cs("/10.0.0.1") + carr([cs("audit"), cs("orders")]) + cs(None)
    )
    assert vb == v0(untagged, i32(45000), cs("uniform"), NO_TAGS)

    classic = C.ClassicMemberMetadata(10000, (C.ClassicProtocol("range", b"\x00\x03sub"),))
    _, vb = roundtrip(
        k, C.ConsumerGroupMemberMetadataValue(**{**_fields(consumer), "classic_member_metadata": classic})
    )
    # a nullable struct in a tagged field: a presence byte (1), then the struct with its own tags
    struct_bytes = i8(1) + i32(10000) + carr([cs("range") + cb(b"\x00\x03sub") + NO_TAGS]) + NO_TAGS
    assert vb == v0(untagged, i32(45000), cs("uniform"), tags((0, struct_bytes)))


def _fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__slots__}


def test_consumer_group_target_assignment_metadata_layout() -> None:
    k = C.ConsumerGroupTargetAssignmentMetadataKey("grp")
    kb, vb = roundtrip(k, C.ConsumerGroupTargetAssignmentMetadataValue(12, 1_700_000_000_123))
    assert kb == key(6, "grp")
    assert vb == v0(i32(12), tags((0, i64(1_700_000_000_123))))


def test_consumer_group_target_assignment_member_layout() -> None:
    k = C.ConsumerGroupTargetAssignmentMemberKey("grp", "m-1")
    value = C.ConsumerGroupTargetAssignmentMemberValue(
        (C.TopicPartitions(T1, (0, 2)), C.TopicPartitions(T2, ()))
    )
    kb, vb = roundtrip(k, value)
    assert kb == key(7, "grp", "m-1")
    assert vb == v0(carr([topic_partitions(T1, [0, 2]), topic_partitions(T2, [])]), NO_TAGS)


def test_consumer_group_current_member_assignment_layout() -> None:
    k = C.ConsumerGroupCurrentMemberAssignmentKey("grp", "m-1")
    value = C.ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=12,
        previous_member_epoch=11,
        state=C.MEMBER_STATE_UNREVOKED_PARTITIONS,
        assigned_partitions=(C.AssignedTopicPartitions(T1, (0, 1), (12, 9)),),
        partitions_pending_revocation=(C.AssignedTopicPartitions(T2, (4,), (3,)),),
    )
    kb, vb = roundtrip(k, value)
    assert kb == bytes.fromhex("0008000367727000036d2d31")
    assert vb == v0(
        i32(12),
        i32(11),
        i8(1),
        carr([topic_partitions(T1, [0, 1], [12, 9])]),
        carr([topic_partitions(T2, [4], [3])]),
        NO_TAGS,
    )
    # no epochs kept (what Kafka before 4.3 wrote): the tag is left out; an empty list is written
    _, vb = roundtrip(
        k,
        C.ConsumerGroupCurrentMemberAssignmentValue(
            1, 0, 0, (C.AssignedTopicPartitions(T1, (0,)), C.AssignedTopicPartitions(T2, (), ())), ()
        ),
    )
    assert vb == v0(
        i32(1),
        i32(0),
        i8(0),
        carr([topic_partitions(T1, [0]), topic_partitions(T2, [], [])]),
        carr([]),
        NO_TAGS,
    )


def test_consumer_group_regular_expression_layout() -> None:
    k = C.ConsumerGroupRegularExpressionKey("grp", "orders-.*")
    kb, vb = roundtrip(
        k, C.ConsumerGroupRegularExpressionValue(("orders-eu", "orders-us"), 42, 1_700_000_000_000)
    )
    assert kb == key(16, "grp", "orders-.*")
    assert vb == v0(carr([cs("orders-eu"), cs("orders-us")]), i64(42), i64(1_700_000_000_000), NO_TAGS)


def test_tombstones_of_every_type() -> None:
    for k in KEYS_OF_EVERY_TYPE:
        kb, vb = C.CONSUMER_RECORDS.encoders[type(k)](k, None)
        assert vb is None
        assert C.CONSUMER_RECORDS.decode(kb, None) == (k, None)


KEYS_OF_EVERY_TYPE = (
    C.ConsumerGroupMetadataKey("g"),
    C.ConsumerGroupPartitionMetadataKey("g"),
    C.ConsumerGroupMemberMetadataKey("g", "m"),
    C.ConsumerGroupTargetAssignmentMetadataKey("g"),
    C.ConsumerGroupTargetAssignmentMemberKey("g", "m"),
    C.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
    C.ConsumerGroupRegularExpressionKey("g", "r"),
)


# --- what older (and newer) Kafkas wrote ------------------------------------------------------
# Every value has the one version 0; Kafka adds fields as tags, so an older writer's value is the
# same version without some tags, and a newer writer's may carry tags this schema does not know.
UNKNOWN_TAG = (9, b"\x01\x02\x03")


@pytest.mark.parametrize(
    ("record_key", "value_bytes", "expected"),
    [
        # 3.8-4.0: no metadata hash; 4.1-4.3: no creation time
        (key(3, "g"), v0(i32(5), NO_TAGS), C.ConsumerGroupMetadataValue(5, 0, -1)),
        (key(3, "g"), v0(i32(5), tags((0, i64(77)))), C.ConsumerGroupMetadataValue(5, 77, -1)),
        (key(3, "g"), v0(i32(5), tags((0, i64(77)), UNKNOWN_TAG)), C.ConsumerGroupMetadataValue(5, 77, -1)),
        # 3.8-3.9 filled the partition racks; 4.0 writes none
        (
            key(4, "g"),
            v0(
                carr([T1.bytes + cs("t") + i32(2) + carr([i32(1) + carr([cs("r")]) + NO_TAGS]) + NO_TAGS]),
                NO_TAGS,
            ),
            C.ConsumerGroupPartitionMetadataValue(
                (C.TopicMetadata(T1, "t", 2, (C.PartitionMetadata(1, ("r",)),)),)
            ),
        ),
        (
            key(4, "g"),
            v0(carr([T1.bytes + cs("t") + i32(2) + carr([]) + NO_TAGS]), tags(UNKNOWN_TAG)),
            C.ConsumerGroupPartitionMetadataValue((C.TopicMetadata(T1, "t", 2),)),
        ),
        # a member of the consumer protocol: no classic metadata
        (
            key(5, "g", "m"),
            v0(
                cs("i"), cs(None), cs("c"), cs("h"), carr([]), cs("t.*"), i32(-1), cs(None), tags(UNKNOWN_TAG)
            ),
            C.ConsumerGroupMemberMetadataValue("i", None, "c", "h", (), "t.*", -1, None),
        ),
        # 3.8-4.2: no assignment timestamp
        (key(6, "g"), v0(i32(3), NO_TAGS), C.ConsumerGroupTargetAssignmentMetadataValue(3, 0)),
        (key(7, "g", "m"), v0(carr([]), tags(UNKNOWN_TAG)), C.ConsumerGroupTargetAssignmentMemberValue(())),
        # 3.8-4.2: no assignment epochs
        (
            key(8, "g", "m"),
            v0(i32(4), i32(3), i8(0), carr([topic_partitions(T1, [5, 6])]), carr([]), NO_TAGS),
            C.ConsumerGroupCurrentMemberAssignmentValue(
                4, 3, 0, (C.AssignedTopicPartitions(T1, (5, 6)),), ()
            ),
        ),
        (
            key(16, "g", "r"),
            v0(carr([cs("t")]), i64(1), i64(2), tags(UNKNOWN_TAG)),
            C.ConsumerGroupRegularExpressionValue(("t",), 1, 2),
        ),
    ],
)
def test_values_older_and_newer_writers_wrote_are_read(
    record_key: bytes, value_bytes: bytes, expected: Any
) -> None:
    assert C.CONSUMER_RECORDS.decode(record_key, value_bytes)[1] == expected


def test_a_tag_unknown_inside_a_nested_struct_is_skipped() -> None:
    nested = T1.bytes + carr([i32(0)]) + tags((0, carr([i32(2)])), UNKNOWN_TAG)
    v = C.CONSUMER_RECORDS.decode(
        key(8, "g", "m"), v0(i32(2), i32(1), i8(0), carr([nested]), carr([]), NO_TAGS)
    )[1]
    assert v == C.ConsumerGroupCurrentMemberAssignmentValue(
        2, 1, 0, (C.AssignedTopicPartitions(T1, (0,), (2,)),), ()
    )


KEY_BYTES = {
    kb[0] * 256 + kb[1]: kb
    for kb in (C.CONSUMER_RECORDS.encoders[type(k)](k, None)[0] for k in KEYS_OF_EVERY_TYPE)
}


@pytest.mark.parametrize("record_type", sorted(SCHEMA_OF_TYPE))
def test_value_versions_above_0_are_refused(record_type: int) -> None:
    for version in (1, 2, -1):
        with pytest.raises(RecordFormatError, match="version"):
            C.CONSUMER_RECORDS.decode(KEY_BYTES[record_type], i16(version) + i32(0) + NO_TAGS)


# --- malformed bytes ---------------------------------------------------------------------------
def test_malformed_keys_and_values_are_refused() -> None:
    good_key, good_value = roundtrip(
        C.ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
        C.ConsumerGroupCurrentMemberAssignmentValue(
            3, 2, 0, (C.AssignedTopicPartitions(T1, (1, 2), (3, 3)),), ()
        ),
    )
    assert good_value is not None
    for cut in range(len(good_key)):
        with pytest.raises(RecordFormatError):
            C.CONSUMER_RECORDS.decode(good_key[:cut], None)
    for cut in range(len(good_value)):
        with pytest.raises(RecordFormatError):
            C.CONSUMER_RECORDS.decode(good_key, good_value[:cut])
    with pytest.raises(RecordFormatError, match="ends at"):
        C.CONSUMER_RECORDS.decode(good_key + b"x", None)
    with pytest.raises(RecordFormatError, match="ends at"):
        C.CONSUMER_RECORDS.decode(good_key, good_value + b"\x00")
    with pytest.raises(RecordFormatError, match="record type"):
        C.CONSUMER_RECORDS.decode(key(2, "g"), None)
    # a null where the schema has no nullable string: the key's member id, the value's client id
    with pytest.raises(RecordFormatError, match="null"):
        C.CONSUMER_RECORDS.decode(i16(8) + s16("g") + i16(-1), None)
    with pytest.raises(RecordFormatError, match="null"):
        C.CONSUMER_RECORDS.decode(
            key(5, "g", "m"),
            v0(cs(None), cs(None), cs(None), cs("h"), carr([]), cs(None), i32(1), cs(None), NO_TAGS),
        )
    # invalid UTF-8
    with pytest.raises(RecordFormatError):
        C.CONSUMER_RECORDS.decode(i16(3) + i16(1) + b"\xff", None)
    assert issubclass(RecordFormatError, ValueError)


@given(
    record_type=st.sampled_from(sorted(SCHEMA_OF_TYPE)),
    tail=st.binary(max_size=64),
    value=st.binary(max_size=64),
)
def test_arbitrary_bytes_decode_or_raise_record_format_error(
    record_type: int, tail: bytes, value: bytes
) -> None:
    # values mostly past the version check: version 0, then anything
    for k, v in ((i16(record_type) + tail, None), (KEY_BYTES[record_type], i16(0) + value)):
        with contextlib.suppress(RecordFormatError):
            C.CONSUMER_RECORDS.decode(k, v)


def test_a_value_of_another_record_type_is_not_written() -> None:
    with pytest.raises(TypeError):
        C.CONSUMER_RECORDS.encoders[C.ConsumerGroupMetadataKey](
            C.ConsumerGroupMetadataKey("g"), C.ConsumerGroupTargetAssignmentMetadataValue(1)
        )


def test_the_codec_registers_beside_the_other_kinds() -> None:
    registry = RecordRegistry([CLASSIC_RECORDS, SHARE_RECORDS, GROUP_RECORDS, C.CONSUMER_RECORDS])
    assert sorted(registry.key_types) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 16, 100, 101, 102, 103]
    k, v = C.ConsumerGroupTargetAssignmentMetadataKey("g"), C.ConsumerGroupTargetAssignmentMetadataValue(2, 9)
    assert registry.decode(*registry.encode(k, v)) == (k, v)


# --- round trips ------------------------------------------------------------------------------
names = st.text(max_size=12)
opt_names = st.none() | names
i8s = st.integers(-(2**7), 2**7 - 1)
i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
uuids = st.uuids() | st.just(C.ZERO_UUID)
int_tuples = st.lists(i32s, max_size=6).map(tuple)
name_tuples = st.lists(names, max_size=4).map(tuple)


def small(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(strategy, max_size=3).map(tuple)


@st.composite
def assigned(draw: Callable[[st.SearchStrategy[Any]], Any]) -> C.AssignedTopicPartitions:
    partitions = draw(int_tuples)
    epochs = draw(st.none() | st.lists(i32s, min_size=len(partitions), max_size=len(partitions)).map(tuple))
    return C.AssignedTopicPartitions(draw(uuids), partitions, epochs)


RECORDS: dict[str, st.SearchStrategy[tuple[Any, Any]]] = {
    "metadata": st.tuples(
        st.builds(C.ConsumerGroupMetadataKey, names),
        st.builds(C.ConsumerGroupMetadataValue, i32s, i64s, i64s),
    ),
    "partition metadata": st.tuples(
        st.builds(C.ConsumerGroupPartitionMetadataKey, names),
        st.builds(
            C.ConsumerGroupPartitionMetadataValue,
            small(
                st.builds(
                    C.TopicMetadata,
                    uuids,
                    names,
                    i32s,
                    small(st.builds(C.PartitionMetadata, i32s, name_tuples)),
                )
            ),
        ),
    ),
    "member metadata": st.tuples(
        st.builds(C.ConsumerGroupMemberMetadataKey, names, names),
        st.builds(
            C.ConsumerGroupMemberMetadataValue,
            opt_names,
            opt_names,
            names,
            names,
            name_tuples,
            opt_names,
            i32s,
            opt_names,
            st.none()
            | st.builds(
                C.ClassicMemberMetadata,
                i32s,
                small(st.builds(C.ClassicProtocol, names, st.binary(max_size=16))),
            ),
        ),
    ),
    "target assignment metadata": st.tuples(
        st.builds(C.ConsumerGroupTargetAssignmentMetadataKey, names),
        st.builds(C.ConsumerGroupTargetAssignmentMetadataValue, i32s, i64s),
    ),
    "target assignment member": st.tuples(
        st.builds(C.ConsumerGroupTargetAssignmentMemberKey, names, names),
        st.builds(
            C.ConsumerGroupTargetAssignmentMemberValue, small(st.builds(C.TopicPartitions, uuids, int_tuples))
        ),
    ),
    "current member assignment": st.tuples(
        st.builds(C.ConsumerGroupCurrentMemberAssignmentKey, names, names),
        st.builds(
            C.ConsumerGroupCurrentMemberAssignmentValue, i32s, i32s, i8s, small(assigned()), small(assigned())
        ),
    ),
    "regular expression": st.tuples(
        st.builds(C.ConsumerGroupRegularExpressionKey, names, names),
        st.builds(C.ConsumerGroupRegularExpressionValue, name_tuples, i64s, i64s),
    ),
}


@pytest.mark.parametrize("kind", sorted(RECORDS))
def test_every_record_round_trips(kind: str) -> None:
    registry = RecordRegistry([C.CONSUMER_RECORDS])

    @given(RECORDS[kind], st.booleans())
    def check(record: tuple[Any, Any], tombstone: bool) -> None:
        k, v = record
        v = None if tombstone else v
        kb, vb = registry.encode(k, v)
        assert kb[:2] == C.CONSUMER_RECORDS.encoders[type(k)](k, None)[0][:2]
        decoded = registry.decode(kb, vb)
        assert decoded == (k, v)
        assert hash(decoded[0]) == hash(k)

    check()


@given(RECORDS["current member assignment"])
def test_the_compiled_codec_writes_what_kafka_pythons_schema_walk_writes(record: tuple[Any, Any]) -> None:
    """kcoord uses kafka-python's compiled codecs; its field-by-field ApiData encoder agrees."""
    k, v = record
    data = C.schema_class("ConsumerGroupCurrentMemberAssignmentValue")
    walked = data(**_fields(v)).encode(version=0, header=True)
    assert C.CONSUMER_RECORDS.encoders[type(k)](k, v)[1] == walked
