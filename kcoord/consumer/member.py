"""A member of a KIP-848 consumer group, as Kafka's ConsumerGroupMember: immutable, each change a
new value (``dataclasses.replace``), so an operation can compare before and after and write a
record only for what changed.

Assignments map a topic id to partitions; the assigned and pending-revocation sets keep, per
partition, the member epoch at which the member got it (KIP-1251, what Kafka 4.3 writes).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from kcoord.consumer.records import (
    MEMBER_STATE_STABLE,
    MEMBER_STATE_UNKNOWN,
    MEMBER_STATE_UNRELEASED_PARTITIONS,
    MEMBER_STATE_UNREVOKED_PARTITIONS,
    AssignedTopicPartitions,
    ClassicMemberMetadata,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
)

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
JOIN_GROUP_MEMBER_EPOCH = 0

TargetAssignment = Mapping[uuid.UUID, frozenset[int]]  # topic id -> partitions
# topic id -> partition -> the member epoch at which it was assigned
EpochAssignment = Mapping[uuid.UUID, Mapping[int, int]]


class MemberState(IntEnum):
    STABLE = MEMBER_STATE_STABLE
    UNREVOKED_PARTITIONS = MEMBER_STATE_UNREVOKED_PARTITIONS
    UNRELEASED_PARTITIONS = MEMBER_STATE_UNRELEASED_PARTITIONS
    UNKNOWN = MEMBER_STATE_UNKNOWN

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()  # sorted
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic_member_metadata: ClassicMemberMetadata | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: EpochAssignment = field(default_factory=dict)
    pending_revocation: EpochAssignment = field(default_factory=dict)

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_member_metadata is not None

    def is_reconciled_to(self, target_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == target_epoch

    def assigned_partitions(self) -> dict[uuid.UUID, frozenset[int]]:
        return {t: frozenset(ps) for t, ps in self.assigned.items()}

    # --- records ------------------------------------------------------------------------------
    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        return ConsumerGroupMemberMetadataValue(
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            server_assignor=self.server_assignor,
            classic_member_metadata=self.classic_member_metadata,
        )

    def assignment_value(self) -> ConsumerGroupCurrentMemberAssignmentValue:
        return ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=int(self.state),
            assigned_partitions=_with_epochs(self.assigned),
            partitions_pending_revocation=_with_epochs(self.pending_revocation),
        )

    def new_instance(self, member_id: str) -> ConsumerGroupMember:
        """A static member's next instance (Kafka's replacement of a static member): the same
        member under ``member_id``, joining (epoch 0) with what the previous instance had."""
        return _replace(self, member_id=member_id, member_epoch=0, previous_member_epoch=0)

    def with_metadata(self, value: ConsumerGroupMemberMetadataValue) -> ConsumerGroupMember:
        return _replace(
            self,
            instance_id=value.instance_id,
            rack_id=value.rack_id,
            client_id=value.client_id,
            client_host=value.client_host,
            subscribed_topic_names=tuple(sorted(value.subscribed_topic_names)),
            subscribed_topic_regex=value.subscribed_topic_regex,
            rebalance_timeout_ms=value.rebalance_timeout_ms,
            server_assignor=value.server_assignor,
            classic_member_metadata=value.classic_member_metadata,
        )

    def with_assignment(self, value: ConsumerGroupCurrentMemberAssignmentValue) -> ConsumerGroupMember:
        return _replace(
            self,
            member_epoch=value.member_epoch,
            previous_member_epoch=value.previous_member_epoch,
            state=MemberState.of(value.state),
            assigned=_from_epochs(value.assigned_partitions, value.member_epoch),
            pending_revocation=_from_epochs(value.partitions_pending_revocation, value.member_epoch),
        )


def _replace(member: ConsumerGroupMember, **changes: object) -> ConsumerGroupMember:
    return dataclasses.replace(member, **changes)  # type: ignore[arg-type]


def _with_epochs(assignment: EpochAssignment) -> tuple[AssignedTopicPartitions, ...]:
    out = []
    for topic_id in sorted(assignment, key=str):
        parts = sorted(assignment[topic_id].items())
        out.append(AssignedTopicPartitions(topic_id, tuple(p for p, _ in parts), tuple(e for _, e in parts)))
    return tuple(out)


def _from_epochs(
    items: tuple[AssignedTopicPartitions, ...], member_epoch: int
) -> dict[uuid.UUID, dict[int, int]]:
    """Partitions with the epoch they were assigned at; the member epoch where the writer kept
    none (Kafka before 4.3)."""
    out: dict[uuid.UUID, dict[int, int]] = {}
    for item in items:
        epochs = item.assignment_epochs
        if epochs is not None and len(epochs) == len(item.partitions):
            out[item.topic_id] = dict(zip(item.partitions, epochs, strict=True))
        else:
            out[item.topic_id] = dict.fromkeys(item.partitions, member_epoch)
    return out
