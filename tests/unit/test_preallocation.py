"""Preallocated segments (``preallocate`` / ``log.preallocate``): the active segment's file is
grown ahead of its appends and trimmed to its data when it stops being active; after a crash,
opening the log cuts the zeros off and loses nothing."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import structlog

from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig
from kcoord.dataplane.partitions import PartitionManager
from kcoord.storage import preallocation
from kcoord.storage.dump import dump_path
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig
from kcoord.storage.preallocation import PREALLOCATE_CHUNK_BYTES, PREALLOCATE_MIN_BYTES
from tests.unit.logutil import T0, append, open_log, read_all


@pytest.fixture
def can_grow(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    fd = os.open(probe, os.O_CREAT | os.O_RDWR)
    try:
        if preallocation.grow(fd, 0, 1 << 20) is not None:
            pytest.skip("this filesystem cannot preallocate")
    finally:
        os.close(fd)
        probe.unlink()


def file_size(path: Path) -> int:
    return os.path.getsize(path)


def test_the_active_file_runs_ahead_of_its_data_and_is_trimmed_on_close(
    tmp_path: Path, can_grow: None
) -> None:
    log = open_log(tmp_path)
    append(log, [T0] * 3, value_size=1000)
    seg = log.active
    assert file_size(seg.path) == PREALLOCATE_MIN_BYTES > seg.size  # a new segment: 1 MiB ahead
    with open(seg.path, "rb") as f:
        f.seek(seg.size)
        assert f.read(1 << 16) == bytes(1 << 16)  # past the data: zeros
    for _ in range(200):  # 20 MB: the file grows by more as the segment holds more
        append(log, [T0] * 100, value_size=1000)
    assert seg.size > PREALLOCATE_CHUNK_BYTES and file_size(seg.path) > seg.size
    assert file_size(seg.path) - seg.size > PREALLOCATE_MIN_BYTES
    assert len(read_all(log)) == 20_003  # reads stop where the data does
    assert "bytes of preallocated space (zeros) after the last batch" in list(dump_path(seg.path))[-1]
    os.utime(seg.path, ns=(1_000_000_000, 1_000_000_000))
    log.close()
    assert file_size(seg.path) == seg.size
    assert os.stat(seg.path).st_mtime_ns == 1_000_000_000  # trimming wrote no data
    reopened = open_log(tmp_path)
    assert len(read_all(reopened)) == 20_003 and reopened.log_end_offset == 20_003
    reopened.close()


def test_a_rolled_segment_is_trimmed(tmp_path: Path, can_grow: None) -> None:
    log = open_log(tmp_path, segment_bytes=1 << 16)
    append(log, [T0] * 10, value_size=1000)
    first = log.active
    assert file_size(first.path) == 1 << 16  # the chunk is capped by segment.bytes
    while log.active is first:
        append(log, [T0] * 10, value_size=1000)
    assert file_size(first.path) == first.size
    assert file_size(log.active.path) == 1 << 16
    log.close()


@pytest.mark.parametrize("zeros", [False, True], ids=["reserved", "written zeros"])
def test_a_crash_leaves_zeros_that_opening_cuts_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], zeros: bool
) -> None:
    structlog.configure(logger_factory=structlog.PrintLoggerFactory())
    log = open_log(tmp_path, preallocate_zeros=zeros)
    append(log, [T0] * 5, value_size=100)
    path = log.active.path
    data = log.active.size
    # kill -9: nothing is closed or trimmed.
    assert file_size(path) == (data + preallocation.ZEROS_CHUNK_BYTES if zeros else PREALLOCATE_MIN_BYTES)
    reopened = open_log(tmp_path, unclean=True, preallocate_zeros=zeros)
    assert reopened.log_end_offset == 5 and file_size(path) == data
    out = capsys.readouterr().out
    assert "trimming preallocated space" in out and "torn" not in out
    append(reopened, [T0] * 5, value_size=100)
    assert [r[0] for r in read_all(reopened)] == list(range(10))
    reopened.close()
    log.close()  # the crashed process's view, older than the file: it never shortens it
    again = open_log(tmp_path, preallocate_zeros=zeros)
    assert [r[0] for r in read_all(again)] == list(range(10))
    again.close()


@pytest.mark.parametrize("behind", [1, 2], ids=["before the active", "two before the active"])
def test_a_lost_trim_behind_the_active_segment_loses_no_segment(
    tmp_path: Path, behind: int, can_grow: None
) -> None:
    """A crash right after a roll can leave the rolled segment untrimmed: its zeros are not a
    torn write, so the segments after it stay (a torn write would drop them)."""
    log = open_log(tmp_path, segment_bytes=4096)
    while len(log.segments) < 4:
        append(log, [T0] * 4, value_size=200)
    end = log.log_end_offset
    untrimmed = log.segments[-1 - behind].path
    log.close()
    os.truncate(untrimmed, 4096 * 4)  # as it was before its trim
    reopened = open_log(tmp_path, unclean=True)
    assert reopened.log_end_offset == end and len(reopened.segments) == 4
    assert [r[0] for r in read_all(reopened)] == list(range(end))
    assert file_size(untrimmed) < 4096 * 4
    reopened.close()


def test_a_torn_write_in_preallocated_space_is_still_a_torn_write(tmp_path: Path, can_grow: None) -> None:
    log = open_log(tmp_path)
    append(log, [T0] * 5, value_size=100)
    seg = log.active
    with open(seg.path, "r+b") as f:
        f.seek(seg.size)
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x01\x00half a batch")
    reopened = open_log(tmp_path, unclean=True)
    assert reopened.log_end_offset == 5 and file_size(seg.path) == seg.size
    reopened.close()
    log.close()


def test_preallocate_off_grows_the_file_as_it_writes(tmp_path: Path) -> None:
    log = open_log(tmp_path, preallocate=False)
    append(log, [T0] * 3, value_size=1000)
    assert file_size(log.active.path) == log.active.size
    log.close()


def test_the_topic_config_and_its_broker_synonym_reach_the_log(tmp_path: Path) -> None:
    flusher = Flusher("always", directory=tmp_path)
    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), flusher, ManualClock())
    assert pm.log_config({}).preallocate is True
    assert pm.log_config({"preallocate": "false"}).preallocate is False
    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path), log_preallocate=False), flusher, ManualClock())
    assert pm.log_config({}).preallocate is False
    assert pm.log_config({"preallocate": "true"}).preallocate is True


def test_log_cache_retain_bytes_reaches_the_partition_logs(tmp_path: Path) -> None:
    flusher = Flusher("always", directory=tmp_path)
    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), flusher, ManualClock())
    assert pm.log_config({}).cache_retain_bytes == 16 << 20
    config = BrokerConfig(log_dirs=str(tmp_path), log_cache_retain_bytes=-1)
    pm = PartitionManager(config, flusher, ManualClock())
    assert pm.log_config({}).cache_retain_bytes == -1


@pytest.mark.parametrize("tail", [bytes(4096), b"\x00\x00\x00\x00\x00\x00\x00\x09half a batch"])
def test_a_trusted_segment_with_bytes_past_its_batches_is_recovered(tmp_path: Path, tail: bytes) -> None:
    """A log opened without recovery (a coordinator log after a clean shutdown) whose active
    segment has bytes past its last batch: they are cut off, so that the next appends follow
    the data instead of bytes a later recovery would stop at, taking them along."""
    config = LogConfig()
    log = Log.open(tmp_path, config, Flusher("os"), unclean=False, trust_clean_close=True)
    append(log, [T0] * 5, value_size=100)
    path = log.active.path
    log.close()
    with open(path, "ab") as f:
        f.write(tail)
    reopened = Log.open(tmp_path, config, Flusher("os"), unclean=False, trust_clean_close=True)
    assert reopened.log_end_offset == 5
    append(reopened, [T0] * 5, value_size=100)
    reopened.close()
    recovered = Log.open(tmp_path, config, Flusher("os"), unclean=True)
    assert [r[0] for r in read_all(recovered)] == list(range(10))
    recovered.close()


# --- coordinator logs: space grown by writing zeros ------------------------------------------
_FS_IOC_FIEMAP = 0xC020660B
_FIEMAP_FLAG_SYNC = 0x1
_FIEMAP_EXTENT_UNWRITTEN = 0x800
_FIEMAP_EXTENT_LAST = 0x1
_EXTENTS = 64


def unwritten_extents(path: Path) -> list[tuple[int, int]] | None:
    """(offset, length) of the file's unwritten extents (blocks reserved, never written), from
    the FIEMAP ioctl after a sync; None where the filesystem has no FIEMAP (tmpfs)."""
    import fcntl
    import struct

    found: list[tuple[int, int]] = []
    start = 0
    with open(path, "rb") as f:
        while True:
            request = bytearray(
                struct.pack("=QQIIII", start, (1 << 64) - 1 - start, _FIEMAP_FLAG_SYNC, 0, _EXTENTS, 0)
            )
            request += bytes(56 * _EXTENTS)
            try:
                fcntl.ioctl(f.fileno(), _FS_IOC_FIEMAP, request)
            except OSError:
                return None
            mapped = struct.unpack_from("=I", request, 20)[0]
            last = False
            for i in range(mapped):
                logical, _physical, length = struct.unpack_from("=QQQ", request, 32 + 56 * i)
                flags = struct.unpack_from("=I", request, 32 + 56 * i + 40)[0]
                if flags & _FIEMAP_EXTENT_UNWRITTEN:
                    found.append((logical, length))
                start = logical + length
                last = bool(flags & _FIEMAP_EXTENT_LAST)
            if last or mapped == 0:
                return found


def test_coordinator_segments_grow_by_written_zeros(tmp_path: Path, can_grow: None) -> None:
    """Reserved space is unwritten extents, whose conversion each sync into a new block commits
    to the journal; a coordinator log's space ahead of its data is written zeros instead, never
    more than a chunk past the append that grew it."""
    reserved = open_log(tmp_path / "topic")
    append(reserved, [T0] * 5, value_size=100)
    found = unwritten_extents(reserved.active.path)
    fiemap = found is not None
    assert found or not fiemap  # the check can tell the two apart
    reserved.close()

    log = open_log(tmp_path / "coordinator", preallocate_zeros=True)
    seg = log.active
    for n in range(1, 3000):  # ~330 KB a round of 100 appends: the file grows a few times
        append(log, [T0], value_size=100)
        if n % 100 == 0:
            assert seg.size < file_size(seg.path) <= seg.size + preallocation.ZEROS_CHUNK_BYTES
            os.fsync(seg.fd)
            assert unwritten_extents(seg.path) == ([] if fiemap else None)
    with open(seg.path, "rb") as f:
        f.seek(seg.size)
        assert f.read() == bytes(file_size(seg.path) - seg.size)
    assert len(read_all(log)) == 2999
    log.close()
    assert file_size(seg.path) == seg.size  # trimmed to its data, as reserved space is
    reopened = open_log(tmp_path / "coordinator", preallocate_zeros=True)
    assert len(read_all(reopened)) == 2999
    reopened.close()


def test_zeros_the_disk_refuses_part_way_leave_the_appends_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk stops the zeros part of the way: the file is as long as they got, appends go
    on into it and past it, and closing trims the file to its data."""
    wrote = preallocation.write_zeros

    def full_disk(fd: int, start: int, end: int) -> int | None:
        wrote(fd, start, start + 4096)
        return errno.ENOSPC

    monkeypatch.setattr(preallocation, "write_zeros", full_disk)
    log = open_log(tmp_path, preallocate_zeros=True)
    for _ in range(20):  # 20 x ~1.1 KB: past the 4 KiB of zeros
        append(log, [T0] * 10, value_size=100)
    seg = log.active
    assert file_size(seg.path) >= seg.size > 4096
    assert len(read_all(log)) == 200
    log.close()
    assert file_size(seg.path) == seg.size
    reopened = open_log(tmp_path, preallocate_zeros=True)
    assert len(read_all(reopened)) == 200
    reopened.close()
