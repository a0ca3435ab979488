"""Every advertised version is served: one valid request per API and version, over the wire."""

from __future__ import annotations

import uuid

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import request_class
from kcoord.server.api_table import build_table
from tests.harness import BrokerProcess
from tests.unit.logutil import decode
from tests.wire import ApiKey, Conn, build_batch

TABLE = build_table()


def served(key: ApiKey) -> list[int]:
    spec = TABLE.get(key)
    assert spec is not None
    return list(range(spec.min_version, spec.max_version + 1))


@pytest.fixture(scope="module")
def topic(_broker_started: BrokerProcess) -> tuple[str, uuid.UUID]:
    """A topic with 3 records at offsets 0-2 (module-scoped: read-mostly)."""
    name = f"versions-{uuid.uuid4().hex[:8]}"
    with _broker_started.connect() as c:
        created = c.create_topic(name, partitions=1)
        c.produce(name, 0, build_batch(count=3))
    return name, created.topics[0].topic_id


def metadata(c: Conn, version: int, topics: list[str] | None) -> object:
    req = request_class(ApiKey.Metadata)
    return c.request(
        ApiKey.Metadata,
        version,
        topics=None if topics is None else [req.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=version >= 8,
    )


@pytest.mark.parametrize("version", served(ApiKey.Metadata))
def test_metadata(broker: BrokerProcess, topic: tuple[str, uuid.UUID], version: int) -> None:
    name, topic_id = topic
    with broker.connect() as c:
        resp = metadata(c, version, [name])
        (b,) = resp.brokers
        assert (b.node_id, b.host, b.port) == (1, broker.host, broker.port)
        (t,) = resp.topics
        assert (t.error_code, t.name) == (0, name)
        assert [p.partition_index for p in t.partitions] == [0]
        if version >= 10:
            assert t.topic_id == topic_id
        missing = metadata(c, version, [name + "-missing"]) if version >= 4 else None
        if missing is not None:
            assert missing.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_metadata_by_topic_id(broker: BrokerProcess, topic: tuple[str, uuid.UUID]) -> None:
    """As the Java admin client's describeTopics(TopicCollection.ofTopicIds(...)) asks: with an
    empty (not null) name next to the id; Kafka looks the id up and ignores the name."""
    name, topic_id = topic
    req = request_class(ApiKey.Metadata)
    with broker.connect() as c:
        for empty in (None, ""):
            resp = c.request(
                ApiKey.Metadata,
                12,
                topics=[req.MetadataRequestTopic(name=empty, topic_id=topic_id)],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
            (t,) = resp.topics
            assert (t.error_code, t.name, t.topic_id) == (0, name, topic_id)
            unknown = uuid.uuid4()
            resp = c.request(
                ApiKey.Metadata,
                12,
                topics=[req.MetadataRequestTopic(name=empty, topic_id=unknown)],
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
            (t,) = resp.topics
            assert (t.error_code, t.topic_id) == (ErrorCode.UNKNOWN_TOPIC_ID, unknown)


@pytest.mark.parametrize("version", served(ApiKey.Produce))
def test_produce(broker: BrokerProcess, unique_topic: str, version: int) -> None:
    with broker.connect() as c:
        created = c.create_topic(unique_topic)
        req = request_class(ApiKey.Produce)
        td = req.TopicProduceData(
            name=unique_topic,
            topic_id=created.topics[0].topic_id,
            partition_data=[req.TopicProduceData.PartitionProduceData(index=0, records=build_batch(count=4))],
        )
        for expected_base in (0, 4):
            resp = c.request(
                ApiKey.Produce, version, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[td]
            )
            part = resp.responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, expected_base)
        assert c.list_offsets(unique_topic, 0, -1).offset == 8


@pytest.mark.parametrize("version", served(ApiKey.Fetch))
def test_fetch(broker: BrokerProcess, topic: tuple[str, uuid.UUID], version: int) -> None:
    name, topic_id = topic
    req = request_class(ApiKey.Fetch)
    ft = req.FetchTopic(
        topic=name,
        topic_id=topic_id,
        partitions=[
            req.FetchTopic.FetchPartition(
                partition=0,
                current_leader_epoch=-1,
                fetch_offset=1,
                last_fetched_epoch=-1,
                log_start_offset=-1,
                partition_max_bytes=1 << 20,
            )
        ],
    )
    with broker.connect() as c:
        resp = c.request(
            ApiKey.Fetch,
            version,
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=1,
            session_id=0,
            session_epoch=-1,
            topics=[ft],
            forgotten_topics_data=[],
            rack_id="",
        )
    (t,) = resp.responses
    if version >= 13:
        assert t.topic_id == topic_id
    else:
        assert t.topic == name
    (p,) = t.partitions
    assert (p.error_code, p.high_watermark, p.last_stable_offset) == (0, 3, 3)
    assert [r[0] for r in decode(p.records)] == [0, 1, 2]


@pytest.mark.parametrize("version", [v for v in served(ApiKey.ListOffsets) if v > 0])
def test_list_offsets(broker: BrokerProcess, topic: tuple[str, uuid.UUID], version: int) -> None:
    name, _ = topic
    with broker.connect() as c:
        latest = c.list_offsets(name, 0, -1, version=version)
        assert (latest.error_code, latest.offset) == (0, 3)
        assert c.list_offsets(name, 0, -2, version=version).offset == 0
        by_ts = c.list_offsets(name, 0, 1_700_000_000_001, version=version)
        assert (by_ts.offset, by_ts.timestamp) == (1, 1_700_000_000_001)


def test_list_offsets_v0_old_style(broker: BrokerProcess, topic: tuple[str, uuid.UUID]) -> None:
    """v0 (still sent by Burrow 1.2.1/sarama): lists of offsets, as Kafka 0.10 answered them."""
    name, _ = topic
    req = request_class(ApiKey.ListOffsets)

    def ask(timestamp: int, max_offsets: int) -> list[int]:
        part = req.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, timestamp=timestamp, max_num_offsets=max_offsets
        )
        with broker.connect() as c:
            resp = c.request(
                ApiKey.ListOffsets,
                0,
                replica_id=-1,
                topics=[req.ListOffsetsTopic(name=name, partitions=[part])],
            )
        p = resp.topics[0].partitions[0]
        assert p.error_code == 0
        return list(p.old_style_offsets)

    assert ask(-1, 1) == [3]  # latest: the high watermark
    assert ask(-2, 1) == [0]  # earliest: the log start
    assert ask(-1, 5) == [3, 0]  # the high watermark, then segment starts, largest first
    assert ask(0, 5) == []  # nothing is that old


@pytest.mark.parametrize("version", served(ApiKey.OffsetForLeaderEpoch))
def test_offset_for_leader_epoch(broker: BrokerProcess, topic: tuple[str, uuid.UUID], version: int) -> None:
    name, _ = topic
    req = request_class(ApiKey.OffsetForLeaderEpoch)
    t = req.OffsetForLeaderTopic(
        topic=name,
        partitions=[
            req.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=0, leader_epoch=0
            )
        ],
    )
    with broker.connect() as c:
        resp = c.request(ApiKey.OffsetForLeaderEpoch, version, replica_id=-1, topics=[t])
    (p,) = resp.topics[0].partitions
    assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 3)


