"""The data plane of transactions: producer state with markers and fencing, the last stable
offset, the aborted-transaction index (Kafka's byte layout) and its rebuild, and replay == live
after random interleavings, restarts and retention."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig
from kcoord.dataplane.partition import Partition
from kcoord.dataplane.partitions import PartitionManager
from kcoord.protocol import records
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.storage.flush import Flusher
from kcoord.storage.txn_index import ENTRY_SIZE, AbortedTxn
from tests.wire import build_batch

T0 = 1_700_000_000_000
TOPIC = "t"


def open_manager(directory: Path) -> PartitionManager:
    pm = PartitionManager(BrokerConfig(log_dirs=str(directory)), Flusher("os"), ManualClock(T0))
    pm.open()
    return pm


def new_partition(directory: Path) -> tuple[PartitionManager, Partition]:
    pm = open_manager(directory)
    pm.create_topic(TOPIC, 1, {})
    part = pm.partition(TOPIC, 0)
    assert part is not None
    return pm, part


def crash(pm: PartitionManager) -> None:
    """Stop without a clean shutdown (no snapshot, no marker); the page cache keeps the bytes."""
    for p in pm.all_partitions():
        p.log.close()


def reopen(directory: Path, pm: PartitionManager, clean: bool) -> tuple[PartitionManager, Partition]:
    if clean:
        pm.close()
    else:
        crash(pm)
    pm2 = open_manager(directory)
    part = pm2.partition(TOPIC, 0)
    assert part is not None
    return pm2, part


def produce(
    part: Partition, pid: int = -1, epoch: int = -1, seq: int = -1, txn: bool = False, count: int = 1
) -> int:
    data = bytearray(
        build_batch(
            count=count,
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            transactional=txn,
            timestamp=T0,
        )
    )
    first, _, appended = part.append_from_client(data, list(records.iter_headers(data)), T0, False)
    assert appended
    return first


def state(part: Partition) -> dict[str, Any]:
    """Everything transactions' data plane keeps, as plain data."""
    producers = {
        pid: (
            e.epoch,
            e.coordinator_epoch,
            e.last_timestamp,
            e.current_txn_first_offset,
            [(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp) for b in e.batches],
        )
        for pid, e in part.producers.producers.items()
    }
    index = {}
    for seg in part.log.segments:
        raw = seg.txn_index.path.read_bytes() if seg.txn_index.path.exists() else b""
        assert [AbortedTxn.decode(raw, i) for i in range(0, len(raw), ENTRY_SIZE)] == seg.txn_index.entries
        index[seg.base_offset] = list(seg.txn_index.entries)
    return {
        "producers": producers,
        "ongoing": part.ongoing_transactions(),
        "lso": part.last_stable_offset,
        "hw": part.high_watermark,
        "first_unstable": part.first_unstable_offset,
        "index": index,
    }


# --- markers and fencing -------------------------------------------------------------------------
def test_transaction_holds_the_lso_until_its_marker(tmp_path: Path) -> None:
    _, part = new_partition(tmp_path)
    produce(part, count=2)  # 0-1 plain
    assert produce(part, pid=7, epoch=0, seq=0, txn=True, count=3) == 2  # 2-4
    produce(part, pid=8, epoch=0, seq=0, count=1)  # 5 idempotent
    assert part.high_watermark == 6
    assert part.last_stable_offset == 2
    assert part.ongoing_transactions() == {7: 2}
    assert part.write_txn_marker(7, 0, 3, commit=True, now_ms=T0 + 5) == 6
    assert part.last_stable_offset == part.high_watermark == 7
    assert part.ongoing_transactions() == {}
    e = part.producers.producers[7]
    assert (e.coordinator_epoch, e.current_txn_first_offset, e.last_timestamp) == (3, None, T0 + 5)
    # A commit is not indexed.
    assert part.aborted_transactions(0, 100) == []


