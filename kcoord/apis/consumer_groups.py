"""KIP-848 consumer group APIs (group.protocol=consumer): ConsumerGroupHeartbeat (68, v0-v1) and
ConsumerGroupDescribe (69, v0-v1).

Behaviour / version notes:
- ConsumerGroupHeartbeat: checked as Kafka 4.3's GroupCoordinatorService before the group sees it
  (INVALID_REQUEST: an empty member id (v1, or epoch > 0 / -1), group, instance or rack id; a
  join (epoch 0) without RebalanceTimeoutMs, with owned partitions, or with neither topic names
  nor a regex; a static leave (-2) without an instance id; an epoch below -2.
  UNSUPPORTED_ASSIGNOR for a ServerAssignor not in group.consumer.assignors). A join to a classic
  group id: an empty classic group (offsets only) becomes a consumer group, its offsets kept; one
  with members is upgraded (group.consumer.migration.policy upgrade or bidirectional) when all
  its members use the ``consumer`` protocol type and it is no bigger than
  group.consumer.max.size, otherwise it is GROUP_ID_NOT_FOUND ("not a consumer group"), as a
  share group id is. An unknown group with an epoch other than 0 is GROUP_ID_NOT_FOUND. A member
  leaving for good that was the last on the consumer protocol turns the group back into a classic
  group (downgrade). The rest is the group's (kcoord/consumer/group.py), in Kafka's order:
  GROUP_MAX_SIZE_REACHED; the member's (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
  UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID); then INVALID_REGULAR_EXPRESSION, with RE2J's error
  text, for a regex new to the group that does not compile. The assignment is sent on full
  requests (joining, or all of RebalanceTimeoutMs, SubscribedTopicNames and TopicPartitions set)
  and when it changed. An error answer is Kafka's response made from the exception: code and
  message, no member id, epoch 0.
- ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for groups that do not exist or are not consumer
  groups, with a message and every other field at its default (state "", epochs 0, no
  authorized operations); v1 adds MemberType (1: consumer protocol, 0: classic protocol).
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
from kcoord.consumer.group import ConsumerGroup, HeartbeatRequest, HeartbeatResult
from kcoord.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
)
from kcoord.consumer.store import ConsumerGroups
from kcoord.protocol.consumer_heartbeat_codec import ConsumerGroupHeartbeatAnswer
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import register_schema_pair

register_schema_pair("ConsumerGroupHeartbeat")  # the request's codec; answers are hand-written
_, _DResp = register_schema_pair("ConsumerGroupDescribe")

CONSUMER = ConsumerGroups.group_type
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


# --- ConsumerGroupHeartbeat ----------------------------------------------------------------------
def _hb_error(code: int, message: str | None) -> ConsumerGroupHeartbeatAnswer:
    """An error answer as Kafka makes it from the exception: code and message, every other field
    at its default (no member id, epoch 0, no assignment)."""
    return ConsumerGroupHeartbeatAnswer(code, message)


# What Java's String.trim() removes: every character up to U+0020 (control characters too, but not
# Unicode spaces such as U+00A0, which Python's str.strip() removes).
_JAVA_TRIMMED = "".join(map(chr, range(0x21)))


def _blank(value: str | None) -> bool:
    """Kafka's throwIfEmptyString test: non-null and empty once trimmed as Java trims."""
    return value is not None and value.strip(_JAVA_TRIMMED) == ""