@pytest.mark.parametrize("version", served(ApiKey.InitProducerId))
def test_init_producer_id(broker: BrokerProcess, version: int) -> None:
    with broker.connect() as c:
        ids = [
            c.request(
                ApiKey.InitProducerId,
                version,
                transactional_id=None,
                transaction_timeout_ms=60000,
                producer_id=-1,
                producer_epoch=-1,
            )
            for _ in range(2)
        ]
    assert [r.error_code for r in ids] == [0, 0]
    assert ids[0].producer_id != ids[1].producer_id
    assert [r.producer_epoch for r in ids] == [0, 0]


@pytest.mark.parametrize("version", served(ApiKey.DescribeCluster))
def test_describe_cluster(broker: BrokerProcess, version: int) -> None:
    with broker.connect() as c:
        resp = c.request(
            ApiKey.DescribeCluster, version, include_cluster_authorized_operations=False, endpoint_type=1
        )
    assert resp.error_code == 0
    (b,) = resp.brokers
    assert (b.broker_id, b.host, b.port) == (1, broker.host, broker.port)
    assert resp.controller_id == 1 and resp.cluster_id


@pytest.mark.parametrize("version", served(ApiKey.DescribeConfigs))
def test_describe_configs(broker: BrokerProcess, topic: tuple[str, uuid.UUID], version: int) -> None:
    name, _ = topic
    req = request_class(ApiKey.DescribeConfigs)
    with broker.connect() as c:
        resp = c.request(
            ApiKey.DescribeConfigs,
            version,
            resources=[
                req.DescribeConfigsResource(resource_type=2, resource_name=name, configuration_keys=None)
            ],
            include_synonyms=False,
            include_documentation=False,
        )
    (r,) = resp.results
    assert r.error_code == 0
    configs = {e.name: e.value for e in r.configs}
    assert configs["cleanup.policy"] == "delete"
    assert configs["max.message.bytes"] == "1048588"


