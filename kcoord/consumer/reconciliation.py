"""How a member moves from its current assignment towards the group's target assignment, as
Kafka's CurrentAssignmentBuilder.

A partition the target takes from a member is first revoked: the member keeps its epoch, moves to
UNREVOKED_PARTITIONS, and stays there until its heartbeat no longer reports the partition as
owned (or its rebalance timeout fences it). Only then does it move to the target epoch. A
partition the target gives a member is handed out only once no other member owns it (assigned or
pending revocation): until then the member is UNRELEASED_PARTITIONS, at the target epoch, with
what it could get. Partitions of topics the member no longer subscribes to are revoked at once,
whatever the target says (Kafka 4.x's subscription consistency). So no partition is ever owned by
two members at once.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Collection, Mapping

from kcoord.consumer.member import ConsumerGroupMember, EpochAssignment, MemberState, TargetAssignment

Owned = Mapping[uuid.UUID, Collection[int]]  # what the heartbeat says the member owns; None: not sent
OwnerOf = Callable[[uuid.UUID, int], str | None]  # the member that owns a partition, if any


class FencedMemberEpoch(Exception):
    """The member must abandon its partitions and rejoin (FENCED_MEMBER_EPOCH)."""


def reconcile(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: TargetAssignment,
    owner_of: OwnerOf,
    owned: Owned | None,
    subscribed_topic_ids: Collection[uuid.UUID],
) -> ConsumerGroupMember:
    """The member's next state; the member itself when it cannot move forward yet."""
    state = member.state
    if state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next(
                member, member.member_epoch, target_epoch, target, owner_of, owned, subscribed_topic_ids
            )
        return _drop_unsubscribed(member, owned, subscribed_topic_ids)
    if state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.pending_revocation):
            return _drop_unsubscribed(member, owned, subscribed_topic_ids)
        return _next(member, member.member_epoch, target_epoch, target, owner_of, owned, subscribed_topic_ids)
    if state is MemberState.UNRELEASED_PARTITIONS:
        return _next(member, member.member_epoch, target_epoch, target, owner_of, owned, subscribed_topic_ids)
    # UNKNOWN (a state a newer Kafka wrote): start again from nothing.
    if owned is None or any(owned.values()):
        raise FencedMemberEpoch(
            "the member is in an unknown state; it must abandon its partitions and rejoin"
        )
    return _next(member, target_epoch, target_epoch, target, owner_of, owned, subscribed_topic_ids)


def _still_owns(owned: Owned | None, revoking: EpochAssignment) -> bool:
    """Whether the member still reports any partition it must give up (unknown: assume it does)."""
    if owned is None:
        return True
    for topic_id, parts in owned.items():
        pending = revoking.get(topic_id)
        if pending and any(p in pending for p in parts):
            return True
    return False


def _drop_unsubscribed(
    member: ConsumerGroupMember, owned: Owned | None, subscribed: Collection[uuid.UUID]
) -> ConsumerGroupMember:
    """Revoke at once the partitions of topics the member no longer subscribes to."""
    gone = [t for t in member.assigned if t not in subscribed]
    if not gone:
        return member
    assigned = {t: ps for t, ps in member.assigned.items() if t in subscribed}
    revoking = {t: dict(ps) for t, ps in member.pending_revocation.items()}
    for t in gone:
        revoking.setdefault(t, {}).update(member.assigned[t])
    if _still_owns(owned, revoking):
        return dataclasses.replace(
            member, state=MemberState.UNREVOKED_PARTITIONS, assigned=assigned, pending_revocation=revoking
        )
    return dataclasses.replace(member, assigned=assigned)


def _next(
    member: ConsumerGroupMember,
    member_epoch: int,
    target_epoch: int,
    target: TargetAssignment,
    owner_of: OwnerOf,
    owned: Owned | None,
    subscribed: Collection[uuid.UUID],
) -> ConsumerGroupMember:
    unreleased = False
    assigned: dict[uuid.UUID, dict[int, int]] = {}
    revoking: dict[uuid.UUID, dict[int, int]] = {}
    pending: dict[uuid.UUID, set[int]] = {}
    for topic_id in {*target, *member.assigned}:
        wanted = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        current = member.assigned.get(topic_id, {})
        kept = {p: e for p, e in current.items() if p in wanted}
        gone = {p: e for p, e in current.items() if p not in wanted}
        mine_revoking = member.pending_revocation.get(topic_id, {})
        to_assign = set()
        for p in wanted:
            if p in kept:
                continue
            # Free, or only held by this member itself while it revokes it: assignable.
            owner = owner_of(topic_id, p)
            if owner is None or (owner == member.member_id and p in mine_revoking):
                to_assign.add(p)
            else:
                unreleased = True
        if kept:
            assigned[topic_id] = kept
        if gone:
            revoking[topic_id] = gone
        if to_assign:
            pending[topic_id] = to_assign
    if revoking and _still_owns(owned, revoking):
        return _moved(member, MemberState.UNREVOKED_PARTITIONS, member_epoch, assigned, revoking)
    for topic_id, parts in pending.items():
        assigned.setdefault(topic_id, {}).update(dict.fromkeys(parts, target_epoch))
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _moved(member, state, target_epoch, assigned, {})


def _moved(
    member: ConsumerGroupMember,
    state: MemberState,
    epoch: int,
    assigned: dict[uuid.UUID, dict[int, int]],
    revoking: dict[uuid.UUID, dict[int, int]],
) -> ConsumerGroupMember:
    return dataclasses.replace(
        member,
        state=state,
        member_epoch=epoch,
        previous_member_epoch=member.member_epoch,  # as Kafka's updateMemberEpoch
        assigned=assigned,
        pending_revocation=revoking,
    )
