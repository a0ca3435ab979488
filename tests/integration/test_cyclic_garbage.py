"""Requests on the hot paths leave no reference cycles behind: what a request allocates is freed by
reference counting when it is answered, not by the cyclic GC.

Each cycle keeps a request's whole context (header, decoded request, Reply, answer) alive until
the next collection, and a collection walks every young object still alive: a cycle per
OffsetFetch (a compiled closure kept in the scope it shares with another closure) made the GC
about a tenth of that request's instructions. Closures that name themselves or each other
(a long poll's waiter, a Fetch's wait and look, a ShareFetch's next pass) made such cycles too.
The broker runs in this process, so the garbage the collector finds can be sorted by the module
of its type; the clients' own is left out.

- kafka-python: Produce, Fetch with and without a long poll, OffsetCommit, OffsetFetch,
  a classic group's heartbeats;
- confluent-kafka with group.protocol=consumer (KIP-848): ConsumerGroupHeartbeat, commits,
  OffsetFetch, long-polled Fetch;
- a confluent-kafka ShareConsumer (in a child process, as test_share_confluent runs it):
  ShareFetch, long-polled and not, and its acknowledgements.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.harness import REPO
from tests.integration.test_share_confluent import set_earliest
from tests.integration.test_txn_read_committed import InProcessBroker
from tests.wire import build_batch

TOPIC = "garbage"
SHARE_TOPIC = "garbage-shared"
ROUNDS = 200


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    b = InProcessBroker(Path(tmp_path_factory.mktemp("garbage")))
    with b.connect() as c:
        c.create_topic(TOPIC, partitions=2)
        c.create_topic(SHARE_TOPIC, partitions=1)
    yield b
    b.stop()


def _kcoord_garbage() -> Counter[str]:
    """The objects of kcoord's types that only the cyclic GC would free, by type."""
    gc.garbage.clear()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return Counter(
            f"{type(o).__module__}.{type(o).__qualname__}"
            for o in gc.garbage
            if type(o).__module__.startswith("kcoord")
        )
    finally:
        gc.garbage.clear()
        gc.set_debug(0)


def test_produce_fetch_commit_and_offset_fetch_leave_no_cycles(broker: InProcessBroker) -> None:
    tp = TopicPartition(TOPIC, 0)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id="garbage-group",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=10,
    )
    try:
        consumer.subscribe([TOPIC])
        # Joining, the first metadata, first-use routes and caches: not per request.
        producer.send(TOPIC, b"warm-up", partition=0).get(10)
        while not consumer.assignment():
            consumer.poll(100)
        consumer.commit({tp: OffsetAndMetadata(0, "", -1)})
        assert consumer.committed(tp) == 0

        gc.collect()
        gc.disable()
        try:
            for i in range(ROUNDS):
                producer.send(TOPIC, f"r{i}".encode(), partition=0).get(10)
                consumer.poll(50)  # Fetch, and heartbeats when due
                consumer.commit({tp: OffsetAndMetadata(i + 1, "", -1)})  # OffsetCommit
                assert consumer.committed(tp) == i + 1  # OffsetFetch
                consumer.poll(30)  # nothing new: Fetches that wait out their MaxWaitMs
            garbage = _kcoord_garbage()
        finally:
            gc.enable()
    finally:
        consumer.close()
        producer.close()
    _assert_none_per_request(garbage)


def _assert_none_per_request(garbage: Counter[str]) -> None:
    # Nothing per request; a handful of objects (a timer's, a connection's) would not scale.
    # A path taken fewer than ~ROUNDS / 10 times (an error, a shutdown wake) can slip by.
    assert sum(garbage.values()) < ROUNDS // 10, garbage.most_common(10)


def test_a_kip848_consumer_leaves_no_cycles(broker: InProcessBroker) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    tp = confluent_kafka.TopicPartition(TOPIC, 1)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "garbage-848",
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 20,
        }
    )
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while not consumer.assignment():  # ConsumerGroupHeartbeat until partitions are assigned
            assert time.monotonic() < deadline, "no assignment"
            consumer.poll(0.1)
        gc.collect()
        gc.disable()
        try:
            consumed = 0
            for i in range(ROUNDS):
                producer.produce(TOPIC, f"k{i}".encode(), partition=1)
                producer.flush(10)
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    consumer.commit(message=message, asynchronous=False)  # OffsetCommit
                    consumer.committed([tp], timeout=10)  # OffsetFetch
                    consumed += 1
            garbage = _kcoord_garbage()
        finally:
            gc.enable()
        assert consumed > ROUNDS // 2
    finally:
        consumer.close()
    _assert_none_per_request(garbage)


def test_a_share_consumer_leaves_no_cycles(broker: InProcessBroker) -> None:
    pytest.importorskip("confluent_kafka")
    group, records = "garbage-share", ROUNDS // 2
    set_earliest(broker, group)  # type: ignore[arg-type]  # bootstrap and connect suffice
    gc.collect()
    gc.disable()
    try:
        # The records arrive one at a time while the consumer polls: ShareFetches that wait for
        # them, ShareFetches with one record each, and the acknowledgements of each.
        worker = subprocess.Popen(
            [*WORKER, broker.bootstrap, group, SHARE_TOPIC, str(records), "explicit"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            with broker.connect() as conn:  # one connection: only the worker's close in the window
                for i in range(records):
                    batch = build_batch([(None, f"s{i}".encode(), 1_700_000_000_000 + i)])
                    assert conn.produce(SHARE_TOPIC, 0, batch).error_code == 0
                    time.sleep(0.02)
                out, err = worker.communicate(timeout=120)
        finally:
            worker.kill()
        garbage = _kcoord_garbage()
    finally:
        gc.enable()
    assert worker.returncode == 0, f"worker exited {worker.returncode}:\n{out[-3000:]}\n{err[-3000:]}"
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len({e["rec"][1] for e in events if "rec" in e}) == records
    _assert_none_per_request(garbage)


WORKER = [sys.executable, "-m", "tests.integration.share_confluent_worker"]