def test_abort_is_indexed_with_the_lso_of_the_moment(tmp_path: Path) -> None:
    _, part = new_partition(tmp_path)
    produce(part, pid=1, epoch=0, seq=0, txn=True)  # 0
    produce(part, pid=2, epoch=0, seq=0, txn=True)  # 1
    produce(part, pid=1, epoch=0, seq=1, txn=True)  # 2
    assert part.write_txn_marker(1, 0, 0, commit=False, now_ms=T0) == 3
    # Producer 2's transaction (from 1) still holds the LSO, and is the entry's LSO.
    assert part.last_stable_offset == 1
    assert part.aborted_transactions(0, 4) == [AbortedTxn(1, 0, 3, 1)]
    assert part.write_txn_marker(2, 0, 0, commit=False, now_ms=T0) == 4
    assert part.last_stable_offset == 5
    assert part.aborted_transactions(0, 5) == [AbortedTxn(1, 0, 3, 1), AbortedTxn(2, 1, 4, 5)]
    # Kafka's overlap rule: marker at or after the fetch offset, first offset below the bound.
    assert part.aborted_transactions(4, 5) == [AbortedTxn(2, 1, 4, 5)]
    assert part.aborted_transactions(0, 1) == [AbortedTxn(1, 0, 3, 1)]
    # The .txnindex holds 34-byte entries: version, producer id, first, last, LSO.
    raw = part.log.active.txn_index.path.read_bytes()
    assert part.log.active.txn_index.path.name == "00000000000000000000.txnindex"
    assert raw == struct.pack(">hqqqq", 0, 1, 0, 3, 1) + struct.pack(">hqqqq", 0, 2, 1, 4, 5)


def test_marker_of_an_empty_transaction_changes_no_offset(tmp_path: Path) -> None:
    _, part = new_partition(tmp_path)
    produce(part, pid=3, epoch=0, seq=0)
    assert part.write_txn_marker(3, 0, 0, commit=False, now_ms=T0) == 1
    assert part.aborted_transactions(0, 10) == []
    assert part.last_stable_offset == 2
    assert part.producers.producers[3].coordinator_epoch == 0


def test_marker_fencing(tmp_path: Path) -> None:
    _, part = new_partition(tmp_path)
    produce(part, pid=5, epoch=2, seq=0, txn=True)
    before = state(part)
    with pytest.raises(KafkaError) as e:
        part.write_txn_marker(5, 1, 0, commit=True, now_ms=T0)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert state(part) == before and part.log.log_end_offset == 1
    # A bumped epoch (transactions v2 writes the marker at epoch + 1) is accepted.
    part.write_txn_marker(5, 3, 4, commit=True, now_ms=T0)
    assert part.producers.producers[5].epoch == 3
    produce(part, pid=5, epoch=3, seq=0, txn=True)
    before = state(part)
    with pytest.raises(KafkaError) as e:
        part.write_txn_marker(5, 3, 3, commit=False, now_ms=T0)
    assert e.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert state(part) == before


def test_client_batches_against_transactions(tmp_path: Path) -> None:
    _, part = new_partition(tmp_path)
    produce(part, pid=9, epoch=1, seq=0, txn=True)
    before = state(part)
    # Non-transactional while the transaction is ongoing.
    with pytest.raises(KafkaError) as e:
        produce(part, pid=9, epoch=1, seq=1)
    assert e.value.code == ErrorCode.INVALID_TXN_STATE
    # An older epoch is fenced.
    with pytest.raises(KafkaError) as e:
        produce(part, pid=9, epoch=0, seq=0, txn=True)
    assert e.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert state(part) == before
    # A retried transactional batch is a duplicate: not appended twice.
    data = bytearray(
        build_batch(count=1, producer_id=9, producer_epoch=1, base_sequence=0, transactional=True)
    )
    assert part.append_from_client(data, list(records.iter_headers(data)), T0, False) == (0, -1, False)


