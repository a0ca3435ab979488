"""A KIP-848 consumer group (group.protocol=consumer), as Kafka's ConsumerGroup and the consumer
part of its GroupMetadataManager.

The group epoch moves whenever membership, a subscription, or the metadata of subscribed topics
changes; the server-side assignor then computes a new target assignment, stamped with that epoch
(target_assignment.py);
each member reconciles towards its target on its own heartbeats (reconciliation.py), so that no
partition is ever owned by two members at once. A member's epoch 0 joins, -1 leaves, -2 is a
static member leaving for a while (it keeps its assignment for its next instance); a member whose
session lapses, or that does not revoke partitions within its rebalance timeout, is fenced.

Every change is a record (records.py) and the group changes only by replaying records: an
operation computes the records of its change, and the runtime applies them through the same
``replay`` start-up uses. What is not persisted: session and rebalance deadlines (members come
back from a restart with fresh ones, as Kafka's coordinator does on load) and the last topics
version seen.

Subscribed topic metadata is summarised by a hash persisted with the group epoch (KIP-1101): a
topic created, deleted or grown among the subscribed ones changes the hash, which bumps the epoch.
Regular-expression subscriptions (Kafka uses RE2J) are resolved with RE2 against the topic names
whenever the topics change, and their resolution is persisted (record type 16).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import Enum

import re2

from kcoord.consumer.assignors import PartitionAssignorError
from kcoord.consumer.member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    MemberState,
    TargetAssignment,
)
from kcoord.consumer.reconciliation import FencedMemberEpoch, reconcile
from kcoord.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
)
from kcoord.consumer.subscriptions import regex_error, subscription_hash
from kcoord.consumer.target_assignment import build_target_assignment, subscribed_topics, topic_partitions
from kcoord.groups.migration import MigrationPolicy
from kcoord.groups.records import OffsetCommitValue, commit_time
from kcoord.groups.topics import TopicsView
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.deadlines import Deadlines
from kcoord.runtime.outcome import Record


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    max_size: int = 2**31 - 1  # group.consumer.max.size
    assignors: tuple[str, ...] = ("uniform", "range")  # group.consumer.assignors; the first is the default
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL  # group.consumer.migration.policy
    classic_max_size: int = 2**31 - 1  # group.max.size: a downgrade must fit a classic group


@dataclass(frozen=True)
class HeartbeatRequest:
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int  # -1: unchanged
    subscribed_topic_names: tuple[str, ...] | None  # None: unchanged
    subscribed_topic_regex: str | None  # None: unchanged
    server_assignor: str | None  # None: unchanged
    owned: Mapping[uuid.UUID, Collection[int]] | None  # None: not sent
    client_id: str
    client_host: str


@dataclass
class HeartbeatResult:
    error: int = 0
    message: str | None = None
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TargetAssignment | None = None  # None: not sent (unchanged)


class HeartbeatError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, dict[uuid.UUID, frozenset[int]]] = {}
        self.owners: dict[tuple[uuid.UUID, int], str] = {}  # partition -> the member that owns it
        self.subscribed_names: Counter[str] = Counter()  # subscribed topic names, by members
        self.regex_subscribers: Counter[str] = Counter()
        self.server_assignors: Counter[str] = Counter()
        self.regexes: dict[str, ConsumerGroupRegularExpressionValue] = {}  # resolved
        self.dead = False
        # Not persisted.
        self.session_deadlines = Deadlines()
        self.rebalance_deadlines = Deadlines()  # a member must have revoked by then ...
        self.rebalance_epochs: dict[str, int] = {}  # ... unless it left the epoch it was set at
        # Members on the classic protocol: told to join again, they must within their rebalance
        # timeout; having joined, they must sync within it (Kafka's join and sync timers).
        self.join_deadlines = Deadlines()
        self.sync_deadlines = Deadlines()
        # The topics version the metadata hash and the regexes were checked against (soft: -1
        # after a restart, so that the first heartbeat looks again).
        self.topics_version = -1

    # --- facts ---------------------------------------------------------------------------------
    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        epoch = self.assignment_epoch
        if any(not m.is_reconciled_to(epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def preferred_assignor(self, config: ConsumerGroupConfig) -> str:
        if self.server_assignors:
            return max(sorted(self.server_assignors), key=lambda n: self.server_assignors[n])
        return config.assignors[0]

    def subscribed_topics(self) -> set[str]:
        names = {n for n, c in self.subscribed_names.items() if c > 0}
        for regex, resolved in self.regexes.items():
            if self.regex_subscribers.get(regex):
                names.update(resolved.topics)
        return names

    # --- offsets (Kafka's Group interface) -----------------------------------------------------
    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_names.get(topic, 0) > 0:
            return True
        return any(
            self.regex_subscribers.get(regex) and topic in resolved.topics
            for regex, resolved in self.regexes.items()
        )

    def offset_expiration_base(self) -> Callable[[OffsetCommitValue], int] | None:
        return None if self.dead else commit_time

    def validate_offset_commit(
        self,
        member_id: str,
        member_epoch: int,
        api_version: int,
        partitions: Collection[tuple[uuid.UUID, int]] = (),
        transactional: bool = False,
    ) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit: a commit without member (epoch < 0) is
        accepted while the group has no member; otherwise the member must be known and its epoch
        current (ILLEGAL_GENERATION for a member on the classic protocol). A consumer-protocol
        member may commit with an older epoch (KIP-1251, Kafka 4.3) if every partition committed
        (topic id, partition) is still its own, assigned or pending revocation, since an epoch no
        later than the commit's: a commit sent just before a heartbeat moved the member's epoch on
        (partitions added) stays valid. Otherwise STALE_MEMBER_EPOCH. A transactional commit
        (TxnOffsetCommit) takes any version."""
        if self.dead:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if member_epoch < 0 and not self.members:
            return 0
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if not transactional and not member.uses_classic_protocol and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch == member.member_epoch:
            return 0
        if member.uses_classic_protocol:
            return ErrorCode.ILLEGAL_GENERATION
        if member_epoch > member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        for topic_id, partition in partitions:
            assigned_at = member.assigned.get(topic_id, {}).get(partition)
            if assigned_at is None:
                assigned_at = member.pending_revocation.get(topic_id, {}).get(partition)
            if assigned_at is None or member_epoch < assigned_at:
                return ErrorCode.STALE_MEMBER_EPOCH
        return 0

    def validate_offset_fetch(self, member_id: str | None, member_epoch: int) -> int:
        if member_id is None and member_epoch < 0:
            return 0
        member = self.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return (
                ErrorCode.ILLEGAL_GENERATION if member.uses_classic_protocol else ErrorCode.STALE_MEMBER_EPOCH
            )
        return 0

    # --- replay (the only way the group changes) -----------------------------------------------
    def replay_epoch(self, value: ConsumerGroupMetadataValue) -> None:
        self.group_epoch = value.epoch
        self.metadata_hash = value.metadata_hash

    def replay_member(self, member_id: str, updated: ConsumerGroupMember | None) -> None:
        old = self.members.get(member_id)
        if old is not None:
            self._forget(old)
        if updated is None:
            self.members.pop(member_id, None)
            for deadlines in (
                self.session_deadlines,
                self.rebalance_deadlines,
                self.rebalance_epochs,
                self.join_deadlines,
                self.sync_deadlines,
            ):
                deadlines.pop(member_id, None)
            return
        self.members[member_id] = updated
        for name in updated.subscribed_topic_names:
            self.subscribed_names[name] += 1
        if updated.subscribed_topic_regex is not None:
            self.regex_subscribers[updated.subscribed_topic_regex] += 1
        if updated.server_assignor is not None:
            self.server_assignors[updated.server_assignor] += 1
        if updated.instance_id is not None:
            self.static_members[updated.instance_id] = member_id
        for topic_id, parts in (*updated.assigned.items(), *updated.pending_revocation.items()):
            for p in parts:
                self.owners[(topic_id, p)] = member_id

    def _forget(self, old: ConsumerGroupMember) -> None:
        for name in old.subscribed_topic_names:
            self.subscribed_names[name] -= 1
            if self.subscribed_names[name] <= 0:
                del self.subscribed_names[name]
        for counter, key in (
            (self.regex_subscribers, old.subscribed_topic_regex),
            (self.server_assignors, old.server_assignor),
        ):
            if key is not None:
                counter[key] -= 1
                if counter[key] <= 0:
                    del counter[key]
        if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
            del self.static_members[old.instance_id]
        for topic_id, parts in (*old.assigned.items(), *old.pending_revocation.items()):
            for p in parts:
                if self.owners.get((topic_id, p)) == old.member_id:
                    del self.owners[(topic_id, p)]

    # --- records -------------------------------------------------------------------------------
    def _member_records(self, member: ConsumerGroupMember) -> list[Record]:
        return [
            (ConsumerGroupMemberMetadataKey(self.group_id, member.member_id), member.metadata_value()),
        ]

    def _assignment_record(self, member: ConsumerGroupMember) -> Record:
        return ConsumerGroupCurrentMemberAssignmentKey(
            self.group_id, member.member_id
        ), member.assignment_value()

    def _removal_records(self, member_id: str) -> list[Record]:
        """Kafka's removeMember: current assignment, target assignment, then the member."""
        g = self.group_id
        return [
            (ConsumerGroupCurrentMemberAssignmentKey(g, member_id), None),
            (ConsumerGroupTargetAssignmentMemberKey(g, member_id), None),
            (ConsumerGroupMemberMetadataKey(g, member_id), None),
        ]

    def tombstones(self, members: Collection[str] | None = None) -> list[Record]:
        """Every record of the group, deleted (Kafka's createGroupTombstoneRecords); ``members``
        when the operation has changed who they are (a static member replaced)."""
        g = self.group_id
        ids = list(self.members) if members is None else list(members)
        out: list[Record] = [(ConsumerGroupCurrentMemberAssignmentKey(g, m), None) for m in ids]
        out += [(ConsumerGroupTargetAssignmentMemberKey(g, m), None) for m in ids]
        out.append((ConsumerGroupTargetAssignmentMetadataKey(g), None))
        out += [(ConsumerGroupMemberMetadataKey(g, m), None) for m in ids]
        out += [(ConsumerGroupRegularExpressionKey(g, r), None) for r in self.regexes]
        out.append((ConsumerGroupMetadataKey(g), None))
        return out

    # --- heartbeat -----------------------------------------------------------------------------
    def heartbeat(
        self, req: HeartbeatRequest, config: ConsumerGroupConfig, topics: TopicsView, now: int
    ) -> tuple[HeartbeatResult, list[Record], str | None]:
        """The answer, the records, and the member that leaves for good (the caller fences it: its
        leaving may turn the group back into a classic group)."""
        try:
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            result, records = self._heartbeat(req, config, topics, now)
            return result, records, None
        except HeartbeatError as e:
            return HeartbeatResult(e.code, e.message, member_id=req.member_id), [], None

    def _heartbeat(
        self, req: HeartbeatRequest, config: ConsumerGroupConfig, topics: TopicsView, now: int
    ) -> tuple[HeartbeatResult, list[Record]]:
        steady = self._steady(req, config, topics, now)
        if steady is not None:
            return steady, []
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        self.check_capacity(req.member_id, config)
        replaced: str | None = None  # the static member this one takes the place of
        if req.instance_id is None:
            member = self._dynamic_member(req, joining)
        else:
            member, replaced = self._static_member(req, joining)
        updated = dataclasses.replace(
            member,
            instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
            rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms
            if req.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms,
            server_assignor=req.server_assignor
            if req.server_assignor is not None
            else member.server_assignor,
            subscribed_topic_names=(
                tuple(sorted(set(req.subscribed_topic_names)))
                if req.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (req.subscribed_topic_regex or None)
                if req.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=req.client_id,
            client_host=req.client_host,
            classic_member_metadata=None,
        )
        regex = updated.subscribed_topic_regex
        if (
            regex is not None
            and regex != member.subscribed_topic_regex
            and not self.regex_subscribers.get(regex)
        ):
            # Kafka compiles a regex when a member subscribes to one the group does not have yet.
            error = regex_error(regex)
            if error is not None:
                raise HeartbeatError(
                    ErrorCode.INVALID_REGULAR_EXPRESSION,
                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {error}.",
                )
        try:
            reconciled, records = self.update_member(
                member, updated, replaced, req.owned, config, topics, now
            )
        except FencedMemberEpoch as e:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, str(e)) from None
        member_id = reconciled.member_id
        # Deadlines (not persisted).
        self.session_deadlines[member_id] = now + config.session_timeout_ms
        if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
            # As Kafka's maybeReconcile: the timeout starts again whenever the member moves (it
            # revoked some, the target changed), not only when its epoch does.
            if reconciled != updated or member_id not in self.rebalance_epochs:
                self.rebalance_deadlines[member_id] = now + max(reconciled.rebalance_timeout_ms, 0)
                self.rebalance_epochs[member_id] = reconciled.member_epoch
        elif member_id in self.rebalance_epochs:
            del self.rebalance_deadlines[member_id], self.rebalance_epochs[member_id]
        full = joining or (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.owned is not None
        )
        changed = reconciled.assigned != updated.assigned
        return (
            HeartbeatResult(
                member_id=member_id,
                member_epoch=reconciled.member_epoch,
                heartbeat_interval_ms=config.heartbeat_interval_ms,
                assignment=reconciled.assigned_partitions() if full or changed else None,
            ),
            records,
        )

    def _steady(
        self, req: HeartbeatRequest, config: ConsumerGroupConfig, topics: TopicsView, now: int
    ) -> HeartbeatResult | None:
        """The answer to a heartbeat that can change nothing, or None to take the full path: a
        reconciled member at the current epoch, nothing new in the request, the topics as last
        seen. Nearly every heartbeat of a stable group is one, and building the updated member
        and its records only to find them unchanged costs more than the rest of the heartbeat."""
        member = self.members.get(req.member_id)
        if (
            member is None
            or req.member_epoch <= 0
            or req.member_epoch != member.member_epoch
            or member.state is not MemberState.STABLE
            or member.member_epoch != self.assignment_epoch
            or self.group_epoch != self.assignment_epoch
            or topics.version != self.topics_version
            or req.instance_id != member.instance_id
            or member.classic_member_metadata is not None
            or (req.rack_id is not None and req.rack_id != member.rack_id)
            or (req.rebalance_timeout_ms != -1 and req.rebalance_timeout_ms != member.rebalance_timeout_ms)
            or (req.server_assignor is not None and req.server_assignor != member.server_assignor)
            or (
                req.subscribed_topic_regex is not None
                and (req.subscribed_topic_regex or None) != member.subscribed_topic_regex
            )
            or (
                req.subscribed_topic_names is not None
                and tuple(sorted(set(req.subscribed_topic_names))) != member.subscribed_topic_names
            )
            or req.client_id != member.client_id
            or req.client_host != member.client_host
        ):
            return None
        self.session_deadlines[member.member_id] = now + config.session_timeout_ms
        full = (
            req.rebalance_timeout_ms != -1
            and req.subscribed_topic_names is not None
            and req.owned is not None
        )
        return HeartbeatResult(
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            assignment=member.assigned_partitions() if full else None,
        )

    def check_capacity(self, member_id: str, config: ConsumerGroupConfig) -> None:
        if len(self.members) >= config.max_size and member_id not in self.members:
            raise HeartbeatError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {config.max_size} members.",
            )

    def update_member(
        self,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        replaced: str | None,
        owned: Mapping[uuid.UUID, Collection[int]] | None,
        config: ConsumerGroupConfig,
        topics: TopicsView,
        now: int,
    ) -> tuple[ConsumerGroupMember, list[Record]]:
        """The records of ``member`` becoming ``updated`` (replacing the static member ``replaced``),
        whichever protocol it speaks: the member, the group epoch if its subscription or the
        subscribed topics changed, the new target assignment if the epoch moved, and the member
        reconciled towards its target with what it says it ``owned``. Raises FencedMemberEpoch."""
        records: list[Record] = []
        # Whose subscription and assignor leave the group's counts: the replaced instance's.
        before = self.members[replaced] if replaced is not None else member
        if replaced is not None:
            records += self._removal_records(replaced)
        bump = False
        if updated.metadata_value() != member.metadata_value() or replaced is not None:
            records += self._member_records(updated)
            if replaced is not None:
                # The new instance starts from what the previous one was assigned.
                records.append(
                    (
                        ConsumerGroupTargetAssignmentMemberKey(self.group_id, updated.member_id),
                        ConsumerGroupTargetAssignmentMemberValue(
                            topic_partitions(self.target.get(replaced, {}))
                        ),
                    )
                )
                records.append(self._assignment_record(updated))
            bump = (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        # Epoch 0 is reserved for joining members: a new group moves away from it on its first join,
        # whatever the subscription, as Kafka's does (since KAFKA-20268 it creates groups at epoch
        # 1). A member answered with epoch 0 (an empty subscription: a client-side regex matching
        # nothing yet) would send its next heartbeat as a join without a join's fields.
        bump = bump or self.group_epoch == 0
        # Subscribed topics: resolve new or stale regular expressions, then check the metadata.
        group_epoch = self.group_epoch
        metadata_hash = self.metadata_hash
        # The resolutions this heartbeat sees (its records are replayed only after it).
        regexes: Mapping[str, ConsumerGroupRegularExpressionValue] = self.regexes
        checked = bump or topics.version != self.topics_version
        if checked:
            regexes, regex_records = self._resolve_regexes(before, updated, topics, now)
            records += regex_records
            metadata_hash = self._metadata_hash(before, updated, regexes, topics)
            if metadata_hash != self.metadata_hash:
                bump = True
        if bump:
            group_epoch += 1
            records.append(
                (
                    ConsumerGroupMetadataKey(self.group_id),
                    ConsumerGroupMetadataValue(group_epoch, metadata_hash),
                )
            )
        # The target assignment, computed again when the group epoch moved past it.
        if group_epoch > self.assignment_epoch:
            try:
                target, target_records = build_target_assignment(
                    self.group_id,
                    self.members,
                    self.target,
                    self.server_assignors,
                    group_epoch=group_epoch,
                    member=before,
                    updated=updated,
                    replaced=replaced,
                    regexes=regexes,
                    assignor_names=config.assignors,
                    topics=topics,
                    now=now,
                )
            except PartitionAssignorError as e:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"Failed to compute a new target assignment: {e}"
                ) from e
            records += target_records
            target_epoch = group_epoch
        else:
            target_epoch = self.assignment_epoch
            # A static member's new instance has the target of the instance it replaces (Kafka's
            # ConsumerGroup.targetAssignment(memberId, instanceId)): its own is only being written.
            target = self.target.get(replaced if replaced is not None else updated.member_id, {})
        # Reconcile the member towards its target.
        subscribed_ids = subscribed_topics(updated, regexes, topics).keys()
        owners = self.owners
        member_id = updated.member_id

        def owner_of(topic_id: uuid.UUID, p: int) -> str | None:
            owner = owners.get((topic_id, p))
            return member_id if owner is not None and owner == replaced else owner

        reconciled = reconcile(updated, target_epoch, target, owner_of, owned, subscribed_ids)
        if (
            reconciled.member_epoch,
            reconciled.previous_member_epoch,
            reconciled.state,
            reconciled.assigned,
            reconciled.pending_revocation,
        ) != (
            member.member_epoch,
            member.previous_member_epoch,
            member.state,
            member.assigned,
            member.pending_revocation,
        ):
            records.append(self._assignment_record(reconciled))
        if checked:
            # Soft state, set once nothing can fail: an answered error writes nothing, and the
            # next heartbeat must look at the topics again.
            self.topics_version = topics.version
        return reconciled, records

    def static_member(
        self, instance_id: str, member_id: str, unknown: str | None = None
    ) -> ConsumerGroupMember:
        """The instance's member, which must be ``member_id`` (Kafka's throwIfStaticMemberIsUnknown,
        or ``unknown`` as the message, and throwIfInstanceIdIsFenced)."""
        existing_id = self.static_members.get(instance_id)
        existing = self.members.get(existing_id) if existing_id is not None else None
        if existing is None:
            raise HeartbeatError(
                ErrorCode.UNKNOWN_MEMBER_ID, unknown or f"Instance id {instance_id} is unknown."
            )
        if existing.member_id != member_id:
            raise HeartbeatError(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{existing.member_id}.",
            )
        return existing

    def _dynamic_member(self, req: HeartbeatRequest, joining: bool) -> ConsumerGroupMember:
        member = self.members.get(req.member_id)
        if member is None:
            if not joining:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {self.group_id}.",
                )
            return ConsumerGroupMember(req.member_id)
        _check_epoch(member, req)
        return member

    def _static_member(self, req: HeartbeatRequest, joining: bool) -> tuple[ConsumerGroupMember, str | None]:
        assert req.instance_id is not None
        existing_id = self.static_members.get(req.instance_id)
        existing = self.members.get(existing_id) if existing_id is not None else None
        if joining:
            if existing is None:
                return self.members.get(req.member_id) or ConsumerGroupMember(req.member_id), None
            if existing.member_id == req.member_id:
                return existing, None
            if (
                existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                and not existing.uses_classic_protocol
            ):
                raise HeartbeatError(
                    ErrorCode.UNRELEASED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} cannot join the "
                    f"group because the instance id is owned by {existing.member_id} member.",
                )
            # The new instance takes the place of the previous one, with its assignment.
            return existing.new_instance(req.member_id), existing.member_id
        existing = self.static_member(req.instance_id, req.member_id)
        _check_epoch(existing, req)
        return existing, None

    # --- subscriptions and metadata ------------------------------------------------------------
    def _resolve_regexes(
        self, member: ConsumerGroupMember, updated: ConsumerGroupMember, topics: TopicsView, now: int
    ) -> tuple[dict[str, ConsumerGroupRegularExpressionValue], list[Record]]:
        """The regexes subscribed after this heartbeat, resolved against the current topics;
        records for resolutions that changed and for regexes nobody subscribes to any more."""
        counts = Counter({r: c for r, c in self.regex_subscribers.items() if c > 0})
        if member.member_id in self.members and member.subscribed_topic_regex is not None:
            counts[member.subscribed_topic_regex] -= 1
        if updated.subscribed_topic_regex is not None:
            counts[updated.subscribed_topic_regex] += 1
        records: list[Record] = []
        resolved: dict[str, ConsumerGroupRegularExpressionValue] = {}
        names: list[str] | None = None
        for regex in sorted(r for r, c in counts.items() if c > 0):
            current = self.regexes.get(regex)
            # Resolved while the topics were as they are: reused. (The persisted version counts
            # topic changes since the broker started: after a restart it says nothing.)
            if current is not None and self.topics_version == topics.version:
                resolved[regex] = current
                continue
            if names is None:
                names = sorted(topics.names())
            pattern = re2.compile(regex)
            matched = tuple(n for n in names if pattern.fullmatch(n) is not None)
            value = ConsumerGroupRegularExpressionValue(matched, topics.version, now)
            resolved[regex] = value
            if current is None or current.topics != matched or current.version != value.version:
                records.append((ConsumerGroupRegularExpressionKey(self.group_id, regex), value))
        for regex in self.regexes:
            if regex not in resolved:
                records.append((ConsumerGroupRegularExpressionKey(self.group_id, regex), None))
        return resolved, records

    def _metadata_hash(
        self,
        member: ConsumerGroupMember | None,
        updated: ConsumerGroupMember | None,
        regexes: Mapping[str, ConsumerGroupRegularExpressionValue],
        topics: TopicsView,
    ) -> int:
        """A hash of the subscribed topics' ids and partition counts (KIP-1101's metadata hash),
        with ``member`` replaced by ``updated`` (either may be None: a member joining or leaving)."""
        names = Counter({n: c for n, c in self.subscribed_names.items() if c > 0})
        if member is not None and member.member_id in self.members:
            names.subtract(member.subscribed_topic_names)
        if updated is not None:
            names.update(updated.subscribed_topic_names)
        return subscription_hash({n for n, c in names.items() if c > 0}, regexes, topics)

    # --- leaving and fencing -------------------------------------------------------------------
    def _leave(self, req: HeartbeatRequest) -> tuple[HeartbeatResult, list[Record], str | None]:
        result = HeartbeatResult(member_id=req.member_id, member_epoch=req.member_epoch)
        if req.instance_id is None:
            if req.member_id not in self.members:
                raise HeartbeatError(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member {req.member_id} is not a member of group {self.group_id}.",
                )
            return result, [], req.member_id
        existing = self.static_member(req.instance_id, req.member_id)
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Leaves for a while: keeps its assignment (nothing pending revocation) for its next instance.
            leaving = dataclasses.replace(
                existing, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation={}
            )
            return (
                HeartbeatResult(member_id=existing.member_id, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH),
                [self._assignment_record(leaving)],
                None,
            )
        return result, [], existing.member_id

    def fence(self, member_ids: Collection[str], topics: TopicsView) -> list[Record]:
        """Remove members (they left, or their session or rebalance timeout lapsed): their records
        go, and the group epoch moves so that their partitions are assigned again."""
        gone = sorted({m for m in member_ids if m in self.members})  # a LeaveGroup may name one twice
        if not gone:
            return []
        records: list[Record] = []
        names = Counter({n: c for n, c in self.subscribed_names.items() if c > 0})
        regexes = Counter({r: c for r, c in self.regex_subscribers.items() if c > 0})
        for member_id in sorted(gone):
            records += self._removal_records(member_id)
            member = self.members[member_id]
            names.subtract(member.subscribed_topic_names)
            if member.subscribed_topic_regex is not None:
                regexes[member.subscribed_topic_regex] -= 1
        still = {r: v for r, v in self.regexes.items() if regexes.get(r, 0) > 0}
        for regex in self.regexes:
            if regex not in still:
                records.append((ConsumerGroupRegularExpressionKey(self.group_id, regex), None))
        staying = {n for n, c in names.items() if c > 0}
        metadata_hash = subscription_hash(staying, still, topics) if len(gone) < len(self.members) else 0
        records.append(
            (
                ConsumerGroupMetadataKey(self.group_id),
                ConsumerGroupMetadataValue(self.group_epoch + 1, metadata_hash),
            )
        )
        return records

    # --- timers --------------------------------------------------------------------------------
    def session_timeout_ms(self, member: ConsumerGroupMember, config: ConsumerGroupConfig) -> int:
        """A classic-protocol member's own session timeout, or group.consumer.session.timeout.ms."""
        classic = member.classic_member_metadata
        return classic.session_timeout_ms if classic is not None else config.session_timeout_ms

    def next_deadline(self) -> int | None:
        earliest = None
        for deadlines in (
            self.session_deadlines,
            self.rebalance_deadlines,
            self.join_deadlines,
            self.sync_deadlines,
        ):
            d = deadlines.earliest()
            if d is not None and (earliest is None or d < earliest):
                earliest = d
        return earliest

    def expired(self, now: int) -> set[str]:
        """Members to fence now: their session lapsed, they did not revoke within their rebalance
        timeout (still at the epoch it was set for), or, on the classic protocol, did not join or
        sync in time. Their deadlines are spent."""
        expired = {m for m, d in self.session_deadlines.items() if d <= now}
        expired |= {
            m
            for m, d in self.rebalance_deadlines.items()
            if d <= now and m in self.members and self.members[m].member_epoch == self.rebalance_epochs[m]
        }
        expired |= {m for m, d in self.join_deadlines.items() if d <= now}
        expired |= {m for m, d in self.sync_deadlines.items() if d <= now}
        for m in [m for m, d in self.rebalance_deadlines.items() if d <= now]:
            del self.rebalance_deadlines[m], self.rebalance_epochs[m]
        for deadlines in (self.session_deadlines, self.join_deadlines, self.sync_deadlines):
            for m in [m for m, d in deadlines.items() if d <= now]:
                del deadlines[m]
        return {m for m in expired if m in self.members}

    def start_timers(self, now: int, config: ConsumerGroupConfig) -> None:
        """After a restart, or a group made from a classic group: every member on a fresh session,
        revocations on a fresh timeout."""
        for mid, m in self.members.items():
            self.session_deadlines[mid] = now + self.session_timeout_ms(m, config)
            if m.state is MemberState.UNREVOKED_PARTITIONS and not m.uses_classic_protocol:
                self.rebalance_deadlines[mid] = now + max(m.rebalance_timeout_ms, 0)
                self.rebalance_epochs[mid] = m.member_epoch

    # --- members on the classic protocol (Kafka's "classic member in a consumer group") ----------
    def classic_member_count(self) -> int:
        return sum(1 for m in self.members.values() if m.uses_classic_protocol)

    def all_classic_except(self, member_id: str) -> bool:
        """Kafka's allMembersUseClassicProtocolExcept: ``member_id`` is on the consumer protocol,
        every other member on the classic one."""
        member = self.members.get(member_id)
        return (
            member is not None
            and not member.uses_classic_protocol
            and self.classic_member_count() == len(self.members) - 1
        )

    def supports_classic_protocols(self, protocol_type: str, names: Collection[str]) -> bool:
        """Kafka's supportsClassicProtocols: the ``consumer`` type, and (unless the group is empty)
        one of ``names`` that every classic-protocol member supports."""
        if protocol_type != "consumer":
            return False
        if not self.members:
            return bool(names)
        classic = [m for m in self.members.values() if m.classic_member_metadata is not None]
        return any(
            all(
                any(p.name == name for p in m.classic_member_metadata.supported_protocols)  # type: ignore[union-attr]
                for m in classic
            )
            for name in names
        )

    def waiting_on_unreleased(self, member: ConsumerGroupMember) -> bool:
        """Kafka's waitingOnUnreleasedPartition: a partition of its target it has not got is still
        owned by another member."""
        if member.state is not MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, parts in self.target.get(member.member_id, {}).items():
            mine = member.assigned.get(topic_id, {})
            if any(p not in mine and (topic_id, p) in self.owners for p in parts):
                return True
        return False


def _check_epoch(member: ConsumerGroupMember, req: HeartbeatRequest) -> None:
    """Kafka's throwIfConsumerGroupMemberEpochIsInvalid: a member may lag one epoch behind (it did
    not get the last answer) as long as it owns only partitions it still has. Epoch 0 is a member
    rejoining with its member id after it was fenced (it gave up its partitions): accepted, and
    it is answered with its current epoch and assignment (KAFKA-19233, Kafka 4.3)."""
    epoch = req.member_epoch
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        return
    if epoch > member.member_epoch:
        raise HeartbeatError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )
    if epoch < member.member_epoch and (
        epoch != member.previous_member_epoch or not _owns_subset(req.owned, member)
    ):
        raise HeartbeatError(
            ErrorCode.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the group "
            f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
        )


def _owns_subset(owned: Mapping[uuid.UUID, Collection[int]] | None, member: ConsumerGroupMember) -> bool:
    if owned is None:
        return False
    for topic_id, parts in owned.items():
        assigned = member.assigned.get(topic_id)
        if assigned is None or any(p not in assigned for p in parts):
            return False
    return True
