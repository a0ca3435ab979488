"""Metadata (key 3) and DescribeTopicPartitions (key 75).

Behaviour / version notes:
- one broker, leader of every partition at epoch 0, sole replica and ISR member; it advertises
  the address of the listener the client connected to (``advertised.listeners``);
- topics = null (v1+) lists every topic, [] none; v0's [] means all (as Kafka);
- a requested unknown topic is created when ``auto.create.topics.enable`` and, from v4, the
  request's AllowAutoTopicCreation agree; it is answered at once with its partitions (creation
  is synchronous here); otherwise UNKNOWN_TOPIC_OR_PARTITION; an illegal name gets
  INVALID_TOPIC_EXCEPTION; v10+ entries with a non-zero topic id are looked up by id (the name
  is ignored, as in Kafka), unknown ids answer UNKNOWN_TOPIC_ID;
- internal topics (``__consumer_offsets``) are flagged IsInternal;
- with an authorizer (apis/authorization.py), as Kafka's handleTopicMetadataRequest: listing
  every topic lists those the principal may describe; a named topic it may not describe is
  TOPIC_AUTHORIZATION_FAILED (whether it exists or not); auto-creation needs Create on the
  cluster or the topic, else TOPIC_AUTHORIZATION_FAILED; the authorized operations (v8+) are
  the principal's (the cluster's only with Describe on it, else none);
- DescribeTopicPartitions pages by ResponsePartitionLimit with a cursor, as the Java admin
  client expects; an empty topic list describes every topic.
"""

from __future__ import annotations

import uuid
from typing import Any

from kcoord.apis.acl_operations import bitfield
from kcoord.apis.authorization import (
    CLUSTER,
    TOPIC,
    Op,
    authorized_operations,
    authorized_topics,
    cluster_authorized,
    topic_authorized,
)
from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.dataplane.partition import Topic
from kcoord.dataplane.partitions import validate_topic_name
from kcoord.metadata import CLUSTER_METADATA_TOPIC
from kcoord.metadata.acls import CLUSTER_NAME
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.messages import ApiKey, response_class

# AclOperation codes: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
# CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12, DESCRIBE_TOKENS 14
AUTHORIZED_OPS_OMITTED = -2147483648
ZERO_UUID = uuid.UUID(int=0)

_Resp = response_class(ApiKey.Metadata)
_Broker = _Resp.MetadataResponseBroker
_Topic = _Resp.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition


def handle(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    ep = services.cluster.advertised(ctx.listener)
    pm = services.partitions
    node = services.cluster.node_id
    topics_out = []
    include_ops = v >= 8 and req.include_topic_authorized_operations

    all_topics = req.topics is None or (v == 0 and not req.topics)
    if all_topics:
        wanted = [(t.name, None) for t in pm.topics.values()]
    else:
        wanted = [(t.name, t.topic_id if v >= 10 else None) for t in req.topics]

    allow_auto = services.config.auto_create_topics_enable and (v < 4 or req.allow_auto_topic_creation)
    for name, topic_id in wanted:
        by_id = topic_id is not None and topic_id != ZERO_UUID
        if by_id or name is None:
            # A topic id, when given, is what Kafka looks up; the name is then ignored (the Java
            # admin client's describeTopics by id leaves it empty, not null).
            if not by_id:
                topics_out.append(
                    _Topic(error_code=ErrorCode.INVALID_REQUEST, name=None, topic_id=ZERO_UUID, partitions=[])
                )
                continue
            topic = pm.get_by_id(topic_id)
            if topic is None:
                topics_out.append(
                    _Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id, partitions=[])
                )
                continue
            if not topic_authorized(services, ctx, Op.DESCRIBE, topic.name):
                topics_out.append(_denied(None, topic_id, False))
                continue
        else:
            if not topic_authorized(services, ctx, Op.DESCRIBE, name):
                if not all_topics:
                    topics_out.append(_denied(name, ZERO_UUID, False))
                continue
            topic = pm.get(name)
            if topic is None:
                if allow_auto and not (
                    cluster_authorized(services, ctx, Op.CREATE)
                    or topic_authorized(services, ctx, Op.CREATE, name)
                ):
                    topics_out.append(_denied(name, ZERO_UUID, False))
                    continue
                topic_or_error = _auto_create(services, name, allow_auto)
                if isinstance(topic_or_error, int):
                    topics_out.append(
                        _Topic(error_code=topic_or_error, name=name, topic_id=ZERO_UUID, partitions=[])
                    )
                    continue
                topic = topic_or_error
        ops = authorized_operations(services, ctx, TOPIC, topic.name) if include_ops else None
        topics_out.append(describe_topic(topic, node, ops))

    resp = _Resp(
        throttle_time_ms=0,
        brokers=[_Broker(node_id=node, host=ep.host, port=ep.port, rack=None)],
        cluster_id=services.cluster.cluster_id,
        controller_id=node,
        topics=topics_out,
        error_code=0,
    )
    if 8 <= v <= 10:
        if not req.include_cluster_authorized_operations:
            resp.authorized_operations = None
        elif cluster_authorized(services, ctx, Op.DESCRIBE):
            resp.authorized_operations = authorized_operations(services, ctx, CLUSTER, CLUSTER_NAME)
        else:
            resp.authorized_operations = set()
    return resp


