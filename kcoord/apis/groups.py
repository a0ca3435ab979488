"""Classic group APIs: JoinGroup (11, v0-v9), Heartbeat (12, v0-v4), LeaveGroup (13, v0-v5),
SyncGroup (14, v0-v5), DescribeGroups (15, v0-v6), ListGroups (16, v0-v5), DeleteGroups (42,
v0-v2). FindCoordinator, which serves every coordinator, is find_coordinator.py.

Behaviour / version notes:
- group ids: empty (or null) is INVALID_GROUP_ID for Join/Sync/Heartbeat/Leave (KIP-289);
  DescribeGroups and DeleteGroups take "" like any group id, as Kafka does, so that the offsets
  standalone consumers stored under it can be inspected and deleted; an unknown group is
  UNKNOWN_MEMBER_ID for Sync/Heartbeat/Leave and for a JoinGroup naming a member id;
- JoinGroup: MEMBER_ID_REQUIRED only from v4; v0 has no rebalance timeout (the session timeout
  is used); static membership from v5; the leader's response lists the members' metadata;
  SkipAssignment (v9) is set for a static leader that rejoined without a rebalance;
- SyncGroup checks ProtocolType/ProtocolName (v5+: INCONSISTENT_GROUP_PROTOCOL);
- KIP-848 migration: JoinGroup, SyncGroup, Heartbeat and LeaveGroup of a consumer group with
  members are answered by it for its members on the classic protocol (consumer/classic_members.py,
  REBALANCE_IN_PROGRESS telling them to join again); a JoinGroup turns an empty consumer group
  into a classic group; a share group id answers JoinGroup INCONSISTENT_GROUP_PROTOCOL and
  SyncGroup, Heartbeat and LeaveGroup UNKNOWN_MEMBER_ID, as Kafka's classicGroup* do;
- LeaveGroup: v0-v2 leave one member (error at the top level), v3+ a batch with per-member
  errors, including removal by group.instance.id alone (the admin client's removeMembers);
- DescribeGroups: an unknown group is Dead (v6: GROUP_ID_NOT_FOUND); metadata and assignment
  bytes are shown for Stable groups, as Kafka does; client host as Kafka prints it ("/1.2.3.4");
- ListGroups: every group that exists, standalone ones included; state (v4+) and type (v5+)
  filters, case-insensitive;
- DeleteGroups: NON_EMPTY_GROUP while members remain, GROUP_ID_NOT_FOUND for unknown groups;
  tombstones for every offset and for the group.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.authorization import (
    GROUP,
    Op,
    authorized_operations,
    cluster_authorized,
    group_authorized,
    require,
)
from kcoord.apis.context import RequestContext
from kcoord.apis.reply import reply_all, reply_with
from kcoord.apis.services import Services
from kcoord.classic import offsets as offset_rules
from kcoord.classic.group import ClassicGroup, GroupState
from kcoord.classic.metrics import COMPLETED_REBALANCE
from kcoord.classic.store import ClassicGroups
from kcoord.consumer.store import ConsumerGroups
from kcoord.groups.classic_protocol import JoinRequest, JoinResult, SyncResult
from kcoord.groups.store import GroupStore
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.groups_codec import HeartbeatAnswer, JoinGroupAnswer, SyncGroupAnswer
from kcoord.protocol.messages import ApiKey, response_class
from kcoord.runtime.outcome import Operation, Outcome, Responder
from kcoord.share.store import ShareGroups

CLASSIC = ClassicGroups.group_type
CONSUMER = ConsumerGroups.group_type


def _not_classic(services: Services, group_id: str) -> bool:
    """A share group's id: Kafka's classic APIs answer JoinGroup INCONSISTENT_GROUP_PROTOCOL and the
    others UNKNOWN_MEMBER_ID for it. (Consumer groups answer them for their members on the classic
    protocol: KIP-848 migration.)"""
    store = services.groups.state_for(group_id)
    return store.held_by_another_type(group_id, CLASSIC) and store.group_type(group_id) != CONSUMER


def client_host(ctx: RequestContext) -> str:
    return "/" + ctx.client_host


# --- JoinGroup ---------------------------------------------------------------------------------
def _join_response(r: JoinResult, version: int) -> JoinGroupAnswer:
    return JoinGroupAnswer(
        r.error,
        r.generation,
        r.protocol_type,
        r.protocol_name if version >= 7 or r.protocol_name is not None else "",
        r.leader,
        r.skip_assignment,
        r.member_id,
        r.members,
    )


def handle_join(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    # Kafka authorizes before the coordinator validates the group id.
    require(services, ctx, Op.READ, GROUP, req.group_id)
    if not req.group_id:
        return _join_response(JoinResult(ErrorCode.INVALID_GROUP_ID, req.member_id or ""), v)
    if _not_classic(services, req.group_id):
        return _join_response(JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, ""), v)
    join = JoinRequest(
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 5 else None,
        client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=v >= 4,
    )
    reply, respond = reply_with(lambda r: _join_response(r, v))
    bounds = (services.config.group_min_session_timeout_ms, services.config.group_max_session_timeout_ms)
    services.groups.tell(req.group_id, join_op(req.group_id, join, bounds, respond))
    return reply


def join_op(
    gid: str, join: JoinRequest, session_bounds: tuple[int, int], respond: Responder
) -> Operation[GroupStore]:
    """JoinGroup, as Kafka's classicGroupJoin dispatches it: a consumer group with members takes
    it for its member on the classic protocol; an empty consumer group gives way to a classic
    group (its offsets stay); otherwise the classic group, created by a join without member id."""

    def op(store: GroupStore, now: int) -> Outcome:
        consumer = store.kind(ConsumerGroups)
        group = consumer.get(gid)
        if group is None:
            return _classic_join(store, now, gid, join, respond)
        refused = None
        if not session_bounds[0] <= join.session_timeout_ms <= session_bounds[1]:
            refused = ErrorCode.INVALID_SESSION_TIMEOUT
        elif not group.members:
            # Only a join that will make the classic group makes the consumer group give way.
            if join.member_id:
                refused = ErrorCode.UNKNOWN_MEMBER_ID
            elif not join.protocol_type or not join.protocols:
                refused = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            else:
                out = consumer.give_way(gid)
                out.then = _classic_join_op(gid, join, respond)
                return out
        if refused is not None:
            out = Outcome()
            out.respond(respond, JoinResult(refused, join.member_id))
            return out
        return consumer.classic_join(gid, join, respond, now)

    return op


# A closure made apart from join_op's: compiled, one that op's scope held would be a reference
# cycle per JoinGroup (docs/architecture.md).
def _classic_join_op(gid: str, join: JoinRequest, respond: Responder) -> Operation[GroupStore]:
    return lambda store, now: _classic_join(store, now, gid, join, respond)


def _classic_join(store: GroupStore, now: int, gid: str, join: JoinRequest, respond: Responder) -> Outcome:
    groups = store.kind(ClassicGroups)
    group = groups.get_or_create(gid, now) if join.member_id == "" else groups.get(gid)
    if group is None:
        out = Outcome()
        out.respond(respond, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, join.member_id))
        return out
    return group.join(join, respond, now)


def join_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _join_response(JoinResult(code, req.member_id or ""), version)


# --- SyncGroup ---------------------------------------------------------------------------------
def _sync_response(r: SyncResult) -> SyncGroupAnswer:
    return SyncGroupAnswer(r.error, r.protocol_type, r.protocol_name, r.assignment)


def handle_sync(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    # Kafka authorizes before the coordinator validates the group id.
    require(services, ctx, Op.READ, GROUP, req.group_id)
    if not req.group_id:
        return _sync_response(SyncResult(ErrorCode.INVALID_GROUP_ID))
    if _not_classic(services, req.group_id):
        return _sync_response(SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
    sync = SyncRequest(
        req.member_id,
        req.group_instance_id if v >= 3 else None,
        req.generation_id,
        req.protocol_type if v >= 5 else None,
        req.protocol_name if v >= 5 else None,
        {a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    reply, respond = reply_with(_sync_response)
    services.groups.tell(
        req.group_id,
        counting_completed_rebalance(services, req.group_id, sync_op(req.group_id, sync, respond)),
    )
    return reply


def counting_completed_rebalance(
    services: Services, gid: str, op: Operation[GroupStore]
) -> Operation[GroupStore]:
    """``op``, recording Kafka's group-completed-rebalance when it takes the classic group from
    CompletingRebalance to Stable (the leader's SyncGroup)."""
    completed = services.metrics.meter(COMPLETED_REBALANCE, ())

    def counted(store: GroupStore, now: int) -> Outcome:
        group = store.kind(ClassicGroups).get(gid)
        completing = group is not None and group.is_in(GroupState.COMPLETING_REBALANCE)
        out = op(store, now)
        if completing and group is not None and group.is_in(GroupState.STABLE):
            completed.record(now)
        return out

    return counted


class SyncRequest:
    """What sync_op needs of a SyncGroup (one per member and rebalance: a plain class, which
    compiled is built in C, where a frozen dataclass's __init__ is Python)."""

    __slots__ = ("assignments", "generation", "instance_id", "member_id", "protocol_name", "protocol_type")

    def __init__(
        self,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.generation = generation
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.assignments = assignments


def sync_op(gid: str, sync: SyncRequest, respond: Responder) -> Operation[GroupStore]:
    """SyncGroup: the classic group's, or a consumer group's for its member on the classic
    protocol; UNKNOWN_MEMBER_ID for an unknown or empty group."""

    def op(store: GroupStore, now: int) -> Outcome:
        out = Outcome()
        consumer = store.kind(ConsumerGroups)
        cg = consumer.get(gid)
        if cg is not None and cg.members:
            result = consumer.classic_sync(
                gid,
                sync.member_id,
                sync.instance_id,
                sync.generation,
                sync.protocol_type,
                sync.protocol_name,
                now,
            )
            out.respond(respond, result)
            return out
        group = store.kind(ClassicGroups).get(gid)
        if group is None:
            out.respond(respond, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return out
        return group.sync(
            sync.member_id,
            sync.instance_id,
            sync.generation,
            sync.protocol_type,
            sync.protocol_name,
            sync.assignments,
            respond,
            now,
        )

    return op


def sync_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _sync_response(SyncResult(code))


# --- Heartbeat ---------------------------------------------------------------------------------


def handle_heartbeat(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    # Kafka authorizes before the coordinator validates the group id.
    require(services, ctx, Op.READ, GROUP, req.group_id)
    if not req.group_id:
        return HeartbeatAnswer(ErrorCode.INVALID_GROUP_ID)
    if _not_classic(services, req.group_id):
        return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID)
    reply, respond = reply_with(HeartbeatAnswer)
    instance = req.group_instance_id if v >= 3 else None
    op = heartbeat_op(req.group_id, req.member_id, instance, req.generation_id, respond)
    services.groups.tell(req.group_id, op)
    return reply


def heartbeat_op(
    gid: str, member_id: str, instance_id: str | None, generation: int, respond: Responder
) -> Operation[GroupStore]:
    def op(store: GroupStore, now: int) -> Outcome:
        out = Outcome()
        consumer = store.kind(ConsumerGroups)
        if consumer.holds(gid):
            code = consumer.classic_heartbeat(gid, member_id, instance_id, generation, now)
        else:
            group = store.kind(ClassicGroups).get(gid)
            code = (
                ErrorCode.UNKNOWN_MEMBER_ID
                if group is None
                else group.heartbeat(member_id, instance_id, generation, now)
            )
        out.respond(respond, code)
        return out

    return op


def heartbeat_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return HeartbeatAnswer(code)


# --- LeaveGroup --------------------------------------------------------------------------------
_LResp: Any = response_class(ApiKey.LeaveGroup)  # kafka-python's generated class


def handle_leave(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    if v >= 3:
        identities = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        identities = [(req.member_id, None)]
    # Kafka authorizes before the coordinator validates the group id.
    require(services, ctx, Op.READ, GROUP, req.group_id)
    if not req.group_id:
        return leave_error_response(req, v, ErrorCode.INVALID_GROUP_ID, None)
    if _not_classic(services, req.group_id):
        return leave_error_response(req, v, ErrorCode.UNKNOWN_MEMBER_ID, f"Group {req.group_id} not found.")
    gid = req.group_id

    def build(errors: list[int]) -> Any:
        if v < 3:
            return _LResp(throttle_time_ms=0, error_code=errors[0] if errors else 0)
        return _LResp(
            throttle_time_ms=0,
            error_code=0,
            members=[
                _LResp.MemberResponse(member_id=m, group_instance_id=i, error_code=e)
                for (m, i), e in zip(identities, errors, strict=True)
            ],
        )

    reply, respond = reply_with(build)
    services.groups.tell(gid, leave_op(gid, identities, respond))
    return reply


def leave_op(gid: str, identities: list[tuple[str, str | None]], respond: Responder) -> Operation[GroupStore]:
    def op(store: GroupStore, now: int) -> Outcome:
        consumer = store.kind(ConsumerGroups)
        if consumer.holds(gid):
            out, errors = consumer.classic_leave(gid, identities)
        else:
            group = store.kind(ClassicGroups).get(gid)
            if group is None:
                out, errors = Outcome(), [ErrorCode.UNKNOWN_MEMBER_ID] * len(identities)
            else:
                out, errors = group.leave(identities, now)
        out.respond(respond, errors)
        return out

    return op


def leave_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    if version < 3:
        return _LResp(throttle_time_ms=0, error_code=code)
    return _LResp(throttle_time_ms=0, error_code=code, members=[])


# --- DescribeGroups ----------------------------------------------------------------------------
_DResp: Any = response_class(ApiKey.DescribeGroups)  # kafka-python's generated class
_Described = _DResp.DescribedGroup
_DMember = _Described.DescribedGroupMember


def describe_group(
    group: ClassicGroup | None, group_id: str, version: int, ops: set[int] | None, other_type: bool = False
) -> Any:
    """Kafka 4.3: a group that is not a classic group (``other_type``) is Dead before v6, and
    GROUP_ID_NOT_FOUND "is not a classic group" from v6. ``ops``: the authorized operations, when
    asked for."""
    if group is None or group.is_in(GroupState.DEAD):
        what = "is not a classic group" if other_type else "not found"
        return _Described(
            error_code=ErrorCode.GROUP_ID_NOT_FOUND if version >= 6 else 0,
            error_message=f"Group {group_id} {what}." if version >= 6 else None,
            group_id=group_id,
            group_state=GroupState.DEAD.value,
            protocol_type="",
            protocol_data="",
            members=[],
            authorized_operations=ops,
        )
    stable = group.is_in(GroupState.STABLE)
    return _Described(
        error_code=0,
        error_message=None,
        group_id=group_id,
        group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        members=[
            _DMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=m.metadata(group.protocol_name) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )
            for m in group.members.values()
        ],
        authorized_operations=ops,
    )


def handle_describe(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    include_ops = v >= 3 and req.include_authorized_operations
    gc = services.groups
    groups = []
    for gid in req.groups:
        if not group_authorized(services, ctx, Op.DESCRIBE, gid):
            groups.append(_describe_error(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
            continue
        groups.append(
            describe_group(
                gc.state_for(gid).kind(ClassicGroups).get(gid),
                gid,
                v,
                authorized_operations(services, ctx, GROUP, gid) if include_ops else None,
                gc.state_for(gid).held_by_another_type(gid, CLASSIC),
            )
        )
    return _DResp(throttle_time_ms=0, groups=groups)


def _describe_error(gid: str, code: int, message: str | None) -> Any:
    return _Described(
        error_code=code,
        error_message=message,
        group_id=gid,
        group_state="",
        protocol_type="",
        protocol_data="",
        members=[],
        authorized_operations=None,
    )


def describe_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DResp(throttle_time_ms=0, groups=[_describe_error(gid, code, message) for gid in req.groups])


# --- ListGroups --------------------------------------------------------------------------------
_LGResp: Any = response_class(ApiKey.ListGroups)  # kafka-python's generated class


def handle_list(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    states = {s.lower() for s in req.states_filter} if v >= 4 and req.states_filter else None
    types = {t.lower() for t in req.types_filter} if v >= 5 and req.types_filter else None
    listed = []
    stores = services.groups.states()
    for g in (g for store in stores for g in store.kind(ClassicGroups).groups.values()):
        if g.is_in(GroupState.DEAD):
            continue
        if states is not None and g.state.value.lower() not in states:
            continue
        if types is not None and "classic" not in types:
            continue
        listed.append(
            _LGResp.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type or "",
                group_state=g.state.value,
                group_type="classic",
            )
        )
    for cg in (g for store in stores for g in store.kind(ConsumerGroups).groups.values()):
        state = cg.state.value
        if cg.dead or (states is not None and state.lower() not in states):
            continue
        if types is not None and "consumer" not in types:
            continue
        listed.append(
            _LGResp.ListedGroup(
                group_id=cg.group_id, protocol_type="consumer", group_state=state, group_type="consumer"
            )
        )
    for sg in (g for store in stores for g in store.kind(ShareGroups).groups.values()):
        if sg.dead or (states is not None and sg.state.lower() not in states):
            continue
        if types is not None and "share" not in types:
            continue
        listed.append(
            _LGResp.ListedGroup(
                group_id=sg.group_id, protocol_type="share", group_state=sg.state, group_type="share"
            )
        )
    if not cluster_authorized(services, ctx, Op.DESCRIBE):
        # Kafka's ListGroups: Describe on the cluster lists every group, else those the
        # principal may describe.
        listed = [g for g in listed if group_authorized(services, ctx, Op.DESCRIBE, g.group_id)]
    return _LGResp(throttle_time_ms=0, error_code=0, groups=listed)


def list_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _LGResp(throttle_time_ms=0, error_code=code, groups=[])


# --- DeleteGroups ------------------------------------------------------------------------------
_DGResp: Any = response_class(ApiKey.DeleteGroups)  # kafka-python's generated class


def handle_delete(services: Services, ctx: RequestContext, req: Any) -> Any:
    gids = list(req.groups_names)

    def build(codes: list[int]) -> Any:
        return _DGResp(
            throttle_time_ms=0,
            results=[
                _DGResp.DeletableGroupResult(group_id=gid, error_code=code)
                for gid, code in zip(gids, codes, strict=True)
            ],
        )

    reply, responders = reply_all(len(gids), build)
    for gid, respond in zip(gids, responders, strict=True):
        # KIP-289 as the project's design specifies it: "" is refused like null. (Kafka 4 itself
        # still deletes "" "for backwards compatibility"; kcoord follows its own spec here.)
        if not gid:
            respond(ErrorCode.INVALID_GROUP_ID)
            continue
        if not group_authorized(services, ctx, Op.DELETE, gid):
            respond(ErrorCode.GROUP_AUTHORIZATION_FAILED)
            continue
        services.groups.tell(gid, _delete_op(gid, respond))
    return reply


def _delete_op(group_id: str, respond: Responder) -> Operation[GroupStore]:
    return lambda store, now: _delete_group(store, group_id, now, respond)


def _delete_group(store: GroupStore, group_id: str, now: int, respond: Responder) -> Outcome:
    consumer = store.kind(ConsumerGroups).get(group_id)
    if consumer is not None:
        if consumer.members:  # Kafka's ConsumerGroup.validateDeleteGroup: only an Empty group
            out = Outcome()
            out.respond(respond, ErrorCode.NON_EMPTY_GROUP)
            return out
        out = Outcome(records=store.offsets.tombstones(group_id) + consumer.tombstones())
        out.respond(respond, 0)
        return out
    share = store.kind(ShareGroups).get(group_id)
    if share is not None:
        if share.members:
            out = Outcome()
            out.respond(respond, ErrorCode.NON_EMPTY_GROUP)
            return out
        out = share.delete()
        out.respond(respond, 0)
        return out
    group = store.kind(ClassicGroups).get(group_id)
    if group is None:
        out = Outcome()
        out.respond(respond, ErrorCode.GROUP_ID_NOT_FOUND)
        return out
    code, out = offset_rules.delete_group(group, store.offsets, now)
    out.respond(respond, code)
    return out


def delete_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DGResp(
        throttle_time_ms=0,
        results=[_DGResp.DeletableGroupResult(group_id=g, error_code=code) for g in req.groups_names],
    )
