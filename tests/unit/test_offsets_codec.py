"""The hand-written OffsetCommit/OffsetFetch response encoders write kafka-python's bytes."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.messages import ApiKey, response_class
from kcoord.protocol.offsets_codec import OffsetCommitAnswer, OffsetFetchAnswer

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
    assert OffsetCommitAnswer(topics).encode(version=version) == _commit_expected(topics, version)


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