def test_client_control_batches_are_invalid_records() -> None:
    marker = records.build_end_txn_marker(1, 0, 0, True, T0)
    (h,) = records.iter_headers(marker)
    with pytest.raises(records.InvalidBatch) as e:
        records.validate_batch(marker, h)
    assert not e.value.corrupt and "control records" in str(e.value)
    assert records.read_end_txn_marker(bytes(marker), h) == (True, 0)


def test_marker_bytes_are_kafkas_end_transaction_marker() -> None:
    from kafka.record.default_records import DefaultRecordBatch

    batch = records.build_end_txn_marker(42, 7, 13, False, T0)
    b = DefaultRecordBatch(bytes(batch))
    assert b.validate_crc()
    assert b.is_control_batch and b.is_transactional and b.producer_id == 42 and b.producer_epoch == 7
    (r,) = list(b)
    assert r.key == struct.pack(">hh", 0, 0) and r.value == struct.pack(">hi", 0, 13)


def test_lso_waits_for_the_high_watermark_to_pass_the_marker(tmp_path: Path) -> None:
    """Kafka's unreplicatedTxns: with log.flush.policy=always the marker is above the high
    watermark until its fsync; the transaction is unstable until then."""
    _, part = new_partition(tmp_path)
    produce(part, pid=1, epoch=0, seq=0, txn=True)
    part.producers.unreplicated.clear()
    txn = part.producers.update_marker(
        records.read_header(records.build_end_txn_marker(1, 0, 0, True, T0)), True, 0, T0
    )
    assert txn is not None
    part.producers.complete(txn._replace(last_offset=1))
    part.producers.on_high_watermark(1)
    assert part.producers.first_unstable_offset() == 0
    part.producers.on_high_watermark(2)
    assert part.producers.first_unstable_offset() is None


def test_ongoing_transaction_never_expires(tmp_path: Path) -> None:
    _, part = new_partition(tmp_path)
    produce(part, pid=1, epoch=0, seq=0, txn=True)
    produce(part, pid=2, epoch=0, seq=0)
    assert part.producers.expire(T0 + 10**9, 1000) == 1
    assert set(part.producers.producers) == {1}


def test_lso_is_clamped_to_the_log_start_offset(tmp_path: Path) -> None:
    pm, part = new_partition(tmp_path)
    produce(part, pid=1, epoch=0, seq=0, txn=True)
    produce(part, count=3)
    pm.delete_records(part, 2)
    assert part.last_stable_offset == 2


# --- on disk: index rebuild, snapshots -----------------------------------------------------------
def _aborted_history(part: Partition) -> None:
    produce(part, pid=1, epoch=0, seq=0, txn=True)
    produce(part, pid=2, epoch=0, seq=0, txn=True)
    part.write_txn_marker(1, 0, 0, commit=False, now_ms=T0)
    part.log.roll()
    produce(part, pid=2, epoch=0, seq=1, txn=True)
    part.write_txn_marker(2, 0, 0, commit=False, now_ms=T0)
    produce(part, pid=3, epoch=0, seq=0, txn=True)


@pytest.mark.parametrize("clean", [True, False])
def test_deleted_txnindex_is_rebuilt_after_an_unclean_start(tmp_path: Path, clean: bool) -> None:
    pm, part = new_partition(tmp_path)
    _aborted_history(part)
    live = state(part)
    assert live["index"] == {0: [AbortedTxn(1, 0, 2, 1)], 3: [AbortedTxn(2, 1, 4, 5)]}
    assert live["ongoing"] == {3: 5} and live["lso"] == 5
    if clean:
        pm, part = reopen(tmp_path, pm, clean=True)
        assert state(part) == live
        pm, part = reopen(tmp_path, pm, clean=False)
    crash(pm)
    for f in (tmp_path / f"{TOPIC}-0").glob("*.txnindex"):
        f.unlink()
    pm = open_manager(tmp_path)
    part = pm.partition(TOPIC, 0)  # type: ignore[assignment]
    assert state(part) == live


