"""Log compaction, one pass: Kafka's Cleaner. Which log is cleaned and when is log_cleaner.py's.

A cleaning pass of a log (``compact``) rewrites its cleanable segments keeping, of every key, the
record written last; what else goes (tombstones, transaction markers, empty batches) is the
log's rules' to say (``CleaningRules``: the coordinator logs' and the data topics' rules live in
``compaction_rules``). Like Kafka's cleaner:

- Only whole closed segments below the *first uncleanable offset* are cleaned: never the active
  segment, nothing at or past the high watermark, nothing at or past the first offset of a
  transaction that has no marker yet (the first unstable offset: its outcome decides whether its
  records shadow older ones), and nothing newer than the rules' min.compaction.lag.ms.
- Transactions are followed through the whole log, as Kafka's CleanedTransactionMetadata does
  with the aborted-transaction index: records of aborted transactions are removed and never
  shadow anything; records of committed ones count like any other. A marker is kept while any
  batch of its transaction is left in the log (replay would otherwise leave that transaction
  open forever); once none is, the rules decide when it goes.
- Retained records keep their offsets, timestamps and headers; each batch keeps its base offset
  and last offset delta (``record_filter``); a batch whose records all survive is copied as is.

The pass reads and writes in a worker thread; only the swap (``Log.install_cleaned``, crash-safe)
runs on the event loop, so writers never wait for the cleaner.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import structlog

from kcoord.protocol import records
from kcoord.protocol.records import BatchHeader
from kcoord.storage import record_filter
from kcoord.storage.compaction_rules import CoordinatorRules, HistoryRetention
from kcoord.storage.log import Log
from kcoord.storage.segment import Segment, segment_name
from kcoord.storage.switch_interval import handing_back_the_gil_often
from kcoord.storage.write_fully import write_fully

log = structlog.get_logger(__name__)

_READ_CHUNK = 4 << 20


class CleaningRules(Protocol):
    """What a log's compaction keeps beyond the latest record of each key, and when it runs
    (Kafka's per-topic configs of the same names)."""

    @property
    def delete_retention_ms(self) -> int: ...
    @property
    def min_cleanable_ratio(self) -> float: ...
    @property
    def min_compaction_lag_ms(self) -> int: ...
    @property
    def max_compaction_lag_ms(self) -> int: ...

    def retain_tombstone(self, h: BatchHeader, timestamp: int, now_ms: int) -> bool:
        """Whether a tombstone, the latest record of its key, stays."""
        ...

    def retain_marker(self, h: BatchHeader, now_ms: int) -> bool:
        """Whether a transaction marker stays once no batch of its transaction is left."""
        ...

    def horizon(self, h: BatchHeader, now_ms: int) -> int | None:
        """The delete horizon to stamp on a rewritten batch holding a tombstone or a marker
        that may go (None: the rules judge by record timestamps, no horizon is stamped)."""
        ...

    @property
    def keeps_history(self) -> bool:
        """Whether superseded records may stay (``retain_superseded``)."""
        ...

    def retain_superseded(self, key: bytes, timestamp: int, now_ms: int, tombstone_at: int | None) -> bool:
        """Whether a record a later one of its key replaced stays (a coordinator log's history)."""
        ...

    def retain_empty(self, h: BatchHeader, last_of_producer: bool) -> bool:
        """Whether a data batch none of whose records stays is kept as an empty batch."""
        ...

    @property
    def history_key_prefixes(self) -> tuple[bytes, ...]:
        """How the keys of records kept as history (for a while) once replaced begin."""
        ...

    def unchanged_until(self, earliest_timestamp: int) -> int | None:
        """After a pass that removed nothing from a log none of whose records is older than
        ``earliest_timestamp``: until when another pass removes nothing either, as long as every
        record written since is a non-transactional one with a ``history_key_prefixes`` key
        (None: no promise)."""
        ...


@dataclass
class CleanStats:
    segments_in: int = 0
    segments_out: int = 0
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    end_offset: int = 0  # the cleaned segments end here: the first offset left dirty
    earliest_horizon: int | None = None  # the earliest delete horizon this pass stamped
    earliest_timestamp: int | None = None  # of the batches read (their first timestamps)
    transactional: bool = False  # a transactional or control batch was read
    skipped: bool = False  # the pass was not needed: it would have removed nothing


@dataclass
class TxnScan:
    """What the cleaner needs to know of the transactions of a log (one forward scan)."""

    aborted: set[int] = field(default_factory=set)  # base offsets of aborted transactions' batches
    markers_with_data: set[int] = field(default_factory=set)  # markers whose txn has a batch left
    last_batch: dict[int, int] = field(default_factory=dict)  # producer id -> its last data batch
    first_unstable: int | None = None  # the first offset of the first transaction without marker


def _batches(seg: Segment, size: int) -> Iterator[tuple[BatchHeader, bytes]]:
    """The batches of ``seg``'s first ``size`` bytes, each with its header (position 0)."""
    pos = 0
    while pos < size:
        data = seg.read(pos, min(_READ_CHUNK, size - pos))
        used = 0
        for h in records.iter_headers(data, partial_ok=True):
            used = h.position + h.size
            batch = data[h.position : used]
            h.position = 0
            yield h, batch
        if used == 0:  # one batch larger than a chunk
            if len(data) < records.HEADER_SIZE:
                return
            whole = records.read_header(data).size
            if pos + whole > size:
                return
            data = seg.read(pos, whole)
            h = records.read_header(data)
            yield h, data
            used = whole
        pos += used


def scan_transactions(segments: list[Segment], sizes: list[int]) -> TxnScan:
    """Follow every transaction of the log: which batches were aborted, which markers still have
    a batch of their transaction before them, where the first undecided transaction starts."""
    scan = TxnScan()
    open_txns: dict[int, list[int]] = {}  # producer id -> its open transaction's batches
    for seg, size in zip(segments, sizes, strict=True):
        for h, batch in _batches(seg, size):
            if h.is_control:
                if not h.has_producer_id:
                    continue
                marker = records.read_end_txn_marker(batch, h)
                if marker is None:
                    continue
                batches = open_txns.pop(h.producer_id, None)
                if batches:
                    scan.markers_with_data.add(h.base_offset)
                    if not marker[0]:
                        scan.aborted.update(batches)
                continue
            if h.has_producer_id:
                scan.last_batch[h.producer_id] = h.base_offset
                if h.is_transactional:
                    open_txns.setdefault(h.producer_id, []).append(h.base_offset)
    if open_txns:
        scan.first_unstable = min(b[0] for b in open_txns.values())
    return scan


def offset_map(
    segments: list[Segment], aborted: set[int], tombstones: dict[bytes, int] | None = None
) -> dict[bytes, int]:
    """The latest offset of every key in ``segments``, aborted transactions left out (Kafka's
    buildOffsetMap: control batches and aborted batches never shadow a record). ``tombstones``,
    if given, gets the timestamp of each key whose latest record is a tombstone."""
    latest: dict[bytes, int] = {}
    for seg in segments:
        for h, batch in _batches(seg, seg.size):
            if h.is_control or h.base_offset in aborted:
                continue
            if (
                tombstones is None
                and h.compression == 0
                and not h.attributes & record_filter.ATTR_DELETE_HORIZON
            ):
                for offset, key, _value in records.iter_key_values(batch, h):
                    if key is not None:
                        latest[key] = offset
                continue
            for r in record_filter.iter_raw(record_filter.records_body(batch, h), h):
                if r.key is not None:
                    latest[r.key] = r.offset
                    if tombstones is not None:
                        if r.tombstone:
                            tombstones[r.key] = r.timestamp
                        else:
                            tombstones.pop(r.key, None)
    return latest


class _Output:
    """The ``.cleaned`` segment files a pass writes, each up to ``segment_bytes``."""

    def __init__(self, directory: Path, first_base: int, segment_bytes: int) -> None:
        self.directory = directory
        self.first_base = first_base
        self.segment_bytes = segment_bytes
        self.paths: list[Path] = []
        self.fd = -1
        self.size = 0

    def write(self, batch: bytes | bytearray, base_offset: int) -> None:
        if self.fd < 0 or self.size + len(batch) > self.segment_bytes:
            # The first output keeps the first cleaned segment's name (as Kafka's cleaner does),
            # so the log's offset range does not change.
            self._open(self.first_base if not self.paths else base_offset)
        write_fully(self.fd, batch)
        self.size += len(batch)

    def _open(self, base: int) -> None:
        self.close()
        path = self.directory / (segment_name(base) + ".log.cleaned")
        self.paths.append(path)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def finish(self) -> list[Path]:
        if not self.paths:
            # Everything was dropped: an empty segment still marks where the log starts.
            self._open(self.first_base)
        self.close()
        return self.paths


def write_cleaned(
    directory: Path,
    dirty: list[Segment],
    latest: dict[bytes, int],
    txns: TxnScan,
    rules: CleaningRules,
    now_ms: int,
    segment_bytes: int,
    tombstones: dict[bytes, int] | None = None,
) -> tuple[list[Path], CleanStats]:
    """Rewrite ``dirty`` keeping what the offset map and the rules keep; the ``.cleaned`` files.
    ``tombstones``: as ``offset_map`` fills it, where the rules keep history."""
    stats = CleanStats(segments_in=len(dirty), end_offset=dirty[-1].next_offset)
    out = _Output(directory, dirty[0].base_offset, segment_bytes)
    try:
        for seg in dirty:
            stats.bytes_in += seg.size
            for h, batch in _batches(seg, seg.size):
                stats.records_in += h.records_count
                if stats.earliest_timestamp is None or h.base_timestamp < stats.earliest_timestamp:
                    stats.earliest_timestamp = h.base_timestamp
                if h.is_transactional or h.is_control:
                    stats.transactional = True
                kept_batch = _filter_batch(h, batch, latest, txns, rules, now_ms, stats, tombstones)
                if kept_batch is not None:
                    out.write(kept_batch, h.base_offset)
                    stats.bytes_out += len(kept_batch)
        paths = out.finish()
    except BaseException:
        # A pass that failed (a full disk) gives back the space it took at once: its files are
        # never installed, and the disk that refused it is the one it would keep filling.
        with contextlib.suppress(OSError):
            out.close()
        for path in out.paths:
            path.unlink(missing_ok=True)
        raise
    finally:
        out.close()
    stats.segments_out = len(paths)
    return paths, stats


def _filter_batch(
    h: BatchHeader,
    batch: bytes,
    latest: dict[bytes, int],
    txns: TxnScan,
    rules: CleaningRules,
    now_ms: int,
    stats: CleanStats,
    tombstones_at: dict[bytes, int] | None = None,
) -> bytes | bytearray | None:
    """The batch as it is to be written: itself, rewritten, or None (removed)."""
    if h.is_control:
        if h.base_offset in txns.markers_with_data or not h.has_producer_id:
            stats.records_out += h.records_count
            return batch
        if not rules.retain_marker(h, now_ms):
            return None
        stats.records_out += h.records_count
        horizon = rules.horizon(h, now_ms)
        if horizon is None or record_filter.delete_horizon(h) is not None:
            return batch
        body = record_filter.records_body(batch, h)
        _note_horizon(stats, horizon)
        return record_filter.rebuild(h, body, list(record_filter.iter_raw(body, h)), horizon)
    body = record_filter.records_body(batch, h)
    kept: list[record_filter.RawRecord] = []
    tombstones = False
    if h.base_offset not in txns.aborted:
        for r in record_filter.iter_raw(body, h):
            if r.key is None:
                continue
            if latest.get(r.key) != r.offset:
                if tombstones_at is None or h.is_transactional:
                    continue
                if not rules.retain_superseded(r.key, r.timestamp, now_ms, tombstones_at.get(r.key)):
                    continue
            elif r.tombstone:
                if not rules.retain_tombstone(h, r.timestamp, now_ms):
                    continue
                tombstones = True
            kept.append(r)
    stats.records_out += len(kept)
    if not kept:
        if rules.retain_empty(h, txns.last_batch.get(h.producer_id) == h.base_offset):
            return record_filter.rebuild(h, body, kept)
        return None
    horizon = rules.horizon(h, now_ms) if tombstones and record_filter.delete_horizon(h) is None else None
    if horizon is not None:
        _note_horizon(stats, horizon)
    elif len(kept) == h.records_count:
        return batch  # nothing changes: the producer's bytes, codec and CRC as they were
    return record_filter.rebuild(h, body, kept, horizon)


def _note_horizon(stats: CleanStats, horizon: int) -> None:
    if stats.earliest_horizon is None or horizon < stats.earliest_horizon:
        stats.earliest_horizon = horizon


def first_uncleanable_offset(log_: Log, rules: CleaningRules, now_ms: int) -> int:
    """Where cleaning must stop, before the transactions are looked at: the active segment, the
    high watermark, and the first segment newer than min.compaction.lag.ms."""
    end = min(log_.active.base_offset, log_.high_watermark)
    if rules.min_compaction_lag_ms > 0:
        for seg in log_.segments[:-1]:
            if seg.size and seg.max_timestamp > now_ms - rules.min_compaction_lag_ms:
                end = min(end, seg.base_offset)
                break
    return end


def only_history_since(
    segments: list[Segment], start: int, end: int, rules: CleaningRules
) -> tuple[int, int | None] | None:
    """The records of ``segments`` from offset ``start`` up to the first segment reaching past
    ``end``, if each is a non-transactional one with a key the rules keep as history: how
    many, and the earliest first timestamp of their batches (None if one is not history). Reads
    keys only: no offset map, no writing."""
    prefixes = rules.history_key_prefixes
    if not prefixes:
        return None
    count = 0
    earliest: int | None = None
    for seg in segments:
        if seg.next_offset > end:
            break
        if seg.next_offset <= start:
            continue
        for h, batch in _batches(seg, seg.size):
            if h.last_offset < start:
                continue
            if h.is_control or h.is_transactional:
                return None
            if not record_filter.keys_start_with(record_filter.records_body(batch, h), h, prefixes):
                return None
            count += h.records_count
            if earliest is None or h.base_timestamp < earliest:
                earliest = h.base_timestamp
    return count, earliest


def _may_be_unchanged(dirty: list[Segment], rules: CleaningRules, now_ms: int) -> bool:
    """Whether a log no pass has vouched for may hold nothing a pass would remove, as far as its
    first batch's timestamp tells (a lower bound on none of them, but an old one rules it out
    before its keys are read)."""
    first = dirty[0].first_batch_timestamp if dirty else None
    if first is None or first < 0 or not rules.history_key_prefixes:
        return False
    until = rules.unchanged_until(first)
    return until is not None and now_ms < until


def _clean_in_thread(
    directory: Path,
    segments: list[Segment],
    sizes: list[int],
    end: int,
    rules: CleaningRules,
    now_ms: int,
    segment_bytes: int,
    unchanged_since: int | None = None,
) -> tuple[list[Segment], list[Path], CleanStats] | None:
    txns = scan_transactions(segments, sizes)
    if txns.first_unstable is not None:
        end = min(end, txns.first_unstable)
    dirty = [s for s in segments[:-1] if s.next_offset <= end]
    if not any(s.size for s in dirty):
        return None
    # A pass would rewrite the log unchanged if everything a pass may remove is absent: it
    # removes only superseded records of types history does not keep, transactional ones, and
    # what aged. The last pass removed nothing and its records have not aged (``unchanged_since``,
    # checked by the caller): then only what came since is read. With no such pass (a broker's
    # first, or one after a pass that removed something), the whole log is read, and its
    # earliest timestamp must be young enough too. Rewriting it cost stop 28's bench 1.7 M offset
    # commits read and written again in 2-4 s of a thread that takes the GIL from the event loop.
    whole = unchanged_since is None
    if whole and _may_be_unchanged(dirty, rules, now_ms):
        unchanged_since = dirty[0].base_offset
    if unchanged_since is not None:
        history = only_history_since(dirty, unchanged_since, end, rules)
        if history is not None:
            count, earliest = history
            until = rules.unchanged_until(earliest) if whole and earliest is not None else None
            if not whole or (until is not None and now_ms < until):
                stats = CleanStats(end_offset=dirty[-1].next_offset, skipped=True)
                stats.records_in = stats.records_out = count
                if whole:
                    stats.earliest_timestamp = earliest
                return dirty, [], stats
    tombstones: dict[bytes, int] | None = {} if rules.keeps_history else None
    latest = offset_map(dirty, txns.aborted, tombstones)
    paths, stats = write_cleaned(directory, dirty, latest, txns, rules, now_ms, segment_bytes, tombstones)
    return dirty, paths, stats


async def compact(
    log_: Log, rules: CleaningRules, now_ms: int, unchanged_since: int | None = None
) -> CleanStats | None:
    """One cleaning pass over ``log_``; None if nothing could be cleaned. ``unchanged_since``: the
    end of the last pass, which removed nothing and whose records have not aged since; if every
    record from there is history, the pass is skipped (its stats say ``skipped``). Without it,
    the pass is skipped too when every record of the log is history and none can have aged."""
    if len(log_.segments) < 2:
        return None
    end = first_uncleanable_offset(log_, rules, now_ms)
    segments = list(log_.segments)
    sizes = [s.size for s in segments]  # appends go on meanwhile: read what is there now
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    for seg in segments:
        seg.pin()  # the worker thread reads them; their files must stay open meanwhile
    try:
        with handing_back_the_gil_often():
            result = await loop.run_in_executor(
                None,
                _clean_in_thread,
                log_.directory,
                segments,
                sizes,
                end,
                rules,
                now_ms,
                log_.config.segment_bytes,
                unchanged_since,
            )
    finally:
        for seg in segments:
            seg.unpin()
    if result is None:
        return None
    dirty, outputs, stats = result
    if stats.skipped:
        seconds = round(time.monotonic() - started, 3)
        log.info("cleaning skipped: a pass would remove nothing",
                 log=log_.directory.name, records=stats.records_in, end_offset=stats.end_offset,
                 seconds=seconds)  # fmt: skip
        return stats
    if log_.closed or any(s not in log_.segments for s in dirty):
        # Retention, DeleteRecords or a topic deletion got there first.
        for p in outputs:
            p.unlink(missing_ok=True)
        return None
    log_.install_cleaned(dirty, outputs)
    # The pass's wall time, so that what ran beside it can be told apart (bench/compaction.py).
    seconds = round(time.monotonic() - started, 3)
    log.info("cleaned log", log=log_.directory.name, seconds=seconds, **stats.__dict__)
    return stats


async def clean(
    log_: Log, now_ms: int, delete_retention_ms: int, history: HistoryRetention | None = None
) -> CleanStats | None:
    """One pass over a coordinator log (its rules: ``compaction_rules.CoordinatorRules``)."""
    return await compact(log_, CoordinatorRules(delete_retention_ms, history=history), now_ms)
