"""The admin APIs a single Kafka node answers: DeleteRecords (key 21, v0-v2), DescribeLogDirs
(key 35, v1-v5), ElectLeaders (key 43, v0-v2), AlterPartitionReassignments (key 45, v0-v1) and
ListPartitionReassignments (key 46, v0).

Behaviour / version notes (Kafka's KafkaApis, ReplicaManager and, for the last three, the KRaft
controller's ReplicationControlManager, which the broker forwards them to):
- DeleteRecords: each partition's Offset (-1: the high watermark) becomes its log start offset
  when above it (Kafka's maybeIncrementLogStartOffset), written durably before the answer
  (``<partition dir>/log-start-offset``); LowWatermark is the log start offset after the request.
  ListOffsets EARLIEST, Fetch (OFFSET_OUT_OF_RANGE below it), share groups and retention follow
  it; segments wholly below it are deleted at the next retention run. Errors, each with
  LowWatermark -1: UNKNOWN_TOPIC_OR_PARTITION; INVALID_TOPIC_EXCEPTION for an internal topic
  (``__consumer_offsets``); POLICY_VIOLATION when cleanup.policy has no ``delete``;
  OFFSET_OUT_OF_RANGE for an offset above the high watermark or below -1. A partition named
  twice is answered once, with the last offset given (Kafka keys them by partition). TimeoutMs
  has nothing to wait for: with one replica the low watermark is reached at once.
- DescribeLogDirs: the one log directory (``log.dirs``, absolute), with every requested
  partition that lives in it (null: all of them, ``__consumer_offsets`` included), its size in
  bytes (all segments) and offset lag 0 (Kafka's max(HW - LEO, 0) on a leader), never a future
  log; unknown partitions are left out and topics left with none are dropped, as Kafka;
  TotalBytes/UsableBytes (v4+) from the file system; IsCordoned (v5+) false: kcoord cordons no
  log directory.
- ElectLeaders: every existing partition already has its preferred (and only) replica as leader,
  so each answers ELECTION_NOT_NEEDED, preferred (0) or unclean (1) alike; unknown topics and
  partitions UNKNOWN_TOPIC_OR_PARTITION; null TopicPartitions (all partitions) lists each topic
  with no partition results, as Kafka leaves out those that need no election; another election
  type is INVALID_REQUEST for the whole request (v1+).
- AlterPartitionReassignments: the only broker is this node; reassigning a partition to exactly
  ``[node.id]`` is a no-op success; an empty list, another broker id or a duplicate is
  INVALID_REPLICA_ASSIGNMENT (Kafka's validateManualPartitionAssignment messages); null replicas
  (cancel) NO_REASSIGNMENT_IN_PROGRESS; unknown topics and partitions UNKNOWN_TOPIC_OR_PARTITION;
  AllowReplicationFactorChange (v1+) is echoed (a change of factor fails the checks above first).
- ListPartitionReassignments: no reassignment is ever in progress, so the list is empty, for
  named topics and for all (null).
"""

from __future__ import annotations

import os
from typing import Any

from kcoord.apis.authorization import Op, authorized_topics, require_cluster
from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.dataplane.partition import Partition, Topic
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.messages import ApiKey, response_class

# Kafka's Topic.isInternal: records of these topics cannot be deleted by clients.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
INVALID_LOW_WATERMARK = -1
_LONG_MAX = (1 << 63) - 1

# --- DeleteRecords -----------------------------------------------------------------------------
_DRResp = response_class(ApiKey.DeleteRecords)
_DRTopic = _DRResp.DeleteRecordsTopicResult
_DRPart = _DRTopic.DeleteRecordsPartitionResult


def _partition(services: Services, name: str, index: int) -> tuple[Topic | None, Partition | None]:
    topic = services.partitions.get(name)
    if topic is None or not 0 <= index < len(topic.partitions):
        return topic, None
    return topic, topic.partitions[index]


