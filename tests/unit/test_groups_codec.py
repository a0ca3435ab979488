"""The hand-written classic group codecs: the JoinGroup, SyncGroup and Heartbeat answers are
kafka-python's bytes, and the SyncGroup and Heartbeat requests decode as kafka-python decodes
them, refusing the nulls and truncated bodies that kafka-python and the dispatcher refuse."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.frames import MalformedRequest
from kcoord.protocol.groups_codec import (
    HeartbeatAnswer,
    JoinGroupAnswer,
    SyncGroupAnswer,
    decode_heartbeat,
    decode_sync_group,
)
from kcoord.protocol.messages import ApiKey, null_violation, request_class, response_class

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


@settings(max_examples=100, deadline=None)
@given(version=st.integers(0, 4), error=int16)
def test_heartbeat_answer(version: int, error: int) -> None:
    expected = response_class(ApiKey.Heartbeat)(throttle_time_ms=0, error_code=error).encode(version=version)
    assert HeartbeatAnswer(error).encode(version) == expected


_HB = request_class(ApiKey.Heartbeat)
_SG = request_class(ApiKey.SyncGroup)


def _refuses_every_truncation(decode, body: bytes, version: int) -> None:
    for cut in range(len(body)):
        with pytest.raises((MalformedRequest, IndexError, struct.error)):
            decode(bytes(body[:cut]), 0, version)


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(0, 4),
    group=long_names,
    generation=int32,
    member=long_names,
    instance=nullable,
    prefix=st.binary(max_size=4),
)
def test_heartbeat_request_decodes_as_kafka_python(
    version: int, group: str, generation: int, member: str, instance, prefix: bytes
) -> None:
    req = _HB(group_id=group, generation_id=generation, member_id=member, group_instance_id=instance)
    body = req.encode(version=version)
    ours, end = decode_heartbeat(bytes(prefix + body), len(prefix), version)
    theirs = _HB.decode(body, version=version)
    assert end == len(prefix) + len(body)
    assert (ours.group_id, ours.generation_id, ours.member_id) == (group, generation, member)
    assert ours.group_instance_id == (theirs.group_instance_id if version >= 3 else None)
    _refuses_every_truncation(decode_heartbeat, body, version)


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(0, 5),
    group=names,
    generation=int32,
    member=names,
    instance=nullable,
    protocol_type=nullable,
    protocol_name=nullable,
    assignments=st.lists(st.tuples(long_names, blobs), max_size=5),
    prefix=st.binary(max_size=4),
)
def test_sync_group_request_decodes_as_kafka_python(
    version: int, group, generation, member, instance, protocol_type, protocol_name, assignments, prefix
) -> None:
    req = _SG(
        group_id=group,
        generation_id=generation,
        member_id=member,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=[_SG.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in assignments],
    )
    body = req.encode(version=version)
    ours, end = decode_sync_group(bytes(prefix + body), len(prefix), version)
    theirs = _SG.decode(body, version=version)
    assert end == len(prefix) + len(body)
    assert (ours.group_id, ours.generation_id, ours.member_id) == (group, generation, member)
    assert ours.group_instance_id == (theirs.group_instance_id if version >= 3 else None)
    assert (ours.protocol_type, ours.protocol_name) == (
        (theirs.protocol_type, theirs.protocol_name) if version >= 5 else (None, None)
    )
    assert [(a.member_id, a.assignment) for a in ours.assignments] == [
        (a.member_id, bytes(a.assignment)) for a in theirs.assignments
    ]
    _refuses_every_truncation(decode_sync_group, body, version)


@pytest.mark.parametrize("version", [0, 3, 4, 5])
@pytest.mark.parametrize("field", ["group_id", "member_id", "assignments", "assignment_member"])
def test_sync_group_request_refuses_forbidden_nulls(version: int, field: str) -> None:
    assignment = _SG.SyncGroupRequestAssignment(
        member_id=None if field == "assignment_member" else "m", assignment=b"x"
    )
    req = _SG(
        group_id=None if field == "group_id" else "g",
        generation_id=1,
        member_id=None if field == "member_id" else "m",
        group_instance_id=None,
        protocol_type=None,
        protocol_name=None,
        assignments=None if field == "assignments" else [assignment],
    )
    body = req.encode(version=version)
    assert null_violation(_SG.decode(body, version=version), version) is not None
    with pytest.raises(MalformedRequest, match="non-nullable"):
        decode_sync_group(bytes(body), 0, version)


@pytest.mark.parametrize("version", [0, 3, 4])
@pytest.mark.parametrize("field", ["group_id", "member_id"])
def test_heartbeat_request_refuses_forbidden_nulls(version: int, field: str) -> None:
    req = _HB(
        group_id=None if field == "group_id" else "g",
        generation_id=1,
        member_id=None if field == "member_id" else "m",
        group_instance_id=None,
    )
    body = req.encode(version=version)
    assert null_violation(_HB.decode(body, version=version), version) is not None
    with pytest.raises(MalformedRequest, match="non-nullable"):
        decode_heartbeat(bytes(body), 0, version)
