"""The KIP-848 consumer groups of one coordinator partition and how their records replay.

Records of types 3 to 8 and 16 are applied here, live and at start-up alike (type 4, the
subscription metadata Kafka 3.8-4.0 wrote, is read and ignored: the metadata hash of the group
epoch record replaced it). A group comes into existence with its first record and goes with the
tombstone of its epoch record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from kcoord.consumer.group import ConsumerGroup, ConsumerGroupConfig, HeartbeatRequest, HeartbeatResult
from kcoord.consumer.member import JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, ConsumerGroupMember
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
from kcoord.groups.store import GroupNamespace, GroupsById
from kcoord.groups.topics import TopicsView
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Outcome, Record
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.shard import Loader

GROUP_TYPE = "consumer"


class ConsumerGroups(GroupsById[ConsumerGroup]):
    group_type = GROUP_TYPE

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

    def heartbeat(
        self, group_id: str, req: HeartbeatRequest, now: int
    ) -> tuple[HeartbeatResult, list[Record]]:
        """ConsumerGroupHeartbeat on a group of this kind: a join (epoch 0) creates the group when
        no group of any type has the id; otherwise GROUP_ID_NOT_FOUND for an unknown group."""
        group = self.groups.get(group_id)
        if group is None and req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            group = self.get_or_create(group_id)
        if group is None:
            held = self.namespace.group_type(group_id) is not None
            message = f"Group {group_id} is not a consumer group." if held else f"Group {group_id} not found."
            return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND, message, req.member_id), []
        epoch = group.group_epoch
        result, records = group.heartbeat(req, self.config, self.topics, now)
        if not records and not group.members and group.group_epoch == 0:
            self.groups.pop(group_id, None)  # a join that failed leaves no group behind
        if req.member_epoch >= 0 and any(  # as Kafka: leaving is no rebalance it counts
            isinstance(key, ConsumerGroupMetadataKey) and value is not None and value.epoch > epoch
            for key, value in records
        ):
            self.rebalanced()
        return result, records

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
        return Outcome(records=group.on_timer(now, self.topics)) if group is not None else Outcome()

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
