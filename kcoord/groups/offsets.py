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
  when the group became empty); offsets of topics the group consumes never expire; an offset with
  a transactional commit pending does not expire (as Kafka);
- transactional offsets (TxnOffsetCommit): pending per producer, invisible to OffsetFetch, until
  the producer's COMMIT marker makes them the committed offsets or its ABORT marker drops them.
  Kafka's rule for a mix of both kinds: the offset written later in the log wins, whatever the
  order of the markers (see ``PendingTransactions``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Generic, Protocol, TypeVar

from kcoord.groups.records import (
    OFFSET_COMMIT_TYPES,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_offset_commit,
)
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.fields import RecordFormatError
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


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class PendingTransactions(Generic[K, V]):
    """Offsets written in transactions that have not ended, by producer id.

    Kafka's rule when a transaction commits: each of its offsets replaces the committed one only if
    it was written later in the log (OffsetMetadataManager compares record offsets). Writes are
    replayed in log order, so the rule is kept without record offsets on every committed value:
    ``seq`` orders the writes (log offsets at start-up, a counter above them live), and for a key
    with pending writes ``last_write`` keeps the order number of its committed value. A pending
    write stays pending (OffsetFetch's UNSTABLE_OFFSET_COMMIT) until its producer's marker even
    when a later commit means it cannot win, as in Kafka; an offset tombstone drops every pending
    write of its key (Kafka's replay of a tombstone).
    """

    __slots__ = ("by_key", "by_producer", "last_write")

    def __init__(self) -> None:
        self.by_producer: dict[int, dict[K, tuple[int, V]]] = {}
        self.by_key: dict[K, set[int]] = {}
        self.last_write: dict[K, int] = {}  # keys with pending writes: their committed value's seq

    def add(self, producer_id: int, key: K, seq: int, value: V) -> None:
        entries = self.by_producer.get(producer_id)
        if entries is None:
            entries = self.by_producer[producer_id] = {}
        entries[key] = (seq, value)
        producers = self.by_key.get(key)
        if producers is None:
            self.by_key[key] = {producer_id}
        else:
            producers.add(producer_id)

    def supersede(self, key: K, seq: int) -> None:
        """A plain commit of ``key`` at ``seq``, written after every pending write of it: those
        stay pending but can no longer win."""
        if key in self.by_key:
            self.last_write[key] = seq

    def remove_key(self, key: K) -> None:
        """An offset tombstone: the key's pending writes go with its committed offset."""
        for pid in self.by_key.pop(key, ()):
            entries = self.by_producer[pid]
            del entries[key]
            if not entries:
                del self.by_producer[pid]
        self.last_write.pop(key, None)

    def end(self, producer_id: int, commit: bool) -> list[tuple[K, V]]:
        """The producer's transaction ended: what it commits, in the order it wrote it."""
        entries = self.by_producer.pop(producer_id, None)
        if not entries:
            return []
        out: list[tuple[K, V]] = []
        for key, (seq, value) in entries.items():
            producers = self.by_key[key]
            producers.discard(producer_id)
            if commit and seq > self.last_write.get(key, -1):
                out.append((key, value))
                if producers:
                    self.last_write[key] = seq
            if not producers:
                del self.by_key[key]
                self.last_write.pop(key, None)
        return out

    def snapshot(self) -> dict[int, dict[K, V]]:
        """The pending writes without their order numbers (which differ between live and loaded)."""
        return {pid: {k: v for k, (_, v) in entries.items()} for pid, entries in self.by_producer.items()}


class Offsets:
    def __init__(self) -> None:
        self.committed: dict[str, dict[str, dict[int, OffsetCommitValue]]] = {}
        self.pending: PendingTransactions[OffsetCommitKey, OffsetCommitValue] = PendingTransactions()
        self.seq = 0  # orders pending transactional writes; above every loaded one

    def of(self, group_id: str) -> Committed:
        return self.committed.get(group_id, _NONE)

    def replay(self, key: OffsetCommitKey, value: OffsetCommitValue | None, now: int) -> None:
        if self.pending.by_key:
            if value is None:
                self.pending.remove_key(key)
            else:
                self.seq += 1
                self.pending.supersede(key, self.seq)
        self._put(key, value)

    def replay_transactional(
        self, producer_id: int, key: OffsetCommitKey, value: OffsetCommitValue | None
    ) -> None:
        if value is None:
            raise RecordFormatError("a transactional offset commit cannot be a tombstone")
        self.seq += 1
        self.pending.add(producer_id, key, self.seq, value)

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        for key, value in self.pending.end(producer_id, commit):
            self._put(key, value)

    def has_pending(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether a transaction that has not ended committed this offset (UNSTABLE_OFFSET_COMMIT)."""
        return (
            bool(self.pending.by_key) and OffsetCommitKey(group_id, topic, partition) in self.pending.by_key
        )

    def _put(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
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
                if self.has_pending(group_id, topic, p):
                    remaining += 1
                    continue
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
    Transactional commits are held per producer by the same rules as live ones; a COMMIT marker
    makes its writes the last records of their keys, and what no marker ended is pending after
    the load.
    """

    __slots__ = ("_held", "_last", "_offsets", "_pending")

    def __init__(self, offsets: Offsets) -> None:
        self._offsets = offsets
        self._held: dict[bytes, bytes | None] = {}  # key without its type -> value
        self._pending: PendingTransactions[bytes, bytes] = PendingTransactions()
        self._last = 0

    def feed(self, offset: int, key: bytes, value: bytes | None) -> None:
        rest = key[2:]
        if self._pending.by_key:
            if value is None:
                self._pending.remove_key(rest)
            else:
                self._pending.supersede(rest, offset)
        self._held[rest] = value
        self._last = offset

    def feed_transactional(
        self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        if value is None:
            raise RecordFormatError(f"a transactional offset commit cannot be a tombstone (offset {offset})")
        self._pending.add(producer_id, key[2:], offset, value)
        self._last = offset

    def end_transaction(self, offset: int, producer_id: int, producer_epoch: int, commit: bool) -> None:
        for rest, value in self._pending.end(producer_id, commit):
            self._held[rest] = value

    def finish(self) -> None:
        offsets = self._offsets
        prefix = OFFSET_COMMIT_TYPES[1].to_bytes(2, "big")
        for rest, value in self._held.items():
            k, v = decode_offset_commit(prefix + rest, value)
            offsets._put(k, v)
        self._held.clear()
        keys: dict[bytes, OffsetCommitKey] = {}
        for pid, entries in self._pending.by_producer.items():
            for rest, (seq, raw) in entries.items():
                k, v = decode_offset_commit(prefix + rest, raw)
                if v is not None:
                    offsets.pending.add(pid, k, seq, v)
                    keys[rest] = k
        for rest, seq in self._pending.last_write.items():
            offsets.pending.last_write[keys[rest]] = seq
        offsets.seq = max(offsets.seq, self._last)
        self._pending = PendingTransactions()
