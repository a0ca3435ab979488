"""``__consumer_offsets`` records: kcoord's hand-written codecs against Kafka's JSON schemas.

The schemas (kcoord/protocol/schemas/records/, from Kafka's group-coordinator module) are
loaded through kafka-python's schema-driven ApiData; both sides must agree byte for byte on
every version.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.api_data import ApiData

from kcoord.classic import records as R
from kcoord.groups import records as GR


def _data_class(name: str) -> type:
    # The coordinator schemas say "coordinator-key"/"coordinator-value"; ApiData wants "data".
    return type(
        name,
        (ApiData,),
        {"json_patch": classmethod(lambda cls, j: dict(j, type="data"))},
        load_json="kcoord.protocol.schemas.records",
    )


OffsetCommitKey = _data_class("OffsetCommitKey")
OffsetCommitValue = _data_class("OffsetCommitValue")
GroupMetadataKey = _data_class("GroupMetadataKey")
GroupMetadataValue = _data_class("GroupMetadataValue")

names = st.text(min_size=0, max_size=12)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


def test_offset_commit_key_layout() -> None:
    key = GR.OffsetCommitKey("g", "t", 7)
    ours = GR.encode_offset_key(key)
    theirs = struct.pack(">h", 1) + OffsetCommitKey(group="g", topic="t", partition=7).encode(
        version=0, header=False
    )
    assert ours == theirs == bytes.fromhex("0001 0001 67 0001 74 00000007".replace(" ", ""))
    assert GR.decode_offset_key(ours) == key
    assert GR.decode_offset_key(struct.pack(">h", 0) + ours[2:]) == key  # type 0 (legacy) reads too


def test_group_metadata_key_layout() -> None:
    ours = R.encode_key(R.GroupMetadataKey("grp"))
    assert ours == struct.pack(">h", 2) + GroupMetadataKey(group="grp").encode(version=0, header=False)


@given(offset=i64, epoch=i32, metadata=names, commit=i64, expire=i64)
def test_offset_values_written(offset: int, epoch: int, metadata: str, commit: int, expire: int) -> None:
    v3 = GR.encode_offset_value(GR.OffsetCommitValue(offset, epoch, metadata, commit))
    theirs = OffsetCommitValue(offset=offset, leader_epoch=epoch, metadata=metadata, commit_timestamp=commit)
    assert v3 == theirs.encode(version=3, header=True)
    v1 = GR.encode_offset_value(GR.OffsetCommitValue(offset, -1, metadata, commit, expire))
    theirs = OffsetCommitValue(
        offset=offset, metadata=metadata, commit_timestamp=commit, expire_timestamp=expire
    )
    assert v1 == theirs.encode(version=1, header=True)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_offset_values_read_every_version(version: int) -> None:
    theirs = OffsetCommitValue(
        offset=42, leader_epoch=3, metadata="m\u00e9ta", commit_timestamp=1000, expire_timestamp=5000
    )
    v = GR.decode_offset_value(theirs.encode(version=version, header=True))
    assert (v.offset, v.metadata, v.commit_timestamp) == (42, "m\u00e9ta", 1000)
    assert v.leader_epoch == (3 if version >= 3 else -1)
    assert v.expire_timestamp == (5000 if version == 1 else None)


def _their_member(m: R.MemberMetadata) -> object:
    return GroupMetadataValue.MemberMetadata(
        member_id=m.member_id,
        group_instance_id=m.group_instance_id,
        client_id=m.client_id,
        client_host=m.client_host,
        rebalance_timeout=m.rebalance_timeout,
        session_timeout=m.session_timeout,
        subscription=m.subscription,
        assignment=m.assignment,
    )


members = st.lists(
    st.builds(
        R.MemberMetadata,
        names,
        st.none() | names,
        names,
        names,
        st.integers(0, 2**31 - 1),
        st.integers(0, 2**31 - 1),
        st.binary(max_size=20),
        st.binary(max_size=20),
    ),
    max_size=3,
)


@given(ptype=names, gen=i32, protocol=st.none() | names, leader=st.none() | names, ts=i64, ms=members)
def test_group_value_written_as_v3(
    ptype: str, gen: int, protocol: str | None, leader: str | None, ts: int, ms: list[R.MemberMetadata]
) -> None:
    ours = R.encode_value(R.GroupMetadataValue(ptype, gen, protocol, leader, ts, tuple(ms)))
    theirs = GroupMetadataValue(
        protocol_type=ptype,
        generation=gen,
        protocol=protocol,
        leader=leader,
        current_state_timestamp=ts,
        members=[_their_member(m) for m in ms],
    )
    assert ours == theirs.encode(version=3, header=True)
    assert R.decode_group_value(ours) == R.GroupMetadataValue(ptype, gen, protocol, leader, ts, tuple(ms))


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_values_read_every_version(version: int) -> None:
    m = R.MemberMetadata("m-1", "inst", "client", "/1.2.3.4", 30000, 10000, b"sub", b"asg")
    theirs = GroupMetadataValue(
        protocol_type="consumer",
        generation=5,
        protocol="range",
        leader="m-1",
        current_state_timestamp=777,
        members=[_their_member(m)],
    )
    v = R.decode_group_value(theirs.encode(version=version, header=True))
    assert (v.protocol_type, v.generation, v.protocol, v.leader) == ("consumer", 5, "range", "m-1")
    assert v.current_state_timestamp == (777 if version >= 2 else -1)
    got = v.members[0]
    assert got.group_instance_id == ("inst" if version >= 3 else None)
    assert got.rebalance_timeout == (30000 if version >= 1 else 10000)  # v0: the session timeout
    assert (got.subscription, got.assignment) == (b"sub", b"asg")


def test_tombstones_and_subscriptions() -> None:
    assert R.encode_value(None) is None
    key, value = R.decode_record(R.encode_key(R.GroupMetadataKey("g")), None)
    assert key == R.GroupMetadataKey("g") and value is None
    from tests.unit.grouputil import subscription

    assert R.subscribed_topics(subscription("a", "b")) == {"a", "b"}
    assert R.subscribed_topics(b"\x00") is None
