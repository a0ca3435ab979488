"""The embedded ``consumer`` protocol of classic groups (Kafka's ConsumerProtocol): the
subscription a member sends in JoinGroup and the assignment it gets in SyncGroup, any version.

Both group kinds read them when a group changes protocol (KIP-848 online migration) and when a
classic member joins a consumer group; the codecs are kafka-python's schema-driven classes. As
Kafka's deserializers, a version newer than the schema knows is read as the newest it knows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

PROTOCOL_TYPE = "consumer"


class MalformedConsumerProtocol(ValueError):
    """Bytes that are not a consumer protocol subscription or assignment."""


@dataclass(frozen=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: dict[str, tuple[int, ...]]  # v1+: partitions the member owns (cooperative rebalancing)
    rack_id: str | None  # v3+


def decode_subscription(data: bytes) -> Subscription:
    try:
        s = ConsumerProtocolSubscription.decode(data)
        topics = tuple(_strings(s.topics))
        owned: dict[str, tuple[int, ...]] = {}
        if s.version >= 1:
            for tp in _items(s.owned_partitions):
                owned[_text(tp.topic)] = tuple(_items(tp.partitions))
        rack = s.rack_id if s.version >= 3 else None
    except Exception as e:  # kafka-python raises assorted errors on short or corrupt bytes
        raise MalformedConsumerProtocol(f"malformed consumer protocol subscription: {e}") from None
    return Subscription(s.version, topics, owned, rack)


def _items(values: list[Any] | None) -> list[Any]:
    """An array that must not be null: kafka-python reads a null as None, Kafka's parser refuses it."""
    if values is None or any(v is None for v in values):
        raise ValueError("a null where the schema allows none")
    return values


def _text(value: str | None) -> str:
    if value is None:
        raise ValueError("a null string where the schema allows none")
    return value


def _strings(values: list[str | None] | None) -> list[str]:
    return [_text(v) for v in _items(values)]


def subscription_version(data: bytes) -> int:
    """The version a member's subscription was written in (its assignment is answered in it)."""
    if len(data) < 2:
        raise MalformedConsumerProtocol("consumer protocol subscription shorter than its version")
    return int.from_bytes(data[:2], "big", signed=True)


def decode_assignment(data: bytes) -> dict[str, tuple[int, ...]]:
    """Topic -> partitions; empty bytes (a member not yet assigned) are no partitions."""
    if not data:
        return {}
    try:
        a = ConsumerProtocolAssignment.decode(data)
        out: dict[str, tuple[int, ...]] = {}
        for tp in _items(a.assigned_partitions):
            topic = _text(tp.topic)
            out[topic] = out.get(topic, ()) + tuple(_items(tp.partitions))
    except Exception as e:
        raise MalformedConsumerProtocol(f"malformed consumer protocol assignment: {e}") from None
    return out


def assignment_has_user_data(data: bytes) -> bool:
    """Whether an assignment carries user data (a custom assignor's state, which a consumer group
    has no place for); empty bytes carry none."""
    if not data:
        return False
    try:
        a = ConsumerProtocolAssignment.decode(data)
    except Exception as e:
        raise MalformedConsumerProtocol(f"malformed consumer protocol assignment: {e}") from None
    return bool(a.user_data)


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int) -> bytes:
    version = min(max(version, 0), ConsumerProtocolAssignment.max_version)
    tps = [
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=sorted(ps))
        for t, ps in sorted(partitions.items())
    ]
    return bytes(ConsumerProtocolAssignment(assigned_partitions=tps, user_data=None).encode(version=version))
