"""A segment's transaction index: ``<20-digit base offset>.txnindex``, Kafka's byte layout.

One 34-byte entry per aborted transaction whose ABORT marker is in the segment, in marker order
(Kafka's AbortedTxn): version int16 (0), producerId int64, firstOffset int64, lastOffset int64
(the marker's offset), lastStableOffset int64 (the LSO right after the marker). Read-committed
fetches collect the entries overlapping what they return; ``lastStableOffset`` lets the search
stop early, as Kafka's TransactionIndex.collectAbortedTxns. The file is created with its first
entry. Entries are kept in memory too (there are few): the file is read once, at open.

The index is derived data: the partition's producer state rebuilds it from the log after an
unclean shutdown (``truncate_to`` then appends), which is why its writes are only fsynced with
the segment.

An entry the file cannot take (a full disk) stays in memory, which is what read-committed fetches
read, and is written with the next entry or at close: the marker it belongs to is already in the
log, so the append must not fail, or the marker would be written again. A torn entry is cut off
at once, so that later entries stay whole. ``complete`` says whether the file holds every entry;
``close`` raises when it still cannot, and the partition then has its transaction indexes
rebuilt from the log at the next start (``Partition.drop_producer_snapshots``).
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path
from typing import NamedTuple

import structlog

from kcoord.storage.sync_thread import FSYNC, SyncOp
from kcoord.storage.write_fully import write_fully

log = structlog.get_logger(__name__)

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(
            CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )

    @classmethod
    def decode(cls, buf: bytes, pos: int = 0) -> AbortedTxn:
        version, pid, first, last, lso = ENTRY.unpack_from(buf, pos)
        if version > CURRENT_VERSION:
            raise ValueError(f"aborted transaction entry version {version} (this broker writes 0)")
        return cls(pid, first, last, lso)


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        self._on_disk = 0  # entries the file holds: the first ones
        self._fd = -1

    def load(self) -> None:
        """Read the entries on disk; a torn trailing entry (a crash mid-write) is dropped."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self.entries = []
            return
        whole = len(data) - len(data) % ENTRY_SIZE
        self.entries = [AbortedTxn.decode(data, pos) for pos in range(0, whole, ENTRY_SIZE)]
        self._on_disk = len(self.entries)
        if whole != len(data):
            log.warning("dropping a torn transaction index entry", index=str(self.path))
            os.truncate(self.path, whole)

    def append(self, txn: AbortedTxn) -> None:
        if self.entries and self.entries[-1].last_offset >= txn.last_offset:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} after one ending at "
                f"{self.entries[-1].last_offset} in {self.path}"
            )
        self.entries.append(txn)
        try:
            self._write_out()
        except OSError as e:
            log.warning(
                "could not write a transaction index entry: kept in memory, written with the next "
                "one or at close",
                index=str(self.path),
                error=str(e),
            )

    @property
    def complete(self) -> bool:
        return self._on_disk == len(self.entries)

    def write_pending(self) -> bool:
        """Write the entries the file lacks, if the disk takes them now; whether it holds all."""
        try:
            self._write_out()
        except OSError:
            return False
        return True

    def forget_pending(self) -> None:
        """The segment is being deleted: what its file lacks is never to be written."""
        del self.entries[self._on_disk :]

    def _write_out(self) -> None:
        """Write the entries the file lacks; on a failure, cut off what part of them it took."""
        if self.complete:
            return
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            write_fully(self._fd, b"".join(e.encode() for e in self.entries[self._on_disk :]))
        except OSError:
            try:
                os.ftruncate(self._fd, self._on_disk * ENTRY_SIZE)  # appends go on from a whole entry
            except OSError:  # not even that: the file starts over, every entry pending
                os.close(self._fd)
                self._fd = -1
                self.path.unlink(missing_ok=True)
                self._on_disk = 0
            raise
        self._on_disk = len(self.entries)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after ``offset`` (Kafka's truncateTo)."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) == len(self.entries):
            return
        self.entries = keep
        self._on_disk = min(self._on_disk, len(keep))
        if not keep:
            self._close_file()
            self.path.unlink(missing_ok=True)
            return
        with contextlib.suppress(FileNotFoundError):  # no entry was ever written
            os.truncate(self.path, self._on_disk * ENTRY_SIZE)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound), and whether the search is complete
        (an entry's last stable offset reached the bound: later segments cannot overlap)."""
        found = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                found.append(e)
            if e.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def sync_ops(self, ops: list[SyncOp]) -> None:
        """Add this index's fsync to a flush round's operations (when it has a file open)."""
        if self._fd >= 0:
            ops.append((FSYNC, self._fd, 0, 0))

    def close(self) -> None:
        """Write what the file lacks, sync it and close it; raises if the file still lacks
        entries (closed all the same)."""
        try:
            self._write_out()
        finally:
            self._close_file()

    def _close_file(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete(self) -> None:
        self._close_file()
        self.path.unlink(missing_ok=True)
        self.entries = []
        self._on_disk = 0
