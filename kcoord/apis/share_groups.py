"""Share group membership and administration (KIP-932, Kafka 4.3 wire versions):
ShareGroupHeartbeat (76, v1), ShareGroupDescribe (77, v1), DescribeShareGroupOffsets (90, v0-v1),
AlterShareGroupOffsets (91, v0), DeleteShareGroupOffsets (92, v0). Record delivery (ShareFetch,
ShareAcknowledge) is in share_fetch.py.

Behaviour / version notes:
- ShareGroupHeartbeat: member ids come from the client; epoch 0 joins (creating the group),
  -1 leaves; INVALID_REQUEST for an empty member or group id, an empty rack id, a first
  heartbeat without topics, or an epoch below -1; a group id held by a classic group is
  GROUP_ID_NOT_FOUND ("not a share group"), as is an unknown group with a non-zero epoch;
  UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED as Kafka; the assignment is sent
  when joining, on full requests and when it changed, else null;
- the offsets APIs: StartOffset is the share-partition start offset (SPSO); -1 for partitions
  never initialized; alter/delete need the group to be Empty (NON_EMPTY_GROUP); alter creates
  the group and starts the given partitions afresh at the given offsets.
"""

from __future__ import annotations

import uuid
from typing import Any

from kcoord.apis.acl_operations import bitfield
from kcoord.apis.authorization import (
    GROUP,
    Op,
    authorized_operations,
    authorized_topics,
    group_authorized,
    require,
)
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import reply_with
from kcoord.apis.services import Services
from kcoord.groups.store import GroupStore
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import register_schema_pair
from kcoord.runtime.outcome import Outcome
from kcoord.share.config import effective_group_config
from kcoord.share.group import JOIN_EPOCH, LEAVE_EPOCH
from kcoord.share.inflight import RecordState
from kcoord.share.partition import SharePartition
from kcoord.share.store import ShareGroups

ZERO_UUID = uuid.UUID(int=0)
SHARE = ShareGroups.group_type

_, _HBResp = register_schema_pair("ShareGroupHeartbeat")
_, _DResp = register_schema_pair("ShareGroupDescribe")
_, _DOResp = register_schema_pair("DescribeShareGroupOffsets")
_, _AOResp = register_schema_pair("AlterShareGroupOffsets")
_, _DLResp = register_schema_pair("DeleteShareGroupOffsets")


def _not_share_group(services: Services, group_id: str) -> bool:
    return services.groups.state_for(group_id).held_by_another_type(group_id, SHARE)


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


def handle_share_heartbeat(services: Services, ctx: RequestContext, req: Any) -> Any:
    gid, mid, epoch = req.group_id, req.member_id, req.member_epoch
    # Kafka's KafkaApis: Read on the group, then Describe on every subscribed topic name, before
    # the coordinator validates the request.
    require(services, ctx, Op.READ, GROUP, gid or "")
    names = req.subscribed_topic_names or []
    hidden = set(names) - authorized_topics(services, ctx, Op.DESCRIBE, names)
    if hidden:
        return _hb_error(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "The member is not authorized to describe topics: " + ", ".join(sorted(hidden)),
            mid,
        )
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
    if _not_share_group(services, gid):
        return _hb_error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.", mid)
    cfg = services.config
    reply, respond = reply_with(lambda response: response)

    def op(store: GroupStore, now: int) -> Outcome:
        out = Outcome()
        groups = store.kind(ShareGroups)
        group = groups.get_or_create(gid) if epoch == JOIN_EPOCH else groups.get(gid)
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
        eff = effective_group_config
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
            groups.topics,
            now,
        )
        if out.records:
            services.share.rebalances.record(now)
            services.share.wake(gid)  # the assignment changed: parked fetches may have new partitions
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

    services.groups.tell(gid, op)
    return reply


def share_heartbeat_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _hb_error(code, message, req.member_id)


