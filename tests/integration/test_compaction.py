"""Compacted data topics with real clients and the real broker process (issue 16).

kafka-python produces (idempotent, gzip) to a ``cleanup.policy=compact`` topic whose segments
roll every 200 ms; the broker's cleaner (log.cleaner.backoff.ms 100) compacts it while idle, and
a consumer from offset 0 reads each key once, at the offset its last write got. The producer
keeps producing afterwards. The slow test kills the broker with SIGKILL while it cleans, many
times, and checks the log after every restart.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewTopic
from kafka.errors import InvalidConfigurationError

from kcoord.protocol import records
from tests.harness import BrokerFactory, BrokerProcess
from tests.unit.logutil import written_headers

CLEANER_ARGS = ["--log-cleaner-backoff-ms", "100", "--log-retention-check-interval-ms", "100"]
COMPACT = {
    "cleanup.policy": "compact",
    "segment.ms": "200",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
}


@pytest.fixture
def cleaning_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(CLEANER_ARGS)


@pytest.fixture
def admin(cleaning_broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=cleaning_broker.bootstrap, request_timeout_ms=10_000)
    yield a
    a.close()


def read_all(broker: BrokerProcess, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    end = consumer.end_offsets([tp])[tp]
    out = []
    deadline = time.monotonic() + 20
    while consumer.position(tp) < end and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            out += [(r.offset, r.key, r.value) for r in recs]
    consumer.close()
    return out


def test_real_client_reads_a_compacted_topic(cleaning_broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    topic = "compacted"
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs=COMPACT)])
    producer = KafkaProducer(
        bootstrap_servers=cleaning_broker.bootstrap,
        enable_idempotence=True,
        compression_type="gzip",
        linger_ms=5,
    )
    last_offset: dict[bytes, int] = {}
    for round_ in range(30):
        for k in range(10):
            key = b"key-%d" % k
            value = None if k == 9 and round_ == 29 else b"value-%d-%d" % (k, round_) * 10
            last_offset[key] = producer.send(topic, key=key, value=value).get(10).offset
        time.sleep(0.01)
    producer.flush()
    expected = {
        k: (o, None if k == b"key-9" else b"value-%s-29" % k[4:] * 10) for k, o in last_offset.items()
    }
    deadline = time.monotonic() + 30
    seen: list[tuple[int, bytes, bytes | None]] = []
    while time.monotonic() < deadline:
        seen = read_all(cleaning_broker, topic)
        keys = [k for _o, k, _v in seen]
        if len(keys) == len(set(keys)) and b"key-9" not in keys:
            break
        time.sleep(0.3)
    # Each key once, at the offset of its last write; the tombstone went (delete.retention.ms 0).
    assert {k: (o, v) for o, k, v in seen} == {k: ov for k, ov in expected.items() if k != b"key-9"}
    assert [o for o, _k, _v in seen] == sorted(o for o, _k, _v in seen)
    # The idempotent producer goes on after its batches were compacted away.
    more = producer.send(topic, key=b"key-0", value=b"after").get(10)
    assert more.offset == max(last_offset.values()) + 1
    producer.close()
    assert read_all(cleaning_broker, topic)[-1] == (more.offset, b"key-0", b"after")


def test_compact_is_accepted_by_create_and_alter(admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("both", 1, 1, topic_configs={"cleanup.policy": "compact,delete"})])
    admin.create_topics([NewTopic("plain", 1, 1)])
    admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, "plain", configs={"cleanup.policy": "compact"})]
    )
    wanted = ConfigResource(ConfigResourceType.TOPIC, "plain", configs={"cleanup.policy": None})
    described = admin.describe_configs([wanted], config_filter="all")["topic"]["plain"]
    assert described["cleanup.policy"]["value"] == "compact"
    with pytest.raises(InvalidConfigurationError):
        admin.create_topics([NewTopic("bad", 1, 1, topic_configs={"min.cleanable.dirty.ratio": "1.5"})])


@pytest.mark.slow
def test_kill_9_while_cleaning_leaves_a_readable_compacted_log(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(CLEANER_ARGS)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    admin.create_topics(
        [NewTopic("crashy", 1, 1, topic_configs={**COMPACT, "delete.retention.ms": "86400000"})]
    )
    admin.close()
    latest: dict[bytes, bytes] = {}
    rng = random.Random(16)
    for round_ in range(6):
        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap, compression_type="lz4", linger_ms=5, acks="all"
        )
        for i in range(3000):
            key = b"k%d" % rng.randrange(200)
            value = b"r%d-i%d-" % (round_, i) * 20
            producer.send("crashy", key=key, value=value)
            latest[key] = value
        producer.flush()
        producer.close()
        time.sleep(rng.uniform(0.2, 1.0))  # segments roll and the cleaner starts: kill it then
        broker.kill()
        broker.start()
        for seg in sorted((broker.data_dir / "crashy-0").glob("*.log")):
            data = seg.read_bytes()
            for h in written_headers(data):
                assert records.crc_of(data, h.position, h.size) == h.crc, seg
        seen = read_all(broker, "crashy")
        last: dict[bytes, bytes | None] = {}
        for _o, k, v in seen:
            last[k] = v
        assert last == latest
