"""Which log is cleaned, and when: Kafka's LogCleaner and LogCleanerManager for one broker.

The pass itself (``compact``) is cleaner.py's. This module keeps, per registered log, what Kafka's
cleaner checkpoint keeps (the first dirty offset), the delete horizon a pass stamped, and the
promise of a pass that removed nothing (the skip: cleaner.py's ``_clean_in_thread``), and runs the
passes one at a time every ``log.cleaner.backoff.ms``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog

from kcoord.storage.cleaner import CleaningRules, CleanStats, compact
from kcoord.storage.compaction_rules import LONG_MAX, CoordinatorRules, HistoryRetention
from kcoord.storage.log import Log

log = structlog.get_logger(__name__)


class Clock(Protocol):
    def now_ms(self) -> int: ...


@dataclass
class _Cleanable:
    rules: Callable[[], CleaningRules]
    first_dirty: int = 0  # the first offset not cleaned yet (Kafka's cleaner checkpoint)
    next_horizon: int | None = None  # a delete horizon this cleaner stamped, due then
    # After a pass that removed nothing: where it ended, and until when its records stay as
    # they are (CleaningRules.unchanged_until); the next pass is skipped before then if only
    # history came since.
    unchanged_since: int | None = None
    unchanged_until: int | None = None
    # A pass failed on it for a reason other than the disk: not tried again until the broker
    # restarts (Kafka's LogCleanerManager marks such a partition uncleanable).
    uncleanable: bool = False


class LogCleaner:
    """Cleans registered logs in the background (Kafka's LogCleanerManager picking logs).

    A log is cleaned when the bytes written since its last cleaning make up at least its
    ``min_cleanable_ratio`` (min.cleanable.dirty.ratio) of its cleanable segments, when its
    oldest dirty record is older than max.compaction.lag.ms, or when a delete horizon the cleaner
    stamped has passed (the tombstones and markers it guards may go); checked every
    ``backoff_ms`` (log.cleaner.backoff.ms).
    """

    def __init__(
        self,
        clock: Clock,
        delete_retention_ms: int,
        backoff_ms: int,
        min_cleanable_ratio: float,
        history: HistoryRetention | None = None,
    ) -> None:
        self.clock = clock
        self.history = history  # what coordinator logs keep as history (offsets.history.retention.ms)
        self.delete_retention_ms = delete_retention_ms
        self.backoff_ms = backoff_ms
        self.min_cleanable_ratio = min_cleanable_ratio
        self.logs: dict[Log, _Cleanable] = {}
        self.runs = 0
        self.busy = False  # a pass is running (tests and benchmarks wait on it)

    def _now(self) -> int:
        now: int = self.clock.now_ms()
        return now

    def register(self, log_: Log, rules: Callable[[], CleaningRules] | None = None) -> None:
        """Clean ``log_`` by ``rules`` (a coordinator log's rules by default)."""
        if rules is None:
            coordinator: CleaningRules = CoordinatorRules(
                self.delete_retention_ms, self.min_cleanable_ratio, history=self.history
            )
            self.logs.setdefault(log_, _Cleanable(lambda: coordinator))
        else:
            self.logs.setdefault(log_, _Cleanable(rules))

    def unregister(self, log_: Log) -> None:
        self.logs.pop(log_, None)

    def dirty_ratio(self, log_: Log) -> float:
        entry = self.logs.get(log_)
        first_dirty = entry.first_dirty if entry is not None else 0
        inactive = log_.segments[:-1]
        total = sum(s.size for s in inactive)
        if total == 0:
            return 0.0
        return sum(s.size for s in inactive if s.base_offset >= first_dirty) / total

    def needs_cleaning(self, log_: Log) -> bool:
        entry = self.logs.get(log_)
        if entry is None or log_.closed or len(log_.segments) < 2:
            return False
        rules = entry.rules()
        now = self._now()
        if entry.next_horizon is not None and entry.next_horizon <= now:
            return True
        if self.dirty_ratio(log_) >= rules.min_cleanable_ratio and self.dirty_ratio(log_) > 0:
            return True
        if rules.max_compaction_lag_ms < LONG_MAX:
            for seg in log_.segments[:-1]:
                if seg.base_offset >= entry.first_dirty and seg.size:
                    first = seg.first_batch_timestamp
                    return first is not None and first >= 0 and now - first > rules.max_compaction_lag_ms
        return False

    async def clean_if_needed(self, log_: Log) -> CleanStats | None:
        if not self.needs_cleaning(log_):
            return None
        entry = self.logs[log_]
        rules = entry.rules()
        now = self._now()
        since = entry.unchanged_since
        if entry.unchanged_until is None or now >= entry.unchanged_until:
            since = None
        self.busy = True
        try:
            stats = await compact(log_, rules, now, since)
        finally:
            self.busy = False
        if stats is not None and stats.skipped:
            entry.first_dirty = entry.unchanged_since = stats.end_offset
            if stats.earliest_timestamp is not None:  # the whole log was read: its promise
                entry.unchanged_until = rules.unchanged_until(stats.earliest_timestamp)
        elif stats is not None:
            entry.first_dirty = stats.end_offset
            entry.next_horizon = stats.earliest_horizon
            self.runs += 1
            until = None
            # A transactional record a later plain one replaces goes at once (it is never kept
            # as history): after a pass that kept any, the next pass is not skipped.
            if (
                stats.records_out == stats.records_in
                and stats.earliest_timestamp is not None
                and not stats.transactional
            ):
                until = rules.unchanged_until(stats.earliest_timestamp)
            entry.unchanged_since = stats.end_offset if until is not None else None
            entry.unchanged_until = until
        elif entry.next_horizon is not None and entry.next_horizon <= self._now():
            entry.next_horizon = None
        return stats

    @property
    def uncleanable(self) -> list[Log]:
        """The logs a pass failed on, which are no longer cleaned (Kafka's uncleanable partitions)."""
        return [log_ for log_, entry in self.logs.items() if entry.uncleanable]

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.backoff_ms / 1000)
            await self.run_once()

    async def run_once(self) -> None:
        """One look at every registered log: each is cleaned if it needs it."""
        for log_, entry in list(self.logs.items()):
            if entry.uncleanable:
                continue
            try:
                await self.clean_if_needed(log_)
            except OSError:
                # The disk failed a read or a write (a full disk, say): tried again next time.
                log.exception("cleaning failed", log=log_.directory.name)
            except Exception:
                # Records it cannot read (a log written before a stricter parser), or a bug: as
                # Kafka's LogCleaner, the log is left as it is and not tried again until the
                # broker restarts, where every pass used to fail and log the same error again.
                entry.uncleanable = True
                log.exception(
                    "cleaning failed: the log is uncleanable until the broker restarts",
                    log=log_.directory.name,
                )
