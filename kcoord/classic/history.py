"""Who owned a partition of a classic group, for the offset history (kcoord/groups/history.py).

A classic group's metadata record (type 2) is written when a rebalance completes, members
leave or the group empties, and holds every member with its client id and, for the
``consumer`` protocol, its assignment: the last one before a commit in the log says which
member owned the committed partition then.
"""

from __future__ import annotations

from kcoord.classic.records import GROUP_METADATA_KEY_TYPE, decode_record
from kcoord.groups.consumer_protocol import MalformedConsumerProtocol, decode_assignment

_TYPE = GROUP_METADATA_KEY_TYPE.to_bytes(2, "big")


class ClassicMembership:
    """Partition owners after the classic group metadata records fed so far."""

    def __init__(self) -> None:
        self.owners: dict[tuple[str, int], tuple[str, str]] = {}

    def feed(self, key: bytes, value: bytes | None) -> None:
        if key[:2] != _TYPE:
            return
        self.owners = {}
        _k, v = decode_record(key, value)
        if v is None or v.protocol_type != "consumer":
            return  # a tombstone, or a group whose assignments are not the consumer protocol's
        for m in v.members:
            try:
                assigned = decode_assignment(m.assignment)
            except MalformedConsumerProtocol:
                continue
            for topic, parts in assigned.items():
                for p in parts:
                    self.owners[(topic, p)] = (m.member_id, m.client_id)

    def owner(self, topic: str, partition: int) -> tuple[str, str] | None:
        return self.owners.get((topic, partition))
