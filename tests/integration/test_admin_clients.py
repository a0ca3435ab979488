"""The admin APIs of one node through Python clients: confluent-kafka's AdminClient (librdkafka:
delete_records, the legacy alter_configs, elect_leaders), aiokafka's (legacy alter_configs,
delete_records) and kafka-python 3's KafkaAdminClient (every one of them), plus kafka-python's
broker version probe, which must take kcoord for the Kafka 4.3 it answers as."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType
from kafka.errors import OffsetOutOfRangeError
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS, infer_broker_version_from_api_versions

from kcoord.protocol.messages import ApiKey
from kcoord.server.api_table import build_table
from tests.harness import BrokerProcess
from tests.wire import build_batch

T0 = int(time.time() * 1000) - 60_000


@pytest.fixture
def topic5(broker: BrokerProcess, unique_topic: str) -> str:
    """Two partitions; partition 0 holds offsets 0-4."""
    with broker.connect() as c:
        c.create_topic(unique_topic, partitions=2)
        c.produce(unique_topic, 0, build_batch(count=5, timestamp=T0))
    return unique_topic


# --- kafka-python ---------------------------------------------------------------------------------
@pytest.fixture
def kadmin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    yield a
    a.close()


def test_kafka_python_takes_kcoord_for_kafka_4_3(broker: BrokerProcess, kadmin: KafkaAdminClient) -> None:
    """kafka-python infers the broker version from ApiVersions (4.3: DescribeLogDirs v5); the
    APIs of one node are advertised at exactly the versions of Kafka 4.3's table."""
    assert kadmin.get_broker_version_data(1).broker_version == (4, 3)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        assert consumer.config["api_version"] == (4, 3)
    finally:
        consumer.close()
    advertised = {spec.key: (spec.min_version, spec.max_version) for spec in build_table()}
    assert infer_broker_version_from_api_versions(advertised) == (4, 3)
    kafka_4_3 = BROKER_API_VERSIONS[(4, 3)]
    for key in (
        ApiKey.DeleteRecords,
        ApiKey.AlterConfigs,
        ApiKey.DescribeLogDirs,
        ApiKey.ElectLeaders,
        ApiKey.AlterPartitionReassignments,
        ApiKey.ListPartitionReassignments,
        ApiKey.ListConfigResources,
    ):
        assert advertised[key] == kafka_4_3[key], key.name


def test_kafka_python_admin(broker: BrokerProcess, kadmin: KafkaAdminClient, topic5: str) -> None:
    tp0, tp1 = TopicPartition(topic5, 0), TopicPartition(topic5, 1)
    assert kadmin.delete_records({tp0: 3})[tp0]["low_watermark"] == 3
    with pytest.raises(OffsetOutOfRangeError):
        kadmin.delete_records({tp0: 6})
    assert kadmin.list_partition_offsets({tp0: -2})[tp0].offset == 3

    (described,) = kadmin.describe_log_dirs()
    (log_dir,) = described["log_dirs"]
    assert log_dir["log_dir"] == str(broker.data_dir.absolute())
    assert log_dir["is_cordoned"] is False
    parts = {
        p["partition_index"]: p for t in log_dir["topics"] if t["name"] == topic5 for p in t["partitions"]
    }
    assert parts[0]["partition_size"] > 0 and parts[1]["partition_size"] == 0
    assert {(p["offset_lag"], p["is_future_key"]) for p in parts.values()} == {(0, False)}

    # Legacy AlterConfigs: the given set replaces the topic's configs; kafka-python first adds
    # the topic's current dynamic configs to it (_add_missing_dynamic_configs), so nothing is lost.
    res = KConfigResource(ConfigResourceType.TOPIC, topic5, configs={"retention.ms": "60000"})
    assert kadmin.alter_configs([res], incremental=False) == {"topic": {topic5: "OK"}}
    res = KConfigResource(ConfigResourceType.TOPIC, topic5, configs={"segment.ms": "600000"})
    assert kadmin.alter_configs([res], incremental=False) == {"topic": {topic5: "OK"}}
    with broker.connect() as c:
        from tests.conformance.test_admin_wire import describe_configs

        configs = describe_configs(c, 2, topic5)
    assert configs["segment.ms"] == ("600000", True)
    assert configs["retention.ms"] == ("60000", True)

    listed = kadmin.list_config_resources()
    assert topic5 in listed["topic"] and listed["broker"] == ["1"] and listed["broker_logger"] == ["1"]
    assert kadmin.list_config_resources(["topic"]).keys() == {"topic"}

    elected = kadmin.elect_leaders(0, {topic5: [0, 1]})
    assert {
        (p.partition_id, p.error_code) for r in elected.replica_election_results for p in r.partition_result
    } == {
        (0, KafkaError.ELECTION_NOT_NEEDED),
        (1, KafkaError.ELECTION_NOT_NEEDED),
    }
    reassigned = kadmin.alter_partition_reassignments({tp0: [1], tp1: [2]})
    assert reassigned[tp0] is None
    assert reassigned[tp1].errno == 39  # INVALID_REPLICA_ASSIGNMENT
    assert kadmin.list_partition_reassignments() == {}
    assert kadmin.list_partition_reassignments([tp0]) == {}