def _denied(name: str | None, topic_id: uuid.UUID, internal: bool) -> Any:
    return _Topic(
        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        name=name,
        topic_id=topic_id,
        is_internal=internal,
        partitions=[],
    )


def _auto_create(services: Services, name: str, allow: bool) -> Topic | int:
    try:
        validate_topic_name(name)
    except KafkaError as e:
        return e.code
    if not allow or name == CLUSTER_METADATA_TOPIC:  # never a topic: the security metadata's log
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        return services.partitions.create_topic(name, services.config.num_partitions, {})
    except KafkaError as e:
        if e.code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return services.partitions.get(name)
        return e.code


def describe_topic(topic: Topic, node: int, ops: set[int] | None) -> Any:
    return _Topic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.internal,
        partitions=[
            _Partition(
                error_code=0,
                partition_index=p.index,
                leader_id=node,
                leader_epoch=p.leader_epoch,
                replica_nodes=[node],
                isr_nodes=[node],
                offline_replicas=[],
            )
            for p in topic.partitions
        ],
        authorized_operations=ops,
    )


# --- DescribeTopicPartitions ------------------------------------------------------------------
_DResp = response_class(ApiKey.DescribeTopicPartitions)
_DTopic = _DResp.DescribeTopicPartitionsResponseTopic
_DPartition = _DTopic.DescribeTopicPartitionsResponsePartition
_Cursor = _DResp.Cursor


def handle_describe_topic_partitions(services: Services, ctx: RequestContext, req: Any) -> Any:
    pm = services.partitions
    node = services.cluster.node_id
    limit = max(1, req.response_partition_limit)
    names = sorted({t.name for t in req.topics}) if req.topics else sorted(pm.topics)
    if not req.topics:  # every topic: those the principal may describe
        names = sorted(authorized_topics(services, ctx, Op.DESCRIBE, names))
    cursor = req.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    out = []
    remaining = limit
    next_cursor = None
    for name in names:
        if not topic_authorized(services, ctx, Op.DESCRIBE, name):
            out.append(
                _DTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    name=name,
                    topic_id=ZERO_UUID,
                    partitions=[],
                )
            )
            continue
        topic = pm.get(name)
        if topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            try:
                validate_topic_name(name)
            except KafkaError as e:
                code = e.code
            out.append(_DTopic(error_code=code, name=name, topic_id=ZERO_UUID, partitions=[]))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        parts = topic.partitions[start:]
        if remaining <= 0:
            next_cursor = _Cursor(topic_name=name, partition_index=start)
            break
        taken = parts[:remaining]
        remaining -= len(taken)
        out.append(
            _DTopic(
                error_code=0,
                name=name,
                topic_id=topic.topic_id,
                is_internal=topic.internal,
                partitions=[
                    _DPartition(
                        error_code=0,
                        partition_index=p.index,
                        leader_id=node,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=[node],
                        isr_nodes=[node],
                        eligible_leader_replicas=[],
                        last_known_elr=[],
                        offline_replicas=[],
                    )
                    for p in taken
                ],
                topic_authorized_operations=bitfield(authorized_operations(services, ctx, TOPIC, name)),
            )
        )
        if len(taken) < len(parts):
            next_cursor = _Cursor(topic_name=name, partition_index=start + len(taken))
            break
    return _DResp(throttle_time_ms=0, topics=out, next_cursor=next_cursor)
