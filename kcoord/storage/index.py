"""Sparse offset and time indexes in Kafka's on-disk formats.

``.index``: 8-byte entries (int32 offset relative to the segment's base, int32 file position).
``.timeindex``: 12-byte entries (int64 timestamp, int32 relative offset), timestamps strictly
increasing: an entry is added when a batch raises the segment's largest timestamp.

Both are derived data: entries are appended to the file as they are made, never fsynced, and
rebuilt from the log whenever they fail a sanity check.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class OffsetIndex:
    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.offsets: list[int] = []  # absolute offsets, increasing
        self.positions: list[int] = []
        self._fd: int | None = None

    def load(self, log_size: int) -> bool:
        """Read the file; False (and empty) if it is missing or not a valid index for the log."""
        self.offsets, self.positions = [], []
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % _OFFSET_ENTRY.size:
            return False
        last_off, last_pos = -1, -1
        for rel, pos in _OFFSET_ENTRY.iter_unpack(data):
            off = self.base_offset + rel
            if off <= last_off or pos <= last_pos or pos >= log_size:
                self.offsets, self.positions = [], []
                return False
            self.offsets.append(off)
            self.positions.append(pos)
            last_off, last_pos = off, pos
        return True

    def open_for_append(self, truncate: bool) -> None:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else os.O_APPEND)
        self._fd = os.open(self.path, flags, 0o644)
        if truncate:
            data = b"".join(
                _OFFSET_ENTRY.pack(o - self.base_offset, p)
                for o, p in zip(self.offsets, self.positions, strict=True)
            )
            if data:
                os.write(self._fd, data)

    def append(self, offset: int, position: int) -> None:
        self.offsets.append(offset)
        self.positions.append(position)
        if self._fd is not None:
            os.write(self._fd, _OFFSET_ENTRY.pack(offset - self.base_offset, position))

    def lookup(self, offset: int) -> int:
        """File position of the last indexed batch starting at or before ``offset`` (else 0)."""
        i = bisect.bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        i = bisect.bisect_left(self.positions, position)
        del self.offsets[i:], self.positions[i:]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class TimeIndex:
    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.timestamps: list[int] = []  # strictly increasing
        self.offsets: list[int] = []
        self._fd: int | None = None

    def load(self, next_offset: int) -> bool:
        self.timestamps, self.offsets = [], []
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        if len(data) % _TIME_ENTRY.size:
            return False
        last_ts, last_off = None, -1
        for ts, rel in _TIME_ENTRY.iter_unpack(data):
            off = self.base_offset + rel
            if (last_ts is not None and ts <= last_ts) or off < last_off or off >= next_offset:
                self.timestamps, self.offsets = [], []
                return False
            self.timestamps.append(ts)
            self.offsets.append(off)
            last_ts, last_off = ts, off
        return True

    def open_for_append(self, truncate: bool) -> None:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else os.O_APPEND)
        self._fd = os.open(self.path, flags, 0o644)
        if truncate:
            data = b"".join(
                _TIME_ENTRY.pack(t, o - self.base_offset)
                for t, o in zip(self.timestamps, self.offsets, strict=True)
            )
            if data:
                os.write(self._fd, data)

    @property
    def max_timestamp(self) -> int:
        return self.timestamps[-1] if self.timestamps else -1

    def maybe_append(self, max_timestamp: int, offset: int) -> None:
        """Record that the segment's largest timestamp became ``max_timestamp`` at ``offset``."""
        if self.timestamps and max_timestamp <= self.timestamps[-1]:
            return
        self.timestamps.append(max_timestamp)
        self.offsets.append(offset)
        if self._fd is not None:
            os.write(self._fd, _TIME_ENTRY.pack(max_timestamp, offset - self.base_offset))

    def lookup(self, timestamp: int) -> int:
        """An offset at or before the first record with timestamp >= ``timestamp``."""
        i = bisect.bisect_left(self.timestamps, timestamp) - 1
        return self.offsets[i] if i >= 0 else self.base_offset

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
