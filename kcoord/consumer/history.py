"""Who owned a partition of a KIP-848 consumer group, for the offset history
(kcoord/groups/history.py).

A member's current assignment record (type 8) says which partitions it holds from its epoch
on, its member metadata record (type 5) its client id; tombstones of either mean it left.
Assignments name topics by id: ``topic_names`` maps them back (ids of deleted topics stay
unknown, and so do their owners).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from kcoord.consumer.records import (
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE,
    CONSUMER_GROUP_MEMBER_METADATA_TYPE,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    decode_record,
)

_ASSIGNMENT = CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_TYPE.to_bytes(2, "big")
_MEMBER = CONSUMER_GROUP_MEMBER_METADATA_TYPE.to_bytes(2, "big")


class ConsumerMembership:
    """Partition owners after the consumer group records fed so far."""

    def __init__(self, topic_names: Mapping[uuid.UUID, str]) -> None:
        self.topic_names = topic_names
        self.client_ids: dict[str, str] = {}
        self.assigned: dict[str, set[tuple[str, int]]] = {}  # member id -> partitions

    def feed(self, key: bytes, value: bytes | None) -> None:
        kind = key[:2]
        if kind not in (_ASSIGNMENT, _MEMBER):
            return
        k, v = decode_record(key, value)
        member_id: str = k.member_id  # type: ignore[union-attr]
        if kind == _MEMBER:
            if isinstance(v, ConsumerGroupMemberMetadataValue):
                self.client_ids[member_id] = v.client_id
            else:
                self.client_ids.pop(member_id, None)
                self.assigned.pop(member_id, None)
            return
        if isinstance(v, ConsumerGroupCurrentMemberAssignmentValue):
            self.assigned[member_id] = {
                (name, p)
                for tp in v.assigned_partitions
                if (name := self.topic_names.get(tp.topic_id)) is not None
                for p in tp.partitions
            }
        else:
            self.assigned.pop(member_id, None)

    def owner(self, topic: str, partition: int) -> tuple[str, str] | None:
        for member_id, parts in self.assigned.items():
            if (topic, partition) in parts:
                return member_id, self.client_ids.get(member_id, "")
        return None
