"""Share group APIs (KIP-932, Kafka 4.3 wire versions): ShareGroupHeartbeat (76, v1),
ShareGroupDescribe (77, v1), ShareFetch (78), ShareAcknowledge (79), DescribeShareGroupOffsets
(90, v0-v1), AlterShareGroupOffsets (91, v0), DeleteShareGroupOffsets (92, v0).

Behaviour / version notes:
- ShareGroupHeartbeat: member ids come from the client; epoch 0 joins (creating the group),
  -1 leaves; INVALID_REQUEST for an empty member or group id, an empty rack id, a first
  heartbeat without topics, or an epoch below -1; a group id held by a classic group is
  GROUP_ID_NOT_FOUND ("not a share group"), as is an unknown group with a non-zero epoch;
  UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED as Kafka; the assignment is sent
  when joining, on full requests and when it changed, else null;
- ShareFetch/ShareAcknowledge: share sessions (share/sessions.py), acknowledgements first, then
  acquisition (share/coordinator.py); AcquisitionLockTimeoutMs is the group's
  share.record.lock.duration.ms; each partition answers with whole batches in Records and the
  acquired offset ranges in AcquiredRecords; with nothing to deliver a ShareFetch waits up to
  MaxWaitMs and is woken by new data or records released by others; acknowledgement results
  come back per partition (AcknowledgeErrorCode); a final request (epoch -1) releases every
  record the member still holds and answers only for the partitions it named;
- v2 ShareFetch: ShareAcquireMode 1 (record_limit) acquires at most MaxRecords; RENEW (type 4)
  only with IsRenewAck (v2), where the fetch limits must all be 0 and nothing is fetched, and
  only while share.renew.acknowledge.enable (INVALID_RECORD_STATE otherwise);
- the offsets APIs: StartOffset is the share-partition start offset (SPSO); -1 for partitions
  never initialized; alter/delete need the group to be Empty (NON_EMPTY_GROUP); alter creates
  the group and starts the given partitions afresh at the given offsets.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kcoord.broker.apis.groups import GROUP_OPERATIONS, _await, future_responder
from kcoord.broker.apis.metadata import _ops_int
from kcoord.broker.groups.group import Outcome
from kcoord.broker.share.coordinator import AckBatches, PartitionKey, PartitionResult
from kcoord.broker.share.group import JOIN_EPOCH, LEAVE_EPOCH, ShareGroup
from kcoord.broker.share.partition import AckType, SharePartition
from kcoord.broker.share.sessions import FINAL_EPOCH, INITIAL_EPOCH
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.messages import register_schema_pair

ZERO_UUID = uuid.UUID(int=0)
GROUP_OPERATIONS_INT = _ops_int(GROUP_OPERATIONS)
ACQUIRE_RECORD_LIMIT = 1

_, _HBResp = register_schema_pair("ShareGroupHeartbeat")
_, _DResp = register_schema_pair("ShareGroupDescribe")
_, _FResp = register_schema_pair("ShareFetch")
_, _AResp = register_schema_pair("ShareAcknowledge")
_, _DOResp = register_schema_pair("DescribeShareGroupOffsets")
_, _AOResp = register_schema_pair("AlterShareGroupOffsets")
_, _DLResp = register_schema_pair("DeleteShareGroupOffsets")


def _not_share_group(broker: Any, group_id: str) -> bool:
    return broker.groups.store_for(group_id).group_type(group_id) == "classic"


# --- ShareGroupHeartbeat -----------------------------------------------------------------------
def _hb_error(code: int, message: str | None, member_id: str | None = None) -> Any:
    return _HBResp(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        member_id=member_id,
        member_epoch=0,
        heartbeat_interval_ms=0,
        assignment=None,
    )


def handle_share_heartbeat(broker: Any, ctx: Any, req: Any) -> Any:
    gid, mid, epoch = req.group_id, req.member_id, req.member_epoch
    if not gid:
        return _hb_error(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if not mid:
        return _hb_error(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if req.rack_id is not None and req.rack_id == "":
        return _hb_error(ErrorCode.INVALID_REQUEST, "RackId can't be empty.", mid)
    if epoch < LEAVE_EPOCH:
        return _hb_error(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.", mid)
    if epoch == JOIN_EPOCH and not req.subscribed_topic_names:
        return _hb_error(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.", mid)
    if _not_share_group(broker, gid):
        return _hb_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.", mid)
    cfg = broker.config
    gc = broker.groups
    fut, respond = future_responder()

    def op(group: ShareGroup | None, now: int) -> Outcome:
        out = Outcome()
        if group is None:
            out.respond(
                respond, _hb_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {gid} not found.", mid)
            )
            return out
        if epoch == LEAVE_EPOCH and mid not in group.members:
            out.respond(
                respond, _hb_error(ErrorCode.UNKNOWN_MEMBER_ID, f"member {mid} is not in the group", mid)
            )
            return out
        configs = group.configs
        from kcoord.broker.share.config import effective_group_config as eff

        result, out = group.heartbeat(
            mid,
            epoch,
            req.rack_id,
            list(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None,
            ctx.client_id or "",
            "/" + ctx.client_host,
            int(eff("share.session.timeout.ms", configs, cfg)),
            int(eff("share.heartbeat.interval.ms", configs, cfg)),
            cfg.group_share_max_size,
            gc.topic_lookup,
            now,
        )
        if out.records:
            broker.share.rebalances.record(now)
            broker.share.wake(gid)  # the assignment changed: parked fetches may have new partitions
        assignment = None
        if result.assignment is not None:
            assignment = _HBResp.Assignment(
                topic_partitions=[
                    _HBResp.Assignment.TopicPartitions(topic_id=t, partitions=sorted(ps))
                    for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
                ]
            )
        out.respond(
            respond,
            _HBResp(
                throttle_time_ms=0,
                error_code=result.error,
                error_message=result.message,
                member_id=result.member_id,
                member_epoch=result.member_epoch,
                heartbeat_interval_ms=result.heartbeat_interval_ms,
                assignment=assignment,
            ),
        )
        return out

    gc.actor(gid).tell_share(op, create=epoch == JOIN_EPOCH)
    return fut


def share_heartbeat_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _hb_error(code, message, req.member_id)


# --- ShareGroupDescribe ------------------------------------------------------------------------
def handle_share_describe(broker: Any, ctx: Any, req: Any) -> Any:
    pm = broker.partitions
    groups = []
    for gid in req.group_ids:
        group = broker.groups.store_for(gid).get_share(gid)
        ops = GROUP_OPERATIONS_INT if req.include_authorized_operations else -2147483648
        if group is None or group.dead:
            groups.append(
                _DResp.DescribedGroup(
                    error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=f"Group {gid} not found.",
                    group_id=gid,
                    group_state="Dead",
                    group_epoch=-1,
                    assignment_epoch=-1,
                    assignor_name="",
                    members=[],
                    authorized_operations=ops,
                )
            )
            continue
        members = []
        # The commonStructs Assignment / TopicPartitions are nested under the field that uses them.
        assignment_cls = _DResp.DescribedGroup.Member.Assignment
        for m in group.members.values():
            parts = []
            for t, ps in sorted(m.assignment.items(), key=lambda kv: str(kv[0])):
                topic = pm.get_by_id(t)
                parts.append(
                    assignment_cls.TopicPartitions(
                        topic_id=t, topic_name=topic.name if topic else "", partitions=sorted(ps)
                    )
                )
            members.append(
                _DResp.DescribedGroup.Member(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=sorted(m.subscribed),
                    assignment=assignment_cls(topic_partitions=parts),
                )
            )
        groups.append(
            _DResp.DescribedGroup(
                error_code=0,
                error_message=None,
                group_id=gid,
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name="simple",
                members=members,
                authorized_operations=ops,
            )
        )
    return _DResp(throttle_time_ms=0, groups=groups)


def share_describe_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DResp(
        throttle_time_ms=0,
        groups=[
            _DResp.DescribedGroup(
                error_code=code,
                error_message=message,
                group_id=g,
                group_state="",
                group_epoch=-1,
                assignment_epoch=-1,
                assignor_name="",
                members=[],
            )
            for g in req.group_ids
        ],
    )


# --- ShareFetch and ShareAcknowledge -----------------------------------------------------------
def _ack_batches(partition: Any) -> AckBatches:
    return [
        (b.first_offset, b.last_offset, list(b.acknowledge_types)) for b in partition.acknowledgement_batches
    ]


def _acks_of(req: Any) -> dict[PartitionKey, AckBatches]:
    acks = {}
    for t in req.topics:
        for p in t.partitions:
            if p.acknowledgement_batches:
                acks[(t.topic_id, p.partition_index)] = _ack_batches(p)
    return acks


def _check_renew(acks: dict[PartitionKey, AckBatches], renew_request: bool) -> None:
    has_renew = any(AckType.RENEW in types for bs in acks.values() for _f, _l, types in bs)
    if has_renew and not renew_request:
        raise KafkaError(ErrorCode.INVALID_REQUEST, "RENEW acknowledgements need IsRenewAck (ShareFetch v2)")


def _renew_allowed(broker: Any, group_id: str) -> bool:
    from kcoord.broker.share.config import effective_group_config

    configs = broker.groups.store_for(group_id).group_configs.get(group_id, {})
    return effective_group_config("share.renew.acknowledge.enable", configs, broker.config) == "true"


def _fetch_response(
    broker: Any,
    version: int,
    group_id: str,
    results: dict[PartitionKey, PartitionResult],
    keys: list[PartitionKey],
) -> Any:
    node = broker.node_id
    topics: dict[uuid.UUID, list[Any]] = {}
    for pkey in keys:
        r = results.get(pkey, PartitionResult())
        topics.setdefault(pkey[0], []).append(
            _FResp.ShareFetchableTopicResponse.PartitionData(
                partition_index=pkey[1],
                error_code=r.error,
                error_message=r.error_message,
                acknowledge_error_code=r.ack_error or 0,
                acknowledge_error_message=None,
                current_leader=_FResp.ShareFetchableTopicResponse.PartitionData.LeaderIdAndEpoch(
                    leader_id=node, leader_epoch=0
                ),
                records=r.records,
                acquired_records=[
                    _FResp.ShareFetchableTopicResponse.PartitionData.AcquiredRecords(
                        first_offset=a.first_offset,
                        last_offset=a.last_offset,
                        delivery_count=a.delivery_count,
                    )
                    for a in r.acquired
                ],
            )
        )
    return _FResp(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        acquisition_lock_timeout_ms=broker.share.lock_duration_ms(group_id),
        responses=[_FResp.ShareFetchableTopicResponse(topic_id=t, partitions=ps) for t, ps in topics.items()],
        node_endpoints=[],
    )


def _top_error(resp_cls: Any, code: int, message: str | None) -> Any:
    return resp_cls(
        throttle_time_ms=0,
        error_code=code,
        error_message=message,
        acquisition_lock_timeout_ms=0,
        responses=[],
        node_endpoints=[],
    )


def handle_share_fetch(broker: Any, ctx: Any, req: Any) -> Any:
    v = ctx.api_version
    gid, mid, epoch = req.group_id, req.member_id, req.share_session_epoch
    if not gid or not mid:
        return _top_error(_FResp, ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required")
    acks = _acks_of(req)
    renew = v >= 2 and req.is_renew_ack
    _check_renew(acks, renew)
    if renew and (req.max_bytes or req.min_bytes or req.max_records or req.max_wait_ms):
        raise KafkaError(ErrorCode.INVALID_REQUEST, "a renew-only ShareFetch must set every fetch limit to 0")
    requested = [(t.topic_id, p.partition_index) for t in req.topics for p in t.partitions]
    forgotten = [(t.topic_id, p) for t in req.forgotten_topics_data for p in t.partitions]
    share = broker.share
    session = share.sessions.for_fetch((gid, mid), epoch, ctx.conn, requested, forgotten, bool(acks))
    final = epoch == FINAL_EPOCH
    keys = [] if final or renew else list(session.partitions)
    if renew and not _renew_allowed(broker, gid):
        results = {k: PartitionResult(ack_error=ErrorCode.INVALID_RECORD_STATE) for k in acks}
        return _fetch_response(broker, v, gid, results, list(acks))
    strict = v >= 2 and req.share_acquire_mode == ACQUIRE_RECORD_LIMIT
    max_records = req.max_records if req.max_records > 0 else 500

    def work(with_acks: bool) -> asyncio.Future[Any]:
        fut, respond = future_responder()

        def op(group: ShareGroup | None, now: int) -> Outcome:
            out = Outcome()
            results: dict[PartitionKey, PartitionResult] = {}
            if group is None:
                for k in keys or acks:
                    results[k] = PartitionResult(
                        error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=f"share group {gid} does not exist",
                    )
                out.respond(respond, (results, 0))
                return out
            if with_acks and acks:
                share.acknowledge(group, mid, acks, now, out, results)
                share.wake(gid)
            n = (
                share.acquire(group, mid, keys, max_records, req.max_bytes, now, out, results, strict)
                if keys
                else 0
            )
            if final:
                for sp in group.partitions.values():
                    out.records.extend(sp.release_member(mid, now))
                share.wake(gid)
            out.respond(respond, (results, n))
            return out

        broker.groups.actor(gid).tell_share(op)
        return fut

    if final:
        share.sessions.close((gid, mid))

    async def run() -> Any:
        results, n = await work(True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
        while n == 0 and keys and req.min_bytes > 0 and loop.time() < deadline and not broker.server.stopping:
            wake: asyncio.Future[None] = loop.create_future()
            share.park(gid, wake)
            parts = [broker.partitions.partition_by_id(t, p) for t, p in keys]
            for p in parts:
                if p is not None:
                    p.add_waiter(wake)
            try:
                await asyncio.wait_for(asyncio.shield(wake), max(deadline - loop.time(), 0))
            except TimeoutError:
                pass
            finally:
                share.unpark(gid, wake)
                for p in parts:
                    if p is not None:
                        p.remove_waiter(wake)
            more, n = await work(False)
            for k, r in more.items():
                mine = results.setdefault(k, PartitionResult())
                mine.error, mine.error_message = r.error, r.error_message
                mine.records, mine.acquired = r.records, r.acquired
        if epoch == INITIAL_EPOCH:
            shown = keys
        else:
            shown = [k for k in dict.fromkeys(list(acks) + keys) if k in results and results[k].has_news()]
        return _fetch_response(broker, v, gid, results, shown)

    return run()


def share_fetch_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _top_error(_FResp, code, message)


def handle_share_acknowledge(broker: Any, ctx: Any, req: Any) -> Any:
    v = ctx.api_version
    gid, mid, epoch = req.group_id, req.member_id, req.share_session_epoch
    if not gid or not mid:
        return _ack_error(ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required")
    acks = _acks_of(req)
    renew = v >= 2 and req.is_renew_ack
    _check_renew(acks, renew)
    share = broker.share
    share.sessions.for_acknowledge((gid, mid), epoch, ctx.conn)
    final = epoch == FINAL_EPOCH
    if final:
        share.sessions.close((gid, mid))
    if renew and not _renew_allowed(broker, gid):
        return _ack_response(
            broker, v, gid, {k: PartitionResult(ack_error=ErrorCode.INVALID_RECORD_STATE) for k in acks}
        )
    fut, respond = future_responder()

    def op(group: ShareGroup | None, now: int) -> Outcome:
        out = Outcome()
        results: dict[PartitionKey, PartitionResult] = {}
        if group is None:
            results = {k: PartitionResult(ack_error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION) for k in acks}
        else:
            share.acknowledge(group, mid, acks, now, out, results)
            if final:
                for sp in group.partitions.values():
                    out.records.extend(sp.release_member(mid, now))
            share.wake(gid)
        out.respond(respond, results)
        return out

    broker.groups.actor(gid).tell_share(op)
    return _await(fut, lambda results: _ack_response(broker, v, gid, results))


def _ack_response(
    broker: Any, version: int, group_id: str, results: dict[PartitionKey, PartitionResult]
) -> Any:
    topics: dict[uuid.UUID, list[Any]] = {}
    node = broker.node_id
    for (t, p), r in results.items():
        topics.setdefault(t, []).append(
            _AResp.ShareAcknowledgeTopicResponse.PartitionData(
                partition_index=p,
                error_code=r.ack_error or 0,
                error_message=None,
                current_leader=_AResp.ShareAcknowledgeTopicResponse.PartitionData.LeaderIdAndEpoch(
                    leader_id=node, leader_epoch=0
                ),
            )
        )
    return _AResp(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        acquisition_lock_timeout_ms=broker.share.lock_duration_ms(group_id),
        responses=[
            _AResp.ShareAcknowledgeTopicResponse(topic_id=t, partitions=ps) for t, ps in topics.items()
        ],
        node_endpoints=[],
    )


def _ack_error(code: int, message: str | None) -> Any:
    return _top_error(_AResp, code, message)


def share_acknowledge_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _ack_error(code, message)


# --- share group offsets ------------------------------------------------------------------------
def handle_describe_offsets(broker: Any, ctx: Any, req: Any) -> Any:
    v = ctx.api_version
    pm = broker.partitions
    out_groups = []
    for g in req.groups:
        group = broker.groups.store_for(g.group_id).get_share(g.group_id)
        if group is None or group.dead:
            out_groups.append(
                _DOResp.DescribeShareGroupOffsetsResponseGroup(
                    group_id=g.group_id,
                    topics=[],
                    error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                    error_message=f"Group {g.group_id} not found.",
                )
            )
            continue
        if g.topics is None:
            wanted: dict[str, list[int]] = {}
            for tid, p in sorted(group.partitions, key=lambda k: (str(k[0]), k[1])):
                topic = pm.get_by_id(tid)
                if topic is not None:
                    wanted.setdefault(topic.name, []).append(p)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        topics = []
        for name, parts in wanted.items():
            topic = pm.get(name)
            entries = []
            for p in parts:
                sp = group.partitions.get((topic.topic_id, p)) if topic is not None else None
                if topic is None or not 0 <= p < len(topic.partitions):
                    entries.append(_offsets_entry(p, -1, -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                elif sp is None:
                    entries.append(_offsets_entry(p, -1, -1, 0))
                else:
                    lag = max(
                        topic.partitions[p].high_watermark - sp.start_offset - _delivered_in_flight(sp), 0
                    )
                    entries.append(_offsets_entry(p, sp.start_offset, lag if v >= 1 else -1, 0))
            topics.append(
                _DOResp.DescribeShareGroupOffsetsResponseGroup.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name, topic_id=topic.topic_id if topic else ZERO_UUID, partitions=entries
                )
            )
        out_groups.append(
            _DOResp.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=topics, error_code=0, error_message=None
            )
        )
    return _DOResp(throttle_time_ms=0, groups=out_groups)


def _delivered_in_flight(sp: SharePartition) -> int:
    """Records above the SPSO whose delivery is complete (Kafka's deliveryCompleteCount)."""
    from kcoord.broker.share.partition import RecordState

    return sum(
        b.last_offset - b.first_offset + 1
        for b in sp.in_flight()
        if b.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
    )


def _offsets_entry(p: int, start: int, lag: int, code: int) -> Any:
    cls = _DOResp.DescribeShareGroupOffsetsResponseGroup.DescribeShareGroupOffsetsResponseTopic
    return cls.DescribeShareGroupOffsetsResponsePartition(
        partition_index=p, start_offset=start, leader_epoch=0, lag=lag, error_code=code, error_message=None
    )


def describe_offsets_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DOResp(
        throttle_time_ms=0,
        groups=[
            _DOResp.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=[], error_code=code, error_message=message
            )
            for g in req.groups
        ],
    )


