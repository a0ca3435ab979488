"""``format("kcoord")`` (kcoord.spark) in a real PySpark session against the shared broker.

One session-scoped SparkSession on local[2] serves every test here (starting Spark is the slow
part). Run them alone with ``pytest -m spark``; they skip when pyspark (the ``spark`` extra) or
Java is missing.

- batch: df.write.format("kcoord") then spark.read.format("kcoord") gives back every row (key,
  value, headers, partition), one input partition per Kafka partition; given offsets and
  read_committed; read_committed over transactions (committed, aborted, open) reads only the
  committed rows, read_uncommitted every row;
- streaming: a query started on an empty topic sees rows produced after it started, trigger
  after trigger (also with maxOffsetsPerTrigger), and its progress is committed as consumer group
  offsets, visible through OffsetFetch (and so to lag tools): zero lag once caught up, lag again
  when rows arrive after it stopped;
- df.writeStream.format("kcoord") copies a stream into another topic.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import BrokerProcess

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")

from kafka import KafkaAdminClient, KafkaProducer, TopicPartition  # noqa: E402
from kafka.protocol.consumer.group import OffsetFetchRequest  # noqa: E402

from tests.wire import ApiKey  # noqa: E402


def _java_home() -> str | None:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return str(Path(os.path.realpath(java)).parent.parent) if java else None


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    java_home = _java_home()
    if java_home is None:
        pytest.skip("java is not installed")
    env = {
        "JAVA_HOME": java_home,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    from pyspark.sql import SparkSession

    # No kcoord.spark.register(): format("kcoord") is discovered through the installed
    # pyspark_kcoord module, as a user's plain SparkSession would find it.
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kcoord-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def produce(broker: BrokerProcess, topic: str, rows: list[tuple[int, str]]) -> None:
    """Another application writes (partition, value) rows."""
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    try:
        for partition, value in rows:
            p.send(topic, value=value.encode(), key=value.encode(), partition=partition)
        p.flush()
    finally:
        p.close()


def committed(broker: BrokerProcess, group: str) -> dict[tuple[str, int], int]:
    """The group's offsets, with a plain OffsetFetch v8 (all topics)."""
    with broker.connect() as c:
        coord = c.request(ApiKey.FindCoordinator, 4, key_type=0, coordinator_keys=[group])
        assert coord.coordinators[0].error_code == 0
        resp = c.request(
            ApiKey.OffsetFetch,
            8,
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)],
            require_stable=True,
        )
    g = resp.groups[0]
    assert g.error_code == 0, g
    return {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions}


