"""The hand-written OffsetCommit/OffsetFetch codecs: the response encoders write kafka-python's
bytes, and the request decoders read what kafka-python reads, refusing the nulls and truncated
bodies that kafka-python's decoder and the dispatcher's null check refuse."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.frames import MalformedRequest
from kcoord.protocol.messages import ApiKey, null_violation, request_class, response_class
from kcoord.protocol.offsets_codec import (
    OffsetCommitAnswer,
    OffsetFetchAnswer,
    decode_offset_commit,
    decode_offset_fetch,
)

_C = response_class(ApiKey.OffsetCommit)
_F = response_class(ApiKey.OffsetFetch)

names = st.text(min_size=0, max_size=20)
uuids = st.uuids().map(lambda u: u if u.int else uuid.uuid4())
int32 = st.integers(-(2**31), 2**31 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
metadata = st.one_of(st.none(), st.text(max_size=300))  # > 127 bytes: multi-byte varints


def _commit_expected(topics: list, version: int) -> bytes:
    P = _C.OffsetCommitResponseTopic.OffsetCommitResponsePartition
    return _C(
        throttle_time_ms=0,
        topics=[
            _C.OffsetCommitResponseTopic(
                name=n if version < 10 else None,
                topic_id=tid if version >= 10 else None,
                partitions=[P(partition_index=p, error_code=e) for p, e in parts],
            )
            for n, tid, parts in topics
        ],
    ).encode(version=version)


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(2, 10),
    topics=st.lists(st.tuples(names, uuids, st.lists(st.tuples(int32, int16), max_size=5)), max_size=4),
)
def test_offset_commit_answer(version: int, topics: list) -> None:
    # [partition, error] lists, as the handler builds them (it fills in a group's error later).
    answer = OffsetCommitAnswer([(n, tid, [list(part) for part in parts]) for n, tid, parts in topics])
    assert answer.encode(version=version) == _commit_expected(topics, version)


fetch_parts = st.lists(st.tuples(int32, int64, int32, metadata, int16), max_size=5)


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(1, 7),
    topics=st.lists(st.tuples(names, st.none(), fetch_parts), max_size=4),
    error=int16,
)
def test_offset_fetch_answer_one_group(version: int, topics: list, error: int) -> None:
    P = _F.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    expected = _F(
        throttle_time_ms=0,
        error_code=error if version >= 2 else 0,
        topics=[
            _F.OffsetFetchResponseTopic(
                name=n,
                partitions=[
                    P(
                        partition_index=p,
                        committed_offset=o,
                        committed_leader_epoch=ep,
                        metadata=md,
                        error_code=e,
                    )
                    for p, o, ep, md, e in parts
                ],
            )
            for n, _tid, parts in topics
        ],
    ).encode(version=version)
    got = OffsetFetchAnswer(topics, error if version >= 2 else 0).encode(version=version)
    assert got == expected


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(8, 10),
    groups=st.lists(
        st.tuples(names, int16, st.lists(st.tuples(names, uuids, fetch_parts), max_size=3)), max_size=3
    ),
)
def test_offset_fetch_answer_groups(version: int, groups: list) -> None:
    T = _F.OffsetFetchResponseGroup.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions
    expected = _F(
        throttle_time_ms=0,
        groups=[
            _F.OffsetFetchResponseGroup(
                group_id=g,
                error_code=err,
                topics=[
                    T(
                        name=n if version < 10 else None,
                        topic_id=tid if version >= 10 else None,
                        partitions=[
                            P(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=ep,
                                metadata=md,
                                error_code=e,
                            )
                            for p, o, ep, md, e in parts
                        ],
                    )
                    for n, tid, parts in topics
                ],
            )
            for g, err, topics in groups
        ],
    ).encode(version=version)
    assert OffsetFetchAnswer(groups=groups).encode(version=version) == expected


# --- request decoders -----------------------------------------------------------------------------
_CR = request_class(ApiKey.OffsetCommit)
_CRT = _CR.OffsetCommitRequestTopic
_CRP = _CRT.OffsetCommitRequestPartition
_FR = request_class(ApiKey.OffsetFetch)


def _commit_request(version: int, group: str, gen: int, member: str, instance, retention: int, topics):
    return _CR(
        group_id=group,
        generation_id_or_member_epoch=gen,
        member_id=member,
        group_instance_id=instance,
        retention_time_ms=retention,
        topics=[
            _CRT(
                name=n,
                topic_id=tid,
                partitions=[
                    _CRP(
                        partition_index=p, committed_offset=o, committed_leader_epoch=e, committed_metadata=m
                    )
                    for p, o, e, m in parts
                ],
            )
            for n, tid, parts in topics
        ],
    ).encode(version=version)


def _commit_view(req, version: int) -> tuple:
    """The fields a handler reads, as the version defines them."""
    return (
        req.group_id,
        req.generation_id_or_member_epoch,
        req.member_id,
        req.group_instance_id if version >= 7 else None,
        req.retention_time_ms if version <= 4 else -1,
        [
            (
                t.name if version < 10 else None,
                t.topic_id if version >= 10 else None,
                [
                    (
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch if version >= 6 else -1,
                        p.committed_metadata,
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


commit_parts = st.lists(st.tuples(int32, int64, int32, metadata), max_size=5)


@settings(max_examples=400, deadline=None)
@given(
    version=st.integers(2, 10),
    group=names,
    gen=int32,
    member=names,
    instance=st.one_of(st.none(), names),
    retention=int64,
    topics=st.lists(st.tuples(names, uuids, commit_parts), max_size=4),
    lead=st.binary(max_size=3),
)
def test_offset_commit_request_decodes_as_kafka_python(
    version: int, group: str, gen: int, member: str, instance, retention: int, topics: list, lead: bytes
) -> None:
    body = _commit_request(version, group, gen, member, instance, retention, topics)
    theirs = _CR.decode(body, version=version)
    ours, end = decode_offset_commit(bytes(lead + body), len(lead), version)
    assert end == len(lead) + len(body)
    assert _commit_view(ours, version) == _commit_view(theirs, version)


@settings(max_examples=200, deadline=None)
@given(
    version=st.integers(2, 10), topics=st.lists(st.tuples(names, uuids, commit_parts), min_size=1, max_size=3)
)
def test_offset_commit_request_truncated_anywhere_is_refused(version: int, topics: list) -> None:
    body = _commit_request(version, "g", 1, "m", None, -1, topics)
    for cut in range(len(body)):
        with pytest.raises((MalformedRequest, IndexError, struct.error)):
            decode_offset_commit(bytes(body[:cut]), 0, version)


@pytest.mark.parametrize("version", [2, 7, 8, 9])
@pytest.mark.parametrize("field", ["group_id", "member_id", "topics", "name", "partitions"])
def test_offset_commit_request_null_where_the_schema_forbids_it(version: int, field: str) -> None:
    """The same refusals as the dispatcher's null check on kafka-python's decoding (which the
    hand-written decoder replaces for this API); a null metadata or instance id is allowed."""
    part = _CRP(partition_index=0, committed_offset=1, committed_metadata=None)
    topic = _CRT(name=None if field == "name" else "t", partitions=None if field == "partitions" else [part])
    req = _CR(
        group_id=None if field == "group_id" else "g",
        generation_id_or_member_epoch=1,
        member_id=None if field == "member_id" else "m",
        group_instance_id=None,
        topics=None if field == "topics" else [topic],
    )
    body = req.encode(version=version)
    assert null_violation(_CR.decode(body, version=version), version) is not None
    with pytest.raises(MalformedRequest, match="non-nullable"):
        decode_offset_commit(bytes(body), 0, version)


def test_offset_commit_request_skips_unknown_tagged_fields() -> None:
    """Flexible versions may carry tagged fields at every level (KIP-482); none is defined here."""
    tags = b"\x02\x05\x01\xaa\x07\x02\xbb\xcc"  # two unknown tags
    body = (
        b"\x02g"
        + b"\x00\x00\x00\x01"
        + b"\x02m"
        + b"\x00"  # group, generation, member, null instance
        + b"\x02"
        + b"\x02t"  # one topic "t"
        + b"\x02"
        + b"\x00\x00\x00\x03"
        + (7).to_bytes(8, "big")
        + b"\xff\xff\xff\xff"
        + b"\x01"
        + tags
        + tags  # the topic's
        + tags  # the request's
    )
    ours, end = decode_offset_commit(bytes(body), 0, 8)
    assert end == len(body)
    assert _commit_view(ours, 8) == _commit_view(_CR.decode(body, version=8), 8)
    assert _commit_view(ours, 8) == ("g", 1, "m", None, -1, [("t", None, [(3, 7, -1, "")])])


def _fetch_view(req, version: int) -> tuple:
    def topics(ts):
        if ts is None:
            return None
        return [
            (
                t.name if version < 10 else None,
                t.topic_id if version >= 10 else None,
                list(t.partition_indexes),
            )
            for t in ts
        ]

    if version < 8:
        return (req.group_id, topics(req.topics), bool(req.require_stable) if version >= 7 else False)
    return (
        [
            (
                g.group_id,
                g.member_id if version >= 9 else None,
                g.member_epoch if version >= 9 else -1,
                topics(g.topics),
            )
            for g in req.groups
        ],
        bool(req.require_stable),
    )


fetch_topics = st.one_of(
    st.none(), st.lists(st.tuples(names, uuids, st.lists(int32, max_size=6)), max_size=4)
)


@settings(max_examples=400, deadline=None)
@given(
    version=st.integers(1, 10),
    group=names,
    topics=fetch_topics,
    groups=st.lists(st.tuples(names, st.one_of(st.none(), names), int32, fetch_topics), max_size=3),
    stable=st.booleans(),
)
def test_offset_fetch_request_decodes_as_kafka_python(
    version: int, group: str, topics, groups: list, stable: bool
) -> None:
    T = _FR.OffsetFetchRequestTopic
    GT = _FR.OffsetFetchRequestGroup.OffsetFetchRequestTopics

    def req_topics(cls, ts):
        if ts is None:
            return None
        if cls is T:  # v1-v7 topics have no id
            return [cls(name=n, partition_indexes=ps) for n, _tid, ps in ts]
        return [cls(name=n, topic_id=tid, partition_indexes=ps) for n, tid, ps in ts]

    if version < 2 and topics is None:
        topics = []
    req = _FR(
        group_id=group,
        topics=req_topics(T, topics),
        groups=[
            _FR.OffsetFetchRequestGroup(group_id=g, member_id=m, member_epoch=e, topics=req_topics(GT, ts))
            for g, m, e, ts in groups
        ],
        require_stable=stable,
    )
    body = req.encode(version=version)
    ours, end = decode_offset_fetch(bytes(body), 0, version)
    assert end == len(body)
    assert _fetch_view(ours, version) == _fetch_view(_FR.decode(body, version=version), version)
    for cut in range(len(body)):
        with pytest.raises((MalformedRequest, IndexError, struct.error)):
            decode_offset_fetch(bytes(body[:cut]), 0, version)