def handle_delete_records(services: Services, ctx: RequestContext, req: Any) -> Any:
    requested: dict[str, dict[int, int]] = {}
    for t in req.topics:
        parts = requested.setdefault(t.name, {})
        for p in t.partitions:
            parts.pop(p.partition_index, None)  # the last one named wins, in its place
            parts[p.partition_index] = p.offset
    topics = []
    deletable = authorized_topics(services, ctx, Op.DELETE, requested)
    for name, parts in requested.items():
        results = []
        for index, offset in parts.items():
            code, low = 0, INVALID_LOW_WATERMARK
            topic, part = _partition(services, name, index)
            if name not in deletable:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif part is None:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif topic is not None and (topic.internal or name in INTERNAL_TOPICS):
                code = ErrorCode.INVALID_TOPIC_EXCEPTION
            else:
                try:
                    low = services.partitions.delete_records(part, offset)
                except KafkaError as e:
                    code = e.code
            results.append(_DRPart(partition_index=index, low_watermark=low, error_code=code))
        topics.append(_DRTopic(name=name, partitions=results))
    return _DRResp(throttle_time_ms=0, topics=topics)


def delete_records_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DRResp(
        throttle_time_ms=0,
        topics=[
            _DRTopic(
                name=t.name,
                partitions=[
                    _DRPart(
                        partition_index=p.partition_index,
                        low_watermark=INVALID_LOW_WATERMARK,
                        error_code=code,
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


# --- DescribeLogDirs ---------------------------------------------------------------------------
_LDResp = response_class(ApiKey.DescribeLogDirs)
_LDResult = _LDResp.DescribeLogDirsResult
_LDTopic = _LDResult.DescribeLogDirsTopic
_LDPart = _LDTopic.DescribeLogDirsPartition


def _space(path: str) -> tuple[int, int]:
    """Total and usable bytes of the file system holding ``path`` (Java's FileStore
    getTotalSpace/getUsableSpace; Kafka answers Long.MAX_VALUE when they overflow)."""
    st = os.statvfs(path)
    total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    return min(total, _LONG_MAX), min(usable, _LONG_MAX)


def handle_describe_log_dirs(services: Services, ctx: RequestContext, req: Any) -> Any:
    require_cluster(services, ctx, Op.DESCRIBE)
    wanted: set[tuple[str, int]] | None = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    by_topic: dict[str, list[Any]] = {}
    for part in services.partitions.all_partitions():
        if wanted is not None and (part.topic.name, part.index) not in wanted:
            continue
        by_topic.setdefault(part.topic.name, []).append(
            _LDPart(
                partition_index=part.index,
                partition_size=part.log.size_bytes,
                offset_lag=max(part.high_watermark - part.log.log_end_offset, 0),
                is_future_key=False,
            )
        )
    log_dir = str(services.config.data_dir.absolute())
    total, usable = _space(log_dir)
    result = _LDResult(
        error_code=0,
        log_dir=log_dir,
        topics=[_LDTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
        total_bytes=total,
        usable_bytes=usable,
        is_cordoned=False,
    )
    return _LDResp(throttle_time_ms=0, error_code=0, results=[result])


def describe_log_dirs_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _LDResp(throttle_time_ms=0, error_code=code, results=[])


# --- ElectLeaders ------------------------------------------------------------------------------
_ELResp = response_class(ApiKey.ElectLeaders)
_ELTopic = _ELResp.ReplicaElectionResult
_ELPart = _ELTopic.PartitionResult

ELECTION_PREFERRED, ELECTION_UNCLEAN = 0, 1
_NOT_NEEDED = "Leader election not needed for topic partition."


def _elect(services: Services, name: str, index: int) -> tuple[int, str | None]:
    """Kafka's ReplicationControlManager.electLeader for a partition led by its only replica."""
    topic = services.partitions.get(name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}"
    if not 0 <= index < len(topic.partitions):
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{index}"
    return ErrorCode.ELECTION_NOT_NEEDED, _NOT_NEEDED


def handle_elect_leaders(services: Services, ctx: RequestContext, req: Any) -> Any:
    require_cluster(services, ctx, Op.ALTER)
    election = req.election_type if ctx.api_version >= 1 else ELECTION_PREFERRED
    if election not in (ELECTION_PREFERRED, ELECTION_UNCLEAN):
        return elect_leaders_error_response(
            req, ctx.api_version, ErrorCode.INVALID_REQUEST, f"Unknown election type {election}"
        )
    results = []
    if req.topic_partitions is None:
        # Every partition: those that need no election are left out, each topic still listed.
        for name in services.partitions.topics:
            results.append(_ELTopic(topic=name, partition_result=[]))
    else:
        for t in req.topic_partitions:
            parts = []
            for index in t.partitions:
                code, message = _elect(services, t.topic, index)
                parts.append(_ELPart(partition_id=index, error_code=code, error_message=message))
            results.append(_ELTopic(topic=t.topic, partition_result=parts))
    return _ELResp(throttle_time_ms=0, error_code=0, replica_election_results=results)


def elect_leaders_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    """Kafka's ElectLeadersRequest.getErrorResponse: every named partition gets the error too."""
    results = [
        _ELTopic(
            topic=t.topic,
            partition_result=[
                _ELPart(partition_id=p, error_code=code, error_message=message) for p in t.partitions
            ],
        )
        for t in (req.topic_partitions or [])
    ]
    return _ELResp(throttle_time_ms=0, error_code=code, replica_election_results=results)


# --- AlterPartitionReassignments ---------------------------------------------------------------
_APResp = response_class(ApiKey.AlterPartitionReassignments)
_APTopic = _APResp.ReassignableTopicResponse
_APPart = _APTopic.ReassignablePartitionResponse


def _reassign(services: Services, name: str, index: int, replicas: list[int] | None) -> None:
    """Kafka's ReplicationControlManager.alterPartitionReassignment with this node the only
    registered broker; raises KafkaError for what it refuses."""
    topic = services.partitions.get(name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
    if not 0 <= index < len(topic.partitions):
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{index}.")
    if replicas is None:
        raise KafkaError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress.")
    if not replicas:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    node = services.cluster.node_id
    previous = None
    for broker in sorted(replicas):
        if broker != node:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker}, "
                "but no such broker is registered.",
            )
        if broker == previous:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker} more than once.",
            )
        previous = broker
    # [node.id]: the replica set it already has, nothing to move.


def handle_alter_partition_reassignments(services: Services, ctx: RequestContext, req: Any) -> Any:
    require_cluster(services, ctx, Op.ALTER)
    responses = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, message = 0, None
            try:
                _reassign(services, t.name, p.partition_index, p.replicas)
            except KafkaError as e:
                code, message = e.code, e.message
            parts.append(_APPart(partition_index=p.partition_index, error_code=code, error_message=message))
        responses.append(_APTopic(name=t.name, partitions=parts))
    return _APResp(
        throttle_time_ms=0,
        allow_replication_factor_change=req.allow_replication_factor_change if ctx.api_version >= 1 else True,
        error_code=0,
        error_message=None,
        responses=responses,
    )


def alter_partition_reassignments_error_response(
    req: Any, version: int, code: int, message: str | None
) -> Any:
    return _APResp(
        throttle_time_ms=0,
        allow_replication_factor_change=True,
        error_code=code,
        error_message=message,
        responses=[],
    )


# --- ListPartitionReassignments ----------------------------------------------------------------
_LPResp = response_class(ApiKey.ListPartitionReassignments)


def handle_list_partition_reassignments(services: Services, ctx: RequestContext, req: Any) -> Any:
    require_cluster(services, ctx, Op.DESCRIBE)
    # One broker: no partition is ever being reassigned, whichever topics were named.
    return _LPResp(throttle_time_ms=0, error_code=0, error_message=None, topics=[])


def list_partition_reassignments_error_response(
    req: Any, version: int, code: int, message: str | None
) -> Any:
    return _LPResp(throttle_time_ms=0, error_code=code, error_message=message, topics=[])
