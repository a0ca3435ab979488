"""The transaction coordinator's APIs: AddPartitionsToTxn (24, v0-v3), AddOffsetsToTxn (25,
v0-v4), EndTxn (26, v0-v4), DescribeTransactions (65, v0), ListTransactions (66, v0-v2);
InitProducerId is in producer_id.py, TxnOffsetCommit in offsets.py.

Behaviour / version notes:
- kcoord serves transaction.version 1 (KIP-890 part 1: partitions are verified on produce):
  AddPartitionsToTxn stops at v3 (v4+ is the broker-to-broker verification form), EndTxn at v4
  and TxnOffsetCommit at v4 (their v5 means transaction.version 2: an epoch bump per
  transaction), so every client runs its transactions the v1 way;
- an empty or null transactional id is INVALID_REQUEST; an id the coordinator does not know, or
  another producer id, INVALID_PRODUCER_ID_MAPPING; another epoch PRODUCER_FENCED; a request while
  the previous transaction's markers are being written CONCURRENT_TRANSACTIONS (clients retry);
- AddPartitionsToTxn answers one error for every partition (Kafka's all-or-nothing); unknown
  topics or partitions are UNKNOWN_TOPIC_OR_PARTITION and the others then
  OPERATION_NOT_ATTEMPTED;
- AddOffsetsToTxn adds the group's ``__consumer_offsets`` partition; EndTxn answers once the
  PrepareCommit/PrepareAbort record is durable, and the markers follow (Kafka);
- DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND for unknown (or expired) ids; ListTransactions
  filters by state names (unknown names come back in UnknownStateFilters), producer ids,
  v1 DurationFilter (transactions started longer ago than that many ms) and v2
  TransactionalIdPattern (a Java regex, matched here with RE2 as kcoord's other regexes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import re2

from kcoord.apis.authorization import (
    GROUP,
    TRANSACTIONAL_ID,
    Op,
    authorized,
    authorized_topics,
    require,
)
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import reply_with
from kcoord.apis.services import Services
from kcoord.groups import OFFSETS_TOPIC
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, response_class
from kcoord.transaction.coordinator import TransactionStore
from kcoord.transaction.metadata import STATE_BY_NAME, TransactionState

# --- AddPartitionsToTxn --------------------------------------------------------------------------
_APResp = response_class(ApiKey.AddPartitionsToTxn)
_APTopic = _APResp.AddPartitionsToTxnTopicResult
_APPart = _APTopic.AddPartitionsToTxnPartitionResult


def _ap_response(topics: list[tuple[str, list[tuple[int, int]]]]) -> Any:
    return _APResp(
        throttle_time_ms=0,
        error_code=0,
        results_by_topic_v3_and_below=[
            _APTopic(
                name=name,
                results_by_partition=[_APPart(partition_index=p, partition_error_code=e) for p, e in ps],
            )
            for name, ps in topics
        ],
    )


def handle_add_partitions(services: Services, ctx: RequestContext, req: Any) -> Any:
    tid = req.v3_and_below_transactional_id
    wanted = [(t.name, list(t.partitions)) for t in req.v3_and_below_topics]
    if not tid:
        return _ap_response([(n, [(p, ErrorCode.INVALID_REQUEST) for p in ps]) for n, ps in wanted])
    require(services, ctx, Op.WRITE, TRANSACTIONAL_ID, tid)
    pm = services.partitions
    writable = authorized_topics(services, ctx, Op.WRITE, [n for n, _ps in wanted])
    refused = {
        (n, p): ErrorCode.TOPIC_AUTHORIZATION_FAILED
        if n not in writable
        else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        for n, ps in wanted
        for p in ps
        if n not in writable or (topic := pm.get(n)) is None or not 0 <= p < len(topic.partitions)
    }
    if refused:
        # Kafka: the refused partitions get their error, the others OPERATION_NOT_ATTEMPTED.
        return _ap_response(
            [
                (n, [(p, refused.get((n, p), ErrorCode.OPERATION_NOT_ATTEMPTED)) for p in ps])
                for n, ps in wanted
            ]
        )
    reply, respond = reply_with(
        lambda error: _ap_response([(n, [(p, error) for p in ps]) for n, ps in wanted])
    )
    pid, epoch = req.v3_and_below_producer_id, req.v3_and_below_producer_epoch
    partitions = [(n, p) for n, ps in wanted for p in ps]
    services.transactions.tell(
        tid, lambda store, now: store.add_partitions(tid, pid, epoch, partitions, respond, now)
    )
    return reply


def add_partitions_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _ap_response([(t.name, [(p, code) for p in t.partitions]) for t in req.v3_and_below_topics or []])


# --- AddOffsetsToTxn -----------------------------------------------------------------------------
_AOResp = response_class(ApiKey.AddOffsetsToTxn)


def handle_add_offsets(services: Services, ctx: RequestContext, req: Any) -> Any:
    tid = req.transactional_id
    if not tid:
        return _AOResp(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST)
    require(services, ctx, Op.WRITE, TRANSACTIONAL_ID, tid)
    require(services, ctx, Op.READ, GROUP, req.group_id)
    if not req.group_id:
        return _AOResp(throttle_time_ms=0, error_code=ErrorCode.INVALID_GROUP_ID)
    offsets_partition = (OFFSETS_TOPIC, services.groups.partition_for(req.group_id))
    reply, respond = reply_with(lambda error: _AOResp(throttle_time_ms=0, error_code=error))
    pid, epoch = req.producer_id, req.producer_epoch
    services.transactions.tell(
        tid, lambda store, now: store.add_partitions(tid, pid, epoch, [offsets_partition], respond, now)
    )
    return reply


def add_offsets_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _AOResp(throttle_time_ms=0, error_code=code)


# --- EndTxn ---------------------------------------------------------------------------------------
_EResp = response_class(ApiKey.EndTxn)


def handle_end(services: Services, ctx: RequestContext, req: Any) -> Any:
    tid = req.transactional_id
    if not tid:
        return _EResp(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST)
    require(services, ctx, Op.WRITE, TRANSACTIONAL_ID, tid)
    reply, respond = reply_with(lambda error: _EResp(throttle_time_ms=0, error_code=error))
    pid, epoch, commit = req.producer_id, req.producer_epoch, bool(req.committed)
    services.transactions.tell(
        tid, lambda store, now: store.end_transaction(tid, pid, epoch, commit, respond, now)
    )
    return reply


def end_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _EResp(throttle_time_ms=0, error_code=code)


# --- DescribeTransactions -----------------------------------------------------------------------------
_DResp = response_class(ApiKey.DescribeTransactions)
_DState = _DResp.TransactionState
_DTopic = _DState.TopicData


def _empty_state(tid: str, code: int) -> Any:
    return _DState(
        error_code=code,
        transactional_id=tid,
        transaction_state="",
        transaction_timeout_ms=0,
        transaction_start_time_ms=-1,
        producer_id=-1,
        producer_epoch=-1,
        topics=[],
    )


def _describe_one(services: Services, ctx: RequestContext, tid: str) -> Any:
    def empty(code: int) -> Any:
        return _empty_state(tid, code)

    if not tid:
        return empty(ErrorCode.INVALID_REQUEST)
    if not authorized(services, ctx, Op.DESCRIBE, TRANSACTIONAL_ID, tid):
        return empty(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    meta = services.transactions.state_for(tid).transactions.get(tid)
    if meta is None or meta.state == TransactionState.DEAD:
        return empty(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(p)
    # Kafka leaves out the topics the principal may not describe.
    describable = authorized_topics(services, ctx, Op.DESCRIBE, by_topic)
    by_topic = {t: ps for t, ps in by_topic.items() if t in describable}
    return _DState(
        error_code=0,
        transactional_id=tid,
        transaction_state=meta.state.kafka_name,
        transaction_timeout_ms=meta.timeout_ms,
        transaction_start_time_ms=meta.start_timestamp,
        producer_id=meta.producer_id,
        producer_epoch=meta.producer_epoch,
        topics=[_DTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


def handle_describe(services: Services, ctx: RequestContext, req: Any) -> Any:
    return _DResp(
        throttle_time_ms=0,
        transaction_states=[_describe_one(services, ctx, tid) for tid in req.transactional_ids],
    )


def describe_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DResp(
        throttle_time_ms=0,
        transaction_states=[_empty_state(tid, code) for tid in req.transactional_ids or []],
    )


# --- ListTransactions ---------------------------------------------------------------------------------
_LResp = response_class(ApiKey.ListTransactions)
_LState = _LResp.TransactionState


def handle_list(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    names = list(req.state_filters or [])
    unknown = [n for n in names if n not in STATE_BY_NAME]
    states = {STATE_BY_NAME[n] for n in names if n in STATE_BY_NAME}
    producer_ids = set(req.producer_id_filters or [])
    duration = req.duration_filter if v >= 1 else -1
    pattern = req.transactional_id_pattern if v >= 2 else None
    matcher: Callable[[str], bool] | None = None
    if pattern:
        try:
            compiled = re2.compile(pattern)
        except re2.error:
            return _LResp(
                throttle_time_ms=0,
                error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                unknown_state_filters=[],
                transaction_states=[],
            )
        matcher = lambda tid: compiled.fullmatch(tid) is not None  # noqa: E731
    now = services.clock.now_ms()
    found = []
    for store in services.transactions.states():
        for tid, meta in _listed(store, states, producer_ids, duration, now):
            if (matcher is None or matcher(tid)) and authorized(
                services, ctx, Op.DESCRIBE, TRANSACTIONAL_ID, tid
            ):
                found.append(
                    _LState(
                        transactional_id=tid,
                        producer_id=meta.producer_id,
                        transaction_state=meta.state.kafka_name,
                    )
                )
    return _LResp(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=found)


def _listed(
    store: TransactionStore, states: set[TransactionState], producer_ids: set[int], duration: int, now: int
) -> Any:
    for tid, meta in store.transactions.items():
        if meta.state == TransactionState.DEAD:
            continue
        if states and meta.state not in states:
            continue
        if producer_ids and meta.producer_id not in producer_ids:
            continue
        if duration >= 0 and now - meta.start_timestamp <= duration:
            continue
        yield tid, meta


def list_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _LResp(throttle_time_ms=0, error_code=code, unknown_state_filters=[], transaction_states=[])
