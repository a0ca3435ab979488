"""The hand-written Fetch response encoder writes kafka-python's bytes, records uncopied."""

from __future__ import annotations

import os
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.fetch_codec import FetchAnswer
from kcoord.protocol.messages import ApiKey, response_class

_R = response_class(ApiKey.Fetch)
_T = _R.FetchableTopicResponse
_P = _T.PartitionData

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
records = st.one_of(st.none(), st.binary(max_size=200), st.integers(4000, 9000).map(lambda n: os.urandom(n)))
aborted = st.one_of(st.none(), st.lists(st.tuples(int64, int64), max_size=3))
partition = st.tuples(int32, int16, int64, int64, int64, aborted, int32, records)
topic = st.tuples(
    st.text(max_size=10),
    st.uuids().map(lambda u: u if u.int else uuid.uuid4()),
    st.lists(partition, max_size=3),
)


def _expected(topics: list, version: int, error: int, session: int) -> bytes:
    return _R(
        throttle_time_ms=0,
        error_code=error,
        session_id=session,
        responses=[
            _T(
                topic=name if version < 13 else None,
                topic_id=tid if version >= 13 else None,
                partitions=[
                    _P(
                        partition_index=i,
                        error_code=e,
                        high_watermark=hw,
                        last_stable_offset=lso,
                        log_start_offset=ls,
                        aborted_transactions=None
                        if ab is None
                        else [_P.AbortedTransaction(producer_id=p, first_offset=f) for p, f in ab],
                        preferred_read_replica=pr,
                        records=rec,
                    )
                    for i, e, hw, lso, ls, ab, pr, rec in parts
                ],
            )
            for name, tid, parts in topics
        ],
    ).encode(version=version)


@settings(max_examples=300, deadline=None)
@given(version=st.integers(4, 18), topics=st.lists(topic, max_size=3), error=int16, session=int32)
def test_fetch_answer(version: int, topics: list, error: int, session: int) -> None:
    answer = FetchAnswer(
        [(n if version < 13 else None, t if version >= 13 else None, parts) for n, t, parts in topics],
        error,
        session,
    )
    chunks = answer.encode_chunks(version)
    assert b"".join(chunks) == _expected(topics, version, error if version >= 7 else 0, session)
    # Large record sets are handed over as the very buffers read from the log.
    large = [p[7] for _n, _t, parts in topics for p in parts if p[7] is not None and len(p[7]) > 4096]
    assert all(any(c is rec for c in chunks) for rec in large)
