"""Members of a consumer group that speak the classic protocol (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup): Kafka's classicGroupJoinToConsumerGroup and its siblings, KIP-848's online migration.

Such a member is a consumer group member like any other, with what it brought in JoinGroup kept
in its record (ClassicMemberMetadata: session timeout, protocols). Its JoinGroup updates it and
reconciles it as a heartbeat would, with the partitions its subscription says it owns (none for
an eager client, which gives everything up before joining); the answer carries its member epoch
as the generation and no member list (the coordinator assigns). SyncGroup hands it its assigned
partitions in the consumer protocol. Its Heartbeat tells it to join again (REBALANCE_IN_PROGRESS)
when the group epoch moved past it, when it has partitions to revoke, or when partitions it waits
for were released; it then has its rebalance timeout to join, and after joining to sync.
"""

from __future__ import annotations

import base64
import dataclasses
import uuid
from collections.abc import Collection

from kcoord.consumer.group import ConsumerGroup, ConsumerGroupConfig, HeartbeatError
from kcoord.consumer.member import ConsumerGroupMember, MemberState
from kcoord.consumer.reconciliation import FencedMemberEpoch
from kcoord.consumer.records import ClassicMemberMetadata, ClassicProtocol
from kcoord.groups.classic_protocol import JoinRequest, JoinResult, SyncResult
from kcoord.groups.consumer_protocol import (
    PROTOCOL_TYPE,
    MalformedConsumerProtocol,
    decode_subscription,
    encode_assignment,
    subscription_version,
)
from kcoord.groups.topics import TopicsView
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Record


def new_member_id() -> str:
    """A member id as Kafka's coordinator makes one (Uuid.randomUuid().toString())."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember:
    """Kafka's validateConsumerGroupMember, then throwIfMemberDoesNotUseClassicProtocol."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {group.group_id}."
            )
    else:
        member = group.static_member(
            instance_id,
            member_id,
            unknown=f"Member with instance id {instance_id} is not a member of group {group.group_id}.",
        )
    if not member.uses_classic_protocol:
        raise HeartbeatError(
            ErrorCode.UNKNOWN_MEMBER_ID, f"Member {member.member_id} does not use the classic protocol."
        )
    return member


def _protocol_name(member: ConsumerGroupMember) -> str:
    assert member.classic_member_metadata is not None
    return member.classic_member_metadata.supported_protocols[0].name


def _rejoin_if_rebalancing(group: ConsumerGroup, member: ConsumerGroupMember, now: int) -> None:
    """Kafka's throwIfRebalanceInProgress: a member behind the group epoch joins again, unless it
    is still revoking (it joined already; the next join comes once it has revoked)."""
    if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
        group.join_deadlines.setdefault(member.member_id, now + max(member.rebalance_timeout_ms, 0))
        raise HeartbeatError(
            ErrorCode.REBALANCE_IN_PROGRESS,
            f"A new rebalance is triggered in group {group.group_id} and member {member.member_id} "
            "should rejoin to catch up.",
        )


# --- JoinGroup ------------------------------------------------------------------------------------
def join(
    group: ConsumerGroup, req: JoinRequest, config: ConsumerGroupConfig, topics: TopicsView, now: int
) -> tuple[JoinResult, list[Record], str | None, ConsumerGroupMember | None]:
    """The answer, the records, the static member this one replaced (if any: if it was the last
    on the consumer protocol, the group turns back into a classic group) and the member joined."""
    member_id = req.member_id or new_member_id()
    try:
        group.check_capacity(member_id, config)
        if not group.supports_classic_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            raise HeartbeatError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL, f"Member {member_id}'s protocols are not supported."
            )
        if req.require_known_member_id and req.member_id == "" and req.group_instance_id is None:
            # A dynamic member joins for a member id first (JoinGroup v4+).
            return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id), [], None, None
        try:
            subscription = decode_subscription(req.protocols[0][1])
        except MalformedConsumerProtocol as e:
            raise HeartbeatError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, str(e)) from None
        member, replaced = _joining_member(group, member_id, req.group_instance_id, req.member_id == "")
        updated = dataclasses.replace(
            member,
            instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms
            if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            client_id=req.client_id,
            client_host=req.client_host,
            classic_member_metadata=ClassicMemberMetadata(
                req.session_timeout_ms, tuple(ClassicProtocol(n, m) for n, m in req.protocols)
            ),
        )
        owned = {}
        for topic, parts in subscription.owned.items():
            found = topics.lookup(topic)
            if found is not None:
                owned[found[0]] = frozenset(parts)
        try:
            reconciled, records = group.update_member(member, updated, replaced, owned, config, topics, now)
        except FencedMemberEpoch as e:  # an unknown member state: start again from nothing
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, str(e)) from None
    except HeartbeatError as e:
        return JoinResult(e.code, member_id), [], None, None
    group.join_deadlines.pop(member_id, None)
    group.session_deadlines[member_id] = now + req.session_timeout_ms
    group.sync_deadlines[member_id] = now + max(req.rebalance_timeout_ms, 0)
    result = JoinResult(
        0,
        member_id,
        generation=reconciled.member_epoch,
        protocol_type=PROTOCOL_TYPE,
        protocol_name=_protocol_name(updated),
    )
    return result, records, replaced, reconciled


