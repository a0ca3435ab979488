"""Log compaction: keep the latest record of every key, drop old tombstones.

Like Kafka's LogCleaner, it rewrites only segments that are no longer active, so writers never
wait for it; every kept record keeps its offset and timestamp. A record survives if no later
record (anywhere in the log up to the cleaning point) has its key; a surviving tombstone (null
value) is dropped once it is older than ``delete.retention.ms`` (Kafka's
log.cleaner.delete.retention.ms), so that readers replaying the log had time to see it.

Transactions, as Kafka's cleaner keeps them: nothing at or after the first unstable offset (the
first record of a transaction without its marker yet) is cleaned or counts as a key's latest
record, since the transaction may still abort and the older record would then be the one that
counts; records of aborted transactions are dropped and never count as a key's latest; kept
records keep their batch's producer id, epoch and transactional flag, so a committed
transaction's records are still read as such; COMMIT/ABORT markers are kept (Kafka removes them
only once no record of their transaction is left, which keeping them never contradicts).

History retention (``HistoryRetention``, offsets.history.retention.ms for the offset commits of
``__consumer_offsets``): a superseded record whose key has one of the given record types is kept
while it is younger than the retention, so that the log keeps what a key was before. Replay is
unchanged by it, since a later record of the key always follows; except where the key's latest
record is a tombstone this cleaning drops: its history goes with it, else replay would bring the
deleted key back. Records of transactional batches are not kept as history: the rewritten batch
is no longer transactional and its markers are gone, so an aborted write would read as a commit.

The heavy part (reading every batch, writing the cleaned segments) runs in a worker thread;
only the swap runs on the event loop (see ``Log.install_cleaned`` for its crash safety).
"""

from __future__ import annotations

import asyncio
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from kcoord.protocol import records
from kcoord.storage.log import Log
from kcoord.storage.segment import Segment, segment_name

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class HistoryRetention:
    key_prefixes: tuple[bytes, ...]  # the record types (a key's first two bytes) kept as history
    retention_ms: int

    def keeps(self, key: bytes, ts: int, now_ms: int) -> bool:
        return now_ms - ts < self.retention_ms and key.startswith(self.key_prefixes)


@dataclass
class CleanStats:
    segments_in: int = 0
    segments_out: int = 0
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


def _transactions(segments: list[Segment], up_to: int) -> tuple[set[int], int]:
    """(base offsets of the batches of aborted transactions, first unstable offset) of the
    batches below ``up_to`` (``up_to`` when every transaction has its marker)."""
    ongoing: dict[int, list[int]] = {}  # producer id -> its open transaction's batches
    aborted: set[int] = set()
    for seg in segments:
        if seg.size == 0:
            continue
        data = seg.read(0, seg.size)
        for h in records.iter_headers(data, partial_ok=True):
            if h.base_offset >= up_to:
                break
            if h.is_control:
                commit, _epoch = records.read_marker(data[h.position : h.position + h.size], h)
                started = ongoing.pop(h.producer_id, None)
                if started and not commit:
                    aborted.update(started)
            elif h.is_transactional:
                ongoing.setdefault(h.producer_id, []).append(h.base_offset)
    first_unstable = min((batches[0] for batches in ongoing.values()), default=up_to)
    return aborted, first_unstable


def _offset_map(
    segments: list[Segment],
    up_to: int,
    aborted: frozenset[int] | set[int] = frozenset(),
    tombstones: dict[bytes, int] | None = None,
) -> dict[bytes, int]:
    """Latest offset of every key in the given segments, below ``up_to``, leaving out the
    batches of aborted transactions (their records never replaced anything); ``tombstones``
    gets the timestamp of each key whose latest record is a tombstone."""
    latest: dict[bytes, int] = {}
    for seg in segments:
        if seg.size == 0:
            continue
        data = seg.read(0, seg.size)
        for h in records.iter_headers(data, partial_ok=True):
            if h.base_offset >= up_to:
                return latest
            if h.is_control or h.base_offset in aborted:
                continue
            batch = data[h.position : h.position + h.size]
            for offset, ts, key, value in records.iter_records(batch, h):
                if key is not None and offset < up_to:
                    latest[key] = offset
                    if tombstones is not None:
                        if value is None:
                            tombstones[key] = ts
                        else:
                            tombstones.pop(key, None)
    return latest


