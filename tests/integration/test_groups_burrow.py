"""Burrow (Debian's ``burrow`` package, 1.2.1) reads committed offsets from __consumer_offsets.

Burrow needs a ZooKeeper for its own coordination; Debian's ``zookeeper`` package provides
one (run here as a standalone ZooKeeperServerMain on a free port). Burrow's Kafka consumer
module consumes every __consumer_offsets partition and decodes the offset-commit records;
with its debug log on, each decoded offset is a "consumer offset" line naming the
__consumer_offsets partition, group, topic, partition and offset. The test checks those lines
against the commits it made.

Then Burrow's HTTP lag endpoint must show every partition's lag (high watermark minus the
committed offset): Burrow 1.2.1's cluster module asks for the log-end offsets with ListOffsets
v0 (sarama's OffsetRequest with no version set), which Kafka 4.0 removed (KIP-896) but kcoord
still serves for tools like this one.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.consumer.group import OffsetCommitRequest

from tests.coordinator_log import offsets_partition
from tests.harness import BrokerFactory, free_port
from tests.wire import ApiKey, build_batch

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
OFFSETS_PARTITIONS = 5

pytestmark = pytest.mark.slow


def _missing() -> str | None:
    if shutil.which("Burrow") is None:
        return "Burrow not installed (Debian package 'burrow': apt-get install burrow)"
    if not ZOOKEEPER_JAR.exists():
        return f"{ZOOKEEPER_JAR} missing (Debian package 'zookeeper', needed by Burrow)"
    if shutil.which("java") is None:
        return "java not installed (ZooKeeper needs it)"
    return None


def zk_ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"srvr")
            return b"Mode: standalone" in s.recv(4096)
    except OSError:
        return False


@pytest.fixture
def zookeeper(tmp_path: Path) -> Iterator[int]:
    reason = _missing()
    if reason:
        pytest.skip(reason)
    port = free_port()
    (tmp_path / "zk").mkdir()
    with open(tmp_path / "zookeeper.log", "wb") as out:
        proc = subprocess.Popen(
            [
                "java",
                "-Xmx128m",
                "-Dzookeeper.admin.enableServer=false",
                "-cp",
                str(ZOOKEEPER_JAR),
                "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(port),
                str(tmp_path / "zk"),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while not zk_ready(port):
            assert proc.poll() is None, (tmp_path / "zookeeper.log").read_text()
            assert time.monotonic() < deadline, "ZooKeeper did not start"
            time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


BURROW_CONFIG = """\
[general]
pidfile="{dir}/burrow.pid"

[logging]
filename="{dir}/burrow.log"
level="debug"

[zookeeper]
servers=["127.0.0.1:{zk}"]
timeout=6
root-path="/burrow"

[client-profile.kcoord]
client-id="burrow-test"
kafka-version="2.0.0"

[cluster.local]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="kcoord"
topic-refresh=60
offset-refresh=10

[consumer.local]
class-name="kafka"
cluster="local"
servers=["{bootstrap}"]
client-profile="kcoord"
offsets-topic="__consumer_offsets"
start-latest=false
group-blacklist="^$"

[httpserver.default]
address="127.0.0.1:{http}"

[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1
"""


def test_burrow_reads_committed_offsets(
    zookeeper: int, broker_factory: BrokerFactory, unique_topic: str, tmp_path: Path
) -> None:
    b = broker_factory(
        ["--group-initial-rebalance-delay-ms", "0", "--offsets-topic-num-partitions", str(OFFSETS_PARTITIONS)]
    )
    b.create_topic(unique_topic, 2)
    groups = {f"{unique_topic}-a": (7, 3), f"{unique_topic}-b": (11, 1)}
    part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    with b.connect() as c:
        for p in range(2):
            assert c.produce(unique_topic, p, build_batch(count=12)).error_code == 0
        for group, offsets in groups.items():
            # Two commits per partition (OffsetCommit v3, then v8): offset - 1, then offset.
            for version, first_then_final in ((3, -1), (8, 0)):
                resp = c.request(
                    ApiKey.OffsetCommit,
                    version,
                    group_id=group,
                    generation_id_or_member_epoch=-1,
                    member_id="",
                    group_instance_id=None,
                    retention_time_ms=-1,
                    topics=[
                        OffsetCommitRequest.OffsetCommitRequestTopic(
                            name=unique_topic,
                            partitions=[
                                part(
                                    partition_index=p,
                                    committed_offset=o + first_then_final,
                                    committed_leader_epoch=-1,
                                    committed_metadata="",
                                )
                                for p, o in enumerate(offsets)
                            ],
                        )
                    ],
                )
                assert [p.error_code for t in resp.topics for p in t.partitions] == [0, 0]

    config_dir = tmp_path / "burrow"
    config_dir.mkdir()
    http_port = free_port()
    (config_dir / "burrow.toml").write_text(
        BURROW_CONFIG.format(dir=config_dir, zk=zookeeper, bootstrap=b.bootstrap, http=http_port)
    )
    log = config_dir / "burrow.log"
    with open(tmp_path / "burrow.out", "wb") as out:
        burrow = subprocess.Popen(
            ["Burrow", "-config-dir", str(config_dir)], stdout=out, stderr=subprocess.STDOUT, cwd=config_dir
        )
    try:
        wanted = {(g, p, o) for g, offsets in groups.items() for p, o in enumerate(offsets)}

        def seen() -> list[dict]:
            if not log.exists():
                return []
            lines = [json.loads(x) for x in log.read_text().splitlines() if x.startswith("{")]
            return [x for x in lines if x.get("msg") == "consumer offset" and x.get("group") in groups]

        deadline = time.monotonic() + 60
        while not wanted <= {(x["group"], x["partition"], x["offset"]) for x in seen()}:
            assert burrow.poll() is None, (tmp_path / "burrow.out").read_text()
            if time.monotonic() > deadline:
                raise AssertionError(f"Burrow decoded only {seen()}; log tail:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        for x in seen():
            assert x["topic"] == unique_topic
            # Burrow found each group where Kafka's partitionFor puts it.
            assert x["offset_partition"] == offsets_partition(x["group"], OFFSETS_PARTITIONS)
        # In log order: the first commit of each partition, then the final one, nothing else.
        for g, offsets in groups.items():
            for p, o in enumerate(offsets):
                history = [x["offset"] for x in seen() if x["group"] == g and x["partition"] == p]
                assert history == [o - 1, o], (g, p, history)
        undecoded = [x for x in log.read_text().splitlines() if "failed to decode" in x and unique_topic in x]
        assert not undecoded

        # Lag: 12 records in each partition minus the committed offsets.
        def lag(group: str) -> dict[int, int]:
            url = f"http://127.0.0.1:{http_port}/v3/kafka/local/consumer/{group}/lag"
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    status = json.load(r).get("status") or {}
            except (OSError, ValueError):
                return {}
            return {
                p["partition"]: p["current_lag"]
                for p in status.get("partitions") or []
                if p.get("topic") == unique_topic and p.get("end")
            }

        deadline = time.monotonic() + 60
        for g, offsets in groups.items():
            want = {p: 12 - o for p, o in enumerate(offsets)}
            while lag(g) != want:
                assert burrow.poll() is None, (tmp_path / "burrow.out").read_text()
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"Burrow's lag for {g}: {lag(g)}, want {want}; log tail:\n{log.read_text()[-3000:]}"
                    )
                time.sleep(0.5)
    finally:
        burrow.terminate()
        try:
            burrow.wait(10)
        except subprocess.TimeoutExpired:
            burrow.kill()
            burrow.wait()