# --- ShareGroupDescribe ------------------------------------------------------------------------
def handle_share_describe(services: Services, ctx: RequestContext, req: Any) -> Any:
    pm = services.partitions
    groups = []
    for gid in req.group_ids:
        if not group_authorized(services, ctx, Op.DESCRIBE, gid):
            groups.append(
                _DResp.DescribedGroup(
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    error_message=None,
                    group_id=gid,
                    group_state="",
                    group_epoch=0,
                    assignment_epoch=0,
                    assignor_name="",
                    members=[],
                    authorized_operations=-2147483648,
                )
            )
            continue
        group = services.groups.state_for(gid).kind(ShareGroups).get(gid)
        ops = (
            bitfield(authorized_operations(services, ctx, GROUP, gid))
            if req.include_authorized_operations
            else -2147483648
        )
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
    # Kafka answers the groups it may not describe first, then the ones the coordinator described.
    denied = [g.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED for g in groups]
    ordered = [g for g, d in zip(groups, denied, strict=True) if d]
    ordered += [g for g, d in zip(groups, denied, strict=True) if not d]
    return _DResp(throttle_time_ms=0, groups=ordered)


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


# --- share group offsets ------------------------------------------------------------------------
def handle_describe_offsets(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    pm = services.partitions
    out_groups = []
    for g in req.groups:
        if not group_authorized(services, ctx, Op.DESCRIBE, g.group_id):
            out_groups.append(
                _DOResp.DescribeShareGroupOffsetsResponseGroup(
                    group_id=g.group_id,
                    topics=[],
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                    error_message=None,
                )
            )
            continue
        group = services.groups.state_for(g.group_id).kind(ShareGroups).get(g.group_id)
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
        # Kafka: named topics the principal may not describe are TOPIC_AUTHORIZATION_FAILED per
        # partition; with all topics asked for, they are left out.
        describable = authorized_topics(services, ctx, Op.DESCRIBE, wanted)
        if g.topics is None:
            wanted = {n: ps for n, ps in wanted.items() if n in describable}
        topics = []
        for name, parts in wanted.items():
            topic = pm.get(name)
            entries = []
            for p in parts:
                sp = group.partitions.get((topic.topic_id, p)) if topic is not None else None
                if name not in describable:
                    entries.append(_offsets_entry(p, -1, -1, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                elif topic is None or not 0 <= p < len(topic.partitions):
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


def handle_alter_offsets(services: Services, ctx: RequestContext, req: Any) -> Any:
    gid = req.group_id
    if not gid:
        return alter_offsets_error_response(req, 0, ErrorCode.INVALID_GROUP_ID, None)
    require(services, ctx, Op.READ, GROUP, gid)
    readable = authorized_topics(services, ctx, Op.READ, [t.topic_name for t in req.topics])
    if _not_share_group(services, gid):
        return alter_offsets_error_response(
            req, 0, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group."
        )
    pm = services.partitions

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

    reply, respond = reply_with(build)

    def op(store: GroupStore, now: int) -> Outcome:
        out = Outcome()
        groups = store.kind(ShareGroups)
        group = groups.get_or_create(gid)
        if group is None:  # another group type took the id meanwhile
            out.respond(respond, (ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.", []))
            return out
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
                if t.topic_name not in readable:
                    parts.append((p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                    continue
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
                        groups.partition_config(gid),
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

    services.groups.tell(gid, op)
    return reply


def alter_offsets_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _AOResp(throttle_time_ms=0, error_code=code, error_message=message, responses=[])


def handle_delete_offsets(services: Services, ctx: RequestContext, req: Any) -> Any:
    gid = req.group_id
    if not gid:
        return delete_offsets_error_response(req, 0, ErrorCode.INVALID_GROUP_ID, None)
    require(services, ctx, Op.DELETE, GROUP, gid)
    readable = authorized_topics(services, ctx, Op.READ, [t.topic_name for t in req.topics])
    pm = services.partitions

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

    reply, respond = reply_with(build)

    def op(store: GroupStore, now: int) -> Outcome:
        out = Outcome()
        group = store.kind(ShareGroups).get(gid)
        if group is None or group.dead:
            out.respond(respond, (ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found.", []))
            return out
        if group.members:
            out.respond(respond, (ErrorCode.NON_EMPTY_GROUP, f"Share group {gid} is not empty.", []))
            return out
        results = []
        for t in req.topics:
            topic = pm.get(t.topic_name)
            if t.topic_name not in readable:
                results.append(
                    (
                        t.topic_name,
                        topic.topic_id if topic else ZERO_UUID,
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                        None,
                    )
                )
                continue
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

    services.groups.tell(gid, op)
    return reply


def delete_offsets_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DLResp(throttle_time_ms=0, error_code=code, error_message=message, responses=[])