def heartbeat_request_error(req: Any, version: int, assignors: tuple[str, ...]) -> tuple[int, str] | None:
    """Kafka 4.3's throwIfConsumerGroupHeartbeatRequestIsInvalid, in its order."""
    epoch = req.member_epoch
    if (version >= 1 or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and _blank(req.member_id):
        return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
    for value, what in ((req.group_id, "GroupId"), (req.instance_id, "InstanceId"), (req.rack_id, "RackId")):
        if _blank(value):
            return ErrorCode.INVALID_REQUEST, f"{what} can't be empty."
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if req.rebalance_timeout_ms == -1:
            return ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
        if req.topic_partitions is None or req.topic_partitions:
            return ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
        regex = req.subscribed_topic_regex if version >= 1 else None
        if req.subscribed_topic_names is None and regex is None:
            return (
                ErrorCode.INVALID_REQUEST,
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if req.instance_id is None:
            return ErrorCode.INVALID_REQUEST, "InstanceId can't be null."
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."
    if req.server_assignor is not None and req.server_assignor not in assignors:
        supported = ", ".join(assignors)
        return (
            ErrorCode.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: {supported}.",
        )
    return None


def heartbeat_response(result: HeartbeatResult) -> ConsumerGroupHeartbeatAnswer:
    if result.error:
        return _hb_error(result.error, result.message)
    return ConsumerGroupHeartbeatAnswer(
        0,
        None,
        result.member_id,
        result.member_epoch,
        result.heartbeat_interval_ms,
        result.assignment,
    )


def handle_heartbeat(services: Services, ctx: RequestContext, req: Any) -> Any:
    v = ctx.api_version
    # Kafka's KafkaApis: Read on the group, then Describe on every subscribed topic name.
    require(services, ctx, Op.READ, GROUP, req.group_id or "")
    names = req.subscribed_topic_names or []
    hidden = set(names) - authorized_topics(services, ctx, Op.DESCRIBE, names)
    if hidden:
        return _hb_error(
            ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            "The group member is not authorized to describe topics: " + ", ".join(sorted(hidden)),
        )
    config = services.groups.state_for(req.group_id or "").kind(ConsumerGroups).config
    invalid = heartbeat_request_error(req, v, config.assignors)
    if invalid is not None:
        return _hb_error(*invalid)
    gid = req.group_id
    owned = None
    if req.topic_partitions is not None:
        owned = {tp.topic_id: frozenset(tp.partitions) for tp in req.topic_partitions}
    hb = HeartbeatRequest(
        member_id=req.member_id or str(uuid.uuid4()),
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=(
            tuple(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None
        ),
        subscribed_topic_regex=req.subscribed_topic_regex if v >= 1 else None,
        server_assignor=req.server_assignor,
        owned=owned,
        client_id=ctx.client_id or "",
        client_host="/" + ctx.client_host,
    )
    reply, respond = reply_with(heartbeat_response)

    services.groups.tell(gid, lambda store, now: store.kind(ConsumerGroups).heartbeat(gid, hb, respond, now))
    return reply


def heartbeat_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _hb_error(code, message)


# --- ConsumerGroupDescribe ---------------------------------------------------------------------
_Described = _DResp.DescribedGroup
_DMember = _Described.Member
_DAssignment = _DMember.Assignment
_DTopicPartitions = _DAssignment.TopicPartitions


def _described_assignment(services: Services, assignment: Any) -> Any:
    parts = []
    for topic_id, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        topic = services.partitions.get_by_id(topic_id)
        name = topic.name if topic else ""
        parts.append(_DTopicPartitions(topic_id=topic_id, topic_name=name, partitions=sorted(ps)))
    return _DAssignment(topic_partitions=parts)


def _described_member(services: Services, group: ConsumerGroup, m: ConsumerGroupMember) -> Any:
    return _DMember(
        member_id=m.member_id,
        instance_id=m.instance_id,
        rack_id=m.rack_id,
        member_epoch=m.member_epoch,
        client_id=m.client_id,
        client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names),
        subscribed_topic_regex=m.subscribed_topic_regex,
        assignment=_described_assignment(services, m.assigned_partitions()),
        target_assignment=_described_assignment(services, group.target.get(m.member_id, {})),
        member_type=MEMBER_TYPE_CLASSIC if m.uses_classic_protocol else MEMBER_TYPE_CONSUMER,
    )


def described_error(gid: str, code: int, message: str | None) -> Any:
    """A group that could not be described, as Kafka answers it: the group id, the error and its
    message; every other field at its default (state "", epochs 0, no authorized operations:
    KafkaApis adds them to the groups described without error only)."""
    return _Described(
        error_code=code,
        error_message=message,
        group_id=gid,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=[],
        authorized_operations=-(2**31),
    )


def handle_describe(services: Services, ctx: RequestContext, req: Any) -> Any:
    groups = []
    for gid in req.group_ids:
        if not group_authorized(services, ctx, Op.DESCRIBE, gid):
            groups.append(described_error(gid, ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
            continue
        ops = (
            bitfield(authorized_operations(services, ctx, GROUP, gid))
            if req.include_authorized_operations
            else -(2**31)
        )
        store = services.groups.state_for(gid)
        kind = store.kind(ConsumerGroups)
        group = kind.get(gid)
        if group is None:
            held = store.held_by_another_type(gid, CONSUMER)
            message = f"Group {gid} is not a consumer group." if held else f"Group {gid} not found."
            groups.append(described_error(gid, ErrorCode.GROUP_ID_NOT_FOUND, message))
            continue
        groups.append(
            _Described(
                error_code=0,
                error_message=None,
                group_id=gid,
                group_state=group.state.value,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.preferred_assignor(kind.config),
                members=[_described_member(services, group, m) for m in group.members.values()],
                authorized_operations=ops,
            )
        )
    # Kafka answers the groups it may not describe first, then the ones the coordinator described.
    denied = [g.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED for g in groups]
    ordered = [g for g, d in zip(groups, denied, strict=True) if d]
    ordered += [g for g, d in zip(groups, denied, strict=True) if not d]
    return _DResp(throttle_time_ms=0, groups=ordered)


def describe_error_response(req: Any, version: int, code: int, message: str | None) -> Any:
    return _DResp(throttle_time_ms=0, groups=[described_error(g, code, message) for g in req.group_ids])
