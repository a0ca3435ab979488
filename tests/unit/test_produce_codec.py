"""The hand-written Produce codecs: the answer's encoder writes kafka-python's bytes, and the
request's decoder reads what kafka-python reads (the records as a view of the request),
refusing the nulls and truncated bodies that kafka-python's decoder and the dispatcher's null
check refuse."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.protocol.frames import MalformedRequest
from kcoord.protocol.messages import ApiKey, null_violation, request_class, response_class
from kcoord.protocol.produce_codec import PartitionAnswer, ProduceAnswer, decode_produce

_REQ = request_class(ApiKey.Produce)
_RESP = response_class(ApiKey.Produce)
_TD = _REQ.TopicProduceData
_PD = _TD.PartitionProduceData

names = st.text(min_size=0, max_size=20)
uuids = st.uuids().map(lambda u: u if u.int else uuid.uuid4())
int32 = st.integers(-(2**31), 2**31 - 1)
int16 = st.integers(-(2**15), 2**15 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
messages = st.one_of(st.none(), st.text(max_size=200))  # > 127 bytes: multi-byte varints
records = st.one_of(st.none(), st.binary(max_size=300))

answers = st.builds(
    PartitionAnswer,
    int32,
    int16,
    int64,
    int64,
    int64,
    st.lists(st.tuples(int32, messages), max_size=3),
    messages,
)


@settings(max_examples=400, deadline=None)
@given(
    version=st.integers(3, 13),
    topics=st.lists(st.tuples(names, uuids, st.lists(answers, max_size=4)), max_size=4),
)
def test_produce_answer_encodes_as_kafka_python(version: int, topics: list) -> None:
    P = _RESP.TopicProduceResponse.PartitionProduceResponse
    expected = _RESP(
        throttle_time_ms=0,
        responses=[
            _RESP.TopicProduceResponse(
                name=name if version < 13 else None,
                topic_id=tid if version >= 13 else None,
                partition_responses=[
                    P(
                        index=a.index,
                        error_code=a.error_code,
                        base_offset=a.base_offset,
                        log_append_time_ms=a.log_append_time_ms,
                        log_start_offset=a.log_start_offset,
                        record_errors=[
                            P.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                            for i, m in a.record_errors
                        ],
                        error_message=a.error_message,
                    )
                    for a in parts
                ],
            )
            for name, tid, parts in topics
        ],
    ).encode(version=version)
    assert ProduceAnswer(topics).encode(version=version) == expected


def _view(req, version: int) -> tuple:
    """The fields a handler reads, as the version defines them."""
    return (
        req.transactional_id,
        req.acks,
        req.timeout_ms,
        [
            (
                t.name if version < 13 else None,
                t.topic_id if version >= 13 else None,
                [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data],
            )
            for t in req.topic_data
        ],
    )


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(3, 13),
    tid=st.one_of(st.none(), names),
    acks=int16,
    timeout=int32,
    topics=st.lists(st.tuples(names, uuids, st.lists(st.tuples(int32, records), max_size=4)), max_size=3),
    prefix=st.binary(max_size=5),
)
def test_produce_request_decodes_as_kafka_python(
    version: int, tid, acks: int, timeout: int, topics: list, prefix: bytes
) -> None:
    req = _REQ(
        transactional_id=tid,
        acks=acks,
        timeout_ms=timeout,
        topic_data=[
            _TD(
                name=n if version < 13 else None,
                topic_id=u if version >= 13 else None,
                partition_data=[_PD(index=i, records=r) for i, r in parts],
            )
            for n, u, parts in topics
        ],
    )
    body = req.encode(version=version)
    ours, end = decode_produce(bytes(prefix + body), len(prefix), version)
    assert end == len(prefix) + len(body)
    assert _view(ours, version) == _view(_REQ.decode(body, version=version), version)
    for cut in range(len(body)):
        with pytest.raises((MalformedRequest, IndexError, struct.error)):
            decode_produce(bytes(body[:cut]), 0, version)


def test_produce_records_are_located_in_the_frame() -> None:
    """The records are a read-only view of the decoded bytes, and ``records_at`` is where they
    start in the frame: a request read into a writable buffer of its own (server/connection.py: large
    frames) is stamped there, through RequestContext.frame_buffer, not copied."""
    batch = bytes(range(70))
    prefix = b"\x07" * 5
    body = bytearray(
        prefix
        + _REQ(
            transactional_id=None,
            acks=1,
            timeout_ms=100,
            topic_data=[_TD(name="t", partition_data=[_PD(index=0, records=batch)])],
        ).encode(version=9)
    )
    req, _ = decode_produce(bytes(body), len(prefix), 9)
    part = req.topic_data[0].partition_data[0]
    assert bytes(part.records) == batch and part.records.readonly
    writable = memoryview(body)[part.records_at : part.records_at + len(part.records)]
    assert bytes(writable) == batch and not writable.readonly


@pytest.mark.parametrize("version", [3, 8, 9, 12])
@pytest.mark.parametrize("field", ["topic_data", "name", "partition_data"])
def test_produce_request_refuses_forbidden_nulls(version: int, field: str) -> None:
    topic = _TD(
        name=None if field == "name" else "t",
        partition_data=None if field == "partition_data" else [_PD(index=0, records=None)],
    )
    req = _REQ(
        transactional_id=None, acks=1, timeout_ms=1, topic_data=None if field == "topic_data" else [topic]
    )
    body = req.encode(version=version)
    assert null_violation(_REQ.decode(body, version=version), version) is not None
    with pytest.raises(MalformedRequest, match="non-nullable"):
        decode_produce(bytes(body), 0, version)


def test_produce_request_skips_unknown_tagged_fields() -> None:
    """Flexible versions may carry tagged fields at every level (KIP-482); none is defined here."""
    tags = b"\x02\x05\x01\xaa\x07\x02\xbb\xcc"  # two unknown tags
    body = (
        b"\x00"  # null transactional id
        + b"\xff\xff"
        + b"\x00\x00\x03\xe8"  # acks -1, timeout 1000
        + b"\x02"
        + b"\x02t"  # one topic "t"
        + b"\x02"
        + b"\x00\x00\x00\x03"
        + b"\x04abc"  # partition 3, records b"abc"
        + tags  # the partition's
        + tags  # the topic's
        + tags  # the request's
    )
    ours, end = decode_produce(bytes(body), 0, 9)
    assert end == len(body)
    assert (
        _view(ours, 9)
        == _view(_REQ.decode(body, version=9), 9)
        == (None, -1, 1000, [("t", None, [(3, b"abc")])])
    )
