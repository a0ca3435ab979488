"""A classic group handed to the consumer protocol, or made from a consumer group (KIP-848 online
migration; the consumer kind drives it through groups/store.py's ClassicGroupHost): Kafka's
ClassicGroup.fromConsumerGroup and the classic half of ConsumerGroup.fromClassicGroup.
"""

from __future__ import annotations

from kcoord.classic.group import ClassicGroup, GroupState, select_protocol
from kcoord.classic.records import GroupMetadataKey, GroupMetadataValue, MemberMetadata
from kcoord.groups.classic_protocol import JoinResult, SyncResult
from kcoord.groups.consumer_protocol import (
    PROTOCOL_TYPE,
    MalformedConsumerProtocol,
    assignment_has_user_data,
    decode_assignment,
    encode_assignment,
    subscription_version,
)
from kcoord.groups.migration import (
    CUSTOM_ASSIGNOR,
    MALFORMED,
    NOT_CONSUMER_PROTOCOL,
    CannotUpgrade,
    MigratingGroup,
    MigratingMember,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Outcome


def migration_view(group: ClassicGroup) -> MigratingGroup:
    """The group as a consumer group takes it over (Kafka's validateOnlineUpgrade: members, all on
    the ``consumer`` protocol type). Raises CannotUpgrade if it cannot be: assignments that do not
    parse, or that carry a custom assignor's user data, which the consumer group would lose
    (Kafka's ConsumerGroup.fromClassicGroup), included."""
    if not group.members or group.protocol_type != PROTOCOL_TYPE or group.is_in(GroupState.DEAD):
        raise CannotUpgrade(NOT_CONSUMER_PROTOCOL)
    members = []
    try:
        for m in group.members.values():
            if assignment_has_user_data(m.assignment):
                raise CannotUpgrade(CUSTOM_ASSIGNOR)
            members.append(
                MigratingMember(
                    member_id=m.member_id,
                    instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    protocols=tuple(m.protocols),
                    assigned=decode_assignment(m.assignment),
                )
            )
    except MalformedConsumerProtocol:
        raise CannotUpgrade(MALFORMED) from None
    return MigratingGroup(group.group_id, group.generation, group.protocol_name, tuple(members))


def hand_over(group: ClassicGroup) -> Outcome:
    """The group's tombstone, and REBALANCE_IN_PROGRESS for the requests it holds (Kafka's
    completeAllJoinFutures / completeAllSyncFutures): those members join the consumer group."""
    out = Outcome(records=[(GroupMetadataKey(group.group_id), None)])
    for m in group.members.values():
        out.respond(m.awaiting_join, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, m.member_id))
        out.respond(m.awaiting_sync, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        m.awaiting_join = m.awaiting_sync = None
    return out


def metadata_of(group: MigratingGroup, now: int) -> GroupMetadataValue:
    """The classic group a consumer group becomes: Stable at the group epoch, each member with its
    target assignment in the subscription version of the selected protocol."""
    protocol = select_protocol([[name for name, _ in m.protocols] for m in group.members])
    members = []
    for m in group.members:
        subscription = next(meta for name, meta in m.protocols if name == protocol)
        members.append(
            MemberMetadata(
                m.member_id,
                m.instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                subscription,
                encode_assignment(m.assigned, subscription_version(subscription)),
            )
        )
    return GroupMetadataValue(
        protocol_type=PROTOCOL_TYPE,
        generation=group.generation,
        protocol=protocol,
        leader=group.members[0].member_id if group.members else None,
        current_state_timestamp=now,
        members=tuple(members),
    )
