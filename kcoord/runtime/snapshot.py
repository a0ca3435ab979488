"""Coordinator snapshots: a restart replays the latest record of every key, not the whole log.

A coordinator log keeps every offset commit for offsets.history.retention.ms, so its replay grows
with the log while the state it builds grows only with the keys. A snapshot is what the log
cleaner would leave of the log up to an offset if it kept no history and dropped every tombstone:
the latest record of each live key, and the writes of transactions no marker has ended yet, each
with its original log offset and in log order. Loading it through the same loaders as the log and
then replaying the log from the offset it covers gives the state a full replay gives, by the
invariant compaction already relies on (docs/coordinator-records.md, "Snapshots", says why and
gives the file layout).

``LatestRecords`` keeps that view up to date from the bytes the shard appends and replays (the
runtime never decodes records for it); ``encode_snapshot``, ``store_snapshot`` and
``read_snapshot`` are the file.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path

import crc32c
import structlog

from kcoord.protocol.native import load_extension
from kcoord.storage.atomic import atomic_write

log = structlog.get_logger(__name__)

_codec = load_extension(
    "kcoord.runtime._snapshot_codec", Path(__file__).with_name("_snapshot_codec.c"), "the C snapshot codec"
)

SUFFIX = ".coordinator-snapshot"
MAGIC = b"KCSNAP\r\n"  # the CR LF catches a file mangled by a text-mode copy
VERSION = 1
NO_PRODUCER = -1

# magic | version int16 | crc uint32 (CRC-32C of everything after it)
_PREFIX = struct.Struct(">8shI")
# end offset int64 | entry count int32 | log name length int16 (then the name, then the entries)
_FIXED = struct.Struct(">qih")
# offset int64 | producer id int64 (-1: a plain record) | producer epoch int16 | key length int32
_ENTRY = struct.Struct(">qqhi")
_KEY_LEN = struct.Struct(">18xi")  # an entry's key length alone
_LEN = struct.Struct(">i")
_TOMBSTONE = _LEN.pack(-1)  # a value length of -1: no value

# (offset, producer id or -1, producer epoch, key, value or None for a tombstone)
Entry = tuple[int, int, int, bytes, bytes | None]


class SnapshotError(ValueError):
    """A snapshot file that must not be used: the log is replayed in full instead."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A snapshot file whose checksum, header and entry framing hold (``check_snapshot``)."""

    path: Path
    end_offset: int  # the log offset replay continues from: every record below it is in here
    data: bytes
    start: int  # where the entries begin in ``data``
    count: int

    def entries(self) -> Iterator[Entry]:
        """The entries in offset order, each built as it is reached: a load applies them one by
        one instead of holding a list of them all (their tuples were a third of a restart's
        memory peak, and stayed in the allocator's arenas after)."""
        return iter_entries(self.data, self.start, self.count)


class LatestRecords:
    """The latest record of every key of one coordinator log, as raw bytes with their offsets.

    A plain tombstone drops its key (replaying nothing for a key equals replaying its deletion).
    While a transaction has a pending write of a key, every plain record of that key after it is
    kept too (``held``), tombstones included: full replay applies them to the pending write (a
    plain commit means the pending one cannot win; an offset tombstone discards it), so they stay
    until the transaction ends. A committed transactional write becomes its key's latest record
    unless a later record of the key exists, the rule Kafka's coordinators and the cleaner both
    follow.
    """

    __slots__ = ("held", "latest", "pending", "pending_keys")

    def __init__(self) -> None:
        self.latest: dict[bytes, tuple[int, bytes | None]] = {}
        self.pending: dict[int, tuple[int, list[tuple[int, bytes, bytes | None]]]] = {}
        self.pending_keys: dict[bytes, int] = {}  # key -> pending writes of it, all producers
        self.held: dict[bytes, list[tuple[int, bytes | None]]] = {}

    def __len__(self) -> int:
        return len(self.entries())

    def plain(self, offset: int, key: bytes, value: bytes | None) -> None:
        if key in self.pending_keys:
            self.latest[key] = (offset, value)
            self.held.setdefault(key, []).append((offset, value))
        elif value is None:
            self.latest.pop(key, None)
        else:
            self.latest[key] = (offset, value)

    def transactional(
        self, offset: int, producer_id: int, producer_epoch: int, key: bytes, value: bytes | None
    ) -> None:
        found = self.pending.get(producer_id)
        if found is None:
            self.pending[producer_id] = (producer_epoch, [(offset, key, value)])
        else:
            found[1].append((offset, key, value))
            if producer_epoch != found[0]:
                self.pending[producer_id] = (producer_epoch, found[1])
        self.pending_keys[key] = self.pending_keys.get(key, 0) + 1

    def end_transaction(self, producer_id: int, commit: bool) -> None:
        found = self.pending.pop(producer_id, None)
        if found is None:
            return
        latest = self.latest
        keys = self.pending_keys
        for offset, key, value in found[1]:
            left = keys[key] - 1
            if left:
                keys[key] = left
            else:
                del keys[key]
                self.held.pop(key, None)
            current = latest.get(key)
            if commit and (current is None or current[0] < offset):
                latest[key] = (offset, value)
                current = latest[key]
            if current is not None and current[1] is None and key not in keys:
                del latest[key]  # a tombstone kept only for the transaction

    def pending_entries(self) -> list[Entry]:
        """The pending writes and the plain records held for them (small: open transactions)."""
        out: list[Entry] = []
        for pid, (epoch, writes) in self.pending.items():
            out.extend((o, pid, epoch, k, v) for o, k, v in writes)
        latest = self.latest
        for k, records in self.held.items():
            last = latest[k][0]
            out.extend((o, NO_PRODUCER, 0, k, v) for o, v in records if o != last)
        return out

    def entries(self) -> list[Entry]:
        """Every record a snapshot holds, unsorted (sorting is left to the writer's thread)."""
        out: list[Entry] = [(o, NO_PRODUCER, 0, k, v) for k, (o, v) in self.latest.items()]
        out.extend(self.pending_entries())
        return out


