"""``kcoord topics`` against a real broker: create (partitions, configs), list, describe (leaders,
offsets, configs), delete; Kafka errors exit with status 1 and name their code."""

from __future__ import annotations

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.harness import BrokerProcess
from tests.integration.cli import kcoord, kcoord_json, kcoord_process


def test_create_describe_list_delete(broker: BrokerProcess, unique_topic: str) -> None:
    topic = unique_topic
    made = kcoord_json(
        broker, "topics", "create", topic, "--partitions", "3", "--config", "retention.ms=3600000",
        "--config", "max.message.bytes=200000",
    )  # fmt: skip
    assert made == {"topic": topic, "created": True, "partitions": 3}

    again = kcoord(broker, "topics", "create", topic, "--partitions", "3")
    assert again.code == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert kcoord(broker, "topics", "create", topic, "--if-not-exists").code == 0
    assert kcoord(broker, "topics", "create", topic, "--config", "retention.ms").code == 2

    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(5):
        p.send(topic, key=b"k%d" % i, value=b"v", partition=1)
    p.flush()
    p.close()

    listed = kcoord_json(broker, "topics", "list")["topics"]
    assert {"topic": topic, "partitions": 3, "internal": False} in listed
    assert any(t["internal"] for t in listed)  # __consumer_offsets
    assert all(
        not t["internal"] for t in kcoord_json(broker, "topics", "list", "--exclude-internal")["topics"]
    )

    doc = kcoord_json(broker, "topics", "describe", topic)["topics"]
    assert len(doc) == 1
    d = doc[0]
    assert d["partition_count"] == 3
    assert d["configs"] == {"max.message.bytes": "200000", "retention.ms": "3600000"}
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    ends = c.end_offsets([TopicPartition(topic, i) for i in range(3)])
    c.close()
    assert (
        [(q["partition"], q["log_start_offset"], q["log_end_offset"]) for q in d["partitions"]]
        == [(i, 0, ends[TopicPartition(topic, i)]) for i in range(3)]
        == [(0, 0, 0), (1, 0, 5), (2, 0, 0)]
    )
    assert all(q["leader"] >= 0 and q["replicas"] == [q["leader"]] for q in d["partitions"])

    table = kcoord_process(broker, "topics", "describe", topic)
    assert table.code == 0, table
    lines = table.stdout.splitlines()
    assert lines[0].startswith(f"Topic: {topic}") and "retention.ms=3600000" in lines[0]
    assert lines[1].split() == [
        "PARTITION",
        "LEADER",
        "REPLICAS",
        "ISR",
        "LOG-START-OFFSET",
        "LOG-END-OFFSET",
    ]
    assert lines[3].split()[-2:] == ["0", "5"]

    assert kcoord_json(broker, "topics", "delete", topic) == {"topics": [{"topic": topic, "error": None}]}
    gone = kcoord(broker, "topics", "describe", topic)
    assert gone.code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in gone.stderr
    again = kcoord(broker, "topics", "delete", topic, "--output", "json")
    assert again.code == 1
    assert again.json()["topics"][0]["error"]["name"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert kcoord(broker, "topics", "delete", topic, "--if-exists").code == 0
