"""Topic configs that change what the broker does, set and read through real admin clients and
exercised by real producers and consumers: compression.type (recompression on append)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from kcoord.protocol import records
from tests.harness import BrokerProcess

CODECS = ["uncompressed", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def cadmin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def create(cadmin: AdminClient, name: str, configs: dict[str, str]) -> None:
    (f,) = cadmin.create_topics([NewTopic(name, 1, 1, config=configs)], request_timeout=10).values()
    f.result()


def describe(cadmin: AdminClient, name: str) -> dict[str, str]:
    (f,) = cadmin.describe_configs([ConfigResource("topic", name)], request_timeout=10).values()
    return {k: v.value for k, v in f.result().items()}


def set_config(cadmin: AdminClient, name: str, key: str, value: str) -> None:
    entry = ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)
    (f,) = cadmin.incremental_alter_configs(
        [ConfigResource("topic", name, incremental_configs=[entry])], request_timeout=10
    ).values()
    f.result()


def stored_codecs(broker: BrokerProcess, topic: str) -> list[int]:
    """The codec of every batch the broker returns (its attributes as stored)."""
    with broker.connect() as c:
        raw = c.fetch(topic, 0, 0).records or b""
    return [h.compression for h in records.iter_headers(raw)]


def consume_kafka_python(broker: BrokerProcess, topic: str, n: int) -> list[tuple[int, bytes, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek(TopicPartition(topic, 0), 0)
        out: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=500).values():
                out.extend((r.offset, r.key, r.value) for r in recs)
        return out
    finally:
        consumer.close()


def consume_confluent(broker: BrokerProcess, topic: str, n: int) -> list[tuple[int, bytes, bytes]]:
    from confluent_kafka import TopicPartition as CTP

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        consumer.assign([CTP(topic, 0, 0)])
        out: list[tuple[int, bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while len(out) < n and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        consumer.close()


@pytest.fixture
def kproducer(broker: BrokerProcess) -> Iterator[KafkaProducer]:
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip", acks="all", linger_ms=5)
    yield p
    p.close()


def test_compression_type_recompresses_for_real_clients(
    broker: BrokerProcess, cadmin: AdminClient, kproducer: KafkaProducer, unique_topic: str
) -> None:
    create(cadmin, unique_topic, {"compression.type": "zstd"})
    assert describe(cadmin, unique_topic)["compression.type"] == "zstd"
    expected = []
    for i in range(20):
        kproducer.send(unique_topic, key=b"k%d" % i, value=b"gzip-sent %d " % i * 30, partition=0)
        expected.append((i, b"k%d" % i, b"gzip-sent %d " % i * 30))
    kproducer.flush()
    # Switch the codec: later batches get the new one, earlier ones keep theirs.
    set_config(cadmin, unique_topic, "compression.type", "lz4")
    assert describe(cadmin, unique_topic)["compression.type"] == "lz4"
    cproducer = Producer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": "snappy", "enable.idempotence": True}
    )
    for i in range(20, 40):
        cproducer.produce(unique_topic, key=b"k%d" % i, value=b"snappy-sent %d " % i * 30, partition=0)
        expected.append((i, b"k%d" % i, b"snappy-sent %d " % i * 30))
    assert cproducer.flush(30) == 0
    codecs = stored_codecs(broker, unique_topic)
    assert codecs and set(codecs) <= {CODECS.index("zstd"), CODECS.index("lz4")}
    assert CODECS.index("zstd") in codecs and codecs[-1] == CODECS.index("lz4")
    assert consume_kafka_python(broker, unique_topic, 40) == expected
    assert consume_confluent(broker, unique_topic, 40) == expected


def test_producer_default_keeps_the_producers_codec(
    broker: BrokerProcess, cadmin: AdminClient, kproducer: KafkaProducer, unique_topic: str
) -> None:
    create(cadmin, unique_topic, {})
    assert describe(cadmin, unique_topic)["compression.type"] == "producer"
    for i in range(5):
        kproducer.send(unique_topic, key=b"k", value=b"v%d " % i * 50, partition=0)
    kproducer.flush()
    assert set(stored_codecs(broker, unique_topic)) == {CODECS.index("gzip")}


def test_bad_compression_configs_change_nothing(cadmin: AdminClient, unique_topic: str) -> None:
    from confluent_kafka import KafkaError, KafkaException

    create(cadmin, unique_topic, {"compression.type": "gzip"})
    for key, value in [("compression.type", "brotli"), ("compression.zstd.level", "99")]:
        with pytest.raises(KafkaException) as e:
            set_config(cadmin, unique_topic, key, value)
        assert e.value.args[0].code() == KafkaError.INVALID_CONFIG
        assert f"Invalid value {value} for configuration {key}" in e.value.args[0].str()
    configs = describe(cadmin, unique_topic)
    assert (configs["compression.type"], configs["compression.zstd.level"]) == ("gzip", "3")


def test_append_configs_through_real_clients(
    broker: BrokerProcess, cadmin: AdminClient, unique_topic: str
) -> None:
    """LogAppendTime, the flush limits and segment jitter set by Admin, read back by
    DescribeConfigs, and what producers and consumers see of them."""
    from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

    configs = {
        "message.timestamp.type": "LogAppendTime",
        "flush.messages": "1",
        "flush.ms": "100",
        "segment.jitter.ms": "60000",
    }
    create(cadmin, unique_topic, configs)
    described = describe(cadmin, unique_topic)
    assert {k: described[k] for k in configs} == configs
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    before = int(time.time() * 1000)
    producer.produce(unique_topic, key=b"k", value=b"v", partition=0, timestamp=1_000)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        from confluent_kafka import TopicPartition as CTP

        consumer.assign([CTP(unique_topic, 0, 0)])
        deadline = time.monotonic() + 30
        m = None
        while m is None and time.monotonic() < deadline:
            m = consumer.poll(0.5)
        assert m is not None and m.error() is None
        kind, ts = m.timestamp()
        assert kind == TIMESTAMP_LOG_APPEND_TIME and ts >= before
    finally:
        consumer.close()


def test_max_message_bytes_refuses_a_larger_batch(
    broker: BrokerProcess, cadmin: AdminClient, unique_topic: str
) -> None:
    from kafka.errors import MessageSizeTooLargeError

    create(cadmin, unique_topic, {"max.message.bytes": "2000"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, max_request_size=1 << 20, retries=0)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(unique_topic, value=b"x" * 5000, partition=0).get(timeout=30)
        assert producer.send(unique_topic, value=b"x" * 500, partition=0).get(timeout=30).offset == 0
    finally:
        producer.close()


def test_zstd_topics_refuse_fetches_older_than_v10(broker: BrokerProcess, unique_topic: str) -> None:
    """Kafka's KafkaApis: a client that fetches below v10 cannot read zstd."""
    with broker.connect() as c:
        c.create_topic(unique_topic, configs={"compression.type": "zstd"})
        c.create_topic(unique_topic + "-gzip", configs={"compression.type": "gzip"})
        assert c.fetch(unique_topic, 0, 0, version=9).error_code == 76  # UNSUPPORTED_COMPRESSION_TYPE
        assert c.fetch(unique_topic, 0, 0, version=10).error_code == 0
        assert c.fetch(unique_topic + "-gzip", 0, 0, version=9).error_code == 0


def test_out_of_range_timestamps_are_answered_per_record(broker: BrokerProcess, unique_topic: str) -> None:
    """Produce v8+ record_errors: the index of every record out of message.timestamp.*.max.ms."""
    from tests.wire import build_batch

    now = int(time.time() * 1000)
    with broker.connect() as c:
        c.create_topic(unique_topic, configs={"message.timestamp.before.max.ms": "60000"})
        old = now - 10 * 60_000
        batch = build_batch([(b"a", b"1", now), (b"b", b"2", old), (b"c", b"3", now)])
        got = c.produce(unique_topic, 0, batch, version=9)
        assert got.error_code == 32  # INVALID_TIMESTAMP
        assert got.error_message == "One or more records have been rejected due to invalid timestamp"
        assert [
            (e.batch_index, e.batch_index_error_message.split(" is out")[0]) for e in got.record_errors
        ] == [(1, f"Timestamp {old} of message with offset 1")]
        assert c.list_offsets(unique_topic, 0, -1).offset == 0  # nothing appended
        assert c.produce(unique_topic, 0, build_batch([(b"a", b"1", now)]), version=9).error_code == 0
