"""Transactions across kill -9 and restart: every transaction ends fully committed or fully aborted,
and the offsets it committed in ``__consumer_offsets`` agree with its records.

- kill -9 under a load of transactions from two transactional ids (kafka-python's transactional
  producer: records in two topics, three partitions, send_offsets_to_transaction, every other
  transaction aborted), several times: right after the restart and again once every open
  transaction has timed out, a read_committed consumer sees, per transaction, all of its records
  or none, never an aborted one, every acknowledged commit, and each group's committed offset
  (OffsetFetch) is the number of the last transaction whose records are visible;
- a transaction open (Ongoing) at the crash is not visible after the restart and is aborted once
  its timeout has passed;
- a crash after EndTxn, before or midway through the markers: the on-disk state is built by
  driving the broker up to the open transaction, killing it, and then writing what the
  coordinator and the marker writer would have written next with kcoord's own storage classes
  (a PrepareCommit/PrepareAbort record in ``__transaction_state``, markers in only some of the
  partitions); the restarted broker completes the transaction in every partition.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.protocol.admin import DescribeTransactionsRequest
from kafka.structs import OffsetAndMetadata

from kcoord.protocol import records as batches
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig
from kcoord.transaction.metadata import TransactionMetadata, TransactionState
from kcoord.transaction.records import TransactionLogKey, decode_record, encode_record
from tests.group_client import fetch_all
from tests.harness import BrokerFactory, BrokerProcess, read_to_end

pytestmark = pytest.mark.slow

TXN_TIMEOUT_MS = 3000
ARGS = [
    "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
    "500",
    "--group-initial-rebalance-delay-ms",
    "0",
]


def producer(b: BrokerProcess, tid: str) -> KafkaProducer:
    p = KafkaProducer(
        bootstrap_servers=b.bootstrap,
        transactional_id=tid,
        transaction_timeout_ms=TXN_TIMEOUT_MS,
        request_timeout_ms=5000,
        max_block_ms=5000,
    )
    p.init_transactions()
    return p


def read_committed(b: BrokerProcess, partitions: list[tuple[str, int]]) -> list[str]:
    """Every record a read_committed consumer gets from the start of ``partitions``, up to the
    last stable offset."""
    return [m.value.decode() for m in read_to_end(b.bootstrap, partitions, "read_committed", idle_s=2.0)]


def describe(b: BrokerProcess, tid: str) -> Any:
    with b.connect() as c:
        return c.request(DescribeTransactionsRequest.API_KEY, 0, transactional_ids=[tid]).transaction_states[
            0
        ]


def wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


# --- kill -9 under load ------------------------------------------------------------------------------
def check_all_or_nothing(
    values: list[str],
    tids: list[str],
    per_txn: int,
    committed: dict[str, set[int]],
    offsets: dict[str, dict[tuple[str, int], int]],
    group_of: dict[str, str],
    topic: str,
) -> None:
    seen: dict[tuple[str, int], int] = {}
    for v in values:
        tid, n, _i = v.split(":")
        seen[(tid, int(n))] = seen.get((tid, int(n)), 0) + 1
    for (tid, n), count in seen.items():
        assert n % 2 == 0, f"{tid} transaction {n} was aborted by its producer, yet read_committed got it"
        assert count == per_txn, f"{tid} transaction {n}: {count} of {per_txn} records visible"
    for tid in tids:
        visible = {n for (t, n) in seen if t == tid}
        assert committed[tid] <= visible, f"{tid}: acknowledged commits {committed[tid] - visible} lost"
        group_offsets = offsets[group_of[tid]]
        last = max(visible, default=None)
        if last is None:
            assert not group_offsets, (tid, group_offsets)
        else:
            assert group_offsets == {(topic, 0): last}, (tid, last, group_offsets)


def test_kill_9_under_transactions_all_or_nothing(broker_factory: BrokerFactory, unique_topic: str) -> None:
    b = broker_factory(ARGS)
    topic_a, topic_b = f"{unique_topic}-a", f"{unique_topic}-b"
    b.create_topic(topic_a, 2)
    b.create_topic(topic_b, 1)
    partitions = [(topic_a, 0), (topic_a, 1), (topic_b, 0)]
    tids = [f"{unique_topic}-p{i}" for i in range(2)]
    group_of = {tid: f"{tid}-g" for tid in tids}
    committed: dict[str, set[int]] = {tid: set() for tid in tids}
    next_txn = dict.fromkeys(tids, 0)
    per_txn = 2 * len(partitions)

    producers: list[KafkaProducer] = []

    def run(tid: str, stop: threading.Event) -> None:
        try:
            p = producer(b, tid)
        except Exception:
            return
        producers.append(p)
        try:
            while not stop.is_set():
                n = next_txn[tid]
                next_txn[tid] = n + 2 if n % 2 else n + 1
                p.begin_transaction()
                for i in range(per_txn):
                    t, part = partitions[i % len(partitions)]
                    p.send(t, f"{tid}:{n}:{i}".encode(), partition=part)
                p.send_offsets_to_transaction(
                    {TopicPartition(topic_a, 0): OffsetAndMetadata(n, "", -1)}, group_of[tid]
                )
                if n % 2 == 0:
                    p.commit_transaction()
                    committed[tid].add(n)
                else:
                    p.abort_transaction()
        except Exception:
            return  # the broker died under us
        finally:
            with contextlib.suppress(Exception):
                p.close(timeout=1)

    for _round in range(3):
        stop = threading.Event()
        threads = [threading.Thread(target=run, args=(tid, stop), daemon=True) for tid in tids]
        for t in threads:
            t.start()
        start = dict(next_txn)
        wait_for(lambda start=start: all(next_txn[t] >= start[t] + 6 for t in tids), timeout=60)
        b.kill()
        stop.set()
        # kafka-python's send_offsets_to_transaction waits without a timeout, so a thread caught
        # in it would wait for ever: closing its producer stops the sender thread, after which no
        # request of that producer (no late commit after the checks below) can reach the broker,
        # and the thread may be left behind.
        for p in producers:
            with contextlib.suppress(Exception):
                p.close(timeout=0)
        producers.clear()
        for t in threads:
            t.join(0.2)
        b.start()
        # Right after the restart (markers of a transaction caught mid-completion may still be on
        # their way): nothing aborted or partial may be visible. A transaction open at the crash
        # may have its offsets pending until it times out: read the committed ones
        # (RequireStable would answer UNSTABLE_OFFSET_COMMIT for them meanwhile).
        with b.connect() as c:
            offsets = fetch_all(c, list(group_of.values()), require_stable=False)
        check_all_or_nothing(
            read_committed(b, partitions), tids, per_txn, committed, offsets, group_of, topic_a
        )
        # Once every transaction open at the crash has timed out and been aborted.
        wait_for(
            lambda: all(
                describe(b, tid).transaction_state not in ("Ongoing", "PrepareCommit", "PrepareAbort")
                for tid in tids
            )
        )
        with b.connect() as c:
            offsets = fetch_all(c, list(group_of.values()))
        values = read_committed(b, partitions)
        check_all_or_nothing(values, tids, per_txn, committed, offsets, group_of, topic_a)
        for tid in tids:  # the next round's producers start after everything so far
            next_txn[tid] = max(next_txn[tid], 0) + 2 - next_txn[tid] % 2


# --- an open transaction at the crash --------------------------------------------------------------------
def test_ongoing_transaction_at_crash_is_aborted_after_its_timeout(
    broker_factory: BrokerFactory, unique_topic: str
) -> None:
    b = broker_factory(ARGS)
    b.create_topic(unique_topic, 1)
    p = producer(b, unique_topic)
    p.begin_transaction()
    p.send(unique_topic, b"open:0:0", partition=0)
    p.send_offsets_to_transaction({TopicPartition(unique_topic, 0): OffsetAndMetadata(5, "", -1)}, "g-open")
    p.flush()
    assert describe(b, unique_topic).transaction_state == "Ongoing"
    b.kill()
    p.close(timeout=0)
    b.start()
    assert read_committed(b, [(unique_topic, 0)]) == []
    with b.connect() as c:
        assert fetch_all(c, ["g-open"])["g-open"] == {}
    wait_for(lambda: describe(b, unique_topic).transaction_state == "CompleteAbort")
    assert read_committed(b, [(unique_topic, 0)]) == []
    # The partition is stable again: a later transaction's records are read.
    p2 = producer(b, unique_topic)
    p2.begin_transaction()
    p2.send(unique_topic, b"later:0:0", partition=0)
    p2.commit_transaction()
    p2.close()
    assert read_committed(b, [(unique_topic, 0)]) == ["later:0:0"]
    with b.connect() as c:
        assert fetch_all(c, ["g-open"])["g-open"] == {}


# --- a crash after EndTxn, before or midway through the markers ---------------------------------------------
def _open_log(directory: Path) -> Log:
    return Log.open(directory, LogConfig(retention_ms=-1), Flusher("os"), unclean=True)


def _append(directory: Path, data: bytearray) -> None:
    lg = _open_log(directory)
    try:
        lg.append(data, list(batches.iter_headers(data)), int(time.time() * 1000))
    finally:
        lg.close()


def _last_metadata(txn_dir: Path, tid: str) -> TransactionMetadata:
    lg = _open_log(txn_dir)
    try:
        found = None
        for h, data in lg.batches():
            for _o, key, value in batches.iter_key_values(data, h):
                k, v = decode_record(key, value)  # type: ignore[arg-type]
                if k.transactional_id == tid and v is not None:
                    found = TransactionMetadata.from_value(tid, v)
        assert found is not None
        return found
    finally:
        lg.close()


@pytest.mark.parametrize(
    ("commit", "markers_written"),
    [(True, 0), (True, 2), (False, 0), (False, 2)],
    ids=["commit-no-markers", "commit-some-markers", "abort-no-markers", "abort-some-markers"],
)
def test_crash_after_end_txn_is_completed_on_restart(
    broker_factory: BrokerFactory, unique_topic: str, commit: bool, markers_written: int
) -> None:
    b = broker_factory(ARGS)
    b.create_topic(unique_topic, 2)
    other = f"{unique_topic}-o"
    b.create_topic(other, 1)
    group = f"{unique_topic}-g"
    with b.connect() as c:
        c.request(10, 2, key=group, key_type=0)  # FindCoordinator: __consumer_offsets exists
    p = producer(b, unique_topic)
    p.begin_transaction()
    data_partitions = [(unique_topic, 0), (unique_topic, 1), (other, 0)]
    for t, part in data_partitions:
        p.send(t, f"{t}-{part}".encode(), partition=part)
    p.send_offsets_to_transaction({TopicPartition(unique_topic, 0): OffsetAndMetadata(42, "", -1)}, group)
    p.flush()
    b.kill()
    p.close(timeout=0)

    # What the coordinator writes on EndTxn, then the markers of the first partitions only.
    txn_dir = b.data_dir / "__transaction_state-0"
    meta = _last_metadata(txn_dir, unique_topic)
    assert meta.state == TransactionState.ONGOING and len(meta.partitions) == 4, meta
    meta.state = TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT
    key, value = encode_record(TransactionLogKey(unique_topic), meta.to_value())
    _append(txn_dir, batches.build_batch([(key, value)], int(time.time() * 1000)))
    for t, part in data_partitions[:markers_written]:
        marker = batches.build_end_txn_marker(
            meta.producer_id, meta.producer_epoch, 0, commit, int(time.time() * 1000)
        )
        _append(b.data_dir / f"{t}-{part}", marker)

    b.start()
    wait_for(
        lambda: (
            describe(b, unique_topic).transaction_state == ("CompleteCommit" if commit else "CompleteAbort")
        )
    )
    values = read_committed(b, data_partitions)
    with b.connect() as c:
        offsets = fetch_all(c, [group])[group]
    if commit:
        assert sorted(values) == sorted(f"{t}-{part}" for t, part in data_partitions)
        assert offsets == {(unique_topic, 0): 42}
    else:
        assert values == []
        assert offsets == {}
    # Once more after a clean restart: the same answer from the logs alone.
    b.restart()
    assert sorted(read_committed(b, data_partitions)) == sorted(values)
