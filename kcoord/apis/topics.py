"""CreateTopics (key 19, v2-v7), DeleteTopics (key 20, v1-v6), CreatePartitions (key 37, v0-v3).

Behaviour / version notes:
- NumPartitions/ReplicationFactor -1 take num.partitions / default.replication.factor; a
  replication factor above 1 is INVALID_REPLICATION_FACTOR (one broker); manual assignments
  must name this broker only (INVALID_REPLICA_ASSIGNMENT), one entry per partition;
- topic configs are checked against Kafka's topic config names (INVALID_CONFIG for unknown
  names, bad values, and settings kcoord does not implement other than their default);
- v5+ answers with the partition count, replication factor and the effective configs; v7+
  with the topic id; ValidateOnly checks without creating;
- a topic named twice in one request gets INVALID_REQUEST for each occurrence;
- internal topics cannot be deleted (INVALID_REQUEST): ``__consumer_offsets`` is the
  coordinators' own log here, not a topic a client may drop (Kafka would allow it);
- DeleteTopics v6 may name topics by id (UNKNOWN_TOPIC_ID);
- CreatePartitions only grows a topic (INVALID_PARTITIONS otherwise).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from kcoord.apis.authorization import Op, cluster_authorized, topic_authorized
from kcoord.apis.config_sources import topic_config_source
from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.dataplane.partition import Topic
from kcoord.dataplane.topic_config import TOPIC_CONFIGS, effective
from kcoord.metadata import CLUSTER_METADATA_TOPIC
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.messages import ApiKey, response_class
from kcoord.storage.atomic import DirectoryNotSynced

ZERO_UUID = uuid.UUID(int=0)
_CResp = response_class(ApiKey.CreateTopics)
_CResult = _CResp.CreatableTopicResult
_CConfig = _CResult.CreatableTopicConfigs


def handle_create(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    pm = services.partitions
    cfg = services.config
    counts = Counter(t.name for t in req.topics)
    results = []
    may_create_any = cluster_authorized(services, ctx, Op.CREATE)
    for t in req.topics:
        if counts[t.name] > 1:
            results.append(_create_error(t.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
            continue
        if t.name == CLUSTER_METADATA_TOPIC:
            # Its directory is the security metadata's log: a topic of that name would share it.
            results.append(
                _create_error(
                    t.name,
                    ErrorCode.INVALID_REQUEST,
                    f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.",
                )
            )
            continue
        if not (may_create_any or topic_authorized(services, ctx, Op.CREATE, t.name)):
            results.append(
                _create_error(t.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
            )
            continue
        try:
            num_partitions, rf = _partitions_and_rf(t, cfg)
            configs = {c.name: c.value for c in t.configs}
            topic = pm.create_topic(t.name, num_partitions, configs, validate_only=req.validate_only)
        except KafkaError as e:
            results.append(_create_error(t.name, e.code, e.message))
            continue
        result = _CResult(
            name=t.name,
            topic_id=topic.topic_id,
            error_code=0,
            error_message=None,
            num_partitions=num_partitions,
            replication_factor=rf,
        )
        if v >= 5 and not topic_authorized(services, ctx, Op.DESCRIBE_CONFIGS, t.name):
            # Kafka creates the topic but keeps its configs from who may not describe them.
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            result.configs = None
        elif v >= 5:
            result.configs = [
                _CConfig(
                    name=name,
                    value=effective(name, topic.configs, cfg),
                    read_only=False,
                    config_source=topic_config_source(name, topic.configs, cfg),
                    is_sensitive=False,
                )
                for name in sorted(TOPIC_CONFIGS)
            ]
        results.append(result)
    return _CResp(throttle_time_ms=0, topics=results)


def _partitions_and_rf(t: Any, cfg: Any) -> tuple[int, int]:
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                "both partition assignments and numPartitions/replicationFactor were set",
            )
        indexes = sorted(a.partition_index for a in t.assignments)
        if indexes != list(range(len(indexes))):
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "partitions in the assignment must be numbered 0..n-1 without gaps",
            )
        for a in t.assignments:
            if list(a.broker_ids) != [cfg.node_id]:
                raise KafkaError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"replicas must be exactly [{cfg.node_id}], the only broker",
                )
        return len(indexes), 1
    n = cfg.num_partitions if t.num_partitions == -1 else t.num_partitions
    rf = cfg.default_replication_factor if t.replication_factor == -1 else t.replication_factor
    if n <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "number of partitions must be larger than 0")
    if rf <= 0:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if rf > 1:
        raise KafkaError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Unable to replicate the partition {rf} time(s): The target replication "
            "factor of " + str(rf) + " cannot be reached because only 1 broker(s) are registered.",
        )
    return n, rf


def _create_error(name: str, code: int, message: str | None) -> Any:
    return _CResult(
        name=name,
        topic_id=ZERO_UUID,
        error_code=code,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=None,
    )


def create_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _CResp(throttle_time_ms=0, topics=[_create_error(t.name, code, message) for t in req.topics])


# --- DeleteTopics -----------------------------------------------------------------------------
_DResp = response_class(ApiKey.DeleteTopics)
_DResult = _DResp.DeletableTopicResult


def handle_delete(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    pm = services.partitions
    if v >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    results = []
    # Kafka's ControllerApis.deleteTopics: Delete on the cluster deletes any topic; otherwise a
    # topic named that the principal may not describe is TOPIC_AUTHORIZATION_FAILED (whether it
    # exists or not), one it may describe but not delete too, and a topic given by id hides its
    # name from who may not describe it.
    may_delete_any = cluster_authorized(services, ctx, Op.DELETE)

    def allowed(op: Op, topic_name: str) -> bool:
        return may_delete_any or topic_authorized(services, ctx, op, topic_name)

    for name, topic_id in wanted:
        if name is None:
            topic = pm.get_by_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
            missing = ErrorCode.UNKNOWN_TOPIC_ID
        else:
            if not allowed(Op.DESCRIBE, name):
                results.append(_deny(name, topic_id or ZERO_UUID))
                continue
            topic = pm.get(name)
            missing = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if topic is not None and not allowed(Op.DELETE, topic.name):
            shown = topic.name if name is not None or allowed(Op.DESCRIBE, topic.name) else None
            results.append(_deny(shown, topic.topic_id if name is None else ZERO_UUID))
            continue
        if topic is None:
            results.append(
                _DResult(name=name, topic_id=topic_id or ZERO_UUID, error_code=missing, error_message=None)
            )
            continue
        if topic.internal:
            results.append(
                _deleted(topic, ErrorCode.INVALID_REQUEST, f"internal topic {topic.name} cannot be deleted")
            )
            continue
        try:
            pm.delete_topic(topic)
        except DirectoryNotSynced as e:  # deleted, but a crash may bring it back (whole)
            message = f"the topic is deleted, but its deletion may not survive a crash: {e}"
            results.append(_deleted(topic, ErrorCode.KAFKA_STORAGE_ERROR, message))
            continue
        except OSError as e:  # topics.json could not be written: the topic is still there
            message = f"the topic's deletion could not be recorded: {e}"
            results.append(_deleted(topic, ErrorCode.KAFKA_STORAGE_ERROR, message))
            continue
        services.share.topic_deleted(topic.topic_id)
        results.append(_deleted(topic, 0))
    return _DResp(throttle_time_ms=0, responses=results)


def _deleted(topic: Topic, code: int, message: str | None = None) -> Any:
    """A DeleteTopics result naming ``topic``."""
    return _DResult(name=topic.name, topic_id=topic.topic_id, error_code=code, error_message=message)


def _deny(name: str | None, topic_id: uuid.UUID) -> Any:
    return _DResult(
        name=name, topic_id=topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=None
    )


def delete_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    if version >= 6:
        items = [(t.name, t.topic_id) for t in req.topics]
    else:
        items = [(n, ZERO_UUID) for n in req.topic_names]
    return _DResp(
        throttle_time_ms=0,
        responses=[
            _DResult(name=n, topic_id=i or ZERO_UUID, error_code=code, error_message=message)
            for n, i in items
        ],
    )


# --- CreatePartitions -------------------------------------------------------------------------
_PResp = response_class(ApiKey.CreatePartitions)
_PResult = _PResp.CreatePartitionsTopicResult


def handle_create_partitions(services: Services, ctx: RequestContext, req: Any) -> Any:
    pm = services.partitions
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        try:
            if counts[t.name] > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"topic {t.name} is listed more than once")
            if not topic_authorized(services, ctx, Op.ALTER, t.name):
                raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if t.assignments is not None:
                topic = pm.get(t.name)
                added = t.count - (len(topic.partitions) if topic else 0)
                if len(t.assignments) != added:
                    raise KafkaError(
                        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                        f"{len(t.assignments)} assignments for {added} new partitions",
                    )
                for a in t.assignments:
                    if list(a.broker_ids) != [services.cluster.node_id]:
                        raise KafkaError(
                            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                            f"replicas must be exactly [{services.cluster.node_id}], the only broker",
                        )
            pm.create_partitions(t.name, t.count, validate_only=req.validate_only)
        except KafkaError as e:
            results.append(_PResult(name=t.name, error_code=e.code, error_message=e.message))
            continue
        results.append(_PResult(name=t.name, error_code=0, error_message=None))
    return _PResp(throttle_time_ms=0, results=results)


def create_partitions_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _PResp(
        throttle_time_ms=0,
        results=[_PResult(name=t.name, error_code=code, error_message=message) for t in req.topics],
    )
