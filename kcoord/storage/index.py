"""Sparse offset and time indexes in Kafka's on-disk formats.

``.index``: 8-byte entries (int32 offset relative to the segment's base, int32 file position).
``.timeindex``: 12-byte entries (int64 timestamp, int32 relative offset), timestamps strictly
increasing: an entry is added when a batch raises the segment's largest timestamp.

Both are derived data, never fsynced, and rebuilt from the log whenever they fail a sanity
check. The active segment's entries live in memory until the segment stops being active or is
closed: its indexes are rebuilt from the log on every start anyway (its batches are always
CRC-checked), so writing them as they are made only added a dirty file per log to every fsync
round of ``log.flush.policy=always`` (a new time-index entry comes with nearly every batch a
coordinator appends).
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

from kcoord.storage.write_fully import write_fully


class _IndexFile:
    """The file side of an index: fixed-size entries, written out when the file is closed."""

    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fd: int | None = None
        self._on_disk = 0  # entries already in the open file

    def _read_entries(self) -> list[tuple[int, ...]] | None:
        """The entries on disk, or None if the file is missing or not whole entries."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        if len(data) % self.ENTRY.size:
            return None
        return list(self.ENTRY.iter_unpack(data))

    def _entries(self) -> list[tuple[int, ...]]:
        raise NotImplementedError

    def open_for_append(self) -> None:
        """Rewrite the file from the entries in memory and keep it open for later ones."""
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self._on_disk = 0
        self._write_out()

    def _write_out(self) -> None:
        entries = self._entries()[self._on_disk :]
        if entries and self._fd is not None:
            write_fully(self._fd, b"".join(self.ENTRY.pack(*e) for e in entries))
            self._on_disk += len(entries)

    def close(self) -> None:
        """Write out the entries made since the file was opened, and close it."""
        if self._fd is not None:
            try:
                self._write_out()
            finally:
                os.close(self._fd)
                self._fd = None


# An index entry's offset is relative to its segment's base, in 32 bits: a segment holds offsets
# base .. base + MAX_RELATIVE_OFFSET (a batch past that is corrupt, and appends roll before it).
MAX_RELATIVE_OFFSET = 0x7FFFFFFF


class OffsetIndex(_IndexFile):
    ENTRY = struct.Struct(">ii")  # relative offset, file position

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self.offsets: list[int] = []  # absolute offsets, increasing
        self.positions: list[int] = []

    def _entries(self) -> list[tuple[int, ...]]:
        return [(o - self.base_offset, p) for o, p in zip(self.offsets, self.positions, strict=True)]

    def load(self, log_size: int) -> bool:
        """Read the file; False (and empty) if it is missing or not a valid index for the log."""
        self.offsets, self.positions = [], []
        entries = self._read_entries()
        if entries is None:
            return False
        last_off, last_pos = -1, -1
        for rel, pos in entries:
            off = self.base_offset + rel
            if off <= last_off or pos <= last_pos or pos >= log_size:
                self.offsets, self.positions = [], []
                return False
            self.offsets.append(off)
            self.positions.append(pos)
            last_off, last_pos = off, pos
        return True

    def append(self, offset: int, position: int) -> None:
        self.offsets.append(offset)
        self.positions.append(position)

    def lookup(self, offset: int) -> int:
        """File position of the last indexed batch starting at or before ``offset`` (else 0)."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0


class TimeIndex(_IndexFile):
    ENTRY = struct.Struct(">qi")  # timestamp, relative offset

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        self.timestamps: list[int] = []  # strictly increasing
        self.offsets: list[int] = []

    def _entries(self) -> list[tuple[int, ...]]:
        return [(t, o - self.base_offset) for t, o in zip(self.timestamps, self.offsets, strict=True)]

    def load(self, next_offset: int) -> bool:
        self.timestamps, self.offsets = [], []
        entries = self._read_entries()
        if entries is None:
            return False
        last_ts, last_off = None, -1
        for ts, rel in entries:
            off = self.base_offset + rel
            if (last_ts is not None and ts <= last_ts) or off < last_off or off >= next_offset:
                self.timestamps, self.offsets = [], []
                return False
            self.timestamps.append(ts)
            self.offsets.append(off)
            last_ts, last_off = ts, off
        return True

    @property
    def max_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, max_timestamp: int, offset: int) -> None:
        """Record that the segment's largest timestamp became ``max_timestamp`` at ``offset``."""
        if self.timestamps and max_timestamp <= self.timestamps[-1]:
            return
        self.timestamps.append(max_timestamp)
        self.offsets.append(offset)

    def lookup(self, timestamp: int) -> int:
        """An offset at or before the first record with timestamp >= ``timestamp``."""
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else self.base_offset
