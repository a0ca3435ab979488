"""What a classic group decides about offsets: who may commit, OffsetDelete and DeleteGroups
preconditions, and KIP-211 expiry of the group. The offsets themselves, and the rules that only
read and write them, are the group layer's (kcoord/groups/offsets.py).

The rules are Kafka's (ClassicGroup.validateOffsetCommit / validateOffsetDelete /
validateDeleteGroup, OffsetMetadataManager):
- a commit with generation < 0 from a group without live members (Empty, or a group used only
  to store offsets) is accepted as is: the simple/standalone consumer and the admin client;
- otherwise the member (and static instance) must be known (UNKNOWN_MEMBER_ID /
  FENCED_INSTANCE_ID) and the generation current (ILLEGAL_GENERATION); a group that is
  completing a rebalance answers REBALANCE_IN_PROGRESS;
- OffsetDelete: GROUP_ID_NOT_FOUND for a dead group, NON_EMPTY_GROUP for an active group whose
  members' subscriptions are unknown (not the consumer protocol);
- expiry (offsets.retention.minutes), checked every offsets.retention.check.interval.ms: which
  offsets may expire, and from when, is ClassicGroup.offset_expiration_base; an Empty group whose
  offsets have all gone is deleted too (its tombstone).
"""

from __future__ import annotations

from kcoord.classic.group import ClassicGroup, GroupState
from kcoord.classic.records import GroupMetadataKey
from kcoord.groups.offsets import Offsets
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Outcome


def validate_commit(
    group: ClassicGroup, member_id: str, instance_id: str | None, generation: int, transactional: bool = False
) -> int:
    """Kafka's ClassicGroup.validateOffsetCommit. A transactional commit (TxnOffsetCommit, whose
    versions before v3 carry no member) needs no member when it names none, and is taken while
    the group completes a rebalance."""
    if group.is_in(GroupState.DEAD):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if generation < 0 and group.is_in(GroupState.EMPTY):
        return 0
    if generation >= 0 or member_id != "" or instance_id is not None:
        error = group._validate_existing(member_id, instance_id)
        if error:
            return error
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
    elif not transactional and not group.is_in(GroupState.EMPTY):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
        return ErrorCode.REBALANCE_IN_PROGRESS
    return 0


def validate_offset_delete(group: ClassicGroup) -> int:
    if group.is_in(GroupState.DEAD):
        return ErrorCode.GROUP_ID_NOT_FOUND
    active = not group.is_in(GroupState.EMPTY) and bool(group.members)
    if active and (group.protocol_type != "consumer" or group.subscribed_topics() is None):
        return ErrorCode.NON_EMPTY_GROUP
    return 0


def delete_group(group: ClassicGroup, offsets: Offsets, now: int) -> tuple[int, Outcome]:
    """DeleteGroups: tombstones for every offset and the group (NON_EMPTY_GROUP with members)."""
    if group.is_in(GroupState.DEAD):
        return ErrorCode.GROUP_ID_NOT_FOUND, Outcome()
    if not group.is_in(GroupState.EMPTY):
        return ErrorCode.NON_EMPTY_GROUP, Outcome()
    out = Outcome(records=offsets.tombstones(group.group_id))
    out.records.append((GroupMetadataKey(group.group_id), None))
    out.extend(group.mark_dead(now))
    return 0, out


def expire(group: ClassicGroup, offsets: Offsets, now: int, retention_ms: int) -> Outcome:
    """Tombstones for expired offsets, and for the group once it is Empty with none left."""
    out = Outcome()
    if group.is_in(GroupState.DEAD) or group.offset_expiration_base() is None:
        return out
    out.records, none_left = offsets.expire(group.group_id, group, now, retention_ms)
    if none_left and group.is_in(GroupState.EMPTY) and not group.members and not group.pending_members:
        out.records.append((GroupMetadataKey(group.group_id), None))
        out.extend(group.mark_dead(now))
    return out
