"""The two rule sets of log compaction (the machinery is ``cleaner``).

``CoordinatorRules``: the coordinator logs (``__consumer_offsets``, ``__transaction_state``). The
broker writes every record with its own clock, so record timestamps are trusted: a tombstone, or
a marker whose transaction has no record left, goes once it is older than
``delete.retention.ms``. No producer state is kept for these logs: an empty batch is dropped.

History (``HistoryRetention``, offsets.history.retention.ms for the offset commits of
``__consumer_offsets``): a coordinator log may keep a superseded record of given record types while
it is younger than the retention, so that the log keeps what a key was before. Replay is unchanged
by it, since a later record of the key always follows; except where the key's latest record is a
tombstone this pass drops: its history goes with it, else replay would bring the deleted key back.
Superseded records of transactional batches are not kept (their transaction's marker may go).

``DataTopicRules``: topics with ``cleanup.policy`` compact, as Kafka (KIP-534). Producers choose
record timestamps, so they say nothing about when a tombstone was cleaned: the first pass that
keeps a tombstone, or a marker that may go, stamps its batch with a delete horizon (now +
``delete.retention.ms``); a pass after the horizon removes them. A producer's last batch stays,
empty if none of its records does, so that idempotent producers keep their sequence numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcoord.protocol.records import BatchHeader
from kcoord.storage.record_filter import delete_horizon

LONG_MAX = 9223372036854775807


@dataclass(frozen=True)
class HistoryRetention:
    key_prefixes: tuple[bytes, ...]  # the record types (a key's first two bytes) kept as history
    retention_ms: int

    def keeps(self, key: bytes, ts: int, now_ms: int) -> bool:
        return now_ms - ts < self.retention_ms and key.startswith(self.key_prefixes)


@dataclass(frozen=True)
class CoordinatorRules:
    delete_retention_ms: int
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    history: HistoryRetention | None = None

    @property
    def keeps_history(self) -> bool:
        return self.history is not None

    def retain_superseded(self, key: bytes, timestamp: int, now_ms: int, tombstone_at: int | None) -> bool:
        """Whether a record a later one of its key replaced stays, as history. ``tombstone_at``:
        when the key's latest record, if a tombstone, was written."""
        if self.history is None or not self.history.keeps(key, timestamp, now_ms):
            return False
        return tombstone_at is None or now_ms - tombstone_at <= self.delete_retention_ms

    def retain_tombstone(self, h: BatchHeader, timestamp: int, now_ms: int) -> bool:
        return now_ms - timestamp <= self.delete_retention_ms

    def retain_marker(self, h: BatchHeader, now_ms: int) -> bool:
        return now_ms - h.max_timestamp <= self.delete_retention_ms

    def horizon(self, h: BatchHeader, now_ms: int) -> int | None:
        return None

    def retain_empty(self, h: BatchHeader, last_of_producer: bool) -> bool:
        return False

    @property
    def history_key_prefixes(self) -> tuple[bytes, ...]:
        return self.history.key_prefixes if self.history is not None else ()

    def unchanged_until(self, earliest_timestamp: int) -> int | None:
        # What a pass removed nothing of can go only by age: history after its retention, a
        # tombstone (and the history it guards) and a marker after delete.retention.ms, each
        # counted from a timestamp no older than the log's earliest. Records written since that
        # are history of their keys add nothing removable before then either.
        if self.history is None:
            return None
        return earliest_timestamp + min(self.history.retention_ms, self.delete_retention_ms)


@dataclass(frozen=True)
class DataTopicRules:
    delete_retention_ms: int
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX

    def retain_tombstone(self, h: BatchHeader, timestamp: int, now_ms: int) -> bool:
        horizon = delete_horizon(h)
        return horizon is None or now_ms < horizon

    def retain_marker(self, h: BatchHeader, now_ms: int) -> bool:
        horizon = delete_horizon(h)
        return horizon is None or now_ms < horizon

    def horizon(self, h: BatchHeader, now_ms: int) -> int | None:
        return now_ms + self.delete_retention_ms

    def retain_empty(self, h: BatchHeader, last_of_producer: bool) -> bool:
        return h.has_producer_id and last_of_producer

    @property
    def keeps_history(self) -> bool:
        return False

    def retain_superseded(self, key: bytes, timestamp: int, now_ms: int, tombstone_at: int | None) -> bool:
        return False  # a compacted topic keeps the latest record of each key, as Kafka

    @property
    def history_key_prefixes(self) -> tuple[bytes, ...]:
        return ()

    def unchanged_until(self, earliest_timestamp: int) -> int | None:
        return None  # any record written since may replace one: every pass may remove something
