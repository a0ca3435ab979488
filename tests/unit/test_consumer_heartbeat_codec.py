"""The hand-written ConsumerGroupHeartbeat response encoder writes kafka-python's bytes."""

from __future__ import annotations

import uuid

import pytest

from kcoord.protocol.consumer_heartbeat_codec import ConsumerGroupHeartbeatAnswer
from kcoord.protocol.messages import register_schema_pair

_, Resp = register_schema_pair("ConsumerGroupHeartbeat")
T1, T2 = uuid.uuid4(), uuid.uuid4()


def reference(answer: ConsumerGroupHeartbeatAnswer) -> object:
    assignment = None
    if answer.assignment is not None:
        assignment = Resp.Assignment(
            topic_partitions=[
                Resp.Assignment.TopicPartitions(topic_id=t, partitions=sorted(ps))
                for t, ps in sorted(answer.assignment.items(), key=lambda kv: str(kv[0]))
            ]
        )
    return Resp(
        throttle_time_ms=0,
        error_code=answer.error,
        error_message=answer.message,
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        heartbeat_interval_ms=answer.heartbeat_interval_ms,
        assignment=assignment,
    )


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize(
    "answer",
    [
        ConsumerGroupHeartbeatAnswer(member_id="m", member_epoch=7, heartbeat_interval_ms=5000),
        ConsumerGroupHeartbeatAnswer(
            member_id="m", member_epoch=1, heartbeat_interval_ms=5000, assignment={}
        ),
        ConsumerGroupHeartbeatAnswer(
            member_id="mé", member_epoch=3, heartbeat_interval_ms=1, assignment={T1: {3, 1, 2}, T2: set()}
        ),
        ConsumerGroupHeartbeatAnswer(
            member_id="m", member_epoch=2, assignment={T1: frozenset(range(200)), T2: frozenset({0})}
        ),
        ConsumerGroupHeartbeatAnswer(error=110, message="The member must abandon its partitions."),
    ],
)
def test_same_bytes_as_kafka_python(answer: ConsumerGroupHeartbeatAnswer, version: int) -> None:
    assert answer.encode(version) == bytes(reference(answer).encode(version=version))  # type: ignore[attr-defined]
