"""Writing an ending transaction's markers (server/transaction_markers.py) into a data partition
whose files cannot be written for a while: the append fails and counts for nothing, the marker is
written again after a backoff, and the transaction completes, and the partition's last stable
offset passes it, only once the marker is in the log, once."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
from pathlib import Path
from typing import Any

from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig
from kcoord.dataplane.partition import Partition
from kcoord.dataplane.partitions import PartitionManager
from kcoord.protocol import records
from kcoord.server import transaction_markers
from kcoord.server.transaction_markers import TransactionMarkers
from kcoord.storage.flush import Flusher
from kcoord.transaction.coordinator import MarkerJob
from tests.wire import build_batch

T0 = 1_700_000_000_000
PRODUCER_ID = 7


class _FullDisk:
    """The partition manager, whose partitions' marker writes fail with ENOSPC ``failures`` times."""

    def __init__(self, pm: PartitionManager, failures: int) -> None:
        self.pm = pm
        self.failures = failures
        self.attempts = 0

    def partition(self, topic: str, index: int) -> Any:
        part = self.pm.partition(topic, index)
        return None if part is None else _FailingMarkers(part, self)


class _FailingMarkers:
    def __init__(self, part: Partition, disk: _FullDisk) -> None:
        self.part = part
        self.topic = part.topic
        self.index = part.index
        self.log = part.log
        self.disk = disk

    def write_txn_marker(self, *args: Any) -> int:
        self.disk.attempts += 1
        if self.disk.failures > 0:
            self.disk.failures -= 1
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.part.write_txn_marker(*args)


class _Completions:
    """The transaction coordinator's runtime, as far as the marker writer tells it."""

    def __init__(self) -> None:
        self.told: list[str] = []

    def tell(self, key: str, _op: Any) -> None:
        self.told.append(key)


def _open_transaction(directory: Path) -> tuple[Flusher, PartitionManager, Partition]:
    """A topic partition holding two records of an open transaction of ``PRODUCER_ID``."""
    flusher = Flusher("os")
    pm = PartitionManager(BrokerConfig(log_dirs=str(directory)), flusher, ManualClock(T0))
    pm.open()
    pm.create_topic("t", 1, {})
    part = pm.partition("t", 0)
    assert part is not None
    data = bytearray(
        build_batch(count=2, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=0, transactional=True)
    )
    part.append_from_client(data, list(records.iter_headers(data)), T0, False)
    return flusher, pm, part