def snapshot_path(directory: Path, end_offset: int) -> Path:
    return directory / f"{end_offset:020d}{SUFFIX}"


def snapshot_files(directory: Path) -> list[Path]:
    """The snapshots in a log's directory, newest (highest offset) first."""
    found = [p for p in directory.glob(f"*{SUFFIX}") if p.name[: -len(SUFFIX)].isdigit()]
    return sorted(found, key=lambda p: int(p.name[: -len(SUFFIX)]), reverse=True)


def encode_snapshot(log_name: str, end_offset: int, entries: list[Entry]) -> bytearray:
    """The snapshot file's bytes. Each entry is appended to one buffer as its header, key, value
    length and value: slice assignments into a buffer sized first took ~1 us an entry (10 ms for
    10 k offsets, with the GIL held beside the event loop), these appends a third of that; a
    part per field joined at the end peaked at ~9x the file's size (70 MB for 100 k offsets),
    the buffer's growth at 2x."""
    entries.sort(key=itemgetter(0))
    buf = _header(log_name, end_offset, len(entries))
    pack_entry = _ENTRY.pack
    pack_len = _LEN.pack
    for offset, pid, epoch, key, value in entries:
        buf += pack_entry(offset, pid, epoch, len(key))
        buf += key
        if value is None:
            buf += _TOMBSTONE
        else:
            buf += pack_len(len(value))
            buf += value
    return _sealed(buf)


def _header(log_name: str, end_offset: int, count: int) -> bytearray:
    """The file's start, with room for its prefix (``_sealed`` fills it in)."""
    name = log_name.encode()
    buf = bytearray(_PREFIX.size)
    buf += _FIXED.pack(end_offset, count, len(name))
    buf += name
    return buf


def _sealed(buf: bytearray) -> bytearray:
    """``buf`` with its prefix: magic, version and the CRC-32C of everything after it."""
    _PREFIX.pack_into(buf, 0, MAGIC, VERSION, crc32c.crc32c(memoryview(buf)[_PREFIX.size :]))
    return buf


def encode_latest(
    log_name: str, end_offset: int, latest: dict[bytes, tuple[int, bytes | None]], pending: list[Entry]
) -> bytearray:
    """``encode_snapshot`` of a shard's latest records (plain, ``{key: (offset, value)}``) and its
    pending writes: the entries are written by the C codec when it is built (``_snapshot_codec.c``,
    ~4x faster, and holding the GIL once instead of sharing it with the event loop in 0.5 ms slices)."""
    if _codec is None:
        entries: list[Entry] = [(o, NO_PRODUCER, 0, k, v) for k, (o, v) in latest.items()]
        entries.extend(pending)
        return encode_snapshot(log_name, end_offset, entries)
    body, count = _codec.snapshot_entries(latest, pending, NO_PRODUCER)
    buf = _header(log_name, end_offset, count)
    buf += body
    return _sealed(buf)


def decode_snapshot(data: bytes | bytearray, log_name: str) -> tuple[int, list[Entry]]:
    """(end offset, entries) of a snapshot of ``log_name``; SnapshotError if it is not one."""
    data = bytes(data)  # the entries' keys are dict keys
    end_offset, start, count = check_snapshot(data, log_name)
    return end_offset, list(iter_entries(data, start, count))


