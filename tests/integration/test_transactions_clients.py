"""Transactional producers of kafka-python and confluent-kafka (librdkafka) against the broker:

- commit, abort, commit: a read_committed consumer sees exactly the committed records (in
  order per partition), a read_uncommitted one every record;
- consume-transform-produce with send_offsets_to_transaction in a classic group: a committed
  transaction commits the group's offsets with its records, an aborted one neither;
- confluent-kafka: a second producer with the same transactional.id fences the first (fatal
  _FENCED), and a transaction open past transaction.timeout.ms is aborted by the broker: its
  commit fails, read_committed sees none of it, and the producer recovers the way librdkafka
  does (abort_transaction, then a new transaction commits) or reports a fatal error.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.protocol.consumer.group import OffsetFetchRequest
from kafka.structs import OffsetAndMetadata

from tests.harness import BrokerProcess, read_to_end, shared_broker
from tests.wire import ApiKey, build_batch

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402

# No initial rebalance delay (the groups here have one member), and a short cleanup interval so
# that the broker aborts a timed-out transaction within a second.
XBROKER_FLAGS = [
    "--group-initial-rebalance-delay-ms", "0",
    "--transaction-abort-timed-out-transaction-cleanup-interval-ms", "200",
]  # fmt: skip
_xbroker_started, xbroker = shared_broker("xbroker", XBROKER_FLAGS)


@pytest.fixture
def topics(xbroker: BrokerProcess) -> Iterator[tuple[str, str]]:
    """An input topic with 20 plain records per partition ("in-<p>-<i>") and an empty output topic,
    both with 2 partitions."""
    base = f"txn-{uuid.uuid4().hex[:8]}"
    with xbroker.connect() as c:
        for name in (base + "-in", base + "-out"):
            c.create_topic(name, partitions=2)
        for p in range(2):
            recs = [(None, f"in-{p}-{i}".encode(), 1_700_000_000_000 + i) for i in range(20)]
            assert c.produce(base + "-in", p, build_batch(recs)).error_code == 0
    yield base + "-in", base + "-out"


def read(bootstrap: str, topic: str, isolation: str) -> dict[int, list[str]]:
    """Every value of the topic's two partitions at the isolation level, per partition."""
    out: dict[int, list[str]] = {0: [], 1: []}
    for m in read_to_end(bootstrap, [(topic, 0), (topic, 1)], isolation, idle_s=1.5):
        out[m.partition].append(m.value.decode())
    return out


