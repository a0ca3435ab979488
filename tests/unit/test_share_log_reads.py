"""How much log a share-partition acquisition reads (regressions found by the ShareFetch
throughput measurement of issue 4).

A ShareFetch carries MaxBytes = 50 MiB by default (the Java client's fetch.max.bytes). Reading
and parsing that much log for every fetch made each fetch cost the whole backlog, and a
share-partition at share.partition.max.record.locks went on iterating every remaining batch
without acquiring any: consumption slowed down quadratically with the backlog (1.5 M records:
10k records/s; four consumers on one partition: 100 s of broker CPU for 2 M records). Now the
log is read lazily, only as far as acquisition pulls batches, and not at all at the lock cap.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

from kcoord.share.config import SharePartitionConfig
from kcoord.share.coordinator import FIRST_READ_BYTES, _LogBatches
from kcoord.share.partition import SharePartition
from kcoord.storage.log import Log
from tests.unit.logutil import T0, append, decode, open_log

TID = uuid.UUID("6f1c1a43-7f0b-4f43-9a57-5a8a3b0c1d2e")


def sp_new(start: int = 0, **cfg: int) -> SharePartition:
    sp = SharePartition("G1", TID, 0, SharePartitionConfig(**cfg), start)  # type: ignore[arg-type]
    sp.initialize()
    return sp


class Pulled:
    """Batches of ``size`` records from offset 0, counting how many were pulled."""

    def __init__(self, size: int, count: int) -> None:
        self.size, self.count, self.pulled = size, count, 0

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for i in range(self.count):
            self.pulled += 1
            yield i * self.size, i * self.size + self.size - 1


def test_acquire_pulls_no_batch_beyond_max_records() -> None:
    sp = sp_new()
    batches = Pulled(10, 1000)
    assert sp.acquire("a", batches, 25, 0).acquired == [(0, 29, 1)]
    assert batches.pulled == 3


def test_acquire_at_the_lock_cap_stops_pulling() -> None:
    sp = sp_new(max_record_locks=100)
    batches = Pulled(10, 1000)
    assert sp.acquire("a", batches, 500, 0).acquired == [(0, 99, 1)]
    assert batches.pulled == 10
    assert not sp.can_acquire()
    later = Pulled(10, 1000)
    assert sp.acquire("b", later, 500, 0).acquired == []
    assert later.pulled <= 11  # not the 1000 batches of the backlog


def fill(log: Log, batches: int, per_batch: int) -> None:
    for _ in range(batches):
        append(log, [T0] * per_batch, value_size=100)


class _CountingReads:
    """The log, counting the bytes of each read (the log's own class may be compiled, and then
    its methods cannot be replaced)."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.reads: list[int] = []

    def read(self, offset: int, max_bytes: int, *args: object, **kw: object) -> bytes:
        data = self.log.read(offset, max_bytes, *args, **kw)  # type: ignore[arg-type]
        self.reads.append(len(data))
        return data

    def __getattr__(self, name: str) -> object:
        return getattr(self.log, name)


def test_log_batches_read_only_what_is_pulled(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 2000, 10)  # ~2.5 MB
    counting = _CountingReads(log)
    reads = counting.reads
    lb = _LogBatches(counting, 0, log.high_watermark, 50 << 20)  # type: ignore[arg-type]
    got = sp_new().acquire("a", lb, 500, 0)
    assert got.acquired == [(0, 499, 1)]
    assert sum(reads) <= 3 * FIRST_READ_BYTES  # not the 50 MiB MaxBytes, nor the whole log
    # The headers read map offsets to positions in data(): whole batches, decodable.
    data = lb.data()
    first = next(h for h in lb.headers if h.last_offset >= 0)
    last = next(h for h in reversed(lb.headers) if h.base_offset <= 499)
    offsets = [o for o, *_ in decode(data[first.position : last.position + last.size])]
    assert offsets == list(range(500))


def test_log_batches_respect_max_bytes_after_the_first_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 10, 100)  # batches of ~11 KB
    lb = _LogBatches(log, 0, log.high_watermark, 1)  # KIP-74: the first batch anyway
    assert list(lb) == [(0, 99)]
    lb = _LogBatches(log, 0, log.high_watermark, 3 * 11_000)
    assert list(lb) == [(0, 99), (100, 199)]
    lb = _LogBatches(log, 250, log.high_watermark, 50 << 20)  # from inside a batch
    assert list(lb) == [(b, b + 99) for b in range(200, 1000, 100)]
    assert list(_LogBatches(log, 0, 300, 50 << 20)) == [(0, 99), (100, 199), (200, 299)]