def check_snapshot(data: bytes, log_name: str) -> tuple[int, int, int]:
    """(end offset, where the entries begin, how many) of a snapshot of ``log_name``, once its
    checksum, its header and the framing of every entry hold; SnapshotError otherwise. Only the
    lengths are read: a snapshot that fails here was never applied, so the log is replayed in
    full from a clean state."""
    if len(data) < _PREFIX.size + _FIXED.size:
        raise SnapshotError(f"{len(data)} bytes is shorter than a snapshot header")
    magic, version, crc = _PREFIX.unpack_from(data)
    if magic != MAGIC:
        raise SnapshotError("not a coordinator snapshot (bad magic)")
    if version != VERSION:
        raise SnapshotError(f"snapshot version {version}, this broker reads {VERSION}")
    if crc32c.crc32c(memoryview(data)[_PREFIX.size :]) != crc:
        raise SnapshotError("snapshot CRC mismatch (corrupt or truncated)")
    end_offset, count, name_len = _FIXED.unpack_from(data, _PREFIX.size)
    pos = _PREFIX.size + _FIXED.size
    name = data[pos : pos + name_len].decode()
    if name != log_name:
        raise SnapshotError(f"snapshot of log {name}, not of {log_name}")
    pos += name_len
    start = pos
    unpack_key_len = _KEY_LEN.unpack_from
    unpack_len = _LEN.unpack_from
    try:
        for _ in range(count):
            (key_len,) = unpack_key_len(data, pos)
            if key_len < 0:
                raise SnapshotError(f"snapshot entry at byte {pos} has key length {key_len}")
            pos += _ENTRY.size + key_len
            (value_len,) = unpack_len(data, pos)
            pos += 4 + max(value_len, 0)
    except struct.error as e:
        raise SnapshotError(f"snapshot body ends early: {e}") from None
    if pos != len(data):
        raise SnapshotError(f"snapshot body has {len(data) - pos} bytes after its last entry")
    return end_offset, start, count


def iter_entries(data: bytes, pos: int, count: int) -> Iterator[Entry]:
    """The ``count`` entries from ``pos`` of a snapshot ``check_snapshot`` accepted."""
    unpack = _ENTRY.unpack_from
    unpack_len = _LEN.unpack_from
    entry_size = _ENTRY.size
    for _ in range(count):
        offset, pid, epoch, key_len = unpack(data, pos)
        pos += entry_size
        key = data[pos : pos + key_len]
        pos += key_len
        (value_len,) = unpack_len(data, pos)
        pos += 4
        if value_len < 0:
            value = None
        else:
            value = data[pos : pos + value_len]
            pos += value_len
        yield offset, pid, epoch, key, value


def store_snapshot(directory: Path, end_offset: int, data: bytes | bytearray) -> Path:
    """Write an encoded snapshot atomically (temp file, fsync, rename, directory fsync), then
    remove the older ones. Safe off the event loop: it touches only its arguments and the files."""
    path = snapshot_path(directory, end_offset)
    atomic_write(path, data)
    for old in snapshot_files(directory):
        if old != path:
            old.unlink(missing_ok=True)
    return path


def delete_snapshots(directory: Path, below: int | None = None) -> None:
    """Remove the snapshots (those covering less than ``below``, if given), durably."""
    doomed = [p for p in snapshot_files(directory) if below is None or int(p.name[: -len(SUFFIX)]) < below]
    for p in doomed:
        p.unlink(missing_ok=True)
    for tmp in directory.glob(f"*{SUFFIX}.tmp"):
        tmp.unlink(missing_ok=True)
    if doomed:
        _fsync_dir(directory)


def read_snapshot(directory: Path, log_name: str, log_end_offset: int) -> Snapshot | None:
    """The newest usable snapshot of the log; unusable ones are logged and deleted (a snapshot
    beyond the log's end would otherwise apply to whatever is appended at those offsets next)."""
    for path in snapshot_files(directory):
        try:
            data = path.read_bytes()
            end_offset, start, count = check_snapshot(data, log_name)
            if end_offset > log_end_offset:
                raise SnapshotError(
                    f"snapshot covers offsets up to {end_offset}, the log ends at {log_end_offset} "
                    "(truncated by recovery?)"
                )
            if path.name != snapshot_path(directory, end_offset).name:
                raise SnapshotError(f"snapshot file name does not match its offset {end_offset}")
        except (OSError, SnapshotError, UnicodeDecodeError) as e:
            log.warning("ignoring coordinator snapshot; replaying the log", snapshot=str(path), reason=str(e))
            path.unlink(missing_ok=True)
            _fsync_dir(directory)
            continue
        return Snapshot(path, end_offset, data, start, count)
    return None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
