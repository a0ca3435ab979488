"""The KIP-848 consumer groups of one coordinator partition and how their records replay.

Records of types 3 to 8 and 16 are applied here, live and at start-up alike (type 4, the
subscription metadata Kafka 3.8-4.0 wrote, is read and ignored: the metadata hash of the group
epoch record replaced it). A group comes into existence with its first record and goes with the
tombstone of its epoch record.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

from kcoord.consumer import classic_members
from kcoord.consumer.group import ConsumerGroup, ConsumerGroupConfig, HeartbeatRequest, HeartbeatResult
from kcoord.consumer.member import JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, ConsumerGroupMember
from kcoord.consumer.migration import downgrade_view, upgrade_records
from kcoord.consumer.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
)
from kcoord.groups.classic_protocol import JoinRequest, SyncResult
from kcoord.groups.consumer_protocol import MalformedConsumerProtocol
from kcoord.groups.migration import MALFORMED, CannotUpgrade
from kcoord.groups.store import ClassicGroupHost, GroupNamespace, GroupsById
from kcoord.groups.topics import TopicsView
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Outcome, Record, Responder
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.shard import Loader

GROUP_TYPE: Final = "consumer"


class ConsumerGroups(GroupsById[ConsumerGroup]):
    group_type: ClassVar[str] = GROUP_TYPE

    def __init__(
        self,
        namespace: GroupNamespace,
        config: ConsumerGroupConfig,
        topics: TopicsView,
        rebalanced: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__()
        self.namespace = namespace
        self.config = config
        self.topics = topics
        self.rebalanced = rebalanced  # a heartbeat bumped a group epoch (live only, never in replay)
        self.replayers: Mapping[type, Callable[[Any, Any, int], None]] = {
            ConsumerGroupMetadataKey: self._replay_epoch,
            ConsumerGroupPartitionMetadataKey: self._replay_ignored,
            ConsumerGroupMemberMetadataKey: self._replay_member,
            ConsumerGroupTargetAssignmentMetadataKey: self._replay_assignment_epoch,
            ConsumerGroupTargetAssignmentMemberKey: self._replay_target,
            ConsumerGroupCurrentMemberAssignmentKey: self._replay_current,
            ConsumerGroupRegularExpressionKey: self._replay_regex,
        }

    def get_or_create(self, group_id: str) -> ConsumerGroup | None:
        """The group, created if no group of any type has the id; None if another type has it."""
        group = self.groups.get(group_id)
        if group is None and self.namespace.group_type(group_id) is None:
            group = self._create(group_id)
        return group

    def _create(self, group_id: str) -> ConsumerGroup:
        group = self.groups[group_id] = ConsumerGroup(group_id)
        return group

    # --- ConsumerGroupHeartbeat --------------------------------------------------------------------
    def heartbeat(self, group_id: str, req: HeartbeatRequest, respond: Responder, now: int) -> Outcome:
        """ConsumerGroupHeartbeat: a join (epoch 0) creates the group when no group has the id, takes
        over an empty classic group, or upgrades a classic group whose members all speak the
        consumer protocol (group.consumer.migration.policy); otherwise an unknown group is
        GROUP_ID_NOT_FOUND. A member leaving for good may turn the group back into a classic one."""
        group = self.groups.get(group_id)
        if group is None and req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            classic = self.namespace.classic_groups
            if classic is not None and classic.holds(group_id):
                return self._from_classic(classic, group_id, req, respond, now)
            group = self.get_or_create(group_id)
        if group is None:
            out = Outcome()
            out.respond(
                respond,
                HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, self._not_ours(group_id), req.member_id),
            )
            return out
        epoch = group.group_epoch
        result, records, leaving = group.heartbeat(req, self.config, self.topics, now)
        out = self._fence(group, [leaving], now) if leaving is not None else Outcome(records=records)
        if not out.records and not group.members and group.group_epoch == 0:
            self.groups.pop(group_id, None)  # a join that failed leaves no group behind
        if req.member_epoch >= 0:  # as Kafka: leaving is no rebalance it counts
            self._count_rebalance(epoch, records)
        out.respond(respond, result)
        return out

    def _not_ours(self, group_id: str) -> str:
        held = self.namespace.group_type(group_id) is not None
        return f"Group {group_id} is not a consumer group." if held else f"Group {group_id} not found."

    def _count_rebalance(self, epoch: int, records: list[Record]) -> None:
        if any(
            isinstance(key, ConsumerGroupMetadataKey) and value is not None and value.epoch > epoch
            for key, value in records
        ):
            self.rebalanced()

    def _from_classic(
        self, classic: ClassicGroupHost, group_id: str, req: HeartbeatRequest, respond: Responder, now: int
    ) -> Outcome:
        """Kafka's getOrMaybeCreateConsumerGroup on a classic group id: an empty one gives way
        (its offsets stay); one with members is converted if it can be (validateOnlineUpgrade),
        and the join then runs on the consumer group its records made. In Kafka a join that fails
        undoes the conversion with it; here it is tried first on a copy, and a failing one leaves
        the classic group as it was."""
        out = Outcome()
        records: list[Record] = []
        if not classic.is_empty(group_id):
            try:
                records = self._upgrade(classic, group_id, now)
            except CannotUpgrade as e:
                error = HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, e.message(group_id), req.member_id)
                out.respond(respond, error)
                return out
        refused = self._trial_join(group_id, records, req, now)
        if refused is not None:
            out.respond(respond, refused)
            return out

        def join(_state: object, now: int) -> Outcome:
            if group_id in self.groups:
                self.groups[group_id].start_timers(now, self.config)  # the converted members
            return self.heartbeat(group_id, req, respond, now)

        out = classic.hand_over(group_id, now)
        out.records += records
        out.then = join
        return out

    def _trial_join(
        self, group_id: str, records: list[Record], req: HeartbeatRequest, now: int
    ) -> HeartbeatResult | None:
        """The join's error if it ran on the consumer group ``records`` make (none: a new group),
        found on a throwaway copy of this kind."""
        trial = ConsumerGroups(self.namespace, self.config, self.topics)
        for key, value in records:
            trial.replay(key, value, now)
        group = trial.groups.get(group_id) or trial._create(group_id)
        result, _records, _leaving = group.heartbeat(req, self.config, self.topics, now)
        return result if result.error else None

    def _upgrade(self, classic: ClassicGroupHost, group_id: str, now: int) -> list[Record]:
        """The records of the consumer group the classic group becomes; raises CannotUpgrade
        with Kafka's reason (validateOnlineUpgrade's checks in its order, then the conversion)."""
        if not self.config.migration_policy.upgrades:
            raise CannotUpgrade("online upgrade is disabled.")
        view = classic.migration_view(group_id)
        if len(view.members) > self.config.max_size:
            raise CannotUpgrade("the group size exceeds the consumer group maximum size.")
        try:
            return upgrade_records(view, self.topics, now)
        except MalformedConsumerProtocol:
            raise CannotUpgrade(MALFORMED) from None

    # --- members on the classic protocol -------------------------------------------------------------
    def classic_join(self, group_id: str, req: JoinRequest, respond: Responder, now: int) -> Outcome:
        """JoinGroup of a consumer group with members (an empty one gives way: ``give_way``)."""
        group = self.groups[group_id]
        epoch = group.group_epoch
        result, records, replaced, joined = classic_members.join(group, req, self.config, self.topics, now)
        out = Outcome(records=records)
        if (
            replaced is not None
            and joined is not None
            and self._may_downgrade(group, replaced, replacing=True)
        ):
            # The last consumer-protocol member, a static one, came back on the classic protocol.
            out.extend(self._downgrade(group, replaced, joined, now))
        self._count_rebalance(epoch, records)
        out.respond(respond, result)
        return out

    def classic_sync(
        self,
        group_id: str,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        now: int,
    ) -> SyncResult:
        group = self.groups[group_id]
        return classic_members.sync(
            group,
            member_id,
            instance_id,
            generation,
            protocol_type,
            protocol_name,
            self.config,
            self.topics,
            now,
        )

    def classic_heartbeat(
        self, group_id: str, member_id: str, instance_id: str | None, generation: int, now: int
    ) -> int:
        return classic_members.heartbeat(
            self.groups[group_id], member_id, instance_id, generation, self.config, now
        )

    def classic_leave(
        self, group_id: str, identities: list[tuple[str, str | None]]
    ) -> tuple[Outcome, list[int]]:
        group = self.groups[group_id]
        errors, leaving = classic_members.leave(group, identities)
        return Outcome(records=group.fence(leaving, self.topics)), errors

    def give_way(self, group_id: str) -> Outcome:
        """An empty consumer group's tombstones, for a JoinGroup that makes a classic group of the id
        (Kafka's maybeDeleteEmptyConsumerGroup); its offsets stay."""
        group = self.groups.get(group_id)
        return Outcome(records=group.tombstones()) if group is not None and not group.members else Outcome()

    # --- fencing, and going back to the classic protocol ----------------------------------------------
    def _fence(self, group: ConsumerGroup, member_ids: list[str], now: int) -> Outcome:
        """Kafka's consumerGroupFenceMember: the members go and the epoch moves, or, when the one
        leaving is the last on the consumer protocol, the group becomes a classic group."""
        if len(member_ids) == 1 and self._may_downgrade(group, member_ids[0]):
            downgraded = self._downgrade(group, member_ids[0], None, now)
            if downgraded.records:
                return downgraded
        return Outcome(records=group.fence(member_ids, self.topics))

    def _may_downgrade(self, group: ConsumerGroup, leaving: str, replacing: bool = False) -> bool:
        """Kafka's validateOnlineDowngradeWith{FencedMember,ReplacedMemberId}."""
        if self.namespace.classic_groups is None or not self.config.migration_policy.downgrades:
            return False
        if not group.all_classic_except(leaving):
            return False
        if replacing:
            return len(group.members) <= self.config.classic_max_size
        return len(group.members) > 1 and len(group.members) - 1 <= self.config.classic_max_size

    def _downgrade(
        self, group: ConsumerGroup, leaving: str, joining: ConsumerGroupMember | None, now: int
    ) -> Outcome:
        """Kafka's convertToClassicGroup: the consumer group's tombstones, then the classic group
        at the same epoch with what each member owns (consumer/migration.py says why not its
        target). Its members join again after a member left, or when a static member's new
        instance subscribes to other topics than the one it replaces. Nothing if the members
        share no protocol."""
        classic = self.namespace.classic_groups
        assert classic is not None
        view = downgrade_view(group, leaving, joining, self.topics)
        old = group.members[leaving]
        rebalance = joining is None or (joining.subscribed_topic_names, joining.subscribed_topic_regex) != (
            old.subscribed_topic_names,
            old.subscribed_topic_regex,
        )
        try:
            taken = classic.take_over(view, rebalance, now)
        except ValueError:
            return Outcome()
        if joining is None:
            gone = list(group.members)
        else:
            gone = [m for m in group.members if m != leaving] + [joining.member_id]
        out = Outcome(records=group.tombstones(gone))
        out.extend(taken)
        return out

    def _group(self, group_id: str) -> ConsumerGroup:
        return self.groups.get(group_id) or self._create(group_id)

    # --- records ----------------------------------------------------------------------------------
    def replay(self, key: Any, value: Any, now: int) -> None:
        self.replayers[type(key)](key, value, now)

    def _replay_epoch(
        self, key: ConsumerGroupMetadataKey, value: ConsumerGroupMetadataValue | None, now: int
    ) -> None:
        if value is None:
            group = self.groups.pop(key.group_id, None)
            if group is not None:
                group.dead = True
            return
        self._group(key.group_id).replay_epoch(value)

    def _replay_ignored(self, key: Any, value: Any, now: int) -> None:
        pass  # subscription metadata of Kafka 3.8-4.0: the metadata hash replaced it

    def _replay_member(
        self, key: ConsumerGroupMemberMetadataKey, value: ConsumerGroupMemberMetadataValue | None, now: int
    ) -> None:
        if value is None:
            group = self.groups.get(key.group_id)
            if group is not None:
                group.replay_member(key.member_id, None)
            return
        group = self._group(key.group_id)
        member = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
        group.replay_member(key.member_id, member.with_metadata(value))

    def _replay_assignment_epoch(
        self,
        key: ConsumerGroupTargetAssignmentMetadataKey,
        value: ConsumerGroupTargetAssignmentMetadataValue | None,
        now: int,
    ) -> None:
        if value is None:
            group = self.groups.get(key.group_id)
            if group is not None:
                group.assignment_epoch = 0
            return
        self._group(key.group_id).assignment_epoch = value.assignment_epoch

    def _replay_target(
        self,
        key: ConsumerGroupTargetAssignmentMemberKey,
        value: ConsumerGroupTargetAssignmentMemberValue | None,
        now: int,
    ) -> None:
        if value is None:
            group = self.groups.get(key.group_id)
            if group is not None:
                group.target.pop(key.member_id, None)
            return
        target = {tp.topic_id: frozenset(tp.partitions) for tp in value.topic_partitions if tp.partitions}
        self._group(key.group_id).target[key.member_id] = target

    def _replay_current(
        self,
        key: ConsumerGroupCurrentMemberAssignmentKey,
        value: ConsumerGroupCurrentMemberAssignmentValue | None,
        now: int,
    ) -> None:
        if value is None:
            group = self.groups.get(key.group_id)
            member = group.members.get(key.member_id) if group is not None else None
            if group is not None and member is not None:
                # As Kafka: the member stays until its metadata tombstone, owning nothing.
                left = dataclasses.replace(
                    member,
                    member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    assigned={},
                    pending_revocation={},
                )
                group.replay_member(key.member_id, left)
            return
        group = self._group(key.group_id)
        member = group.members.get(key.member_id) or ConsumerGroupMember(key.member_id)
        group.replay_member(key.member_id, member.with_assignment(value))

    def _replay_regex(
        self,
        key: ConsumerGroupRegularExpressionKey,
        value: ConsumerGroupRegularExpressionValue | None,
        now: int,
    ) -> None:
        if value is None:
            group = self.groups.get(key.group_id)
            if group is not None:
                group.regexes.pop(key.regular_expression, None)
            return
        self._group(key.group_id).regexes[key.regular_expression] = value

    def loaders(self, registry: RecordRegistry, now: int) -> Mapping[int, Loader]:
        return {}

    def loaded(self, now: int) -> None:
        for group in self.groups.values():
            group.start_timers(now, self.config)

    def link(self, records: list[Record], base_offset: int) -> list[Record]:
        return records

    def configs_changed(self, group_id: str, configs: dict[str, str]) -> None:
        pass

    # --- timers and offsets -----------------------------------------------------------------------
    def on_timer(self, group_id: str, now: int) -> Outcome:
        group = self.groups.get(group_id)
        if group is None:
            return Outcome()
        expired = group.expired(now)
        classic = sorted(m for m in expired if group.members[m].uses_classic_protocol)
        consumer = sorted(m for m in expired if not group.members[m].uses_classic_protocol)
        # Members on the classic protocol go first, together; then each consumer-protocol member
        # on its own, as Kafka's one timer per member would: the last of them leaving may turn
        # the group back into a classic group.
        out = Outcome(records=group.fence(classic, self.topics)) if classic else Outcome()
        for member_id in consumer:
            out.and_then(functools.partial(self._fence_if_there, group_id, member_id))
        return out

    def _fence_if_there(self, group_id: str, member_id: str, _state: object, now: int) -> Outcome:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return Outcome()
        return self._fence(group, [member_id], now)

    def expire_offsets(self, group_id: str, now: int, retention_ms: int) -> Outcome:
        """KIP-211 for consumer groups (Kafka's cleanupGroupMetadata): offsets of topics no member
        consumes expire from their commit; an empty group with no offsets left is deleted."""
        group = self.groups.get(group_id)
        if group is None:
            return Outcome()
        records, none_left = self.namespace.offsets.expire(group_id, group, now, retention_ms)
        if none_left and not group.members:
            records += group.tombstones()
        return Outcome(records=records)

    def snapshot(self) -> dict[str, Any]:
        return {
            gid: (
                g.group_epoch,
                g.metadata_hash,
                g.assignment_epoch,
                dict(g.members),
                dict(g.target),
                dict(g.regexes),
                # The indexes replay keeps beside the records: a replay that forgot one differs.
                dict(g.static_members),
                dict(g.owners),
                +g.subscribed_names,
                +g.regex_subscribers,
                +g.server_assignors,
            )
            for gid, g in self.groups.items()
        }
