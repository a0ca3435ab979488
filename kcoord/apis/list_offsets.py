"""ListOffsets (key 2, v0-v11) and OffsetForLeaderEpoch (key 23, v2-v4).

Behaviour / version notes:
- v0 (removed in Kafka 4.0 but still sent by tools such as Burrow 1.2.1 through sarama) answers
  with old-style offset lists as Kafka 0.10 did (see _old_style);
- -2 earliest = log start offset; -1 latest = high watermark, or the last stable offset under
  read_committed (v2+); -3 (v7+) the record with the largest timestamp; -4 (v8+) earliest local
  = earliest (no tiered storage); -5 (v9+) latest tiered and -6 (v11+) earliest pending upload
  find nothing: offset -1, as Kafka answers when tiered storage is off;
- a timestamp T >= 0 finds the first record (not batch) whose timestamp is >= T, below the
  high watermark / last stable offset; none: offset -1, timestamp -1, leader epoch -1 and no
  error; a special timestamp newer than the request's version, or an unknown negative one, is
  UNSUPPORTED_VERSION for that partition;
- CurrentLeaderEpoch (v4+) above 0 is UNKNOWN_LEADER_EPOCH; the leader epoch is always 0;
- OffsetForLeaderEpoch: epoch 0, the only one there is, ends at the log end offset; a later
  epoch is answered with undefined epoch/offset (-1/-1) as Kafka does for unknown epochs.
"""

from __future__ import annotations

import os
from typing import Any

from kcoord.apis.authorization import Op, topic_authorized
from kcoord.apis.context import RequestContext
from kcoord.apis.services import Services
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, response_class
from kcoord.storage.log import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from kcoord.storage.read_errors import READ_ERRORS, unreadable

EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
READ_COMMITTED = 1

_Resp = response_class(ApiKey.ListOffsets)
_TopicResp = _Resp.ListOffsetsTopicResponse
_PartResp = _TopicResp.ListOffsetsPartitionResponse

# Special timestamps and the first version that may carry them.
_MIN_VERSION = {
    MAX_TIMESTAMP: 7,
    EARLIEST_LOCAL_TIMESTAMP: 8,
    LATEST_TIERED_TIMESTAMP: 9,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP: 11,
}


