"""confluent-kafka (librdkafka) against the broker: idempotent produce, assign + consume, admin."""

from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from tests.harness import BrokerProcess  # noqa: E402

N = 3000


def create(broker: BrokerProcess, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for fut in admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=1)]
    ).values():
        fut.result(timeout=30)


def test_idempotent_produce_and_consume(broker: BrokerProcess, unique_topic: str) -> None:
    create(broker, unique_topic, 3)
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 10,
            "batch.num.messages": 100,
            "max.in.flight.requests.per.connection": 5,
        }
    )
    now = int(time.time() * 1000)
    delivered: dict[int, list[tuple[int, bytes]]] = {0: [], 1: [], 2: []}
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            delivered[msg.partition()].append((msg.offset(), msg.value()))  # type: ignore[attr-defined]

    sent: dict[bytes, tuple[bytes | None, int, list[tuple[str, bytes]]]] = {}
    for i in range(N):
        value = f"v{i}".encode()
        key = f"k{i % 50}".encode()
        headers = [("seq", str(i).encode())]
        ts = now - N + i
        sent[value] = (key, ts, headers)
        producer.produce(
            unique_topic,
            value=value,
            key=key,
            partition=i % 3,
            headers=headers,
            timestamp=ts,
            on_delivery=on_delivery,
        )
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []
    for part, offs in delivered.items():
        assert sorted(o for o, _ in offs) == list(range(N // 3)), part

    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused-with-assign",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(unique_topic, p, 0) for p in range(3)])
    got: dict[int, list] = {0: [], 1: [], 2: []}
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    while len(eof) < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            assert msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, msg.error()
            eof.add(msg.partition())
            continue
        got[msg.partition()].append(msg)
    for part in range(3):
        msgs = got[part]
        assert [m.offset() for m in msgs] == list(range(N // 3))
        for m in msgs:
            key, ts, headers = sent[m.value()]
            assert m.key() == key
            assert m.timestamp() == (confluent_kafka.TIMESTAMP_CREATE_TIME, ts)
            assert m.headers() == headers
    assert sum(len(v) for v in got.values()) == N
    low, high = consumer.get_watermark_offsets(TopicPartition(unique_topic, 1), timeout=10)
    assert (low, high) == (0, N // 3)
    # offsets_for_times: the first record at or after the timestamp.
    (tp,) = consumer.offsets_for_times([TopicPartition(unique_topic, 0, now - N + 301)], timeout=10)
    assert tp.offset == 101  # partition 0 holds i = 0, 3, 6, ...; i = 303 is its 101st record
    consumer.close()


def test_metadata_and_unknown_topic(broker: BrokerProcess, unique_topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    md = admin.list_topics(timeout=10)
    assert list(md.brokers) == [1]
    assert md.brokers[1].port == broker.port
    create(broker, unique_topic, 2)
    md = admin.list_topics(topic=unique_topic, timeout=10)
    assert sorted(md.topics[unique_topic].partitions) == [0, 1]
