"""A KIP-848 group's target assignment, as Kafka's TargetAssignmentBuilder: the server-side
assignor's answer for every member after a change of membership, subscriptions or topics, and
the records that persist it (a member's target when it changed, then the assignment's epoch).

The group (group.py) decides when a new target is due (its epoch moved past the assignment's);
each member then reconciles towards its target on its own heartbeats (reconciliation.py).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Collection, Mapping

from kcoord.consumer.assignors import ASSIGNORS, GroupSpec, MemberSubscription
from kcoord.consumer.member import ConsumerGroupMember, TargetAssignment
from kcoord.consumer.records import (
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    TopicPartitions,
)
from kcoord.groups.topics import TopicsView
from kcoord.runtime.outcome import Record


def topic_partitions(assignment: Mapping[uuid.UUID, Collection[int]]) -> tuple[TopicPartitions, ...]:
    """An assignment as its records hold it: topics by id, partitions sorted, empty ones left out."""
    return tuple(
        TopicPartitions(t, tuple(sorted(ps)))
        for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0]))
        if ps
    )


def subscribed_topics(
    member: ConsumerGroupMember,
    regexes: Mapping[str, ConsumerGroupRegularExpressionValue],
    topics: TopicsView,
) -> dict[uuid.UUID, int]:
    """The topics ``member`` subscribes to (by name or by a resolved regex) that exist: id ->
    partition count."""
    names = list(member.subscribed_topic_names)
    if member.subscribed_topic_regex is not None:
        resolved = regexes.get(member.subscribed_topic_regex)
        if resolved is not None:
            names += resolved.topics
    out = {}
    for name in names:
        found = topics.lookup(name)
        if found is not None:
            out[found[0]] = found[1]
    return out


def build_target_assignment(
    group_id: str,
    members: Mapping[str, ConsumerGroupMember],
    current: Mapping[str, Mapping[uuid.UUID, frozenset[int]]],
    server_assignors: Counter[str],
    *,
    group_epoch: int,
    member: ConsumerGroupMember,
    updated: ConsumerGroupMember,
    replaced: str | None,
    regexes: Mapping[str, ConsumerGroupRegularExpressionValue],
    assignor_names: tuple[str, ...],
    topics: TopicsView,
    now: int,
) -> tuple[TargetAssignment, list[Record]]:
    """The new target of ``updated`` (``member`` as this heartbeat changes it; ``replaced``: the
    static member instance it takes over), and the records of every member's target that changed,
    then the target assignment epoch. The assignor is the one most members ask for, else the first
    configured (``group.consumer.assignors``); its ``PartitionAssignorError`` is the caller's."""
    after = dict(members)
    if replaced is not None:
        after.pop(replaced, None)
    after[updated.member_id] = updated
    assignors = dict(server_assignors)
    if member.member_id in members and member.server_assignor is not None:
        assignors[member.server_assignor] -= 1
    if updated.server_assignor is not None:
        assignors[updated.server_assignor] = assignors.get(updated.server_assignor, 0) + 1
    live = {n: c for n, c in assignors.items() if c > 0}
    name = max(sorted(live), key=lambda n: live[n]) if live else assignor_names[0]
    assignor = ASSIGNORS[name]
    subscriptions: dict[tuple[tuple[str, ...], str | None], frozenset[uuid.UUID]] = {}
    counts: dict[uuid.UUID, int] = {}
    specs = {}
    for mid, m in after.items():
        key = (m.subscribed_topic_names, m.subscribed_topic_regex)
        ids = subscriptions.get(key)
        if ids is None:
            found = subscribed_topics(m, regexes, topics)
            counts.update(found)
            ids = subscriptions[key] = frozenset(found)
        owned = current.get(replaced if mid == updated.member_id and replaced else mid, {})
        specs[mid] = MemberSubscription(ids, owned, m.rack_id, m.instance_id)
    new = assignor.assign(GroupSpec(specs), counts)
    records: list[Record] = []
    for mid in after:
        assignment = new.get(mid, {})
        if (mid == updated.member_id and replaced is not None) or assignment != current.get(mid, {}):
            records.append(
                (
                    ConsumerGroupTargetAssignmentMemberKey(group_id, mid),
                    ConsumerGroupTargetAssignmentMemberValue(topic_partitions(assignment)),
                )
            )
    records.append(
        (
            ConsumerGroupTargetAssignmentMetadataKey(group_id),
            ConsumerGroupTargetAssignmentMetadataValue(group_epoch, now),
        )
    )
    return new.get(updated.member_id, {}), records