def handle(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    pm = services.partitions
    isolation = req.isolation_level if v >= 2 else 0
    topics = []
    for t in req.topics:
        topic = pm.get(t.name)
        describable = topic_authorized(services, ctx, Op.DESCRIBE, t.name)
        parts = []
        for p in t.partitions:
            if not describable:
                parts.append(_error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                parts.append(_error(p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            part = topic.partitions[p.partition_index]
            leader_epoch = p.current_leader_epoch if v >= 4 else -1
            if leader_epoch > part.leader_epoch:
                parts.append(_error(p.partition_index, ErrorCode.UNKNOWN_LEADER_EPOCH))
                continue
            if v == 0:
                parts.append(_old_style(part, p.partition_index, p.timestamp, p.max_num_offsets, services))
                continue
            try:
                parts.append(_lookup(part, p.partition_index, p.timestamp, isolation, v))
            except READ_ERRORS as e:  # a timestamp lookup reads the segments
                code = unreadable("list offsets", t.name, p.partition_index, e)
                parts.append(_error(p.partition_index, code))
        topics.append(_TopicResp(name=t.name, partitions=parts))
    return _Resp(throttle_time_ms=0, topics=topics)


def _old_style(part: Any, index: int, ts: int, max_offsets: int, services: Services) -> Any:
    """ListOffsets v0 (Kafka 0.10's fetchOffsetsBefore): segment start offsets, each paired with
    its segment file's modification time, plus the high watermark paired with now; latest
    answers from the end, earliest from the start, a timestamp from the last pair not newer than
    it; up to MaxNumOffsets offsets, largest first."""
    log_ = part.log
    pairs = [
        (max(s.base_offset, log_.log_start_offset), int(os.fstat(s.fd).st_mtime * 1000))
        for s in log_.segments
    ]
    if log_.segments[-1].size > 0:
        pairs.append((part.high_watermark, services.clock.now_ms()))
    if ts == LATEST_TIMESTAMP:
        start = len(pairs) - 1
    elif ts == EARLIEST_TIMESTAMP:
        start = 0
    else:
        start = len(pairs) - 1
        while start >= 0 and pairs[start][1] > ts:
            start -= 1
    chosen = [pairs[i][0] for i in range(start, max(start - max(max_offsets, 0), -1), -1)]
    return _PartResp(
        partition_index=index,
        error_code=0,
        old_style_offsets=sorted(chosen, reverse=True),
        timestamp=-1,
        offset=-1,
        leader_epoch=-1,
    )


def _lookup(part: Any, index: int, ts: int, isolation: int, version: int) -> Any:
    limit = part.last_stable_offset if isolation == READ_COMMITTED else part.high_watermark
    if ts < 0 and version < _MIN_VERSION.get(ts, 0):
        return _error(index, ErrorCode.UNSUPPORTED_VERSION)
    offset, found_ts = -1, -1
    if ts in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        offset = part.log_start_offset
    elif ts == LATEST_TIMESTAMP:
        offset = limit
    elif ts == MAX_TIMESTAMP:
        found = part.log.offset_of_max_timestamp(limit)
        if found is not None:
            offset, found_ts = found
    elif ts in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
        pass
    elif ts >= 0:
        found = part.log.offset_for_timestamp(ts, limit)
        if found is not None:
            offset, found_ts = found
    else:
        return _error(index, ErrorCode.UNSUPPORTED_VERSION)
    return _PartResp(
        partition_index=index,
        error_code=0,
        old_style_offsets=[],
        timestamp=found_ts,
        offset=offset,
        leader_epoch=part.leader_epoch if offset >= 0 else -1,
    )


def _error(index: int, code: int) -> Any:
    return _PartResp(
        partition_index=index, error_code=code, old_style_offsets=[], timestamp=-1, offset=-1, leader_epoch=-1
    )


def error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _Resp(
        throttle_time_ms=0,
        topics=[
            _TopicResp(name=t.name, partitions=[_error(p.partition_index, code) for p in t.partitions])
            for t in req.topics
        ],
    )


# --- OffsetForLeaderEpoch ---------------------------------------------------------------------
_EResp = response_class(ApiKey.OffsetForLeaderEpoch)
_ETopic = _EResp.OffsetForLeaderTopicResult
_EPart = _ETopic.EpochEndOffset


def handle_leader_epoch(services: Services, ctx: RequestContext, req: Any) -> Any:
    pm = services.partitions
    topics = []
    for t in req.topics:
        topic = pm.get(t.topic)
        describable = topic_authorized(services, ctx, Op.DESCRIBE, t.topic)
        parts = []
        for p in t.partitions:
            if not describable or topic is None or not 0 <= p.partition < len(topic.partitions):
                parts.append(
                    _EPart(
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        if describable
                        else ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        partition=p.partition,
                        leader_epoch=-1,
                        end_offset=-1,
                    )
                )
                continue
            part = topic.partitions[p.partition]
            if p.current_leader_epoch > part.leader_epoch:
                parts.append(
                    _EPart(
                        error_code=ErrorCode.UNKNOWN_LEADER_EPOCH,
                        partition=p.partition,
                        leader_epoch=-1,
                        end_offset=-1,
                    )
                )
                continue
            if p.leader_epoch == part.leader_epoch:
                parts.append(
                    _EPart(
                        error_code=0,
                        partition=p.partition,
                        leader_epoch=part.leader_epoch,
                        end_offset=part.log.log_end_offset,
                    )
                )
            else:
                parts.append(_EPart(error_code=0, partition=p.partition, leader_epoch=-1, end_offset=-1))
        topics.append(_ETopic(topic=t.topic, partitions=parts))
    return _EResp(throttle_time_ms=0, topics=topics)


def leader_epoch_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _EResp(
        throttle_time_ms=0,
        topics=[
            _ETopic(
                topic=t.topic,
                partitions=[
                    _EPart(error_code=code, partition=p.partition, leader_epoch=-1, end_offset=-1)
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )
