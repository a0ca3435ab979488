"""Committed offsets of the groups of one coordinator partition, as Kafka's OffsetMetadataManager.

Offsets are kept by group id, apart from the group objects, as Kafka keeps them: a group that
changes type (a classic group upgraded to a KIP-848 consumer group, and back) keeps its offsets,
and a group's tombstone does not remove them (Kafka and kcoord write an offset tombstone for every
offset before a group's own tombstone). What each group type decides (who may commit, which
offsets may expire, and from when) is the group's; the rules that only read and write offsets
are here:

- fetch: the committed offsets of requested partitions, or of every partition (KIP-88);
- delete (OffsetDelete): tombstones for the partitions of topics the group does not consume
  (GROUP_SUBSCRIBED_TO_TOPIC for the others);
- expire (KIP-211): an offset with an explicit expire timestamp (value v1) expires then; any other
  expires ``offsets.retention.minutes`` after a base time the group chooses (its commit time, or
  when the group became empty); offsets of topics the group consumes never expire.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from kcoord.groups.records import (
    OFFSET_COMMIT_TYPES,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_offset_commit,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Outcome, Record

Committed = Mapping[str, Mapping[int, OffsetCommitValue]]  # topic -> partition -> value
ExpirationBase = Callable[[OffsetCommitValue], int]  # the time an offset's retention counts from

_NONE: dict[str, dict[int, OffsetCommitValue]] = {}


class OffsetOwner(Protocol):
    """What the offset rules ask of the group whose offsets they are (Kafka's Group interface)."""

    def is_subscribed_to_topic(self, topic: str) -> bool: ...

    def offset_expiration_base(self) -> ExpirationBase | None:
        """When each offset's retention starts, or None while no offset may expire."""
        ...


class Offsets:
    def __init__(self) -> None:
        self.committed: dict[str, dict[str, dict[int, OffsetCommitValue]]] = {}

    def of(self, group_id: str) -> Committed:
        return self.committed.get(group_id, _NONE)

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None, now: int) -> None:
        if value is None:
            topics = self.committed.get(key.group)
            if topics is not None:
                parts = topics.get(key.topic)
                if parts is not None:
                    parts.pop(key.partition, None)
                    if not parts:
                        del topics[key.topic]
                        if not topics:
                            del self.committed[key.group]
            return
        topics = self.committed.get(key.group)
        if topics is None:
            topics = self.committed[key.group] = {}
        parts = topics.get(key.topic)
        if parts is None:
            parts = topics[key.topic] = {}
        parts[key.partition] = value

    # --- the rules that only read and write offsets ---------------------------------------------
    def fetch(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, list[tuple[int, OffsetCommitValue | None]]]]:
        """Committed offsets of the requested partitions, or of all of them when ``topics`` is None."""
        committed = self.of(group_id)
        if topics is None:
            return [(t, sorted(parts.items())) for t, parts in sorted(committed.items())]
        return [(t, [(p, committed.get(t, {}).get(p)) for p in parts]) for t, parts in topics]

    def delete(
        self, group_id: str, owner: OffsetOwner, topics: list[tuple[str, list[int]]]
    ) -> tuple[Outcome, list[tuple[str, list[tuple[int, int]]]]]:
        """OffsetDelete of a group the caller has validated: (tombstones, per-partition errors)."""
        out = Outcome()
        committed = self.of(group_id)
        results = []
        for topic, parts in topics:
            errs = []
            for p in parts:
                if owner.is_subscribed_to_topic(topic):
                    errs.append((p, int(ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)))
                    continue
                if p in committed.get(topic, {}):
                    out.records.append((OffsetCommitKey(group_id, topic, p), None))
                errs.append((p, 0))
            results.append((topic, errs))
        return out, results

    def tombstones(self, group_id: str) -> list[Record]:
        """A tombstone for every offset of the group (DeleteGroups, a group's expiry)."""
        return [
            (OffsetCommitKey(group_id, topic, p), None)
            for topic, parts in sorted(self.of(group_id).items())
            for p in sorted(parts)
        ]

    def expire(
        self, group_id: str, owner: OffsetOwner, now: int, retention_ms: int
    ) -> tuple[list[Record], bool]:
        """Tombstones for the group's expired offsets, and whether none is left after them."""
        base = owner.offset_expiration_base()
        committed = self.of(group_id)
        if base is None:
            return [], not committed
        records: list[Record] = []
        remaining = 0
        for topic, parts in sorted(committed.items()):
            if owner.is_subscribed_to_topic(topic):
                remaining += len(parts)
                continue
            for p, value in sorted(parts.items()):
                if value.expire_timestamp is not None:
                    expired = now >= value.expire_timestamp
                else:
                    expired = now - base(value) >= retention_ms
                if expired:
                    records.append((OffsetCommitKey(group_id, topic, p), None))
                else:
                    remaining += 1
        return records, remaining == 0


def commit_records(
    group_id: str, commits: list[tuple[str, int, int, int, str]], now: int, retention_ms: int
) -> list[Record]:
    """Records for (topic, partition, offset, leader epoch, metadata) commits.

    ``retention_ms`` is the v2-v4 RetentionTimeMs; other than -1 it gives the offset its own
    expiry and is written as offset value v1.
    """
    expire = now + retention_ms if retention_ms != -1 else None
    return [
        (OffsetCommitKey(group_id, topic, partition), OffsetCommitValue(offset, epoch, metadata, now, expire))
        for topic, partition, offset, epoch, metadata in commits
    ]


class OffsetsLoader:
    """Start-up replay of offset commits, decoding only the last record of each offset key.

    Offset commits dominate coordinator logs and most are overwritten by a later commit of the same
    partition. Offsets do not depend on any other record (a group's tombstone leaves them alone),
    so the last record of each key, applied after the whole log, leaves the same offsets as
    applying them all in order: records are held back as bytes, later ones replacing earlier ones.
    """

    __slots__ = ("_held", "_now", "_offsets")

    def __init__(self, offsets: Offsets, now: int) -> None:
        self._offsets = offsets
        self._now = now
        self._held: dict[bytes, bytes | None] = {}  # key without its type -> value

    def feed(self, offset: int, key: bytes, value: bytes | None) -> None:
        self._held[key[2:]] = value

    def finish(self) -> None:
        replay, now = self._offsets.replay, self._now
        prefix = OFFSET_COMMIT_TYPES[1].to_bytes(2, "big")
        for rest, value in self._held.items():
            k, v = decode_offset_commit(prefix + rest, value)
            replay(k, v, now)
        self._held.clear()
