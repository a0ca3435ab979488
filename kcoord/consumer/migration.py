"""A classic group becoming a consumer group and back (KIP-848 online migration): Kafka's
ConsumerGroup.fromClassicGroup with createConsumerGroupRecords, and the consumer half of
ClassicGroup.fromConsumerGroup. The kind (store.py) decides when; this module says what.
"""

from __future__ import annotations

import uuid

from kcoord.consumer.group import ConsumerGroup
from kcoord.consumer.member import ConsumerGroupMember, MemberState
from kcoord.consumer.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from kcoord.consumer.subscriptions import subscription_hash
from kcoord.consumer.target_assignment import topic_partitions
from kcoord.groups.consumer_protocol import decode_subscription
from kcoord.groups.migration import MigratingGroup, MigratingMember
from kcoord.groups.topics import TopicsView
from kcoord.runtime.outcome import Record


def upgrade_records(group: MigratingGroup, topics: TopicsView, now: int) -> list[Record]:
    """The records of the consumer group a classic group becomes: every member Stable at the
    generation with its last assignment as its target, on the classic protocol. Raises
    MalformedConsumerProtocol for a subscription that does not parse."""
    epoch = group.generation
    members: list[ConsumerGroupMember] = []
    taken: set[tuple[object, int]] = set()
    for m in group.members:
        metadata = next((meta for name, meta in m.protocols if name == group.protocol_name), None)
        subscription = decode_subscription(metadata if metadata is not None else m.protocols[0][1])
        assigned: dict[object, dict[int, int]] = {}
        for topic, parts in sorted(m.assigned.items()):
            found = topics.lookup(topic)
            if found is None:
                continue  # a deleted topic: nothing to own
            topic_id, count = found
            # Two classic members never own one partition; should a client-side assignor have
            # said so anyway, the first keeps it (a consumer group has one owner per partition).
            mine = {p: epoch for p in parts if 0 <= p < count and (topic_id, p) not in taken}
            taken.update((topic_id, p) for p in mine)
            if mine:
                assigned[topic_id] = mine
        members.append(
            ConsumerGroupMember(
                m.member_id,
                instance_id=m.instance_id,
                rack_id=subscription.rack_id,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                classic_member_metadata=ClassicMemberMetadata(
                    m.session_timeout_ms, tuple(ClassicProtocol(n, meta) for n, meta in m.protocols)
                ),
                member_epoch=epoch,
                previous_member_epoch=epoch,
                state=MemberState.STABLE,
                assigned=assigned,  # type: ignore[arg-type]
            )
        )
    gid = group.group_id
    names = {n for m in members for n in m.subscribed_topic_names}
    records: list[Record] = [
        (ConsumerGroupMemberMetadataKey(gid, m.member_id), m.metadata_value()) for m in members
    ]
    records.append(
        (
            ConsumerGroupMetadataKey(gid),
            ConsumerGroupMetadataValue(epoch, subscription_hash(names, {}, topics)),
        )
    )
    records += [
        (
            ConsumerGroupTargetAssignmentMemberKey(gid, m.member_id),
            ConsumerGroupTargetAssignmentMemberValue(topic_partitions(m.assigned)),
        )
        for m in members
    ]
    records.append(
        (
            ConsumerGroupTargetAssignmentMetadataKey(gid),
            ConsumerGroupTargetAssignmentMetadataValue(epoch, now),
        )
    )
    records += [
        (ConsumerGroupCurrentMemberAssignmentKey(gid, m.member_id), m.assignment_value()) for m in members
    ]
    return records


def downgrade_view(
    group: ConsumerGroup, leaving: str, joining: ConsumerGroupMember | None, topics: TopicsView
) -> MigratingGroup:
    """The classic group a consumer group becomes when ``leaving`` goes (replaced by ``joining``,
    a static member's new instance, if given): every other member with the partitions it owns,
    those it has yet to revoke included.

    Kafka writes each member's target assignment instead. A target may hold partitions another
    member has not released yet; should the group be upgraded again before its members rejoin
    (or, after a static member's replacement, the new instance sync at once), such a partition
    would have two owners. What members own is disjoint, and is what their clients hold."""
    members = [m for mid, m in group.members.items() if mid != leaving]
    if joining is not None:
        members.append(joining)
    out = []
    for m in members:
        classic = m.classic_member_metadata
        assert classic is not None
        # A static member's new instance takes the place of the one it replaces.
        source = group.members[leaving] if joining is not None and m.member_id == joining.member_id else m
        owned: dict[uuid.UUID, set[int]] = {}
        for topic_id, parts in (*source.assigned.items(), *source.pending_revocation.items()):
            owned.setdefault(topic_id, set()).update(parts)
        assigned: dict[str, tuple[int, ...]] = {}
        for topic_id, held in owned.items():
            name = topics.name_of(topic_id)
            if name is not None:
                assigned[name] = tuple(sorted(held))
        out.append(
            MigratingMember(
                member_id=m.member_id,
                instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=classic.session_timeout_ms,
                protocols=tuple((p.name, p.metadata) for p in classic.supported_protocols),
                assigned=assigned,
            )
        )
    return MigratingGroup(group.group_id, group.group_epoch, None, tuple(out))