def test_producer_state_survives_retention(tmp_path: Path) -> None:
    """The snapshot taken at a roll keeps a transaction whose batches retention deleted."""
    pm, part = new_partition(tmp_path)
    produce(part, pid=1, epoch=0, seq=0, txn=True)  # 0, never ended
    produce(part, pid=2, epoch=0, seq=0, count=2)  # 1-2
    part.log.roll()
    produce(part, count=2)  # 3-4
    part.log.roll()
    pm.delete_records(part, 3)
    pm.enforce_retention()
    assert [s.base_offset for s in part.log.segments] == [3, 5]
    snapshots = sorted(p.name for p in (tmp_path / f"{TOPIC}-0").glob("*.snapshot"))
    assert snapshots == ["00000000000000000003.snapshot", "00000000000000000005.snapshot"]
    live = state(part)
    assert live["ongoing"] == {1: 0} and live["lso"] == 3  # clamped to the log start
    for clean in (False, True, False):
        pm, part = reopen(tmp_path, pm, clean)
        assert state(part) == live
    # The producer's sequence continues where it was.
    assert produce(part, pid=2, epoch=0, seq=2) == 5
    with pytest.raises(KafkaError) as e:
        produce(part, pid=2, epoch=0, seq=9)
    assert e.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_snapshot_above_the_log_end_is_ignored(tmp_path: Path) -> None:
    pm, part = new_partition(tmp_path)
    produce(part, pid=1, epoch=0, seq=0, txn=True)
    live = state(part)
    crash(pm)
    (tmp_path / f"{TOPIC}-0" / "00000000000000000050.snapshot").write_text(
        '{"version": 1, "offset": 50, "producers": []}'
    )
    pm = open_manager(tmp_path)
    part = pm.partition(TOPIC, 0)  # type: ignore[assignment]
    assert state(part) == live
    assert not (tmp_path / f"{TOPIC}-0" / "00000000000000000050.snapshot").exists()


# --- replay == live ------------------------------------------------------------------------------
PIDS = (11, 12, 13)
op = st.one_of(
    st.tuples(st.just("plain"), st.integers(1, 3)),
    st.tuples(st.just("idem"), st.sampled_from(PIDS), st.integers(1, 3)),
    st.tuples(st.just("txn"), st.sampled_from(PIDS), st.integers(1, 3)),
    st.tuples(st.just("marker"), st.sampled_from(PIDS), st.booleans(), st.booleans()),
    st.tuples(st.just("stale"), st.sampled_from(PIDS)),
    st.tuples(st.just("roll")),
    st.tuples(st.just("delete"), st.integers(0, 3)),
    st.tuples(st.just("restart"), st.booleans()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, max_size=40))
