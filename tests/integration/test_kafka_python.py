"""kafka-python 3.0 against the broker: admin, produce (plain, idempotent, gzip), assign/seek/poll."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError

from tests.harness import BrokerProcess

T0 = int(time.time() * 1000) - 60_000  # within message.timestamp.after/before.max.ms


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield a
    a.close()


def make_consumer(broker: BrokerProcess, **kw: object) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        enable_auto_commit=False,
        group_id=None,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        **kw,
    )


def poll_all(consumer: KafkaConsumer, expected: int, deadline_s: float = 30.0) -> list:
    out: list = []
    deadline = time.monotonic() + deadline_s
    while len(out) < expected and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            out.extend(recs)
    return out


def test_admin_create_and_delete_topics(admin: KafkaAdminClient, unique_topic: str) -> None:
    names = [unique_topic + "-a", unique_topic + "-b"]
    admin.create_topics(
        [
            NewTopic(names[0], num_partitions=3, replication_factor=1),
            NewTopic(
                names[1], num_partitions=1, replication_factor=1, topic_configs={"retention.ms": "60000"}
            ),
        ]
    )
    assert set(names) <= set(admin.list_topics())
    described = {t["name"]: t for t in admin.describe_topics(names)}
    assert len(described[names[0]]["partitions"]) == 3
    assert described[names[1]]["partitions"][0]["leader_id"] == 1
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics([NewTopic(names[0], num_partitions=1, replication_factor=1)])
    admin.create_partitions({names[1]: NewPartitions(total_count=4)})
    assert len(admin.describe_topics([names[1]])[0]["partitions"]) == 4
    admin.delete_topics(names)
    assert not set(names) & set(admin.list_topics())
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics([names[0]])


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_produce_then_consume_with_assign_and_seek(
    broker: BrokerProcess, admin: KafkaAdminClient, unique_topic: str, compression: str | None
) -> None:
    admin.create_topics([NewTopic(unique_topic, num_partitions=2, replication_factor=1)])
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        acks="all",
        linger_ms=20,
        batch_size=4096,
        compression_type=compression,
    )
    sent = []
    futures = []
    for i in range(200):
        key = f"key-{i}".encode() if i % 7 else None
        value = f"value-{i}".encode() * (i % 5 + 1) if i % 11 or key is None else None
        headers = [("h", str(i).encode()), ("empty", b"")] if i % 3 == 0 else []
        ts = T0 + i * 3
        part = i % 2
        futures.append(
            producer.send(
                unique_topic, value=value, key=key, headers=headers, partition=part, timestamp_ms=ts
            )
        )
        sent.append((part, key, value, headers, ts))
    producer.flush()
    metas = [f.get(timeout=30) for f in futures]
    producer.close()
    # Offsets per partition are contiguous from 0, in send order.
    for part in (0, 1):
        assert [m.offset for m in metas if m.partition == part] == list(range(100))

    tps = [TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)]
    consumer = make_consumer(broker)
    assert consumer.end_offsets(tps) == {tps[0]: 100, tps[1]: 100}
    assert consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
    consumer.assign(tps)
    consumer.seek(tps[0], 0)
    consumer.seek(tps[1], 0)
    got = poll_all(consumer, 200)
    assert len(got) == 200
    by_part: dict[int, list] = {0: [], 1: []}
    for r in got:
        by_part[r.partition].append(r)
    for part in (0, 1):
        recs = by_part[part]
        assert [r.offset for r in recs] == list(range(100))  # each exactly once, in order
        want = [s for s in sent if s[0] == part]
        for r, (_p, key, value, headers, ts) in zip(recs, want, strict=True):
            assert (r.key, r.value, r.timestamp) == (key, value, ts)
            assert list(r.headers) == headers

    # Seek into the middle: the first record returned is the one asked for.
    consumer.seek(tps[1], 57)
    mid = poll_all(consumer, 43)
    assert [r.offset for r in mid if r.partition == 1][:1] == [57]
    assert max(r.offset for r in mid if r.partition == 1) == 99

    # offsets_for_times: the first record at or after the timestamp, not its batch.
    found = consumer.offsets_for_times({tps[0]: T0 + 3 * 50 + 1, tps[1]: T0 + 10**9})
    assert found[tps[0]].offset == 26  # partition 0 holds even i; ts T0+3*52 is its 26th record
    assert found[tps[0]].timestamp == T0 + 3 * 52
    assert found[tps[1]] is None
    consumer.close()


def test_idempotent_producer(broker: BrokerProcess, admin: KafkaAdminClient, unique_topic: str) -> None:
    admin.create_topics([NewTopic(unique_topic, num_partitions=1, replication_factor=1)])
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, enable_idempotence=True, acks="all", linger_ms=5, batch_size=2048
    )
    futures = [producer.send(unique_topic, value=f"m{i}".encode()) for i in range(500)]
    producer.flush()
    assert [f.get(timeout=30).offset for f in futures] == list(range(500))
    producer.close()
    tp = TopicPartition(unique_topic, 0)
    consumer = make_consumer(broker)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = poll_all(consumer, 500)
    assert [(r.offset, r.value) for r in got] == [(i, f"m{i}".encode()) for i in range(500)]
    assert consumer.end_offsets([tp]) == {tp: 500}
    consumer.close()


def test_consumer_waits_for_new_data(
    broker: BrokerProcess, admin: KafkaAdminClient, unique_topic: str
) -> None:
    admin.create_topics([NewTopic(unique_topic, num_partitions=1, replication_factor=1)])
    tp = TopicPartition(unique_topic, 0)
    consumer = make_consumer(broker, fetch_max_wait_ms=2000)
    consumer.assign([tp])
    consumer.seek_to_end(tp)
    assert consumer.position(tp) == 0
    assert consumer.poll(timeout_ms=200) == {}
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1)
    producer.send(unique_topic, value=b"late").get(timeout=30)
    producer.close()
    got = poll_all(consumer, 1)
    assert [(r.offset, r.value) for r in got] == [(0, b"late")]
    consumer.close()
