"""Compacted data topics: the data-topic rules of the cleaner through the partition manager.

Property: keyed records and tombstones (compressed or not, with headers, from plain and
idempotent producers) produced to a ``cleanup.policy=compact`` partition, cleanings, clock
advances, crashes part-way through a cleaning's swap and restarts; a consumer reading from
offset 0 (kafka-python's own batch decoder, CRCs checked) sees every record at the offset it was
produced at, with its timestamp and headers, in offset order, and for every key exactly the
latest value, or, for a deleted key, the tombstone or (after delete.retention.ms) nothing; in
the cleaned part of the log each key appears once; producers keep their sequence numbers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig
from kcoord.dataplane import compaction
from kcoord.dataplane.partition import Partition
from kcoord.dataplane.partitions import PartitionManager
from kcoord.protocol import records
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage import cleaner
from kcoord.storage import log as log_module
from kcoord.storage.flush import Flusher

T0 = 1_700_000_000_000
TOPIC = "c"
RETENTION = 60_000
KEYS = [b"a", b"b", b"c", b"d", b"e"]
PRODUCERS = [-1, 7001, 7002]
CODECS = [0, 1, 2, 3, 4]  # none, gzip, snappy, lz4, zstd


def batch(
    rows: list[tuple[bytes | None, bytes | None, int, list[tuple[str, bytes]]]],
    codec: int = 0,
    pid: int = -1,
    epoch: int = -1,
    seq: int = -1,
) -> bytearray:
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=False,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        batch_size=1 << 30,
    )
    for i, (key, value, ts, headers) in enumerate(rows):
        b.append(i, timestamp=ts, key=key, value=value, headers=headers)
    return bytearray(b.build())


class CompactedPartition(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kcoord-compact-"))
        self.clock = ManualClock(T0)
        self.pm = self._open()
        self.pm.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "delete.retention.ms": str(RETENTION)})
        self.part.log.config.segment_bytes = 1500  # small outputs: the swap has several files
        self.produced: dict[int, tuple[bytes, bytes | None, int, list[tuple[str, bytes]]]] = {}
        self.seqs = dict.fromkeys(PRODUCERS, 0)
        self.cleaned_end = 0

    def _open(self) -> PartitionManager:
        pm = PartitionManager(BrokerConfig(log_dirs=str(self.dir)), Flusher("os"), self.clock)
        pm.open()
        return pm

    @property
    def part(self) -> Partition:
        p = self.pm.partition(TOPIC, 0)
        assert p is not None
        return p

    def teardown(self) -> None:
        self.pm.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- rules -----------------------------------------------------------------------------
    @rule(
        rows=st.lists(
            st.tuples(
                st.sampled_from(KEYS),
                st.one_of(st.none(), st.integers(0, 99)),
                st.booleans(),
            ),
            min_size=1,
            max_size=6,
        ),
        codec=st.sampled_from(CODECS),
        pid=st.sampled_from(PRODUCERS),
        ts_skew=st.integers(-5000, 5000),
    )
    def produce(self, rows: list[tuple[bytes, int | None, bool]], codec: int, pid: int, ts_skew: int) -> None:
        now = self.clock.now_ms()
        encoded = [
            (
                key,
                None if v is None else (b"value-%d-" % v) * 8,
                now + ts_skew + i,
                [("h", key + b"%d" % i)] if with_header else [],
            )
            for i, (key, v, with_header) in enumerate(rows)
        ]
        seq = self.seqs[pid] if pid >= 0 else -1
        data = batch(encoded, codec, pid, 0 if pid >= 0 else -1, seq)
        headers = list(records.iter_headers(data))
        for h in headers:
            compaction.check_keys(data, h)
        first, _, appended = self.part.append_from_client(data, headers, now, False)
        assert appended
        if pid >= 0:
            self.seqs[pid] += len(rows)
        for i, row in enumerate(encoded):
            self.produced[first + i] = row

    @rule()
    def roll(self) -> None:
        self.part.log.roll()

    @rule(ms=st.sampled_from([1000, RETENTION // 2, RETENTION + 1]))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms)

    @precondition(lambda self: self.produced)
    @rule()
    def clean(self) -> None:
        p = self.part
        p.log.roll()
        rules = compaction.rules_for(p.topic.configs, self.pm.config)
        stats = asyncio.run(cleaner.compact(p.log, rules, self.clock.now_ms()))
        if stats is not None:
            self.cleaned_end = stats.end_offset
            self.check_cleaned_part()

    @precondition(lambda self: self.produced)
    @rule(step=st.integers(0, 12))
    def crash_while_installing(self, step: int) -> None:
        """kill -9 after ``step`` file operations of the swap, then start again."""
        p = self.part
        p.log.roll()
        rules = compaction.rules_for(p.topic.configs, self.pm.config)
        calls = [0]
        real_rename, real_unlink = os.rename, Path.unlink

        class Crash(Exception):
            pass

        def counting(fn: Any) -> Any:
            def wrapped(*args: Any, **kwargs: Any) -> Any:
                if calls[0] >= step:
                    raise Crash
                calls[0] += 1
                return fn(*args, **kwargs)

            return wrapped

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(log_module.os, "rename", counting(real_rename))
            mp.setattr(Path, "unlink", counting(real_unlink))
            mp.setattr(log_module, "atomic_write", counting(log_module.atomic_write))
            with contextlib.suppress(Crash):
                asyncio.run(cleaner.compact(p.log, rules, self.clock.now_ms()))
        self.restart(clean=False, drop_snapshots=False)

    @rule(clean=st.booleans(), drop_snapshots=st.booleans())
    def restart(self, clean: bool, drop_snapshots: bool) -> None:
        if clean:
            self.pm.close()
        else:
            for p in self.pm.all_partitions():
                p.log.close()
        if drop_snapshots:  # producer state rebuilt from the (cleaned) log alone
            for s in self.dir.glob(f"{TOPIC}-0/*.snapshot"):
                s.unlink()
        self.pm = self._open()
        self.part.log.config.segment_bytes = 1500
        self.cleaned_end = 0

    # --- checks --------------------------------------------------------------------------------
    def read_all(self) -> list[tuple[int, bytes, bytes | None, int, list[tuple[str, bytes]]]]:
        out = []
        for h, data in self.part.log.batches():
            assert records.crc_of(data, 0, h.size) == h.crc
            rb = DefaultRecordBatch(bytes(data))
            assert rb.validate_crc()
            for r in rb:
                out.append((r.offset, r.key, r.value, r.timestamp, list(r.headers)))
        return out

    @invariant()
    def consumer_sees_the_latest_value_of_every_key(self) -> None:
        seen = self.read_all()
        offsets = [o for o, *_ in seen]
        assert offsets == sorted(set(offsets))
        last: dict[bytes, bytes | None] = {}
        for offset, key, value, ts, headers in seen:
            assert (key, value, ts, headers) == self.produced[offset]
            last[key] = value
        latest: dict[bytes, bytes | None] = {}
        for offset in sorted(self.produced):
            key, value, _ts, _h = self.produced[offset]
            latest[key] = value
        for key, value in latest.items():
            if value is None:
                assert last.get(key) is None
            else:
                assert last[key] == value

    def check_cleaned_part(self) -> None:
        keys = [k for o, k, *_ in self.read_all() if o < self.cleaned_end]
        assert len(keys) == len(set(keys))

    @invariant()
    def producers_keep_their_sequences(self) -> None:
        for pid in PRODUCERS[1:]:
            if not self.seqs[pid]:
                continue
            entry = self.part.producers.producers.get(pid)
            assert entry is not None and entry.batches, pid
            assert entry.batches[-1].last_seq == self.seqs[pid] - 1


def test_next_batch_of_an_idempotent_producer_after_compaction_is_in_sequence(tmp_path: Path) -> None:
    """Every record of the producer's last batch is replaced by a later one: the batch stays,
    empty, so that a restart rebuilding producer state from the log knows the next sequence."""
    clock = ManualClock(T0)
    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), Flusher("os"), clock)
    pm.open()
    pm.create_topic(TOPIC, 1, {"cleanup.policy": "compact"})
    part = pm.partition(TOPIC, 0)
    assert part is not None
    for seq in (0, 1):
        data = batch([(b"k", b"idempotent", T0, [])], pid=9, epoch=0, seq=seq)
        part.append_from_client(data, list(records.iter_headers(data)), T0, False)
    data = batch([(b"k", b"plain", T0, [])])
    part.append_from_client(data, list(records.iter_headers(data)), T0, False)
    part.log.roll()
    rules = compaction.rules_for(part.topic.configs, pm.config)
    assert asyncio.run(cleaner.compact(part.log, rules, T0)) is not None
    kept = list(part.log.batches())
    assert [(h.base_offset, h.records_count, h.producer_id) for h, _ in kept] == [(1, 0, 9), (2, 1, -1)]
    for p in pm.all_partitions():
        p.log.close()
    for s in tmp_path.glob(f"{TOPIC}-0/*.snapshot"):
        s.unlink()
    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), Flusher("os"), clock)
    pm.open()
    part = pm.partition(TOPIC, 0)
    assert part is not None
    data = batch([(b"k", b"again", T0, [])], pid=9, epoch=0, seq=2)
    assert part.append_from_client(data, list(records.iter_headers(data)), T0, False)[2]
    data = batch([(b"k", b"gap", T0, [])], pid=9, epoch=0, seq=5)
    with pytest.raises(KafkaError) as e:
        part.append_from_client(data, list(records.iter_headers(data)), T0, False)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    pm.close()


def test_tombstones_go_one_pass_after_their_delete_horizon(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), Flusher("os"), clock)
    pm.open()
    pm.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "delete.retention.ms": "1000"})
    part = pm.partition(TOPIC, 0)
    assert part is not None
    data = batch([(b"k", b"v" * 300, T0, []), (b"k", None, T0 - 10**9, [])], codec=1)  # an ancient tombstone
    part.append_from_client(data, list(records.iter_headers(data)), T0, False)
    part.log.roll()
    rules = compaction.rules_for(part.topic.configs, pm.config)
    stats = asyncio.run(cleaner.compact(part.log, rules, T0))
    assert stats is not None and stats.earliest_horizon == T0 + 1000
    # The producer's timestamp says nothing of when the tombstone was cleaned: it stays.
    [(h, data)] = list(part.log.batches())
    assert h.base_offset == 0 and h.last_offset_delta == 1 and h.compression == 1
    assert [(r.offset, r.key, r.value, r.timestamp) for r in DefaultRecordBatch(bytes(data))] == [
        (1, b"k", None, T0 - 10**9)
    ]
    assert asyncio.run(cleaner.compact(part.log, rules, T0 + 999)) is not None
    assert len(list(part.log.batches())) == 1
    assert asyncio.run(cleaner.compact(part.log, rules, T0 + 1000)) is not None
    assert list(part.log.batches()) == []
    assert part.log.log_end_offset == 2  # offsets are never reused
    pm.close()


def test_keyless_records_are_refused_on_compacted_topics() -> None:
    data = batch([(b"k", b"v", T0, []), (None, b"v", T0, [])], codec=3)
    h = records.read_header(data)
    with pytest.raises(records.InvalidBatch, match="without key"):
        compaction.check_keys(data, h)


TestCompactedPartition = CompactedPartition.TestCase
TestCompactedPartition.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