@pytest.mark.parametrize("version", served(ApiKey.CreateTopics))
def test_create_and_delete_topics(broker: BrokerProcess, unique_topic: str, version: int) -> None:
    req = request_class(ApiKey.CreateTopics)
    with broker.connect() as c:
        resp = c.request(
            ApiKey.CreateTopics,
            version,
            topics=[
                req.CreatableTopic(
                    name=unique_topic, num_partitions=2, replication_factor=1, assignments=[], configs=[]
                )
            ],
            timeout_ms=5000,
            validate_only=False,
        )
        assert resp.topics[0].error_code == 0
        assert len(metadata(c, 9, [unique_topic]).topics[0].partitions) == 2
        dversion = served(ApiKey.DeleteTopics)[min(version, len(served(ApiKey.DeleteTopics)) - 1)]
        dreq = request_class(ApiKey.DeleteTopics)
        resp = c.request(
            ApiKey.DeleteTopics,
            dversion,
            topic_names=[unique_topic],
            topics=[dreq.DeleteTopicState(name=unique_topic, topic_id=uuid.UUID(int=0))],
            timeout_ms=5000,
        )
        assert resp.responses[0].error_code == 0
        assert metadata(c, 9, [unique_topic]).topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# Versions kafka-python's schemas know but kcoord no longer serves (Kafka 4 removed them, KIP-896):
# answered UNSUPPORTED_VERSION through each API's error answer, the connection kept.
@pytest.mark.parametrize("version", [0, 2])
def test_produce_below_v3_is_unsupported(broker: BrokerProcess, unique_topic: str, version: int) -> None:
    req = request_class(ApiKey.Produce)
    td = req.TopicProduceData(
        name=unique_topic,
        partition_data=[req.TopicProduceData.PartitionProduceData(index=0, records=build_batch(count=1))],
    )
    with broker.connect() as c:
        resp = c.request(ApiKey.Produce, version, acks=-1, timeout_ms=5000, topic_data=[td])
        (t,) = resp.responses
        assert [p.error_code for p in t.partition_responses] == [ErrorCode.UNSUPPORTED_VERSION]
        assert c.api_versions().error_code == 0


def test_offset_commit_and_fetch_below_their_served_versions_are_unsupported(broker: BrokerProcess) -> None:
    commit = request_class(ApiKey.OffsetCommit)
    fetch = request_class(ApiKey.OffsetFetch)
    with broker.connect() as c:
        resp = c.request(
            ApiKey.OffsetCommit,
            1,
            group_id="g-v1",
            generation_id_or_member_epoch=-1,
            member_id="",
            topics=[
                commit.OffsetCommitRequestTopic(
                    name="t",
                    partitions=[
                        commit.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=5, commit_timestamp=-1, committed_metadata=""
                        )
                    ],
                )
            ],
        )
        assert [p.error_code for t in resp.topics for p in t.partitions] == [ErrorCode.UNSUPPORTED_VERSION]
        resp = c.request(
            ApiKey.OffsetFetch,
            0,
            group_id="g-v0",
            topics=[fetch.OffsetFetchRequestTopic(name="t", partition_indexes=[0])],
        )
        assert [p.error_code for t in resp.topics for p in t.partitions] == [ErrorCode.UNSUPPORTED_VERSION]
        assert c.api_versions().error_code == 0
