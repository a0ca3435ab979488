"""Debezium's Postgres connector (embedded engine) with its offsets in a compacted kcoord topic.

tests/java/DebeziumProbe.java runs the engine against a PostgreSQL this test starts
(tests/integration/postgres.py), with ``offset.storage=KafkaOffsetBackingStore`` on kcoord, and
produces every change event to a kcoord topic. The first run snapshots three rows and streams an
insert of two and an update; the table then changes while no engine runs; the second engine
resumes from the offset it stored in kcoord: just the two new changes, no snapshot again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from tests.harness import BrokerFactory
from tests.integration.postgres import Postgres, PostgresUnavailable, postgres_server
from tests.integration.test_compaction import CLEANER_ARGS, read_all
from tests.integration.test_connect_java import connect_classpath

pytestmark = pytest.mark.java


@pytest.fixture
def postgres() -> Iterator[Postgres]:
    try:
        with postgres_server() as pg:
            yield pg
    except PostgresUnavailable as e:
        pytest.skip(f"PostgreSQL unavailable: {e}")


@pytest.fixture(scope="module")
def dbz_probe(tmp_path_factory: pytest.TempPathFactory) -> str:
    return connect_classpath(tmp_path_factory.mktemp("dbz-classes"), "DebeziumProbe.java")


def run_probe(cp: str, *args: str, log: Path) -> str:
    import subprocess

    proc = subprocess.run(
        ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", cp, "DebeziumProbe", *args],
        capture_output=True,
        text=True,
        timeout=150,
    )
    log.write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0 and "PROBE OK" in proc.stdout, (
        f"DebeziumProbe {args} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    )
    return proc.stdout


@pytest.mark.timeout(600)
def test_debezium_postgres_resumes_from_offsets_in_kcoord(
    dbz_probe: str, postgres: Postgres, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    # Idle compacted partitions roll after 200 ms, so the cleaner gets to every offsets record.
    broker = broker_factory(
        [*CLEANER_ARGS, "--log-roll-ms", "200", "--log-cleaner-min-cleanable-ratio", "0.01"]
    )
    postgres.psql("CREATE TABLE items (id int PRIMARY KEY, name text, n int)")
    postgres.psql("INSERT INTO items VALUES (1, 'one', 0), (2, 'two', 0), (3, 'three', 0)")
    offsets, events = "dbz-offsets", "dbz-events"
    args = [broker.bootstrap, str(postgres.port), offsets, events]

    out = run_probe(dbz_probe, *args, "first", "6", log=tmp_path / "first.log")
    assert "@@ sent 6" in out

    # Changes while no engine runs; the replication slot keeps them for the next one.
    postgres.psql("INSERT INTO items VALUES (6, 'six', 0)")
    postgres.psql("UPDATE items SET name = 'two-updated', n = 2 WHERE id = 2")
    broker.stop()
    broker.start()

    out = run_probe(dbz_probe, *args, "second", "2", log=tmp_path / "second.log")
    assert "@@ event r" not in out, "the restarted engine snapshotted again"

    got = []
    for _offset, key, value in read_all(broker, events):
        assert value is not None
        v = json.loads(value)
        row = v["after"]
        assert json.loads(key) == {"id": row["id"]}
        got.append((v["op"], row["id"], row["name"]))
    assert sorted(got[:3]) == [("r", 1, "one"), ("r", 2, "two"), ("r", 3, "three")]
    assert sorted(got[3:5]) == [("c", 4, "four"), ("c", 5, "five")]
    assert got[5:] == [("u", 1, "one-updated"), ("c", 6, "six"), ("u", 2, "two-updated")]

    # The engine's offsets live in a compacted kcoord topic, keyed by connector + partition.
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, offsets)])["topic"]
    admin.close()
    assert described[offsets]["cleanup.policy"]["value"] == "compact"
    stored = read_all(broker, offsets)
    assert stored, "no offsets committed to kcoord"
    assert {json.loads(k)[0] for _o, k, _v in stored} == {"kcoord-dbz"}
    assert "lsn" in json.loads(stored[-1][2])
    # Both engines committed offsets more than once (flushes every 200 ms, and on close); the
    # cleaner leaves the last one of the one source partition (the server).
    end = stored[-1][0]
    assert end >= 2, f"expected several offset commits, got {stored}"
    deadline = time.monotonic() + 30
    while len(stored) > 1:
        assert time.monotonic() < deadline, f"offsets topic not compacted: {stored}"
        time.sleep(0.5)
        stored = read_all(broker, offsets)
    assert stored[0][0] == end
