"""Spark reads Debezium's change events from kcoord with ``format("kcoord")`` (issue 16).

Debezium's Postgres connector (tests/java/DebeziumProbe.java, embedded engine, offsets in a
compacted kcoord topic) snapshots three rows and streams two inserts and an update into a kcoord
topic; Spark reads that topic in a batch query, decodes the Debezium JSON envelopes and folds
them into the table's current state, which must equal what PostgreSQL holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import BrokerFactory
from tests.integration.postgres import Postgres
from tests.integration.test_compaction import CLEANER_ARGS
from tests.integration.test_debezium_java import dbz_probe, postgres, run_probe
from tests.integration.test_spark_source import spark

pytestmark = [pytest.mark.java, pytest.mark.spark, pytest.mark.timeout(600)]

__all__ = ["dbz_probe", "postgres", "spark"]  # fixtures used by name


def test_spark_reads_debezium_change_events(
    spark, dbz_probe: str, postgres: Postgres, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    broker = broker_factory(CLEANER_ARGS)
    postgres.psql("CREATE TABLE items (id int PRIMARY KEY, name text, n int)")
    postgres.psql("INSERT INTO items VALUES (1, 'one', 0), (2, 'two', 0), (3, 'three', 0)")
    args = [broker.bootstrap, str(postgres.port), "dbz-offsets", "dbz-events", "first", "6"]
    run_probe(dbz_probe, *args, log=tmp_path / "probe.log")

    raw = (
        spark.read.format("kcoord")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("subscribe", "dbz-events")
        .load()
    )
    events = raw.select(
        "offset",
        F.get_json_object(F.col("value").cast("string"), "$.op").alias("op"),
        F.get_json_object(F.col("value").cast("string"), "$.after.id").cast("int").alias("id"),
        F.get_json_object(F.col("value").cast("string"), "$.after.name").alias("name"),
        F.get_json_object(F.col("key").cast("string"), "$.id").cast("int").alias("key_id"),
    )
    assert events.count() == 6
    assert {r["op"]: r["count"] for r in events.groupBy("op").count().collect()} == {"r": 3, "c": 2, "u": 1}
    assert events.filter("id != key_id").count() == 0
    latest = (
        events.withColumn("rank", F.row_number().over(Window.partitionBy("id").orderBy(F.desc("offset"))))
        .filter("rank = 1")
        .select("id", "name")
        .orderBy("id")
    )
    current = [tuple(r) for r in latest.collect()]
    in_postgres = [
        (int(i), name)
        for i, name in (
            line.split("|") for line in postgres.psql("SELECT id, name FROM items ORDER BY id").split()
        )
    ]
    assert current == in_postgres == [(1, "one-updated"), (2, "two"), (3, "three"), (4, "four"), (5, "five")]
