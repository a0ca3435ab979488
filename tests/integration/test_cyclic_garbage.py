"""Requests on the hot paths leave no reference cycles behind: what a request allocates is freed by
reference counting when it is answered, not by the cyclic GC.

Each cycle keeps a request's whole context (header, decoded request, Reply, answer) alive until
the next collection, and a collection walks every young object still alive: a cycle per
OffsetFetch (a compiled closure kept in the scope it shares with another closure) made the GC
about a tenth of that request's instructions. The broker runs in this process, so the garbage
the collector finds can be sorted by the module of its type; the client's own is left out.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.integration.test_txn_read_committed import InProcessBroker

TOPIC = "garbage"
ROUNDS = 200


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    b = InProcessBroker(Path(tmp_path_factory.mktemp("garbage")))
    with b.connect() as c:
        c.create_topic(TOPIC, partitions=2)
    yield b
    b.stop()


def _kcoord_garbage() -> Counter[str]:
    """The objects of kcoord's types that only the cyclic GC would free, by type."""
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
            garbage = _kcoord_garbage()
        finally:
            gc.enable()
    finally:
        consumer.close()
        producer.close()
    # Nothing per request; a handful of objects (a timer's, a connection's) would not scale.
    assert sum(garbage.values()) < ROUNDS // 10, garbage.most_common(10)
