"""A member of a classic group."""

from __future__ import annotations

from dataclasses import dataclass

from kcoord.classic.records import MemberMetadata, subscribed_topics
from kcoord.runtime.outcome import Responder

"""Delivers a response; the asyncio layer sends it once the group's records are durable."""

# How long a new member's parked JoinGroup may wait (Kafka's classic new-member join timeout).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Responder | None = None
    awaiting_sync: Responder | None = None
    is_new: bool = False
    expires_at: int = 0

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def subscription_topics(self, protocol: str | None) -> set[str] | None:
        return subscribed_topics(self.metadata(protocol))

    def to_record(self, protocol: str | None) -> MemberMetadata:
        return MemberMetadata(
            self.member_id,
            self.group_instance_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.session_timeout_ms,
            self.metadata(protocol),
            self.assignment,
        )

    @classmethod
    def from_record(cls, m: MemberMetadata, protocol_type: str, protocol: str | None) -> Member:
        return cls(
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout,
            m.session_timeout,
            protocol_type,
            [(protocol or "", m.subscription)],
            m.assignment,
        )