def latest(broker: BrokerProcess, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    with broker.connect() as c:
        return {(topic, p): c.list_offsets(topic, p, -1).offset for p in range(partitions)}


def wait_for(check: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


# --- batch ---------------------------------------------------------------------------------------
def test_batch_write_then_read_back_every_row(spark: Any, broker: BrokerProcess, unique_topic: str) -> None:
    from pyspark.sql import functions as F

    broker.create_topic(unique_topic, partitions=3)
    n = 3000
    rows = spark.range(0, n).select(
        F.when(F.col("id") % 10 == 0, F.lit(None)).otherwise(F.concat(F.lit("k"), F.col("id"))).alias("key"),
        F.concat(F.lit("value-"), F.col("id")).alias("value"),
        (F.col("id") % 3).cast("int").alias("partition"),
        F.array(
            F.struct(F.lit("id").alias("key"), F.col("id").cast("string").cast("binary").alias("value")),
            F.struct(F.lit("empty").alias("key"), F.lit(b"").alias("value")),
        ).alias("headers"),
    )
    writer = rows.write.format("kcoord").option("kafka.bootstrap.servers", broker.bootstrap)
    writer.option("topic", unique_topic).mode("append").save()
    assert latest(broker, unique_topic, 3) == {(unique_topic, p): n // 3 for p in range(3)}

    df = (
        spark.read.format("kcoord")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique_topic)
        .option("includeHeaders", "true")
        .load()
    )
    assert df.columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"
    ]  # fmt: skip
    got = df.withColumn("task", F.spark_partition_id()).collect()
    assert len(got) == n
    # One input partition (Spark task) per Kafka partition.
    assert len({r.task for r in got}) == 3
    assert all(len({r.partition for r in got if r.task == t}) == 1 for t in range(3))
    by_id: dict[int, Any] = {}
    for r in got:
        i = int(r.value.decode().removeprefix("value-"))
        assert i not in by_id, f"row {i} read twice"
        by_id[i] = r
        assert r.key == (None if i % 10 == 0 else f"k{i}".encode())
        assert r.topic == unique_topic and r.partition == i % 3
        assert [(h.key, bytes(h.value)) for h in r.headers] == [("id", str(i).encode()), ("empty", b"")]
        assert r.timestampType == 0 and r.timestamp.year >= 2024
    assert sorted(by_id) == list(range(n))
    for p in range(3):  # offsets of each partition: 0..999, each once
        assert sorted(r.offset for r in got if r.partition == p) == list(range(n // 3))

    # Given offsets (JSON, string partition keys as Spark's Kafka source) and read_committed.
    start = {unique_topic: {"0": 10, "1": -2, "2": 990}}
    end = {unique_topic: {"0": 20, "1": 5, "2": -1}}
    import json

    sub = (
        spark.read.format("kcoord")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique_topic)
        .option("startingOffsets", json.dumps(start))
        .option("endingOffsets", json.dumps(end))
        .option("kafka.isolation.level", "read_committed")
        .load()
        .select("partition", "offset")
        .collect()
    )
    assert sorted((r.partition, r.offset) for r in sub) == (
        [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)] + [(2, o) for o in range(990, 1000)]
    )


def test_read_committed_rows_only(spark: Any, broker: BrokerProcess, unique_topic: str) -> None:
    """kafka.isolation.level=read_committed over committed, aborted and open transactions among
    plain rows: the batch read ends at the last stable offset and holds exactly the committed and
    plain rows below it (markers and aborted rows leave offset gaps); read_uncommitted holds every
    row; once the open transaction commits, read_committed holds it and the rows after it too."""
    from tests.integration.test_spark_client import write_transactions

    broker.create_topic(unique_topic, partitions=1)
    txn, offsets, committed, every = write_transactions(broker, unique_topic)

    def read(isolation: str) -> list[tuple[int, str]]:
        rows = (
            spark.read.format("kcoord")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("subscribe", unique_topic)
            .option("kafka.isolation.level", isolation)
            .load()
            .select("offset", "value")
            .collect()
        )
        return sorted((r.offset, bytes(r.value).decode()) for r in rows)

    try:
        got = read("read_committed")
        assert [v for _, v in got] == committed
        assert max(o for o, _ in got) < offsets["o"][0]
        assert [v for _, v in read("read_uncommitted")] == every
        txn.commit_transaction()
        # The markers follow EndTxn's answer; read_committed sees the rest once they are written.
        deadline = time.monotonic() + 10
        with broker.connect() as c:
            while c.list_offsets(unique_topic, 0, -1, isolation=1).offset < offsets["q"][-1] + 1:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        assert [v for _, v in read("read_committed")] == [*committed, "o0", "o1", "q0", "q1"]
    finally:
        txn.close()


# --- streaming -----------------------------------------------------------------------------------
def test_stream_sees_new_rows_and_commits_group_offsets(
    spark: Any, broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    broker.create_topic(unique_topic, partitions=2)
    group = f"spark-job-{unique_topic}"
    stream = (
        spark.readStream.format("kcoord")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", unique_topic)
        .option("kafka.group.id", group)
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .selectExpr("CAST(value AS STRING) AS value", "partition", "offset")
    )
    query = (
        stream.writeStream.format("memory")
        .queryName("kcoord_stream")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()  # the query has started: startingOffsets=latest is fixed now

        def seen() -> list[str]:
            return sorted(r.value for r in spark.sql("SELECT value FROM kcoord_stream").collect())

        wave1 = [(i % 2, f"a{i:03d}") for i in range(100)]
        produce(broker, unique_topic, wave1)
        query.processAllAvailable()
        assert seen() == sorted(v for _, v in wave1)
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
        assert len(batches) >= 3 and max(batches) <= 40, f"maxOffsetsPerTrigger=40: {batches}"

        wave2 = [(i % 2, f"b{i:03d}") for i in range(30)]
        produce(broker, unique_topic, wave2)
        query.processAllAvailable()
        assert seen() == sorted(v for _, v in wave1 + wave2)

        # The query's progress is the group's committed offsets: no lag once caught up.
        end = latest(broker, unique_topic, 2)
        assert end == {(unique_topic, 0): 65, (unique_topic, 1): 65}
        assert wait_for(lambda: committed(broker, group) == end, 10), committed(broker, group)
    finally:
        query.stop()

    # Lag tools: the same offsets through kafka-python's admin (OffsetFetch), and lag = 3 once
    # rows arrive while the query is stopped.
    produce(broker, unique_topic, [(0, "c0"), (0, "c1"), (1, "c2")])
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
        described = admin.describe_groups([group])[group]
    finally:
        admin.close()
    now = latest(broker, unique_topic, 2)
    lag = sum(now[(tp.topic, tp.partition)] - om.offset for tp, om in offsets.items())
    assert lag == 3
    assert {TopicPartition(unique_topic, p) for p in range(2)} == set(offsets)
    assert described["group_state"] == "Empty"  # a standalone group: no members, only offsets


def test_write_stream_copies_a_topic(
    spark: Any, broker: BrokerProcess, unique_topic: str, tmp_path: Path
) -> None:
    source, target = unique_topic + "-in", unique_topic + "-out"
    broker.create_topic(source, partitions=2)
    broker.create_topic(target, partitions=1)
    produce(broker, source, [(i % 2, f"r{i}") for i in range(50)])
    query = (
        spark.readStream.format("kcoord")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("commitOffsets", "false")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("kcoord")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    got = (
        spark.read.format("kcoord")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", target)
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
        .collect()
    )
    assert sorted((r.key, r.value) for r in got) == sorted((f"r{i}", f"R{i}") for i in range(50))
    assert committed(broker, "kcoord-spark-" + source) == {}  # commitOffsets=false
