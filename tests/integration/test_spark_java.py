"""Spark's Kafka connector call sequences, with the Java client Spark ships (kafka-clients 3.9 for
Spark 4.0) and the current one (4.3), through tests/java/SparkConnectorProbe.java.

The connector jar itself cannot be installed here; the probe replays what it does: the sink's
idempotent producers, the driver's AdminClient (describeCluster, describeTopics, listOffsets
earliest/latest/by timestamp with the query's isolation level), the executors' assign + seek +
poll, a micro-batch loop asking for the latest offsets every 100 ms while a producer writes, and
the throwaway group of ``useDeprecatedOffsetFetching=true``, which must disappear after it leaves
(KIP-211: an Empty group without offsets is removed at the next offsets cleanup).
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from kcoord.protocol.records import iter_headers
from tests.harness import BrokerFactory
from tests.integration.test_java import probe_command
from tests.wire import ApiKey

pytestmark = pytest.mark.java

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
PROBE = "SparkConnectorProbe.java"


@pytest.fixture(scope="module")
def java() -> str:
    exe = shutil.which("java")
    if exe is None:
        pytest.skip("java is not installed")
    return exe


def classpath(version: str) -> str:
    out = subprocess.run(
        ["bash", str(JAVA_DIR / "client-jars.sh"), version], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, f"client-jars.sh {version} failed:\n{out.stderr}"
    assert "kafka-clients-" + version in out.stdout
    return out.stdout.strip()


@pytest.mark.parametrize("version", ["4.3.0", "3.9.0"])
def test_spark_connector_call_sequences(java: str, broker_factory: BrokerFactory, version: str) -> None:
    # Offsets cleanup every 200 ms so the throwaway group's removal is seen within the test; no
    # initial rebalance delay (Spark would wait the default 3 s for its one-member group).
    broker = broker_factory(
        ["--offsets-retention-check-interval-ms", "200", "--group-initial-rebalance-delay-ms", "0"]
    )
    prefix = f"spark-{version}-{uuid.uuid4().hex[:8]}"
    proc = subprocess.run(
        [
            *probe_command(java, classpath(version), PROBE),
            broker.bootstrap,
            prefix,
            "expect-group-expiry",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "PROBE OK" in proc.stdout, f"{PROBE} failed:\n{output[-8000:]}"
    assert "GROUP EXPIRED spark-kafka-source-" in proc.stdout

    with broker.connect() as c:
        # The sink wrote with idempotent producers (InitProducerId, then sequenced batches) and
        # many records per batch, as Spark's sink does with a non-zero linger.
        for p in range(3):
            fetched = c.fetch(prefix + "-batch", p, 0, max_bytes=1 << 22)
            headers = list(iter_headers(fetched.records))
            records = sum(h.records_count for h in headers)
            assert records == fetched.high_watermark > 0
            assert len(headers) < records / 5, f"expected multi-record batches, got {len(headers)}"
            assert all(h.has_producer_id and h.base_sequence >= 0 for h in headers)
            assert len({h.producer_id for h in headers}) == 2, "one producer id per sink task"
        # Nothing of the driver's throwaway group is left; executors never created a group.
        groups = c.request(ApiKey.ListGroups, 4, states_filter=[]).groups
        assert not [g.group_id for g in groups if g.group_id.startswith("spark-kafka-source-")]
