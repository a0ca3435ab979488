"""quixstreams: a stateful count per key whose state lives in a compacted changelog topic (issue 16).

The application counts messages per key (RocksDB state, backed by a ``changelog__...`` topic that
quixstreams creates with cleanup.policy=compact). After the first batch the broker restarts and
the application starts again with an empty state directory, so its counts can only come back from
the changelog on kcoord; the second batch's counts must continue from there. Both processing
guarantees: at-least-once and exactly-once (transactions: the changelog writes, the output and
the consumer offsets commit together).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from tests.harness import BrokerFactory, BrokerProcess
from tests.integration.test_compaction import CLEANER_ARGS

confluent_kafka = pytest.importorskip("confluent_kafka")
confluent_admin = pytest.importorskip("confluent_kafka.admin")

# Every quixstreams release pins confluent-kafka<2.13 while the project tests with 2.16.1 (it works
# with it: only the pin disagrees), so pip cannot install both into one environment. The test
# installs quixstreams and its other dependencies into a directory of their own, once per machine,
# and runs the application in a process that has that directory on its path besides this
# environment's confluent-kafka.
QUIXSTREAMS = "quixstreams==3.28.1"
QUIX_DEPS = [
    "rocksdict>=0.3,<0.4",
    "orjson>=3.9,<4",
    "pydantic>=2.7,<2.14",
    "pydantic-settings>=2.3,<2.16",
    "jsonschema>=4.3.0",
    "jsonlines>=4,<5",
    "rich>=13,<16",
    "jsonpath-ng>=1.7.0,<2",
    "httpx>=0.28.1",
    "typing-extensions>=4.8",
    # confluent-kafka's schema registry client, which quixstreams' serializers import.
    "authlib>=1.3",
    "cachetools>=5.5",
]
# Named by what it holds, so a changed list installs afresh instead of reusing an older one.
_DEPS_TAG = hashlib.sha1("\n".join(QUIX_DEPS).encode()).hexdigest()[:8]
QUIX_DIR = Path(os.environ.get("KCOORD_TEST_CACHE", Path.home() / ".cache" / "kcoord-tests")) / (
    f"{QUIXSTREAMS}-{_DEPS_TAG}"
)
COUNTER = Path(__file__).with_name("quix_counter.py")


@pytest.fixture(scope="module")
def quix_path() -> Path:
    """The package directory holding quixstreams (installed on first use)."""
    if not (QUIX_DIR / "quixstreams").is_dir():
        tmp = QUIX_DIR.with_name(QUIX_DIR.name + ".tmp")
        pip = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--target",
            str(tmp),
        ]
        try:
            subprocess.run([*pip, "--no-deps", QUIXSTREAMS], check=True, capture_output=True, timeout=600)
            subprocess.run([*pip, *QUIX_DEPS], check=True, capture_output=True, timeout=600)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            stderr = getattr(e, "stderr", b"") or b""
            pytest.skip(f"cannot install {QUIXSTREAMS} from PyPI: {stderr.decode(errors='replace')[-300:]}")
        tmp.rename(QUIX_DIR)
    return QUIX_DIR


KEYS = [f"k{i}" for i in range(5)]
QUIX_BROKER_ARGS = [
    "--log-roll-ms", "200",
    "--log-cleaner-min-cleanable-ratio", "0.01",
    # The application is the group's only member: the initial rebalance delay (3 s, paid at
    # each of its two starts) would only wait for joiners that never come.
    "--group-initial-rebalance-delay-ms", "0",
]  # fmt: skip


def produce(broker: BrokerProcess, topic: str, per_key: int) -> None:
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True})
    for _ in range(per_key):
        for k in KEYS:
            p.produce(topic, key=k.encode(), value=b'{"word": "%s"}' % k.encode())
    assert p.flush(30) == 0


def run_counter(
    quix_path: Path, broker: BrokerProcess, state_dir: Path, guarantee: str, expect: int
) -> dict[str, list[int]]:
    """Run the counting application until it emitted ``expect`` rows; the counts per key."""
    env = {**os.environ, "PYTHONPATH": str(quix_path)}
    done = subprocess.run(
        [sys.executable, str(COUNTER), broker.bootstrap, str(state_dir), guarantee, str(expect)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, list[int]] = {}
    for row in json.loads(done.stdout.strip().splitlines()[-1]):
        out.setdefault(row["word"], []).append(row["n"])
    return out


@pytest.mark.timeout(240)
@pytest.mark.parametrize("guarantee", ["at-least-once", "exactly-once"])
def test_quixstreams_state_recovers_from_compacted_changelog(
    broker_factory: BrokerFactory, tmp_path: Path, guarantee: str, quix_path: Path
) -> None:
    broker = broker_factory([*CLEANER_ARGS, *QUIX_BROKER_ARGS])
    broker.create_topic("words", partitions=2)

    produce(broker, "words", per_key=10)
    first = run_counter(quix_path, broker, tmp_path / "state-1", guarantee, expect=50)
    assert {k: max(v) for k, v in first.items()} == dict.fromkeys(KEYS, 10)

    changelogs = [t for t in broker_topics(broker) if t.startswith("changelog__")]
    assert len(changelogs) == 1, changelogs
    changelog = changelogs[0]
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10_000)
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, changelog)])["topic"]
    admin.close()
    assert described[changelog]["cleanup.policy"]["value"] == "compact"

    # 50 state writes for 5 keys: the cleaner keeps about one per key once segments rolled.
    deadline = time.monotonic() + 30
    while True:
        records = sum(len(read_all_partition(broker, changelog, p)) for p in (0, 1))
        if records <= 20:
            break
        assert time.monotonic() < deadline, f"changelog not compacted: {records} records"
        time.sleep(0.5)

    broker.stop()
    broker.start()
    produce(broker, "words", per_key=5)
    # A new, empty state directory: the counts can only come back from the changelog.
    second = run_counter(quix_path, broker, tmp_path / "state-2", guarantee, expect=25)
    assert {k: sorted(v) for k, v in second.items()} == {k: [11, 12, 13, 14, 15] for k in KEYS}


def broker_topics(broker: BrokerProcess) -> list[str]:
    admin = confluent_admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    return list(admin.list_topics(timeout=10).topics)


def read_all_partition(broker: BrokerProcess, topic: str, partition: int) -> list[tuple[int, bytes, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False)
    tp = TopicPartition(topic, partition)
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
