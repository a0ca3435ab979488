"""One log segment: ``<20-digit base offset>.log`` plus its ``.index``, ``.timeindex`` and
``.txnindex`` (aborted transactions, see txn_index)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

import structlog

from kcoord.protocol import records
from kcoord.protocol.records import HEADER_SIZE, BatchHeader, InvalidBatch
from kcoord.storage import preallocation
from kcoord.storage.index import MAX_RELATIVE_OFFSET, OffsetIndex, TimeIndex
from kcoord.storage.sync_thread import DROP_PAGES, FDATASYNC, SyncOp, run_ops
from kcoord.storage.txn_index import TransactionIndex

log = structlog.get_logger(__name__)

_SCAN_CHUNK: Final = 1 << 20
_PAGE_BYTES: Final = 4096
_IOV_MAX: Final = 1024  # Linux's limit of buffers per pwritev
# Synced pages are dropped in steps of at least this much: one fadvise call per few flush rounds
# of a busy partition, not one per round.
DROP_MIN_BYTES: Final = 1 << 20
DROP_MAX_BYTES: Final = 64 << 20


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class Segment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        index_interval_bytes: int,
        preallocate_bytes: int = 0,
        preallocate_zeros: bool = False,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.path = directory / (segment_name(base_offset) + ".log")
        self.index = OffsetIndex(directory / (segment_name(base_offset) + ".index"), base_offset)
        self.time_index = TimeIndex(directory / (segment_name(base_offset) + ".timeindex"), base_offset)
        self.txn_index = TransactionIndex(directory / (segment_name(base_offset) + ".txnindex"))
        self.txn_index.load()
        self.index_interval_bytes = index_interval_bytes
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self.device = os.fstat(self.fd).st_dev  # the flusher syncs a whole filesystem at once
        self.size = 0
        self.next_offset = base_offset
        self.first_batch_timestamp: int | None = None  # drives time-based rolling, as in Kafka
        self._bytes_since_index = 0
        self._indexes_dirty = False
        self._pins = 0  # in-flight fsyncs; closing waits for them so the fd is never reused
        self._close_pending = False
        # The file is grown ahead of the appends, this many bytes at a time (0: it grows as they
        # write), and was grown up to ``_grown_to`` (0: not by this object; see preallocation.py).
        self.preallocate_bytes = preallocate_bytes
        self.preallocate_zeros = preallocate_zeros  # grown by writing zeros (preallocation.py)
        self._grown_to = 0
        # Synced bytes more than this far behind the end leave the page cache (-1: they stay; see
        # drop_synced_pages), and they were dropped up to ``_dropped_to``.
        self.cache_retain_bytes = -1
        self._dropped_to = 0

    # --- opening ---------------------------------------------------------------------------
    def load(self, recover: bool) -> int:
        """Read the segment's state from disk; with ``recover`` verify every batch's CRC.

        Returns the number of bytes truncated from a torn or corrupt tail (not counting the zeros
        a preallocated file ends with: they are no sign of damage).
        """
        self.size = os.fstat(self.fd).st_size
        if recover:
            return self._recover()
        if not (
            self.index.load(self.size) and self._tail_from_index() and self.time_index.load(self.next_offset)
        ):
            valid = self._scan(verify=False)
            self._indexes_dirty = True
            if valid < self.size:
                # Bytes past the last batch in a segment trusted without recovery: a crash just
                # after two rolls left it untrimmed, or with a torn write. Recovered like the
                # active segment, so that nothing is ever appended or read past them.
                return self._recover()
        return 0

    def _recover(self) -> int:
        valid = self._scan(verify=True)
        truncated = self.size - valid
        if truncated and preallocation.is_zeros(self.fd, valid, self.size):
            log.info("trimming preallocated space", segment=str(self.path), data_bytes=valid)
            preallocation.trim(self.fd, valid)
            truncated = 0
        elif truncated:
            log.warning(
                "truncating torn log tail",
                segment=str(self.path),
                valid_bytes=valid,
                dropped_bytes=truncated,
            )
            os.ftruncate(self.fd, valid)
        if self.size != valid:
            os.fsync(self.fd)
            self.size = valid
        self._indexes_dirty = True
        return truncated

    def _tail_from_index(self) -> bool:
        """Find next_offset by scanning from the last index entry instead of the whole file."""
        if self.size == 0:
            return True
        if not self.index.positions:
            return False
        try:
            headers = self._headers_from(self.index.positions[-1])
        except InvalidBatch:
            return False  # the entry points into the middle of a batch: rebuild the index
        if (
            not headers
            or headers[0].base_offset != self.index.offsets[-1]
            or headers[-1].position + headers[-1].size != self.size
        ):
            return False
        self.next_offset = headers[-1].next_offset
        self.first_batch_timestamp = records.read_header(os.pread(self.fd, HEADER_SIZE, 0)).max_timestamp
        return True

    def _headers_from(self, position: int) -> list[BatchHeader]:
        out = []
        pos = position
        while pos < self.size:
            chunk = os.pread(self.fd, min(_SCAN_CHUNK, self.size - pos), pos)
            consumed = 0
            for h in records.iter_headers(chunk, partial_ok=True):
                h.position += pos
                out.append(h)
                consumed = h.position - pos + h.size
            if consumed == 0:
                # A batch larger than the chunk: read its header alone.
                try:
                    h = records.read_header(os.pread(self.fd, HEADER_SIZE, pos))
                except InvalidBatch:
                    break
                if not self._within(h, pos):
                    break
                h.position = pos
                out.append(h)
                consumed = h.size
            pos += consumed
        return out

    def _scan(self, verify: bool) -> int:
        """Rebuild indexes and offsets from the batches; returns the end of the valid prefix.

        Offsets must increase from batch to batch but may have gaps (compacted logs).
        """
        self.index.offsets, self.index.positions = [], []
        self.time_index.timestamps, self.time_index.offsets = [], []
        self._bytes_since_index = 0
        self.next_offset = self.base_offset
        self.first_batch_timestamp = None
        pos = 0
        while pos < self.size:
            try:
                h = records.read_header(os.pread(self.fd, HEADER_SIZE, pos))
            except InvalidBatch:
                break
            if (
                not self._within(h, pos)
                or h.magic != 2
                or h.base_offset < self.next_offset
                or h.last_offset_delta < 0
                or h.last_offset - self.base_offset > MAX_RELATIVE_OFFSET
            ):
                break
            if verify and records.crc_of(os.pread(self.fd, h.size, pos), 0, h.size) != h.crc:
                break
            h.position = pos
            self._index_batch(h)
            pos += h.size
        return pos

    def persist_indexes(self, keep_open: bool) -> None:
        """Write rebuilt indexes out; the active segment keeps them open for appends. Those of
        another segment that the disk cannot take (it is full) serve from memory, and their
        files are removed for the next start to rebuild (a segment the cleaner installed, or
        one whose indexes the start rebuilt)."""
        if not (self._indexes_dirty or keep_open):
            return
        try:
            self.index.open_for_append()
            self.time_index.open_for_append()
        except OSError:
            if keep_open:
                raise
        self._indexes_dirty = False
        if not keep_open:
            self._close_offset_indexes()

    # --- appending -------------------------------------------------------------------------
    def _index_batch(self, h: BatchHeader) -> None:
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = h.max_timestamp
        if h.position == 0 or self._bytes_since_index >= self.index_interval_bytes:
            self.index.append(h.base_offset, h.position)
            self._bytes_since_index = 0
        self._bytes_since_index += h.size
        self.time_index.maybe_append(h.max_timestamp, h.base_offset)
        self.next_offset = h.next_offset

    def append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> int:
        """Write batches (offsets already assigned) at the end; returns their start position."""
        start = self.size
        view = memoryview(data)
        if self.preallocate_bytes and start + len(view) > self._grown_to:
            self._grow(start, len(view))
        written = 0
        while written < len(view):
            written += os.pwrite(self.fd, view[written:], start + written)
        return self._appended(start, len(view), headers)

    def append_pieces(self, pieces: list[bytes | memoryview], size: int, headers: list[BatchHeader]) -> int:
        """As ``append``, for batches given as pieces that join to ``size`` bytes (a stamped start
        apart from the body it belongs to), written with one pwritev."""
        start = self.size
        if self.preallocate_bytes and start + size > self._grown_to:
            self._grow(start, size)
        written = os.pwritev(self.fd, pieces, start) if len(pieces) <= _IOV_MAX else 0
        if written < size:  # a short write (or too many pieces for one call): the rest
            rest = memoryview(b"".join(pieces))
            while written < size:
                written += os.pwrite(self.fd, rest[written:], start + written)
        return self._appended(start, size, headers)

    def _appended(self, start: int, size: int, headers: list[BatchHeader]) -> int:
        for h in headers:
            h.position += start
            self._index_batch(h)
            h.position -= start
        self.size += size
        return start

    def _grow(self, start: int, length: int) -> None:
        if self.preallocate_zeros:
            # The appended bytes' blocks too, first: on a nearly full disk the zeros never take
            # the blocks the append needs. A failed write is a full disk (or a failing one): the
            # append reports it, and the file is as long as the zeros got (trimmed at the end).
            end = start + length + min(self.preallocate_bytes, preallocation.ZEROS_CHUNK_BYTES)
            if preallocation.write_zeros(self.fd, max(start, self._grown_to), end) is None:
                self._grown_to = end
            else:
                self._grown_to = max(self._grown_to, os.fstat(self.fd).st_size)
            return
        # As much as the segment holds already, between the bounds: an idle partition's file
        # runs 1 MiB ahead of its data, a busy one's 16 MiB.
        step = min(self.preallocate_bytes, max(preallocation.PREALLOCATE_MIN_BYTES, start))
        end = start + max(length, step)
        err = preallocation.grow(self.fd, start, end)
        if err is None:
            self._grown_to = end
        elif preallocation.unsupported(err):
            self.preallocate_bytes = 0  # the filesystem cannot: appends allocate as they go
        else:  # a full disk may have grown the file part of the way
            self._grown_to = max(self._grown_to, os.fstat(self.fd).st_size)

    def _release(self) -> None:
        """No more appends: the file ends where its data does."""
        # Only the file as this object grew it: never what something else wrote since.
        if self._grown_to > self.size and self.fd >= 0 and os.fstat(self.fd).st_size == self._grown_to:
            preallocation.trim(self.fd, self.size)
        self._grown_to = 0
        self.preallocate_bytes = 0

    # --- reading ---------------------------------------------------------------------------
    def position_of(self, offset: int) -> int | None:
        """File position of the batch containing ``offset`` (None if past the end)."""
        if offset >= self.next_offset:
            return None
        pos = self.index.lookup(offset)
        while pos < self.size:
            h = self.header_at(pos)
            if h.last_offset >= offset:
                return pos
            pos += h.size
        return None

    def header_at(self, pos: int) -> BatchHeader:
        """The header of the batch at ``pos`` (see ``checked``)."""
        return self.checked(records.read_header(os.pread(self.fd, HEADER_SIZE, pos)), pos)

    def checked(self, h: BatchHeader, pos: int) -> BatchHeader:
        """``h``, read at ``pos``, if its batch lies within the segment: a length that does not
        (bytes changed on disk since recovery checked them) raises InvalidBatch, where a negative
        one made ``position_of`` loop for ever and a huge one a read of that size."""
        if not self._within(h, pos):
            raise InvalidBatch(f"batch at position {pos} of {self.path.name} has length {h.batch_length}")
        return h

    def _within(self, h: BatchHeader, pos: int) -> bool:
        """The batch read at ``pos`` has a sound length and ends inside the segment."""
        return h.batch_length >= HEADER_SIZE - records.LOG_OVERHEAD and pos + h.size <= self.size

    def read(self, position: int, max_bytes: int) -> bytes:
        return os.pread(self.fd, min(max_bytes, self.size - position), position)

    def headers_from(self, position: int) -> list[BatchHeader]:
        return self._headers_from(position)

    @property
    def max_timestamp(self) -> int:
        return self.time_index.max_timestamp

    def fsync(self) -> None:
        """Sync now, on this thread: the operations a flush round would plan (``sync_ops``)."""
        ops: list[SyncOp] = []
        self.sync_ops(ops)
        run_ops(ops)

    def sync_ops(self, ops: list[SyncOp]) -> None:
        """Add what makes this file's written bytes durable to a flush round's operations."""
        if self.fd >= 0:
            ops.append((FDATASYNC, self.fd, 0, 0))
            self.txn_index.sync_ops(ops)

    def drop_ops(self, ops: list[SyncOp]) -> None:
        """Add, after the round's syncs, a hint that the kernel may drop this file's cached pages
        more than ``cache_retain_bytes`` behind its end (clean once the round has synced).

        On this machine kind a 100 KiB pwrite took 36 us of kernel time while the page cache had
        pages to recycle and 290 us once ~3 GB had been written and each write took fresh ones
        (``copy_folio_from_iter_atomic`` was 65 % of a producing broker's CPU). Dropping what the
        readers at the end no longer need keeps writes on recycled pages: 40 us through 10 GB.
        Only clean pages go (the kernel skips dirty ones, as it would if the round's sync failed),
        so this never loses a byte; a reader further behind reads from the disk.
        """
        retain = self.cache_retain_bytes
        if retain < 0 or self.fd < 0:
            return
        start = self._dropped_to
        upto = (self.size - retain) & ~(_PAGE_BYTES - 1)
        if upto - start < DROP_MIN_BYTES:
            return
        # A bounded step: a segment reopened after a restart is dropped a step per round, not
        # gigabytes at once on a round that syncs on the event loop's thread.
        upto = min(upto, start + DROP_MAX_BYTES)
        ops.append((DROP_PAGES, self.fd, start, upto - start))
        # Planned on the loop's thread, so the next round's step starts after this one's.
        self._dropped_to = upto

    def pin(self) -> None:
        self._pins += 1

    def unpin(self) -> None:
        self._pins -= 1
        if self._pins == 0 and self._close_pending:
            # On the flusher's path, where an error would read as a failed sync: a transaction
            # index the disk still refuses is logged (a crash or restart rebuilds it).
            try:
                self.close()
            except OSError as e:
                log.warning(
                    "could not write a transaction index at close", segment=str(self.path), error=str(e)
                )

    def close(self) -> None:
        """Write out and close the segment's files. Raises OSError when its transaction index
        could not be written whole (a full disk; every file is closed all the same): the
        partition then has its transaction indexes rebuilt from the log at the next start."""
        self._close_offset_indexes()
        if self._pins:
            self._close_pending = True
            return
        try:
            self.txn_index.close()
        finally:
            if self.fd >= 0:
                try:
                    self._release()
                finally:
                    os.close(self.fd)
                    self.fd = -1

    def _close_offset_indexes(self) -> None:
        for index in (self.index, self.time_index):
            try:
                index.close()
            except OSError as e:
                # A full disk. A short index would be trusted at the next start (the time index
                # names the segment's newest timestamp, which retention goes by): without a file,
                # the start rebuilds it from the segment's batches.
                index.path.unlink(missing_ok=True)
                log.warning(
                    "could not write a segment index: removed, the next start rebuilds it",
                    index=str(index.path),
                    error=str(e),
                )

    def delete(self) -> None:
        # Nothing of a deleted segment is to be written: a full disk must not stop its deletion
        # (deleting is how space is freed), nor a deferred close bring its index file back.
        self.txn_index.forget_pending()
        with contextlib.suppress(OSError):
            self.close()
        for p in (self.path, self.index.path, self.time_index.path, self.txn_index.path):
            p.unlink(missing_ok=True)

    def close_indexes(self) -> None:
        """The segment stops being active: no more appends to its indexes or to the file."""
        self._release()
        self._close_offset_indexes()
        if not self._pins:  # else the flusher's thread may be syncing it: Segment.close closes it
            # An entry the file cannot take yet stays in memory (its warning is logged): the
            # roll goes on, and Segment.close tries again.
            with contextlib.suppress(OSError):
                self.txn_index.close()
