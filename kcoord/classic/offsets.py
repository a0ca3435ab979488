"""Committed offsets of a group: commit validation, fetch, delete, and KIP-211 expiration.

The rules are Kafka's (ClassicGroup.validateOffsetCommit, OffsetMetadataManager):
- a commit with generation < 0 from a group without live members (Empty, or a group used only
  to store offsets) is accepted as is: the simple/standalone consumer and the admin client;
- otherwise the member (and static instance) must be known (UNKNOWN_MEMBER_ID /
  FENCED_INSTANCE_ID) and the generation current (ILLEGAL_GENERATION); a group that is
  completing a rebalance answers REBALANCE_IN_PROGRESS;
- expiration (offsets.retention.minutes), checked every offsets.retention.check.interval.ms:
  an Empty group with a protocol type expires every offset once it has been Empty that long
  (current_state_timestamp), then the group itself; a Stable consumer group expires offsets
  of topics no member subscribes to, from their commit timestamp; a group without protocol
  type (standalone) expires each offset from its commit timestamp; an explicit
  expire_timestamp (value v1, from a v2-v4 commit with a retention time) always wins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kcoord.classic.group import ClassicGroup, GroupState
from kcoord.classic.records import GroupMetadataKey, OffsetCommitKey, OffsetCommitValue
from kcoord.classic.store import ClassicGroups
from kcoord.groups.store import GroupStore
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Operation, Outcome


def validate_commit(group: ClassicGroup, member_id: str, instance_id: str | None, generation: int) -> int:
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
    elif not group.is_in(GroupState.EMPTY):
        return ErrorCode.UNKNOWN_MEMBER_ID
    if group.is_in(GroupState.COMPLETING_REBALANCE):
        return ErrorCode.REBALANCE_IN_PROGRESS
    return 0


def commit_records(
    group: ClassicGroup, commits: list[tuple[str, int, int, int, str]], now: int, retention_ms: int
) -> Outcome:
    """Records for (topic, partition, offset, leader epoch, metadata) commits.

    ``retention_ms`` is the v2-v4 RetentionTimeMs; other than -1 it gives the offset its own
    expiry and is written as offset value v1.
    """
    out = Outcome()
    expire = now + retention_ms if retention_ms != -1 else None
    for topic, partition, offset, epoch, metadata in commits:
        out.records.append(
            (
                OffsetCommitKey(group.group_id, topic, partition),
                OffsetCommitValue(offset, epoch, metadata, now, expire),
            )
        )
    return out


def fetch(
    group: ClassicGroup | None, topics: list[tuple[str, list[int]]] | None
) -> list[tuple[str, list[tuple[int, OffsetCommitValue | None]]]]:
    """Committed offsets for the requested partitions, or for all when ``topics`` is None."""
    offsets = group.offsets if group is not None else {}
    if topics is None:
        return [(t, sorted(parts.items())) for t, parts in sorted(offsets.items())]
    return [(t, [(p, offsets.get(t, {}).get(p)) for p in parts]) for t, parts in topics]


def delete_offsets(
    group: ClassicGroup, topics: list[tuple[str, list[int]]]
) -> tuple[int, Outcome, list[tuple[str, list[tuple[int, int]]]]]:
    """OffsetDelete: (top-level error, tombstones, per-partition errors)."""
    out = Outcome()
    if group.is_in(GroupState.DEAD):
        return ErrorCode.GROUP_ID_NOT_FOUND, out, []
    subscribed: set[str] = set()
    if not group.is_in(GroupState.EMPTY) and group.members:
        if group.protocol_type != "consumer":
            return ErrorCode.NON_EMPTY_GROUP, out, []
        found = group.subscribed_topics()
        if found is None:
            return ErrorCode.NON_EMPTY_GROUP, out, []
        subscribed = found
    results = []
    for topic, parts in topics:
        errs = []
        for p in parts:
            if topic in subscribed:
                errs.append((p, int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)))
                continue
            if p in group.offsets.get(topic, {}):
                out.records.append((OffsetCommitKey(group.group_id, topic, p), None))
            errs.append((p, 0))
        results.append((topic, errs))
    return 0, out, results


def delete_group(group: ClassicGroup, now: int) -> tuple[int, Outcome]:
    """DeleteGroups: tombstones for every offset and the group (NON_EMPTY_GROUP with members)."""
    if group.is_in(GroupState.DEAD):
        return ErrorCode.GROUP_ID_NOT_FOUND, Outcome()
    if not group.is_in(GroupState.EMPTY):
        return ErrorCode.NON_EMPTY_GROUP, Outcome()
    out = Outcome()
    for topic, parts in sorted(group.offsets.items()):
        for p in sorted(parts):
            out.records.append((OffsetCommitKey(group.group_id, topic, p), None))
    out.records.append((GroupMetadataKey(group.group_id), None))
    out.extend(group.mark_dead(now))
    return 0, out


def expire(group: ClassicGroup, now: int, retention_ms: int) -> Outcome:
    """Tombstones for expired offsets, and for the group once it is Empty with none left.

    As Kafka's ClassicGroup.offsetExpirationCondition: which offsets may expire, and from when,
    depends on the group; groups in any other situation (rebalancing, not a consumer group)
    expire nothing, not even offsets with an explicit expire timestamp.
    """
    out = Outcome()
    if group.is_in(GroupState.DEAD):
        return out
    subscribed: set[str] = set()
    if group.protocol_type:
        if group.is_in(GroupState.EMPTY):
            empty_since = group.state_timestamp

            def base(v: OffsetCommitValue) -> int:
                return empty_since if empty_since >= 0 else v.commit_timestamp

        elif group.is_in(GroupState.STABLE) and (topics := group.subscribed_topics()) is not None:
            subscribed = topics

            def base(v: OffsetCommitValue) -> int:
                return v.commit_timestamp

        else:
            return out
    else:

        def base(v: OffsetCommitValue) -> int:
            return v.commit_timestamp

    remaining = 0
    for topic, parts in sorted(group.offsets.items()):
        if topic in subscribed:
            remaining += len(parts)
            continue
        for p, value in sorted(parts.items()):
            if value.expire_timestamp is not None:
                expired = now >= value.expire_timestamp
            else:
                expired = now - base(value) >= retention_ms
            if expired:
                out.records.append((OffsetCommitKey(group.group_id, topic, p), None))
            else:
                remaining += 1
    if remaining == 0 and group.is_in(GroupState.EMPTY) and not group.members and not group.pending_members:
        out.records.append((GroupMetadataKey(group.group_id), None))
        out.extend(group.mark_dead(now))
    return out


def expiration(retention_ms: int) -> Callable[[GroupStore], Iterator[tuple[str, Operation[GroupStore]]]]:
    """The periodic KIP-211 cleanup: for every classic group of a shard, an operation that writes
    tombstones for its expired offsets (and for the group itself once it is gone)."""

    def expire_group(store: GroupStore, now: int, group_id: str) -> Outcome:
        group = store.kind(ClassicGroups).get(group_id)
        return expire(group, now, retention_ms) if group is not None else Outcome()

    def op_for(group_id: str) -> Operation[GroupStore]:
        return lambda store, now: expire_group(store, now, group_id)

    def ops(store: GroupStore) -> Iterator[tuple[str, Operation[GroupStore]]]:
        for group_id in list(store.kind(ClassicGroups).groups):
            yield group_id, op_for(group_id)

    return ops
