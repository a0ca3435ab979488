"""Every file kcoord writes with ``os.write`` gets every byte though a write takes only part of
what it is given, as a filling disk's writes do (storage/write_fully.py); a write that then fails
leaves the log as it was. Here ``os.write`` takes at most a few bytes a call, then, where a test
says so, fails with ENOSPC."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kcoord.runtime.snapshot import read_snapshot, store_snapshot
from kcoord.storage.atomic import atomic_write
from kcoord.storage.cleaner import clean
from kcoord.storage.index import OffsetIndex
from kcoord.storage.log import Log
from kcoord.storage.txn_index import AbortedTxn, TransactionIndex
from tests.unit.test_cleaner import DAY, contents, fill, open_log

_write = os.write


class _FillingDisk:
    """``os.write`` that takes at most ``step`` bytes a call, and fails with ENOSPC once
    ``room`` bytes were taken (None: never)."""

    def __init__(self, step: int = 7, room: int | None = None) -> None:
        self.step = step
        self.room = room
        self.calls = 0

    def __call__(self, fd: int, data: bytes | memoryview) -> int:
        self.calls += 1
        n = min(len(data), self.step)
        if self.room is not None:
            if self.room == 0:
                raise OSError(errno.ENOSPC, "No space left on device")
            n = min(n, self.room)
            self.room -= n
        return _write(fd, memoryview(data)[:n])


@pytest.fixture
def short_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[_FillingDisk]:
    disk = _FillingDisk()
    monkeypatch.setattr(os, "write", disk)
    yield disk
    monkeypatch.undo()


def test_a_file_replaced_atomically_gets_every_byte(tmp_path: Path, short_writes: _FillingDisk) -> None:
    data = bytes(range(256)) * 4
    atomic_write(tmp_path / "topics.json", data)
    assert (tmp_path / "topics.json").read_bytes() == data
    assert short_writes.calls > 100


def test_a_file_the_disk_cannot_hold_is_not_replaced_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "topics.json").write_bytes(b"old")
    monkeypatch.setattr(os, "write", _FillingDisk(room=10))
    with pytest.raises(OSError):
        atomic_write(tmp_path / "topics.json", b"new" * 100)
    monkeypatch.undo()
    assert (tmp_path / "topics.json").read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics.json"]


def test_an_offset_index_gets_every_entry(tmp_path: Path, short_writes: _FillingDisk) -> None:
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0)
    index.open_for_append()
    for i in range(50):
        index.append(i * 10, i * 4096)
    index.close()
    reread = OffsetIndex(tmp_path / "00000000000000000000.index", 0)
    assert reread.load(1 << 30)
    assert reread.offsets == [i * 10 for i in range(50)]
    assert reread.positions == [i * 4096 for i in range(50)]


def test_the_aborted_transaction_index_gets_every_entry(tmp_path: Path, short_writes: _FillingDisk) -> None:
    entries = [AbortedTxn(7, i * 10, i * 10 + 5, i * 10 + 6) for i in range(10)]
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    for txn in entries:
        index.append(txn)
    index.close()
    reread = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    reread.load()
    assert reread.entries == entries


def test_a_coordinator_snapshot_gets_every_byte(tmp_path: Path, short_writes: _FillingDisk) -> None:
    # Not a decodable snapshot: read_snapshot must refuse the file for what it holds, not for
    # missing bytes; the bytes themselves are compared.
    data = b"KCSNAP\r\n" + os.urandom(300)
    path = store_snapshot(tmp_path, 5, data)
    assert path.read_bytes() == data
    assert read_snapshot(tmp_path, "p", 5) is None


def _rolled(directory: Path, now: int) -> Log:
    """test_cleaner's log, filled and rolled: ready for a cleaning pass."""
    lg = open_log(directory)
    fill(lg, now)
    lg.roll()
    return lg


def test_a_cleaned_segment_gets_every_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    now = 10 * DAY
    expected_log = _rolled(tmp_path / "expected", now)
    asyncio.run(clean(expected_log, now, DAY))

    lg = _rolled(tmp_path / "p", now)
    disk = _FillingDisk(step=13)
    monkeypatch.setattr(os, "write", disk)
    asyncio.run(clean(lg, now, DAY))
    monkeypatch.undo()
    assert disk.calls > 10
    assert contents(lg) == contents(expected_log)
    lg.close()
    reopened = open_log(tmp_path / "p")
    assert contents(reopened) == contents(expected_log)


def test_a_cleaning_pass_the_disk_cannot_hold_leaves_the_log_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = 10 * DAY
    lg = _rolled(tmp_path / "p", now)
    before = contents(lg)
    monkeypatch.setattr(os, "write", _FillingDisk(step=13, room=100))
    with pytest.raises(OSError):
        asyncio.run(clean(lg, now, DAY))
    monkeypatch.undo()
    assert not list((tmp_path / "p").glob("*.cleaned"))  # the space it took is given back
    assert contents(lg) == before
    lg.close()
    reopened = open_log(tmp_path / "p")
    assert contents(reopened) == before
    assert not list((tmp_path / "p").glob("*.cleaned"))


def test_a_transaction_index_entry_the_disk_refuses_is_kept_and_written_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entries = [AbortedTxn(7, i * 10, i * 10 + 5, i * 10 + 6) for i in range(4)]
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    index.append(entries[0])
    # Room for part of one entry: the torn bytes are cut off, the entry is kept in memory.
    monkeypatch.setattr(os, "write", _FillingDisk(step=7, room=20))
    index.append(entries[1])
    assert index.entries == entries[:2]
    assert not index.complete
    assert (tmp_path / "00000000000000000000.txnindex").stat().st_size == 34
    index.append(entries[2])  # still no room
    monkeypatch.undo()
    index.append(entries[3])  # room again: the file gets every entry, in order
    assert index.complete
    index.close()
    reread = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    reread.load()
    assert reread.entries == entries


def test_a_transaction_index_the_disk_never_takes_raises_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = TransactionIndex(tmp_path / "00000000000000000000.txnindex")
    monkeypatch.setattr(os, "write", _FillingDisk(room=0))
    index.append(AbortedTxn(7, 0, 5, 6))
    with pytest.raises(OSError):
        index.close()
    monkeypatch.undo()
    assert index.entries == [AbortedTxn(7, 0, 5, 6)]


def test_a_cleaned_segment_whose_indexes_the_disk_refuses_is_installed_and_rebuilt_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cleaner deletes the old segments before the new ones' indexes are written: those that
    cannot be (a full disk) serve from memory, and the next start rebuilds their files."""
    now = 10 * DAY
    expected_log = _rolled(tmp_path / "expected", now)
    asyncio.run(clean(expected_log, now, DAY))

    lg = _rolled(tmp_path / "p", now)
    asyncio.run(clean(lg, now, DAY))  # first pass: the segments' own indexes, written
    fill(lg, now)
    fill(expected_log, now)
    lg.roll()
    expected_log.roll()
    asyncio.run(clean(expected_log, now, DAY))

    def full_disk(self: OffsetIndex) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(OffsetIndex, "open_for_append", full_disk)
    asyncio.run(clean(lg, now, DAY))
    monkeypatch.undo()
    assert contents(lg) == contents(expected_log)
    assert lg.segments[0].position_of(contents(lg)[-1][0]) is not None  # the index in memory serves
    lg.close()
    reopened = open_log(tmp_path / "p")
    assert contents(reopened) == contents(expected_log)