def committed(broker: BrokerProcess, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets (RequireStable: waits out pending transactional commits)."""
    req = OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])
    deadline = time.monotonic() + 10
    with broker.connect() as c:
        while True:
            resp = c.request(ApiKey.OffsetFetch, 7, group_id=group, topics=[req], require_stable=True)
            errors = {p.error_code for p in resp.topics[0].partitions} | {resp.error_code}
            if errors == {0} or time.monotonic() > deadline:
                assert errors == {0}, resp
                return {p.partition_index: p.committed_offset for p in resp.topics[0].partitions}
            time.sleep(0.1)  # UNSTABLE_OFFSET_COMMIT until the transaction's markers are written


# --- kafka-python --------------------------------------------------------------------------------
def test_kafka_python_transactions(xbroker: BrokerProcess, topics: tuple[str, str]) -> None:
    src, dst = topics
    group = f"{dst}-kp"
    producer = KafkaProducer(bootstrap_servers=xbroker.bootstrap, transactional_id=f"{dst}-kp")
    consumer = KafkaConsumer(
        src,
        bootstrap_servers=xbroker.bootstrap,
        group_id=group,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=10,
    )
    try:
        producer.init_transactions()

        def transform(commit: bool) -> list[tuple[int, str]]:
            batch: dict[KTopicPartition, list[Any]] = {}
            deadline = time.monotonic() + 20
            while not batch:
                assert time.monotonic() < deadline, "no input records"
                batch = consumer.poll(timeout_ms=500)
            producer.begin_transaction()
            sent = []
            offsets = {}
            for tp, msgs in batch.items():
                for m in msgs:
                    value = "out-" + m.value.decode()
                    producer.send(dst, value=value.encode(), partition=tp.partition)
                    sent.append((tp.partition, value))
                offsets[tp] = OffsetAndMetadata(msgs[-1].offset + 1, "", -1)
            producer.flush()  # an abort drops unsent records; these must reach the log first
            producer.send_offsets_to_transaction(offsets, group)
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
                for tp in batch:  # reprocess what the aborted transaction had consumed
                    consumer.seek(tp, min(m.offset for m in batch[tp]))
            return sent

        first = transform(commit=True)
        after_first = committed(xbroker, group, src)
        assert sum(o for o in after_first.values() if o >= 0) == len(first)
        aborted = transform(commit=False)
        assert committed(xbroker, group, src) == after_first, "an aborted transaction commits no offsets"
        second = transform(commit=True)
        assert sum(o for o in committed(xbroker, group, src).values() if o >= 0) == len(first) + len(second)
    finally:
        consumer.close()
        producer.close()
    expect = {0: [v for p, v in first + second if p == 0], 1: [v for p, v in first + second if p == 1]}
    assert read(xbroker.bootstrap, dst, "read_committed") == expect
    everything = read(xbroker.bootstrap, dst, "read_uncommitted")
    assert sorted(everything[0] + everything[1]) == sorted(v for _, v in first + aborted + second)


# --- confluent-kafka ----------------------------------------------------------------------------------
def ck_producer(broker: BrokerProcess, txid: str, **extra: object) -> Producer:
    config = {"bootstrap.servers": broker.bootstrap, "transactional.id": txid, "linger.ms": 5}
    return Producer({**config, **extra})


def ck_produce(producer: Producer, topic: str, values: list[tuple[int, str]]) -> None:
    errors: list[object] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(err)

    for p, v in values:
        producer.produce(topic, value=v.encode(), partition=p, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert errors == []


def test_confluent_transactions(xbroker: BrokerProcess, topics: tuple[str, str]) -> None:
    src, dst = topics
    group = f"{dst}-ck"
    producer = ck_producer(xbroker, f"{dst}-ck")
    consumer = Consumer(
        {
            "bootstrap.servers": xbroker.bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        producer.init_transactions(30)
        consumer.subscribe([src])

        def transform(commit: bool) -> list[tuple[int, str]]:
            msgs: list[Any] = []
            deadline = time.monotonic() + 20
            while not msgs:
                assert time.monotonic() < deadline, "no input records"
                msgs = consumer.consume(num_messages=15, timeout=0.5)
            assert all(m.error() is None for m in msgs)
            producer.begin_transaction()
            sent = [(m.partition(), "out-" + m.value().decode()) for m in msgs]
            ck_produce(producer, dst, sent)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            if commit:
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
                firsts: dict[int, int] = {}
                for m in msgs:
                    firsts[m.partition()] = min(firsts.get(m.partition(), m.offset()), m.offset())
                for p, o in firsts.items():  # reprocess what the aborted transaction had consumed
                    consumer.seek(TopicPartition(src, p, o))
            return sent

        first = transform(commit=True)
        after_first = committed(xbroker, group, src)
        assert sum(o for o in after_first.values() if o >= 0) == len(first)
        aborted = transform(commit=False)
        assert committed(xbroker, group, src) == after_first, "an aborted transaction commits no offsets"
        second = transform(commit=True)
        assert sum(o for o in committed(xbroker, group, src).values() if o >= 0) == len(first) + len(second)
    finally:
        consumer.close()
    expect = {0: [v for p, v in first + second if p == 0], 1: [v for p, v in first + second if p == 1]}
    assert read(xbroker.bootstrap, dst, "read_committed") == expect
    everything = read(xbroker.bootstrap, dst, "read_uncommitted")
    assert sorted(everything[0] + everything[1]) == sorted(v for _, v in first + aborted + second)

    # A second producer with the same transactional.id fences the first.
    producer.begin_transaction()
    ck_produce(producer, dst, [(0, "fenced-0")])
    second_producer = ck_producer(xbroker, f"{dst}-ck")
    second_producer.init_transactions(30)
    with pytest.raises(KafkaException) as fenced:
        ck_produce(producer, dst, [(0, "fenced-1")])
        producer.commit_transaction(30)
    assert fenced.value.args[0].fatal(), fenced.value
    second_producer.begin_transaction()
    ck_produce(second_producer, dst, [(1, "after-fence")])
    second_producer.commit_transaction(30)
    expect[1].append("after-fence")
    assert read(xbroker.bootstrap, dst, "read_committed") == expect


def test_confluent_transaction_timed_out(xbroker: BrokerProcess, topics: tuple[str, str]) -> None:
    """The broker aborts a transaction open past transaction.timeout.ms (bumping the epoch); the
    producer's commit fails. librdkafka then either needs abort_transaction and an epoch bump
    (InitProducerId naming its producer id and epoch, KIP-360) or reports a fatal error."""
    _, dst = topics
    producer = ck_producer(xbroker, f"{dst}-timeout", **{"transaction.timeout.ms": 1000})
    producer.init_transactions(30)
    producer.begin_transaction()
    ck_produce(producer, dst, [(0, "timed-out")])
    # Until the broker has aborted it (a fixed sleep would race with a loaded machine).
    deadline = time.monotonic() + 20
    with xbroker.connect() as c:
        while True:
            r = c.request(ApiKey.DescribeTransactions, 0, transactional_ids=[f"{dst}-timeout"])
            state = r.transaction_states[0]
            if state.transaction_state == "CompleteAbort":
                assert state.producer_epoch == 1, "the broker's abort fences the producer (epoch 0)"
                break
            assert time.monotonic() < deadline, state
            time.sleep(0.1)
    with pytest.raises(KafkaException) as failed:
        producer.commit_transaction(30)
    error: KafkaError = failed.value.args[0]
    assert read(xbroker.bootstrap, dst, "read_committed") == {0: [], 1: []}
    assert read(xbroker.bootstrap, dst, "read_uncommitted") == {0: ["timed-out"], 1: []}
    if not error.fatal():
        assert error.txn_requires_abort(), error
        producer.abort_transaction(30)
        producer.begin_transaction()
        ck_produce(producer, dst, [(1, "after-timeout")])
        producer.commit_transaction(30)
        assert read(xbroker.bootstrap, dst, "read_committed") == {0: [], 1: ["after-timeout"]}