async def test_a_marker_the_partition_cannot_write_is_written_again_until_it_is(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setattr(transaction_markers, "RETRY_BACKOFF_MS", 5)
    monkeypatch.setattr(transaction_markers, "RETRY_BACKOFF_MAX_MS", 10)
    flusher, pm, part = _open_transaction(tmp_path)
    assert part.last_stable_offset == 0  # the transaction is open

    disk = _FullDisk(pm, failures=3)
    completions = _Completions()
    markers = TransactionMarkers(disk, groups=None, flusher=flusher, clock=ManualClock(T0))  # type: ignore[arg-type]
    markers.transactions = completions  # type: ignore[assignment]
    markers.send(MarkerJob("tx", PRODUCER_ID, 0, True, (("t", 0),)))
    assert disk.attempts == 1
    assert completions.told == []
    assert part.log.log_end_offset == 2  # the failed append counted for nothing
    assert part.last_stable_offset == 0

    for _ in range(200):
        if completions.told:
            break
        await asyncio.sleep(0.005)
    assert completions.told == ["tx"]
    assert disk.attempts == 4
    assert part.log.log_end_offset == 3  # the records and one marker
    assert part.last_stable_offset == 3
    control = [h for h, _ in part.log.batches(0) if h.is_control]
    assert [(h.base_offset, h.producer_id) for h in control] == [(2, PRODUCER_ID)]
    pm.close()


async def test_an_abort_whose_index_entry_the_disk_cannot_take_is_written_once_and_kept(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The marker is in the log before its transaction index entry is written: the entry the
    disk refuses stays in memory (read-committed fetches read it there), the marker is not
    written again, and a shutdown that still cannot write it has the next start rebuild the
    index from the log."""
    flusher, pm, part = _open_transaction(tmp_path)

    def full_disk(_fd: int, _data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)  # the log's own writes are pwrites
    completions = _Completions()
    markers = TransactionMarkers(pm, groups=None, flusher=flusher, clock=ManualClock(T0))  # type: ignore[arg-type]
    markers.transactions = completions  # type: ignore[assignment]
    markers.send(MarkerJob("tx", PRODUCER_ID, 0, False, (("t", 0),)))
    assert completions.told == ["tx"]
    assert part.log.log_end_offset == 3  # one marker
    assert part.last_stable_offset == 3
    aborted = part.log.collect_aborted_txns(0, 3)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in aborted] == [(PRODUCER_ID, 0, 2)]
    pm.close()  # the index still cannot be written: its partition forgets its producer snapshots
    monkeypatch.undo()

    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), Flusher("os"), ManualClock(T0))
    pm.open()
    part = pm.partition("t", 0)
    assert part is not None
    aborted = part.log.collect_aborted_txns(0, 3)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in aborted] == [(PRODUCER_ID, 0, 2)]
    assert part.last_stable_offset == 3
    pm.close()


def _abort_on_a_full_disk(tmp_path: Path, monkeypatch: Any) -> tuple[PartitionManager, Partition]:
    """An open transaction, then its ABORT marker written while the disk refuses the writes of
    transaction indexes: the marker is in the log, its index entry only in memory. The disk goes
    on refusing them (other files' writes succeed, as space freed elsewhere would let them)."""
    flusher, pm, part = _open_transaction(tmp_path)
    write = os.write

    def full_for_indexes(fd: int, data: Any) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".txnindex"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return write(fd, data)

    monkeypatch.setattr(os, "write", full_for_indexes)
    markers = TransactionMarkers(pm, groups=None, flusher=flusher, clock=ManualClock(T0))  # type: ignore[arg-type]
    markers.transactions = _Completions()  # type: ignore[assignment]
    markers.send(MarkerJob("tx", PRODUCER_ID, 0, False, (("t", 0),)))
    assert not part.log.active.txn_index.complete
    return pm, part


async def test_a_topic_whose_transaction_index_lacks_an_entry_can_be_deleted_on_a_full_disk(
    tmp_path: Path, monkeypatch: Any
) -> None:
    pm, part = _abort_on_a_full_disk(tmp_path, monkeypatch)
    directory = part.log.directory
    topic = pm.get("t")
    assert topic is not None
    pm.delete_topic(topic)  # deleting is how an operator frees a full disk
    assert pm.get("t") is None
    assert not directory.exists()
    monkeypatch.undo()
    pm.close()


async def test_no_producer_snapshot_passes_a_transaction_index_the_disk_has_not_taken(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Rolls after the refused entry take no producer snapshot: after a crash, the restart
    replays the log from below that segment and rebuilds its index."""
    pm, part = _abort_on_a_full_disk(tmp_path, monkeypatch)
    for seq in (2, 3, 4):  # a record and a roll each, every roll a chance to snapshot
        data = bytearray(build_batch(count=1, producer_id=8, producer_epoch=0, base_sequence=seq - 2))
        part.append_from_client(data, list(records.iter_headers(data)), T0, False)
        part.log.roll()
    assert not part.log.segments[0].txn_index.complete
    for p in pm.all_partitions():  # a crash: the page cache keeps the bytes, nothing else is done
        with contextlib.suppress(OSError):
            p.log.close()
    monkeypatch.undo()

    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), Flusher("os"), ManualClock(T0))
    pm.open()
    assert pm.unclean_start
    part = pm.partition("t", 0)
    assert part is not None
    aborted = part.log.collect_aborted_txns(0, 3)
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in aborted] == [(PRODUCER_ID, 0, 2)]
    pm.close()