def _joining_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None, unknown: bool
) -> tuple[ConsumerGroupMember, str | None]:
    """Kafka's getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember for the classic protocol:
    a dynamic member is created if new; a static member with no member id yet takes the place of
    the instance's current member, whichever protocol that one speaks."""
    if instance_id is None:
        return group.members.get(member_id) or ConsumerGroupMember(member_id), None
    existing_id = group.static_members.get(instance_id)
    existing = group.members.get(existing_id) if existing_id is not None else None
    if unknown:
        if existing is None:
            return group.members.get(member_id) or ConsumerGroupMember(member_id), None
        return existing.new_instance(member_id), existing.member_id
    return group.static_member(instance_id, member_id), None


# --- SyncGroup ------------------------------------------------------------------------------------
def sync(
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    generation: int,
    protocol_type: str | None,
    protocol_name: str | None,
    config: ConsumerGroupConfig,
    topics: TopicsView,
    now: int,
) -> SyncResult:
    """The member's assigned partitions, in the version of its subscription."""
    try:
        member = _member(group, member_id, instance_id)
        _check_generation(member, generation)
        if protocol_type is not None and protocol_type != PROTOCOL_TYPE:
            raise HeartbeatError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"The protocol type {protocol_type} from member {member_id} request is not equal to the "
                f"group protocol type {PROTOCOL_TYPE}.",
            )
        if protocol_name is not None and protocol_name != _protocol_name(member):
            raise HeartbeatError(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"The protocol name {protocol_name} from member {member_id} request is not equal to the "
                f"protocol name {_protocol_name(member)} returned in the join response.",
            )
        _rejoin_if_rebalancing(group, member, now)
    except HeartbeatError as e:
        return SyncResult(e.code)
    group.sync_deadlines.pop(member.member_id, None)
    group.session_deadlines[member.member_id] = now + group.session_timeout_ms(member, config)
    assigned: dict[str, list[int]] = {}
    for topic_id, parts in member.assigned.items():
        name = topics.name_of(topic_id)
        if name is not None:
            assigned[name] = sorted(parts)
    assert member.classic_member_metadata is not None
    try:
        version = subscription_version(member.classic_member_metadata.supported_protocols[0].metadata)
    except MalformedConsumerProtocol:
        # Kafka's prepareAssignment fails the same way (IllegalStateException).
        return SyncResult(ErrorCode.UNKNOWN_SERVER_ERROR)
    return SyncResult(0, encode_assignment(assigned, version), protocol_type, protocol_name)


def _check_generation(member: ConsumerGroupMember, generation: int) -> None:
    if generation != member.member_epoch:
        raise HeartbeatError(
            ErrorCode.ILLEGAL_GENERATION,
            f"The request generation id {generation} is not equal to the member epoch "
            f"{member.member_epoch} of member {member.member_id}.",
        )


# --- Heartbeat ------------------------------------------------------------------------------------
def heartbeat(
    group: ConsumerGroup,
    member_id: str,
    instance_id: str | None,
    generation: int,
    config: ConsumerGroupConfig,
    now: int,
) -> int:
    try:
        member = _member(group, member_id, instance_id)
        _check_generation(member, generation)
    except HeartbeatError as e:
        return e.code
    group.session_deadlines[member.member_id] = now + group.session_timeout_ms(member, config)
    if (
        member.member_epoch < group.group_epoch
        or member.state is MemberState.UNREVOKED_PARTITIONS
        or (member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased(member))
    ):
        group.join_deadlines.setdefault(member.member_id, now + max(member.rebalance_timeout_ms, 0))
        return ErrorCode.REBALANCE_IN_PROGRESS
    return 0


# --- LeaveGroup -----------------------------------------------------------------------------------
def leave(
    group: ConsumerGroup, identities: Collection[tuple[str, str | None]]
) -> tuple[list[int], list[str]]:
    """Per (member id, instance id) an error code, and the members that leave (the caller fences
    them, with one group epoch bump, as Kafka's classicGroupLeaveToConsumerGroup)."""
    errors: list[int] = []
    leaving: list[str] = []
    for member_id, instance_id in identities:
        try:
            if instance_id is None:
                member = _member(group, member_id, None)
            else:
                # An administrator may remove a static member by its instance id alone.
                existing = group.static_members.get(instance_id)
                owner = existing if member_id == "" and existing is not None else member_id
                member = _member(group, owner, instance_id)
        except HeartbeatError as e:
            errors.append(e.code)
            continue
        errors.append(0)
        leaving.append(member.member_id)
    return errors, leaving
