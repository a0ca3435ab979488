"""The hand-written JoinGroup/SyncGroup response encoders write kafka-python's bytes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.groups_codec import JoinGroupAnswer, SyncGroupAnswer
from kcoord.protocol.messages import ApiKey, response_class

_J = response_class(ApiKey.JoinGroup)
_S = response_class(ApiKey.SyncGroup)

names = st.text(max_size=40)  # member ids are ~40 characters; > 127 bytes reach 2-byte varints too
long_names = st.one_of(names, st.text(min_size=60, max_size=80))
nullable = st.one_of(st.none(), names)
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
blobs = st.binary(max_size=300)


@settings(max_examples=400, deadline=None)
@given(
    version=st.integers(0, 9),
    error=int16,
    generation=int32,
    protocol_type=nullable,
    protocol_name=nullable,
    leader=long_names,
    skip=st.booleans(),
    member_id=long_names,
    members=st.lists(st.tuples(long_names, nullable, blobs), max_size=6),
)
def test_join_group_answer(
    version: int,
    error: int,
    generation: int,
    protocol_type: str | None,
    protocol_name: str | None,
    leader: str,
    skip: bool,
    member_id: str,
    members: list,
) -> None:
    if version < 7:  # nullable only from v7 (the handler answers "" before)
        protocol_name = protocol_name or ""
    expected = _J(
        throttle_time_ms=0,
        error_code=error,
        generation_id=generation,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        leader=leader,
        skip_assignment=skip,
        member_id=member_id,
        members=[
            _J.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md) for m, i, md in members
        ],
    ).encode(version=version)
    answer = JoinGroupAnswer(
        error, generation, protocol_type, protocol_name, leader, skip, member_id, members
    )
    assert answer.encode(version=version) == expected


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(0, 5), error=int16, protocol_type=nullable, protocol_name=nullable, assignment=blobs
)
def test_sync_group_answer(
    version: int, error: int, protocol_type: str | None, protocol_name: str | None, assignment: bytes
) -> None:
    expected = _S(
        throttle_time_ms=0,
        error_code=error,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignment=assignment,
    ).encode(version=version)
    answer = SyncGroupAnswer(error, protocol_type, protocol_name, assignment)
    assert answer.encode(version=version) == expected