def write_cleaned(
    directory: Path,
    dirty: list[Segment],
    latest: dict[bytes, int],
    now_ms: int,
    delete_retention_ms: int,
    segment_bytes: int,
    aborted: frozenset[int] | set[int] = frozenset(),
    history: HistoryRetention | None = None,
    tombstones: dict[bytes, int] | None = None,
) -> tuple[list[Path], CleanStats]:
    """Rewrite ``dirty`` segments keeping only live records (and the history ``history`` keeps;
    ``tombstones`` as ``_offset_map`` fills it); returns the ``.cleaned`` files.

    ``aborted``: base offsets of batches of aborted transactions, dropped whole."""
    stats = CleanStats(segments_in=len(dirty))
    dirty_end = dirty[-1].next_offset
    dead = tombstones or {}

    def history_kept(key: bytes, ts: int) -> bool:
        if history is None or not history.keeps(key, ts, now_ms):
            return False
        tomb_ts = dead.get(key)  # the key's latest record is a tombstone: dropped this time?
        return tomb_ts is None or latest[key] >= dirty_end or now_ms - tomb_ts <= delete_retention_ms

    outputs: list[Path] = []
    fd = -1
    size = 0

    def open_output(base: int) -> None:
        nonlocal fd, size
        path = directory / (segment_name(base) + ".log.cleaned")
        outputs.append(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        size = 0

    def close_output() -> None:
        nonlocal fd
        if fd >= 0:
            os.fsync(fd)
            os.close(fd)
            fd = -1

    try:
        for seg in dirty:
            stats.bytes_in += seg.size
            if seg.size == 0:
                continue
            data = seg.read(0, seg.size)
            for h in records.iter_headers(data, partial_ok=True):
                batch = data[h.position : h.position + h.size]
                stats.records_in += h.records_count
                if h.base_offset in aborted:
                    continue
                if h.is_control:
                    out = bytearray(batch)  # a transaction marker: kept as it is
                    first = h.base_offset
                else:
                    kept = []
                    for offset, ts, key, value in records.iter_records(batch, h):
                        if key is None:
                            continue
                        if latest.get(key) != offset:
                            if h.is_transactional or not history_kept(key, ts):
                                continue
                        elif value is None and now_ms - ts > delete_retention_ms:
                            continue
                        kept.append((offset, ts, key, value))
                    if not kept:
                        continue
                    first = kept[0][0]
                    if len(kept) == h.records_count:
                        out = bytearray(batch)  # nothing to drop: the batch as it was written
                    else:
                        out = records.build_batch_at(
                            kept,
                            producer_id=h.producer_id,
                            producer_epoch=h.producer_epoch,
                            base_sequence=h.base_sequence + (first - h.base_offset)
                            if h.base_sequence >= 0
                            else h.base_sequence,
                            attributes=records.ATTR_TRANSACTIONAL if h.is_transactional else 0,
                        )
                if fd < 0 or size + len(out) > segment_bytes:
                    close_output()
                    # The first output keeps the first dirty segment's name (as Kafka's cleaner
                    # does), so the log's offset range does not change.
                    open_output(dirty[0].base_offset if not outputs else first)
                os.write(fd, out)
                size += len(out)
                stats.records_out += records.read_header(out).records_count
                stats.bytes_out += len(out)
        if not outputs:
            # Everything was dropped: an empty segment still marks where the log starts.
            open_output(dirty[0].base_offset)
    finally:
        close_output()
    stats.segments_out = len(outputs)
    return outputs, stats


async def clean(
    log_: Log, now_ms: int, delete_retention_ms: int, history: HistoryRetention | None = None
) -> CleanStats | None:
    """Compact every non-active segment of ``log_`` (up to the first unstable offset); None if
    there was nothing to clean."""
    dirty = list(log_.segments[:-1])  # consecutive, from the first segment to the active one
    if not any(s.size for s in dirty):
        return None
    up_to = log_.log_end_offset
    segments = list(log_.segments)
    loop = asyncio.get_running_loop()
    for seg in segments:
        seg.pin()  # the worker thread reads them; their files must stay open meanwhile
    outputs: list[Path] = []
    try:
        aborted, first_unstable = await loop.run_in_executor(None, _transactions, segments, up_to)
        # Kafka's firstUncleanableOffset: only whole segments below the first unstable offset.
        up_to = first_unstable
        cleanable = [s for s, after in itertools.pairwise(segments) if after.base_offset <= up_to]
        if cleanable != dirty:
            dirty = cleanable
            if not any(s.size for s in dirty):
                return None
        tombstones: dict[bytes, int] | None = {} if history is not None else None
        latest = await loop.run_in_executor(None, _offset_map, segments, up_to, aborted, tombstones)
        outputs, stats = await loop.run_in_executor(
            None,
            write_cleaned,
            log_.directory,
            dirty,
            latest,
            now_ms,
            delete_retention_ms,
            log_.config.segment_bytes,
            aborted,
            history,
            tombstones,
        )
    finally:
        for seg in segments:
            seg.unpin()
    if log_.closed or any(s not in log_.segments for s in dirty):
        for p in outputs:
            p.unlink(missing_ok=True)
        return None
    log_.install_cleaned(dirty, outputs)
    log.info("cleaned log", log=log_.directory.name, **stats.__dict__)
    return stats


class LogCleaner:
    """Cleans registered logs in the background once enough of them is dirty.

    A log is cleaned when the bytes written since its last cleaning make up at least
    ``min_cleanable_ratio`` (Kafka's log.cleaner.min.cleanable.ratio) of its non-active
    segments; it is checked every ``backoff_ms`` (log.cleaner.backoff.ms). ``history``: the
    superseded records it keeps for a while (offsets.history.retention.ms), None for none.
    """

    def __init__(
        self,
        clock: Any,
        delete_retention_ms: int,
        backoff_ms: int,
        min_cleanable_ratio: float,
        history: HistoryRetention | None = None,
    ) -> None:
        self.clock = clock
        self.delete_retention_ms = delete_retention_ms
        self.backoff_ms = backoff_ms
        self.min_cleanable_ratio = min_cleanable_ratio
        self.history = history
        self.logs: dict[Log, int] = {}  # log -> first offset not cleaned yet
        self.runs = 0

    def register(self, log_: Log) -> None:
        self.logs.setdefault(log_, 0)

    def dirty_ratio(self, log_: Log) -> float:
        inactive = log_.segments[:-1]
        total = sum(s.size for s in inactive)
        if total == 0:
            return 0.0
        clean_up_to = self.logs.get(log_, 0)
        return sum(s.size for s in inactive if s.base_offset >= clean_up_to) / total

    async def clean_if_needed(self, log_: Log) -> CleanStats | None:
        if log_.closed or self.dirty_ratio(log_) < self.min_cleanable_ratio:
            return None
        end = log_.segments[-1].base_offset
        stats = await clean(log_, self.clock.now_ms(), self.delete_retention_ms, self.history)
        if stats is not None:
            self.logs[log_] = end
            self.runs += 1
        return stats

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.backoff_ms / 1000)
            for log_ in list(self.logs):
                try:
                    await self.clean_if_needed(log_)
                except Exception:
                    log.exception("cleaning failed", log=log_.directory.name)