def test_replay_equals_live(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]]) -> None:
    directory = tmp_path_factory.mktemp("txn")
    pm, part = new_partition(directory)
    epochs = dict.fromkeys(PIDS, 0)
    seqs = dict.fromkeys(PIDS, 0)
    coordinator_epoch = 0
    retention_ran = False
    for o in ops:
        before = state(part)
        try:
            if o[0] == "plain":
                produce(part, count=o[1])
            elif o[0] in ("idem", "txn"):
                _, pid, n = o
                produce(part, pid=pid, epoch=epochs[pid], seq=seqs[pid], txn=o[0] == "txn", count=n)
                seqs[pid] += n
            elif o[0] == "marker":
                _, pid, commit, bump = o
                coordinator_epoch += 1
                part.write_txn_marker(pid, epochs[pid] + bump, coordinator_epoch, commit, T0 + len(ops))
                if bump:
                    epochs[pid] += 1
                    seqs[pid] = 0
            elif o[0] == "stale" and o[1] in part.producers.producers:
                # (a producer the partition does not know is not checked, as in Kafka)
                part.write_txn_marker(o[1], epochs[o[1]] - 1, coordinator_epoch, True, T0)
                raise AssertionError("a marker of an older epoch was accepted")
            elif o[0] == "roll":
                part.log.roll()
            elif o[0] == "delete":
                target = min(part.log_start_offset + o[1], part.high_watermark)
                pm.delete_records(part, target)
                pm.enforce_retention()
                retention_ran = True
            elif o[0] == "restart":
                live = state(part)
                pm, part = reopen(directory, pm, clean=o[1])
                assert state(part) == live
        except KafkaError as e:
            # Refused input changes nothing.
            assert state(part) == before, e
            if o[0] == "stale":
                assert e.code == ErrorCode.INVALID_PRODUCER_EPOCH
    live = state(part)
    pm, part = reopen(directory, pm, clean=False)
    assert state(part) == live
    if not retention_ran:
        part.rebuild_producer_state()
        assert state(part) == live
    # The LSO is the first offset of the oldest ongoing transaction (or the high watermark).
    ongoing = part.ongoing_transactions()
    expected = max(min(ongoing.values()), part.log_start_offset) if ongoing else part.high_watermark
    assert part.last_stable_offset == min(expected, part.high_watermark)
    pm.close()


# --- share groups at read_committed ---------------------------------------------------------------
def test_share_acquisition_skips_aborted_batches_and_markers(tmp_path: Path) -> None:
    """The batches a read_committed share-partition may acquire: aborted transactions' batches and
    markers are gaps (archived, never delivered); the acquisition stops at the LSO; the records
    it writes replay to the same share-partition state."""
    import uuid

    from kcoord.share.config import SharePartitionConfig
    from kcoord.share.coordinator import _LogBatches
    from kcoord.share.partition import SharePartition

    _, part = new_partition(tmp_path)
    produce(part, count=2)  # 0-1
    produce(part, pid=1, epoch=0, seq=0, txn=True, count=2)  # 2-3 aborted
    produce(part, pid=2, epoch=0, seq=0, txn=True)  # 4 committed
    part.write_txn_marker(1, 0, 0, commit=False, now_ms=T0)  # 5
    produce(part, pid=1, epoch=0, seq=2, txn=True)  # 6 aborted (another transaction)
    part.write_txn_marker(2, 0, 0, commit=True, now_ms=T0)  # 7
    part.write_txn_marker(1, 0, 0, commit=False, now_ms=T0)  # 8
    produce(part, pid=3, epoch=0, seq=0, txn=True)  # 9 open: the LSO
    produce(part, count=1)  # 10
    assert part.last_stable_offset == 9
    committed = list(_LogBatches(part.log, 0, part.last_stable_offset, 1 << 20, part.aborted_transactions))
    assert committed == [(0, 1), (4, 4)]
    uncommitted = list(_LogBatches(part.log, 0, part.high_watermark, 1 << 20))
    assert uncommitted == [(0, 1), (2, 3), (4, 4), (6, 6), (9, 9), (10, 10)]

    sp = SharePartition("G", uuid.uuid4(), 0, SharePartitionConfig(), 0)  # type: ignore[call-arg]
    written = list(sp.initialize())
    got = sp.acquire("m", _LogBatches(part.log, 0, 9, 1 << 20, part.aborted_transactions), 100, T0)
    assert [(a.first_offset, a.last_offset) for a in got.acquired] == [(0, 1), (4, 4)]
    written += got.records
    # Nothing more below the LSO: a second acquisition finds only gaps.
    again = sp.acquire(
        "m", _LogBatches(part.log, sp.next_fetch_offset(), 9, 1 << 20, part.aborted_transactions), 100, T0
    )
    assert again.acquired == [] and sp.next_fetch_offset() <= 9
    written += again.records
    replayed = SharePartition.from_records(sp.group_id, sp.topic_id, 0, sp.config, written)  # type: ignore[arg-type]
    assert replayed is not None and replayed.durable_view() == sp.durable_view()