# --- confluent-kafka ----------------------------------------------------------------------------------
@pytest.fixture
def cadmin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def test_confluent_delete_records(broker: BrokerProcess, cadmin: AdminClient, topic5: str) -> None:
    futures = cadmin.delete_records([CTopicPartition(topic5, 0, 2)], request_timeout=10)
    assert next(iter(futures.values())).result().low_watermark == 2
    (f,) = cadmin.delete_records([CTopicPartition(topic5, 0, 9)], request_timeout=10).values()
    with pytest.raises(KafkaException) as e:
        f.result()
    assert e.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE
    (f,) = cadmin.delete_records([CTopicPartition("__consumer_offsets", 0, 0)], request_timeout=10).values()
    with pytest.raises(KafkaException) as e:
        f.result()
    assert e.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    # A consumer from the beginning starts at the new log start offset.
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.assign([CTopicPartition(topic5, 0, -2)])  # OFFSET_BEGINNING
        offsets: list[int] = []
        deadline = time.monotonic() + 20
        while len(offsets) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                offsets.append(msg.offset())
        assert offsets == [2, 3, 4]
    finally:
        consumer.close()
    # OFFSET_END (-1): everything up to the high watermark.
    (f,) = cadmin.delete_records([CTopicPartition(topic5, 0, -1)], request_timeout=10).values()
    assert f.result().low_watermark == 5
    lo, hi = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"}).get_watermark_offsets(
        CTopicPartition(topic5, 0), timeout=10
    )
    assert (lo, hi) == (5, 5)


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_confluent_legacy_alter_configs(broker: BrokerProcess, cadmin: AdminClient, topic5: str) -> None:
    def described() -> dict[str, tuple[str, int]]:
        (f,) = cadmin.describe_configs([ConfigResource("topic", topic5)], request_timeout=10).values()
        return {name: (e.value, e.source) for name, e in f.result().items()}

    (f,) = cadmin.alter_configs(
        [ConfigResource("topic", topic5, set_config={"retention.ms": "60000", "segment.ms": "600000"})],
        request_timeout=10,
    ).values()
    f.result()
    configs = described()
    assert configs["retention.ms"] == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert configs["segment.ms"] == ("600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    (f,) = cadmin.alter_configs(
        [ConfigResource("topic", topic5, set_config={"segment.ms": "700000"})], request_timeout=10
    ).values()
    f.result()
    configs = described()
    assert configs["segment.ms"] == ("700000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert configs["retention.ms"][1] != ConfigSource.DYNAMIC_TOPIC_CONFIG.value  # replaced, not merged
    (f,) = cadmin.alter_configs(
        [ConfigResource("topic", topic5, set_config={"retention.ms": "soon"})], request_timeout=10
    ).values()
    with pytest.raises(KafkaException) as e:
        f.result()
    assert e.value.args[0].code() == KafkaError.INVALID_CONFIG


def test_confluent_elect_leaders(cadmin: AdminClient, topic5: str) -> None:
    for election in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        result = cadmin.elect_leaders(
            election, [CTopicPartition(topic5, 0), CTopicPartition(topic5, 1)]
        ).result()
        assert {(tp.topic, tp.partition) for tp in result} == {(topic5, 0), (topic5, 1)}
        for err in result.values():
            assert isinstance(err, KafkaError) and err.code() == KafkaError.ELECTION_NOT_NEEDED


# --- aiokafka ------------------------------------------------------------------------------------
async def test_aiokafka_legacy_alter_configs_and_delete_records(broker: BrokerProcess, topic5: str) -> None:
    from aiokafka import TopicPartition as ATopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete
    from aiokafka.admin.config_resource import ConfigResource as AConfigResource
    from aiokafka.admin.config_resource import ConfigResourceType as AConfigResourceType

    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        res = AConfigResource(AConfigResourceType.TOPIC, topic5, {"segment.ms": "600000"})
        (resp,) = await admin.alter_configs([res])
        assert [(code, name) for code, _msg, _type, name in resp.resources] == [(0, topic5)]
        with broker.connect() as c:
            from tests.conformance.test_admin_wire import describe_configs

            assert describe_configs(c, 2, topic5)["segment.ms"] == ("600000", True)
        tp = ATopicPartition(topic5, 0)
        assert await admin.delete_records({tp: RecordsToDelete(before_offset=4)}) == {tp: 4}
    finally:
        await admin.close()
