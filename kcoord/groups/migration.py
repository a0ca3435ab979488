"""A group changing protocol (KIP-848 online migration, ``group.consumer.migration.policy``): what
the classic kind and the consumer kind hand each other, as Kafka's ConsumerGroup.fromClassicGroup
and ClassicGroup.fromConsumerGroup read it.

The consumer kind drives both directions (a ConsumerGroupHeartbeat upgrades a classic group; the
last consumer-protocol member leaving downgrades a consumer group), and reaches the classic kind
only through ``ClassicGroupHost`` (groups/store.py), so neither kind imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum


class MigrationPolicy(Enum):
    """group.consumer.migration.policy, as Kafka's ConsumerGroupMigrationPolicy."""

    DISABLED = "disabled"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    BIDIRECTIONAL = "bidirectional"

    @property
    def upgrades(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrades(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


class CannotUpgrade(Exception):
    """Why a classic group with members does not become a consumer group: the end of the message
    of Kafka's GroupIdNotFoundException (validateOnlineUpgrade, convertToConsumerGroup)."""

    def message(self, group_id: str) -> str:
        return f"Cannot upgrade classic group {group_id} to consumer group because {self}"


NOT_CONSUMER_PROTOCOL = "the group does not use the consumer embedded protocol."
MALFORMED = "the embedded consumer protocol is malformed."
CUSTOM_ASSIGNOR = (
    "an unsupported custom assignor is in use. Please refer to the documentation or switch to a "
    "default assignor before re-attempting the upgrade."
)


@dataclass(frozen=True)
class MigratingMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # JoinGroup protocols (name, metadata), in the member's order
    assigned: Mapping[str, tuple[int, ...]]  # topic name -> partitions


@dataclass(frozen=True)
class MigratingGroup:
    group_id: str
    generation: int  # the classic generation is the consumer group epoch, and back
    protocol_name: str | None  # classic -> consumer: the protocol whose metadata is the subscription
    members: tuple[MigratingMember, ...]
