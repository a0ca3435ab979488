"""DescribeProducers (key 61), v0: the active producers of partitions, as Kafka's KafkaApis
handleDescribeProducersRequest and UnifiedLog.activeProducers.

Behaviour / version notes:
- per requested partition, every producer id the partition keeps state for (idempotent and
  transactional producers not yet expired): ProducerEpoch, LastSequence (-1 when its cached
  batches are gone, e.g. after a marker of a new epoch), LastTimestamp, CoordinatorEpoch (-1
  until a transaction marker was written for it) and CurrentTxnStartOffset (the first offset of
  its ongoing transaction, -1 when none);
- a topic name Kafka's Topic.validate refuses is INVALID_TOPIC_EXCEPTION with Kafka's message, a
  topic that does not exist UNKNOWN_TOPIC_OR_PARTITION with the error's default message, both on
  every requested partition; a partition index the topic does not have
  UNKNOWN_TOPIC_OR_PARTITION without a message (Kafka's ReplicaManager.getPartitionOrError);
- ``__consumer_offsets`` is served, with no producers: kcoord's coordinators write no producer
  ids;
- partitions named twice are answered twice, in request order, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.authorization import Op, topic_authorized
from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.dataplane.partitions import validate_topic_name
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.messages import ApiKey, response_class

_Resp = response_class(ApiKey.DescribeProducers)
_TopicResp = _Resp.TopicResponse
_PartResp = _TopicResp.PartitionResponse
_State = _PartResp.ProducerState

# Kafka's Errors.UNKNOWN_TOPIC_OR_PARTITION default message, which ApiError(error) carries.
_UNKNOWN_TOPIC = "This server does not host this topic-partition."


def handle(services: Services, ctx: RequestContext, req: Any) -> Any:
    pm = services.partitions
    topics = []
    for t in req.topics:
        error: tuple[int, str | None] | None = None
        try:
            validate_topic_name(t.name)
        except KafkaError as e:
            error = (e.code, e.message)
        if error is None and not topic_authorized(services, ctx, Op.READ, t.name):
            error = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
        topic = pm.get(t.name) if error is None else None
        if error is None and topic is None:
            error = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC)
        parts = []
        for index in t.partition_indexes:
            if error is not None:
                parts.append(_partition_error(index, *error))
            elif topic is None or not 0 <= index < len(topic.partitions):
                parts.append(_partition_error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None))
            else:
                parts.append(_describe(topic.partitions[index]))
        topics.append(_TopicResp(name=t.name, partitions=parts))
    return _Resp(throttle_time_ms=0, topics=topics)


def _describe(part: Any) -> Any:
    return _PartResp(
        partition_index=part.index,
        error_code=0,
        error_message=None,
        active_producers=[
            _State(
                producer_id=e.producer_id,
                producer_epoch=e.epoch,
                last_sequence=e.last_seq,
                last_timestamp=e.last_timestamp,
                coordinator_epoch=e.coordinator_epoch,
                current_txn_start_offset=-1
                if e.current_txn_first_offset is None
                else e.current_txn_first_offset,
            )
            for e in part.active_producers()
        ],
    )


def _partition_error(index: int, code: int, message: str | None) -> Any:
    return _PartResp(partition_index=index, error_code=code, error_message=message, active_producers=[])


def error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _Resp(
        throttle_time_ms=0,
        topics=[
            _TopicResp(
                name=t.name, partitions=[_partition_error(i, code, message) for i in t.partition_indexes]
            )
            for t in req.topics
        ],
    )
