"""A partition's append-only segmented log, in Kafka's on-disk layout.

The log stores v2 record batches as it is handed them (the data plane has validated them, and
recompressed them if the topic asks for a codec), stamping broker-assigned offsets into them.
It knows bytes, offsets and timestamps; nothing about topics, producers or groups. The
coordinator logs use the same class.

``log_end_offset`` is the next offset to assign; ``high_watermark`` is what readers may see:
under ``log.flush.policy=always`` only what an fsync covered, otherwise everything appended.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import os
import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import structlog

from kcoord.protocol import records
from kcoord.protocol.records import BatchHeader
from kcoord.storage import preallocation
from kcoord.storage.atomic import atomic_write
from kcoord.storage.flush import Flusher
from kcoord.storage.index import MAX_RELATIVE_OFFSET
from kcoord.storage.segment import Segment
from kcoord.storage.txn_index import AbortedTxn

log = structlog.get_logger(__name__)

# ListOffsets special timestamps (Kafka's ListOffsetsRequest).
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3
EARLIEST_LOCAL_TIMESTAMP: Final = -4
LATEST_TIERED_TIMESTAMP: Final = -5


CLEANING_FILE: Final = "cleaning.json"
# The log start offset DeleteRecords set (Kafka keeps it in log-start-offset-checkpoint, written
# every minute; kcoord writes it, atomically and synced, before DeleteRecords answers).
START_OFFSET_FILE: Final = "log-start-offset"
# Replay reads logs in windows of this size: with one coordinator partition its log holds every
# group's records, and reading whole segments (up to offsets.topic.segment.bytes) at once doubled
# the broker's memory after loading 1 M records (67 -> 140 MB RSS).
READ_WINDOW_BYTES = 4 << 20
# flush.messages / flush.ms default (Kafka's Long.MAX_VALUE): the flush policy alone decides.
FLUSH_NEVER: Final = 9223372036854775807


class OffsetOutOfRange(Exception):
    pass


def _finish_cleaning(directory: Path) -> None:
    """Complete a cleaner swap a crash interrupted; drop cleaner output never claimed.

    ``install_cleaned`` deletes every old segment before it renames the first swap, so if any
    swap is already in place the old segments are gone; otherwise they must be deleted now.
    """
    plan_path = directory / CLEANING_FILE
    if plan_path.exists():
        plan = json.loads(plan_path.read_text())
        installing = any(not (directory / name).exists() for name in plan["install"])
        if not installing:
            for base in plan["delete"]:
                for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                    (directory / (f"{base:020d}" + suffix)).unlink(missing_ok=True)
        for name in plan["install"]:
            swap = directory / name
            if swap.exists():
                os.rename(swap, directory / name.removesuffix(".swap"))
        plan_path.unlink()
    for stray in list(directory.glob("*.cleaned")) + list(directory.glob("*.swap")):
        stray.unlink()


@dataclass
class LogConfig:
    segment_bytes: int = 1 << 30
    roll_ms: int = 7 * 24 * 3_600_000
    retention_ms: int = 7 * 24 * 3_600_000  # -1: keep forever
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    # Kafka's flush.messages / flush.ms: sync once this many messages are unsynced, and at the
    # latest this long after an append (only matters below log.flush.policy=always).
    flush_messages: int = FLUSH_NEVER
    flush_ms: int = FLUSH_NEVER
    # Kafka's segment.jitter.ms: each segment rolls a random [0, min(jitter, roll_ms)) earlier,
    # so that partitions created together do not all roll at once.
    roll_jitter_ms: int = 0
    # Kafka's preallocate / log.preallocate: the active segment's file is grown ahead of its
    # appends (kcoord/storage/preallocation.py).
    preallocate: bool = True
    # Preallocated space written with zeros instead of reserved (preallocation.py says when).
    preallocate_zeros: bool = False
    # log.cache.retain.bytes: synced bytes further than this behind a segment's end are dropped
    # from the page cache (Segment.drop_ops); -1 leaves them to the kernel.
    cache_retain_bytes: int = -1


@dataclass(init=False)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int

    # One per append: written out, compiled, it is C; dataclass's generated __init__ is Python.
    def __init__(
        self, first_offset: int, last_offset: int, log_append_time: int, log_start_offset: int
    ) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset


class Log:
    def __init__(self, directory: Path, config: LogConfig, flusher: Flusher) -> None:
        self.directory = directory
        self.config = config
        self.flusher = flusher
        self.segments: list[Segment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self.flushed_offset = 0
        self.high_watermark = 0
        self._unsynced: list[Segment] = []
        self.hw_listeners: list[Callable[[int], None]] = []
        # Called with the new segment's base offset when a segment rolls, before anything is
        # written to it (the data plane snapshots producer state there).
        self.roll_listeners: list[Callable[[int], None]] = []
        # Called with the end offset of the range the cleaner is about to replace, before the
        # swap begins (coordinator snapshots covering less than that are no longer valid).
        self.clean_listeners: list[Callable[[int], None]] = []
        self.closed = False
        self._rng = random.Random()
        # The active segment's jitter, drawn when it was created (Kafka's LogSegment.rollJitterMs).
        self.active_roll_jitter_ms = 0

    # --- opening ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        flusher: Flusher,
        unclean: bool = True,
        trust_clean_close: bool = False,
    ) -> Log:
        """Open (or create) the log in ``directory``.

        The active segment's batches are CRC-checked and a torn tail is cut off; after an
        unclean shutdown the segment before it is checked too (it may have rolled just before
        the crash, before its fsync). With ``trust_clean_close`` a log closed cleanly is not
        checked at all, as Kafka skips recovery after a clean shutdown (the coordinator logs:
        reading a 100 MB active segment would cost a restart more than its snapshot saves).
        """
        directory.mkdir(parents=True, exist_ok=True)
        self = cls(directory, config, flusher)
        _finish_cleaning(directory)
        bases = sorted(int(p.stem) for p in directory.glob("*.log") if p.stem.isdigit())
        if not bases:
            bases = [0]
        n = len(bases)
        for i, base in enumerate(bases):
            seg = Segment(directory, base, config.index_interval_bytes)
            recover = (i == n - 1 and (unclean or not trust_clean_close)) or (unclean and i == n - 2)
            truncated = seg.load(recover=recover)
            seg.persist_indexes(keep_open=i == n - 1)
            self.segments.append(seg)
            if truncated and i < n - 1:
                # Data after a corrupt point would leave an offset hole (a gap between segments
                # is legal after compaction, so it cannot be detected later): as Kafka's
                # LogLoader, drop every segment after the one that was truncated.
                for later in bases[i + 1 :]:
                    doomed = Segment(directory, later, config.index_interval_bytes)
                    log.warning("deleting segment after corrupt data", segment=str(doomed.path))
                    doomed.delete()
                seg.persist_indexes(keep_open=True)  # it is the active segment now
                break
        # Segments overlapping their predecessor cannot be trusted either.
        for i in range(1, len(self.segments)):
            if self.segments[i].base_offset < self.segments[i - 1].next_offset:
                for seg in self.segments[i:]:
                    log.warning("deleting segment after corrupt data", segment=str(seg.path))
                    seg.delete()
                del self.segments[i:]
                break
        self._bases = [s.base_offset for s in self.segments]
        checkpoint = self._read_start_offset()
        if checkpoint > self.log_end_offset:
            # Records DeleteRecords had deleted up to were lost in a crash (log.flush.policy os or
            # interval): as Kafka's LogLoader, drop what is left and start over at the checkpoint,
            # so that no offset is ever handed out twice.
            log.warning(
                "log end offset below the log start offset; deleting every segment",
                log=str(directory),
                log_end_offset=self.log_end_offset,
                log_start_offset=checkpoint,
            )
            for seg in self.segments:
                seg.delete()
            seg = Segment(directory, checkpoint, config.index_interval_bytes)
            seg.load(recover=False)
            seg.persist_indexes(keep_open=True)
            self.segments = [seg]
            self._bases = [checkpoint]
        self.log_start_offset = max(self.segments[0].base_offset, checkpoint)
        self.flushed_offset = self.log_end_offset
        self.high_watermark = self.log_end_offset
        self.active_roll_jitter_ms = self._draw_jitter()
        self.segments[-1].preallocate_bytes = self._preallocate_bytes
        self.segments[-1].preallocate_zeros = config.preallocate_zeros
        for seg in self.segments:
            seg.cache_retain_bytes = config.cache_retain_bytes
        return self

    def _draw_jitter(self) -> int:
        """Kafka's LogConfig.randomSegmentJitter."""
        bound = min(self.config.roll_jitter_ms, self.config.roll_ms)
        return self._rng.randrange(bound) if bound > 0 else 0

    @property
    def _preallocate_bytes(self) -> int:
        if not self.config.preallocate:
            return 0
        return min(preallocation.PREALLOCATE_CHUNK_BYTES, self.config.segment_bytes)

    @property
    def roll_after_ms(self) -> int:
        """How old the active segment may get before it rolls: segment.ms less its jitter."""
        return self.config.roll_ms - self.active_roll_jitter_ms

    def _read_start_offset(self) -> int:
        try:
            return int((self.directory / START_OFFSET_FILE).read_text().strip())
        except FileNotFoundError:
            return 0

    # --- offsets -----------------------------------------------------------------------------
    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # --- appending ---------------------------------------------------------------------------
    def append(
        self,
        data: bytes | bytearray | memoryview,
        headers: list[BatchHeader],
        now_ms: int,
        log_append_time: bool = False,
    ) -> AppendInfo:
        """Assign offsets to validated batches in ``data`` and write them: stamped in place when
        ``data`` is writable, else each batch's stamped start is written ahead of the rest of it
        from ``data`` as it is (a Produce request read with other frames: no copy of its records)."""
        if self.closed:
            raise RuntimeError(f"log {self.directory} is closed")
        size = len(data)
        # A small round that writers wait for syncs on the event loop's thread, a large one on the
        # flusher's (storage/flush.py).
        self.flusher.unsynced_bytes += size
        # A loop, not max() and sum() over generators: compiled, each generator is an object.
        incoming_ts = headers[0].max_timestamp
        last_offset = self.log_end_offset - 1
        for h in headers:
            incoming_ts = max(incoming_ts, h.max_timestamp)
            last_offset += h.last_offset_delta + 1
        if self._should_roll(size, incoming_ts, now_ms, last_offset):
            self.roll()
        first = offset = self.log_end_offset
        if not isinstance(data, bytes) and not (isinstance(data, memoryview) and data.readonly):
            buf: bytearray | memoryview = data
        elif log_append_time:
            buf = bytearray(data)  # the new timestamp changes the CRC over the whole batch
        else:
            pieces: list[bytes | memoryview] = []
            view = memoryview(data)
            written = 0
            for h in headers:
                pieces.append(records.stamped_start(view, h.position, offset))
                pieces.append(view[h.position + records.STAMPED_BYTES : h.position + h.size])
                written += h.size
                h.base_offset = offset
                offset = h.next_offset
            self.active.append_pieces(pieces, written, headers)
            return self._appended(first, offset)
        for h in headers:
            records.assign_offset(buf, h.position, offset)
            h.base_offset = offset
            if log_append_time:
                records.set_log_append_time(buf, h.position, h.size, now_ms)
                h.max_timestamp = now_ms
                h.attributes |= records.ATTR_TIMESTAMP_TYPE
            offset = h.next_offset
        self.active.append(buf, headers)
        return self._appended(first, offset, now_ms if log_append_time else -1)

    def _appended(self, first: int, end: int, log_append_time: int = -1) -> AppendInfo:
        if not self.flusher.waits_for_disk:
            self._advance_hw(self.log_end_offset)
            self._apply_flush_limits()
        return AppendInfo(first, end - 1, log_append_time, self.log_start_offset)

    def _apply_flush_limits(self) -> None:
        """flush.messages and flush.ms, as Kafka's UnifiedLog: unflushed messages are counted
        from the last offset a round synced (Kafka's recovery point)."""
        cfg = self.config
        if self.log_end_offset - self.flushed_offset >= cfg.flush_messages:
            self.flusher.mark_dirty(self, urgent=True)
        elif cfg.flush_ms < FLUSH_NEVER:
            self.flusher.flush_within(self, cfg.flush_ms)

    def _should_roll(self, incoming: int, incoming_ts: int, now_ms: int, last_offset: int) -> bool:
        seg = self.active
        if seg.size == 0:
            return False
        if seg.size + incoming > self.config.segment_bytes:
            return True
        if last_offset - seg.base_offset > MAX_RELATIVE_OFFSET:
            # The offset index holds offsets relative to the segment's base in 32 bits (compressed
            # batches of tiny records can get there before the size limit), as Kafka rolls too.
            return True
        first_ts = seg.first_batch_timestamp
        waited = incoming_ts - first_ts if first_ts is not None and first_ts >= 0 else 0
        return waited > self.roll_after_ms

    def roll(self) -> Segment:
        """Close the active segment for appends and start a new one at the log end."""
        old = self.active
        if old.size == 0:
            return old
        old.close_indexes()
        self._unsynced.append(old)
        seg = Segment(
            self.directory,
            self.log_end_offset,
            self.config.index_interval_bytes,
            self._preallocate_bytes,
            self.config.preallocate_zeros,
        )
        seg.load(recover=False)
        seg.persist_indexes(keep_open=True)
        seg.cache_retain_bytes = self.config.cache_retain_bytes
        self.segments.append(seg)
        self._bases.append(seg.base_offset)
        self.active_roll_jitter_ms = self._draw_jitter()
        # Rolled segments are fsynced whatever the policy, as Kafka flushes on roll.
        self.flusher.mark_dirty(self, urgent=True)
        for listener in self.roll_listeners:
            listener(seg.base_offset)
        return seg

    # --- durability --------------------------------------------------------------------------
    def take_unsynced_segments(self) -> list[Segment]:
        out, self._unsynced = self._unsynced, []
        out.append(self.active)
        return out

    def sync(self) -> None:
        for seg in self.take_unsynced_segments():
            seg.fsync()

    def mark_flushed(self, end_offset: int) -> None:
        if end_offset > self.flushed_offset:
            self.flushed_offset = end_offset
        if self.flusher.waits_for_disk:
            self._advance_hw(min(end_offset, self.log_end_offset))

    def _advance_hw(self, offset: int) -> None:
        if offset > self.high_watermark:
            self.high_watermark = offset
            for listener in self.hw_listeners:
                listener(offset)

    # --- reading -----------------------------------------------------------------------------
    def _segment_index(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def segment_of(self, offset: int) -> Segment:
        """The segment that holds (or would hold) ``offset``."""
        return self.segments[self._segment_index(offset)]

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one: bool = True,
        copy: bool = True,
    ) -> bytes | memoryview:
        """Whole batches starting with the one that holds ``offset``, below ``max_offset``.

        At most ``max_bytes``, except that the first batch is returned whole even if it is
        larger (KIP-74) when ``min_one``. Reads stay within one segment, as in Kafka. Without
        ``copy`` the answer may be a memoryview of the bytes read (no copy to cut the tail).
        """
        if max_offset is None:
            max_offset = self.high_watermark
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRange(
                f"offset {offset} outside [{self.log_start_offset}, {self.log_end_offset}]"
            )
        if offset >= max_offset:
            return b""
        i = self._segment_index(offset)
        while i < len(self.segments):
            seg = self.segments[i]
            pos = seg.position_of(offset)
            if pos is not None:
                data = self._read_batches(seg, pos, max_bytes, max_offset, min_one)
                return bytes(data) if copy and type(data) is memoryview else data
            i += 1  # offset fell in a gap left by compaction: continue with the next segment
        return b""

    @staticmethod
    def _read_batches(
        seg: Segment, pos: int, max_bytes: int, max_offset: int, min_one: bool
    ) -> bytes | memoryview:
        data = seg.read(pos, max(max_bytes, records.HEADER_SIZE))
        end = 0
        for h in records.iter_headers(data, partial_ok=True):
            if h.base_offset >= max_offset or h.position + h.size > max_bytes:
                break
            end = h.position + h.size
        if end == 0 and min_one:
            h = seg.checked(records.read_header(data), pos)  # larger than max_bytes, or wrong
            if h.base_offset < max_offset:
                return data if len(data) == h.size else seg.read(pos, h.size)
            return b""
        return memoryview(data)[:end] if end < len(data) else data

    def batches(
        self, start_offset: int = 0, max_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch from ``start_offset`` (for replay and the cleaner), read segment by segment
        in windows of READ_WINDOW_BYTES, so that replaying a large log holds one window in memory
        rather than the whole log. Headers' positions are relative to the batch's segment."""
        end = self.log_end_offset if max_offset is None else max_offset
        first = self._segment_index(start_offset)
        for seg in self.segments[first:]:
            # The offset index finds where to start (a replay from a coordinator snapshot near the
            # end of a large segment would otherwise read every batch before it).
            pos = seg.index.lookup(start_offset) if seg is self.segments[first] else 0
            size = seg.size
            while pos < size:
                data = seg.read(pos, READ_WINDOW_BYTES)
                used = 0
                for h in records.iter_headers(data, partial_ok=True):
                    used = h.position + h.size
                    if h.last_offset < start_offset:
                        continue
                    if h.base_offset >= end:
                        return
                    yield dataclasses.replace(h, position=pos + h.position), data[h.position : used]
                if used == 0:  # a batch larger than the window, or a torn tail: read it whole
                    if len(data) < records.HEADER_SIZE:
                        break
                    whole = records.read_header(data).size
                    if whole <= len(data) or pos + whole > size:
                        break
                    data = seg.read(pos, whole)
                    h = records.read_header(data)
                    if h.base_offset >= end:
                        return
                    if h.last_offset >= start_offset:
                        yield dataclasses.replace(h, position=pos), data
                    used = whole
                pos += used

    # --- aborted transactions ------------------------------------------------------------------
    def append_aborted_txn(self, txn: AbortedTxn) -> None:
        """Index an aborted transaction whose ABORT marker was just appended (to the active
        segment, as Kafka's LogSegment.updateTxnIndex)."""
        self.active.txn_index.append(txn)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound), from the segment
        holding ``fetch_offset`` on (markers come after their data), as Kafka's
        LocalLog.collectAbortedTransactions."""
        found: list[AbortedTxn] = []
        for seg in self.segments[self._segment_index(fetch_offset) :]:
            txns, complete = seg.txn_index.collect(fetch_offset, upper_bound)
            found.extend(txns)
            if complete:
                break
        return found

    def offset_for_timestamp(self, timestamp: int, max_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp``, from the log
        start offset and below max_offset."""
        start_offset = self.log_start_offset
        for seg in self.segments:
            if seg.max_timestamp < timestamp or seg.size == 0 or seg.next_offset <= start_offset:
                continue
            start = seg.time_index.lookup(timestamp)
            pos = seg.position_of(max(start, seg.base_offset, start_offset)) or 0
            for h in seg.headers_from(pos):
                if h.base_offset >= max_offset:
                    return None
                if h.max_timestamp >= timestamp and h.last_offset >= start_offset:
                    found = records.first_offset_at_or_after(
                        seg.read(h.position, h.size), h, timestamp, start_offset
                    )
                    if found is not None and found[0] < max_offset:
                        return found
        return None

    def offset_of_max_timestamp(self, max_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp (ListOffsets -3)."""
        best: tuple[int, int] | None = None
        for seg in self.segments:
            if seg.size == 0:
                continue
            for h in seg.headers_from(0):
                if h.base_offset >= max_offset:
                    break
                if best is None or h.max_timestamp > best[1]:
                    batch = seg.read(h.position, h.size)
                    best = (records.max_timestamp_offset(batch, h), h.max_timestamp)
        return best

    # --- the log start offset ------------------------------------------------------------------
    def advance_start_offset(self, offset: int) -> bool:
        """DeleteRecords: make ``offset`` the log start offset, durably, if it is above the current
        one (Kafka's maybeIncrementLogStartOffset); returns whether it moved. Offsets below it can
        no longer be read; the segments wholly below it go at the next retention run.

        Raises OffsetOutOfRange above the high watermark.
        """
        if offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"Cannot increment the log start offset to {offset} since it is larger than the "
                f"high watermark {self.high_watermark}"
            )
        if offset <= self.log_start_offset:
            return False
        atomic_write(self.directory / START_OFFSET_FILE, f"{offset}\n".encode())
        self.log_start_offset = offset
        return True

    def delete_segments_below_start(self) -> int:
        """Delete the segments whose records all lie below the log start offset (those the next
        segment starts at or before it; never the active one), as Kafka's
        deleteLogStartOffsetBreachedSegments; returns how many."""
        doomed = 0
        while (
            doomed < len(self.segments) - 1 and self.segments[doomed + 1].base_offset <= self.log_start_offset
        ):
            doomed += 1
        return self.delete_oldest_segments(doomed, reason="log start offset") if doomed else 0

    # --- retention ---------------------------------------------------------------------------
    def enforce_retention(self, now_ms: int) -> int:
        """Delete whole segments past log.retention.ms / log.retention.bytes; returns how many."""
        doomed = 0
        cfg = self.config
        if cfg.retention_ms >= 0:
            for seg in self.segments:
                if seg.size == 0 or now_ms - seg.max_timestamp <= cfg.retention_ms:
                    break
                doomed += 1
        if cfg.retention_bytes >= 0:
            excess = self.size_bytes - cfg.retention_bytes
            by_size = 0
            for seg in self.segments:
                if seg.size == 0 or excess - seg.size < 0:
                    break
                excess -= seg.size
                by_size += 1
            doomed = max(doomed, by_size)
        # Never delete unflushed data readers cannot see yet.
        while doomed and self.segments[doomed - 1].next_offset > self.high_watermark:
            doomed -= 1
        if not doomed:
            return 0
        if doomed == len(self.segments):
            self.roll()
        return self.delete_oldest_segments(doomed)

    def delete_oldest_segments(self, count: int, reason: str = "retention") -> int:
        count = min(count, len(self.segments) - 1)
        for seg in self.segments[:count]:
            log.info("deleting segment", segment=str(seg.path), reason=reason)
            seg.delete()
            if seg in self._unsynced:
                self._unsynced.remove(seg)
        del self.segments[:count]
        del self._bases[:count]
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        return count

    def install_cleaned(self, old: list[Segment], cleaned: list[Path]) -> None:
        """Replace consecutive non-active segments by the cleaner's output, crash-safely.

        The ``.cleaned`` files are renamed ``.swap``, then a ``cleaning.json`` naming what to
        delete and what to install is written atomically; only then are the old segments
        deleted and the swaps renamed to ``.log``. ``Log.open`` redoes an interrupted swap from
        that file, and discards ``.cleaned`` files no swap ever claimed.
        """
        i = self.segments.index(old[0])
        for listener in self.clean_listeners:
            listener(old[-1].next_offset)
        swaps = []
        for path in cleaned:
            swap = path.with_name(path.name.removesuffix(".cleaned") + ".swap")
            os.rename(path, swap)
            swaps.append(swap.name)
        plan = {"delete": [s.base_offset for s in old], "install": swaps}
        atomic_write(self.directory / CLEANING_FILE, json.dumps(plan).encode())
        for seg in old:
            if seg in self._unsynced:
                self._unsynced.remove(seg)
            seg.delete()
        new = []
        for name in swaps:
            os.rename(self.directory / name, self.directory / name.removesuffix(".swap"))
            seg = Segment(self.directory, int(name.split(".")[0]), self.config.index_interval_bytes)
            seg.load(recover=False)
            seg.persist_indexes(keep_open=False)
            new.append(seg)
        (self.directory / CLEANING_FILE).unlink()
        self.segments[i : i + len(old)] = new
        self._bases = [s.base_offset for s in self.segments]

    # --- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Close every segment; raises the first segment's OSError (a transaction index the disk
        could not take whole) once all are closed."""
        if self.closed:
            return
        self.closed = True
        failure: OSError | None = None
        for seg in self.segments:
            try:
                seg.close()
            except OSError as e:
                failure = failure or e
        if failure is not None:
            raise failure

    def delete(self) -> None:
        """Remove the log from disk (DeleteTopics): rename first so a crash leaves no half-log."""
        for seg in self.segments:  # nothing of it is to be written, on a full disk least of all
            seg.txn_index.forget_pending()
        self.close()
        if self.directory.exists():
            doomed = self.directory.with_name(self.directory.name + f".{os.getpid()}-delete")
            os.rename(self.directory, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
