"""The active segment reserves its disk blocks ahead of its appends (``preallocate``), without
changing the file's size, and gives back what it did not use when it stops being active."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kcoord.config import BrokerConfig
from kcoord.dataplane.partitions import PartitionManager
from kcoord.storage import preallocation
from kcoord.storage.preallocation import PREALLOCATE_CHUNK_BYTES
from tests.unit.logutil import T0, append, open_log, read_all


def allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


@pytest.fixture
def can_reserve(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    fd = os.open(probe, os.O_CREAT | os.O_RDWR)
    try:
        if not preallocation.reserve(fd, 0, 1 << 20) or allocated(probe) < 1 << 20:
            pytest.skip("this filesystem cannot reserve blocks past the end of a file")
    finally:
        os.close(fd)
        probe.unlink()


def test_appends_reserve_blocks_past_the_end_and_the_size_stays_the_data(
    tmp_path: Path, can_reserve: None
) -> None:
    log = open_log(tmp_path)
    append(log, [T0] * 3, value_size=1000)
    seg = log.active
    assert os.path.getsize(seg.path) == seg.size < 4096
    assert allocated(seg.path) >= PREALLOCATE_CHUNK_BYTES
    # Appends within the reservation do not ask again; the one that passes it reserves the next.
    for _ in range(3):
        append(log, [T0] * 100, value_size=1000)
    assert os.path.getsize(seg.path) == seg.size and allocated(seg.path) >= PREALLOCATE_CHUNK_BYTES
    log.close()
    # Closing gives the unused blocks back; what was written stays, and reads the same.
    assert allocated(seg.path) < seg_bytes_rounded(seg.size) + 4096 * 4
    reopened = open_log(tmp_path, unclean=True)
    assert len(read_all(reopened)) == 303
    reopened.close()


def seg_bytes_rounded(size: int) -> int:
    return (size + 4095) // 4096 * 4096


def test_a_rolled_segment_gives_its_reservation_back_and_keeps_its_mtime(
    tmp_path: Path, can_reserve: None
) -> None:
    log = open_log(tmp_path, segment_bytes=1 << 16)
    append(log, [T0] * 10, value_size=1000)
    first = log.active
    assert allocated(first.path) >= 1 << 16  # the chunk is capped by segment.bytes
    while log.active is first:
        append(log, [T0] * 10, value_size=1000)
    assert allocated(first.path) <= seg_bytes_rounded(first.size)
    active = log.active
    assert allocated(active.path) >= 1 << 16
    os.utime(active.path, ns=(1_000_000_000, 1_000_000_000))  # written long ago
    log.close()
    assert allocated(active.path) <= seg_bytes_rounded(active.size)
    assert os.stat(active.path).st_mtime_ns == 1_000_000_000


def test_a_crash_leaves_the_reservation_and_recovery_reads_the_data(
    tmp_path: Path, can_reserve: None
) -> None:
    log = open_log(tmp_path)
    append(log, [T0] * 5, value_size=100)
    path = log.active.path
    size = os.path.getsize(path)
    # kill -9: nothing is closed; the file holds its data and blocks reserved past its end.
    reopened = open_log(tmp_path, unclean=True)
    assert reopened.log_end_offset == 5 and os.path.getsize(path) == size
    append(reopened, [T0] * 5, value_size=100)
    assert [r[0] for r in read_all(reopened)] == list(range(10))
    reopened.close()
    log.close()  # the crashed process's view, older than the file: giving back never shortens it
    assert [r[0] for r in read_all(open_log(tmp_path))] == list(range(10))


def test_preallocate_off_reserves_nothing(tmp_path: Path, can_reserve: None) -> None:
    log = open_log(tmp_path, preallocate=False)
    append(log, [T0] * 3, value_size=1000)
    assert allocated(log.active.path) < 1 << 20
    log.close()


def test_the_topic_config_and_its_broker_synonym_reach_the_log(tmp_path: Path) -> None:
    pm = PartitionManager.__new__(PartitionManager)
    pm.config = BrokerConfig(log_dirs=str(tmp_path))
    assert pm.log_config({}).preallocate is True
    assert pm.log_config({"preallocate": "false"}).preallocate is False
    pm.config = BrokerConfig(log_dirs=str(tmp_path), log_preallocate=False)
    assert pm.log_config({}).preallocate is False
    assert pm.log_config({"preallocate": "true"}).preallocate is True
