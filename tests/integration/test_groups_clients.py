"""Python clients in consumer groups, and their admin clients on groups and offsets.

- confluent-kafka 2.16 (librdkafka): subscribe, poll, commit, committed; a new consumer resumes
  after the commit; AdminClient list_consumer_groups, describe_consumer_groups,
  list/alter_consumer_group_offsets, delete_consumer_groups (refused while a member is active);
- kafka-python 3.0: KafkaConsumer in a group with commit/committed; KafkaAdminClient
  list_groups, describe_groups, list_group_offsets, alter/delete_group_offsets, delete_groups;
- aiokafka 0.14: AIOKafkaConsumer in a group with commit/committed.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.harness import BrokerProcess, shared_broker
from tests.wire import build_batch

FAST_GROUPS = ["--group-initial-rebalance-delay-ms", "0"]


# A broker of this module with no initial rebalance delay.
_gbroker_started, gbroker = shared_broker("gbroker", FAST_GROUPS)


def produce(broker: BrokerProcess, topic: str, partitions: int, per_partition: int, start: int = 0) -> None:
    with broker.connect() as c:
        for p in range(partitions):
            recs = [(None, f"p{p}-{start + i}".encode(), 1_700_000_000_000 + i) for i in range(per_partition)]
            assert c.produce(topic, p, build_batch(recs)).error_code == 0


# --- confluent-kafka ------------------------------------------------------------------------------
def test_confluent_consumer_commit_committed_and_admin(gbroker: BrokerProcess, unique_topic: str) -> None:
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    group = unique_topic + "-g"
    gbroker.create_topic(unique_topic, 2)
    produce(gbroker, unique_topic, 2, 5)
    conf = {
        "bootstrap.servers": gbroker.bootstrap,
        "group.id": group,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "client.id": "ck-member",
    }
    consumer = ck.Consumer(conf)
    consumer.subscribe([unique_topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None:
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.offset()))
    assert sorted(got) == [(p, o) for p in range(2) for o in range(5)]
    committed = consumer.commit(asynchronous=False)
    assert sorted((tp.partition, tp.offset, tp.error) for tp in committed) == [(0, 5, None), (1, 5, None)]
    tps = [TopicPartition(unique_topic, p) for p in range(2)]
    assert [(tp.partition, tp.offset) for tp in consumer.committed(tps, timeout=10)] == [(0, 5), (1, 5)]

    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=10).result().valid}
    assert listed[group].state == ck.ConsumerGroupState.STABLE
    assert not listed[group].is_simple_consumer_group
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    assert (desc.state, desc.partition_assignor, desc.is_simple_consumer_group) == (
        ck.ConsumerGroupState.STABLE,
        "range",
        False,
    )
    (member,) = desc.members
    assert member.client_id == "ck-member"
    assert sorted(tp.partition for tp in member.assignment.topic_partitions) == [0, 1]
    # Deleting a group with an active member is refused (NON_EMPTY_GROUP).
    with pytest.raises(KafkaException) as refused:
        admin.delete_consumer_groups([group], request_timeout=10)[group].result()
    assert refused.value.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP
    consumer.close()  # leaves the group

    # Another consumer of the group resumes after the commit.
    produce(gbroker, unique_topic, 2, 2, start=5)
    consumer = ck.Consumer(conf)
    consumer.subscribe([unique_topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 4 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append((msg.partition(), msg.offset()))
    assert sorted(got) == [(0, 5), (0, 6), (1, 5), (1, 6)]
    consumer.close()  # without committing

    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result()
    assert sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions) == [(0, 5), (1, 5)]
    altered = admin.alter_consumer_group_offsets(
        [
            ConsumerGroupTopicPartitions(
                group, [TopicPartition(unique_topic, 0, 1), TopicPartition(unique_topic, 1, 6)]
            )
        ]
    )[group].result()
    assert sorted((tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions) == [
        (0, 1, None),
        (1, 6, None),
    ]
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result()
    assert [(tp.partition, tp.offset) for tp in offsets.topic_partitions] == [(0, 1), (1, 6)]
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result()
    assert (desc.state, desc.members) == (ck.ConsumerGroupState.EMPTY, [])

    assert admin.delete_consumer_groups([group], request_timeout=10)[group].result() is None
    assert group not in {g.group_id for g in admin.list_consumer_groups(request_timeout=10).result().valid}
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result()
    assert [tp.offset for tp in offsets.topic_partitions] == [ck.OFFSET_INVALID] * 2


# --- kafka-python ---------------------------------------------------------------------------------
def test_kafka_python_consumer_and_admin(gbroker: BrokerProcess, unique_topic: str) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    group = unique_topic + "-g"
    gbroker.create_topic(unique_topic, 2)
    produce(gbroker, unique_topic, 2, 4)
    consumer = KafkaConsumer(
        bootstrap_servers=gbroker.bootstrap,
        group_id=group,
        client_id="kp-member",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.subscribe([unique_topic])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 8 and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=500).values():
            got.extend((r.partition, r.offset) for r in recs)
    assert sorted(got) == [(p, o) for p in range(2) for o in range(4)]
    consumer.commit()
    tp0, tp1 = TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)
    assert (consumer.committed(tp0), consumer.committed(tp1)) == (4, 4)

    admin = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap, request_timeout_ms=10_000)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert (listed[group]["protocol_type"], listed[group]["group_state"]) == ("consumer", "Stable")
        desc = admin.describe_groups([group])[group]
        assert (desc["group_state"], desc["protocol_type"], desc["protocol_data"]) == (
            "Stable",
            "consumer",
            "range",
        )
        assert [m["client_id"] for m in desc["members"]] == ["kp-member"]
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp: o.offset for tp, o in offsets.items()} == {tp0: 4, tp1: 4}
        # While the member consumes the topic its offsets cannot be deleted, nor the group.
        assert admin.delete_group_offsets(group, [tp0])[tp0].__name__ == "GroupSubscribedToTopicError"
        assert admin.delete_groups([group])[group] == "NonEmptyGroupError"
        consumer.close()  # leaves the group

        assert (
            admin.alter_group_offsets(group, {tp0: OffsetAndMetadata(2, "two", -1)})[tp0].__name__
            == "NoError"
        )
        assert admin.delete_group_offsets(group, [tp1])[tp1].__name__ == "NoError"
        offsets = admin.list_group_offsets({group: None})[group]
        assert {tp: (o.offset, o.metadata) for tp, o in offsets.items()} == {tp0: (2, "two")}
        assert admin.describe_groups([group])[group]["group_state"] == "Empty"

        # A new member resumes at the altered offset; the deleted one starts from the beginning.
        consumer = KafkaConsumer(
            bootstrap_servers=gbroker.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        consumer.subscribe([unique_topic])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 6 and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=500).values():
                got.extend((r.partition, r.offset) for r in recs)
        assert sorted(got) == [(0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)], (
            consumer.assignment(),
            admin.describe_groups([group]),
            admin.list_group_offsets({group: None}),
        )
        consumer.close()

        assert admin.delete_groups([group, group + "-never"]) == {
            group: "OK",  # kafka-python's word for NONE here
            group + "-never": "GroupIdNotFoundError",
        }
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.describe_groups([group])[group]["group_state"] == "Dead"
        assert admin.list_group_offsets({group: None})[group] == {}
    finally:
        admin.close()


# --- aiokafka ---------------------------------------------------------------------------------------
async def test_aiokafka_consumer_group_commit(gbroker: BrokerProcess, unique_topic: str) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka import TopicPartition

    group = unique_topic + "-g"
    gbroker.create_topic(unique_topic, 2)
    produce(gbroker, unique_topic, 2, 6)

    async def consume(expected: int, end: int) -> list[tuple[int, int]]:
        """Consume ``expected`` records, commit them; the committed offsets are then ``end``."""
        consumer = aiokafka.AIOKafkaConsumer(
            unique_topic,
            bootstrap_servers=gbroker.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            got: list[tuple[int, int]] = []
            deadline = time.monotonic() + 30
            while len(got) < expected and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=500)
                for recs in batches.values():
                    got.extend((r.partition, r.offset) for r in recs)
            await consumer.commit()
            committed = [await consumer.committed(TopicPartition(unique_topic, p)) for p in range(2)]
            assert committed == [end, end]
            return got
        finally:
            await consumer.stop()

    assert sorted(await consume(12, 6)) == [(p, o) for p in range(2) for o in range(6)]
    produce(gbroker, unique_topic, 2, 3, start=6)
    # The next consumer of the group starts where the commit left off.
    assert sorted(await consume(6, 9)) == [(p, o) for p in range(2) for o in range(6, 9)]
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
    try:
        offsets = await asyncio.to_thread(admin.list_group_offsets, {group: None})
    finally:
        admin.close()
    assert sorted((tp.partition, o.offset) for tp, o in offsets[group].items()) == [(0, 9), (1, 9)]