def handle_alter_offsets(broker: Any, ctx: Any, req: Any) -> Any:
    gid = req.group_id
    if not gid:
        return alter_offsets_error_response(req, 0, ErrorCode.INVALID_GROUP_ID, None)
    if _not_share_group(broker, gid):
        return alter_offsets_error_response(
            req, 0, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group."
        )
    pm = broker.partitions
    fut, respond = future_responder()

    def op(group: ShareGroup | None, now: int) -> Outcome:
        out = Outcome()
        assert group is not None
        if group.members:
            out.respond(respond, (ErrorCode.NON_EMPTY_GROUP, f"Share group {gid} is not empty.", []))
            return out
        if group.group_epoch == 0:
            group.group_epoch = group.assignment_epoch = 1
            out.records.append(group.epoch_record())
        results = []
        for t in req.topics:
            topic = pm.get(t.topic_name)
            parts = []
            for p in t.partitions:
                if topic is None or not 0 <= p.partition_index < len(topic.partitions):
                    parts.append((p.partition_index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                key = (topic.topic_id, p.partition_index)
                sp = group.partitions.get(key)
                if sp is None:
                    sp = SharePartition(
                        gid,
                        topic.topic_id,
                        p.partition_index,
                        broker.groups.store_for(gid).share_partition_config(gid),
                        p.start_offset,
                    )
                    group.partitions[key] = sp
                    out.records.extend(sp.initialize())
                else:
                    out.records.extend(sp.reset_start(p.start_offset))
                parts.append((p.partition_index, 0))
            results.append((t.topic_name, topic.topic_id if topic else ZERO_UUID, parts))
        out.respond(respond, (0, None, results))
        return out

    broker.groups.actor(gid).tell_share(op, create=True)

    def build(result: Any) -> Any:
        code, message, results = result
        if code:
            return alter_offsets_error_response(req, 0, code, message)
        topic_cls = _AOResp.AlterShareGroupOffsetsResponseTopic
        return _AOResp(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            responses=[
                topic_cls(
                    topic_name=name,
                    topic_id=tid,
                    partitions=[
                        topic_cls.AlterShareGroupOffsetsResponsePartition(
                            partition_index=p, error_code=e, error_message=None
                        )
                        for p, e in parts
                    ],
                )
                for name, tid, parts in results
            ],
        )

    return _await(fut, build)


def alter_offsets_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _AOResp(throttle_time_ms=0, error_code=code, error_message=message, responses=[])


def handle_delete_offsets(broker: Any, ctx: Any, req: Any) -> Any:
    gid = req.group_id
    if not gid:
        return delete_offsets_error_response(req, 0, ErrorCode.INVALID_GROUP_ID, None)
    pm = broker.partitions
    fut, respond = future_responder()

    def op(group: ShareGroup | None, now: int) -> Outcome:
        out = Outcome()
        if group is None or group.dead:
            out.respond(respond, (ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.", []))
            return out
        if group.members:
            out.respond(respond, (ErrorCode.NON_EMPTY_GROUP, f"Share group {gid} is not empty.", []))
            return out
        results = []
        for t in req.topics:
            topic = pm.get(t.topic_name)
            keys = [k for k in group.partitions if topic is not None and k[0] == topic.topic_id]
            if not keys:
                results.append(
                    (
                        t.topic_name,
                        topic.topic_id if topic else ZERO_UUID,
                        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        "There is no offset information to delete.",
                    )
                )
                continue
            for k in keys:
                out.records.extend(group.partitions.pop(k).delete_records())
            results.append((t.topic_name, topic.topic_id, 0, None))  # type: ignore[union-attr]
        out.respond(respond, (0, None, results))
        return out

    broker.groups.actor(gid).tell_share(op)

    def build(result: Any) -> Any:
        code, message, results = result
        if code:
            return delete_offsets_error_response(req, 0, code, message)
        return _DLResp(
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            responses=[
                _DLResp.DeleteShareGroupOffsetsResponseTopic(
                    topic_name=n, topic_id=tid, error_code=e, error_message=m
                )
                for n, tid, e, m in results
            ],
        )

    return _await(fut, build)


def delete_offsets_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DLResp(throttle_time_ms=0, error_code=code, error_message=message, responses=[])
