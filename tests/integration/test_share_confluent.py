"""confluent-kafka 2.16 (librdkafka) ShareConsumer in share groups (KIP-932): ShareGroupHeartbeat
v1, ShareFetch v1 and ShareAcknowledge v1.

- explicit acknowledgement: every record accepted once (one released on its first delivery
  comes back with delivery count 2), commit_sync answered without errors, the share-partition
  start offset reaches the end, and close() exits cleanly (librdkafka has crashed in close()
  when the final acknowledgement's answer named partitions the request did not);
- implicit acknowledgement (the default): two partitions, each record once.

The consumer runs in a child process (share_confluent_worker.py), so a native crash fails the
test instead of pytest. share.auto.offset.reset=earliest is set with the AdminClient's
incremental_alter_configs on the GROUP resource.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from kcoord.protocol.messages import register_schema_pair  # noqa: E402
from tests.harness import REPO, BrokerProcess  # noqa: E402
from tests.wire import ApiKey, build_batch  # noqa: E402

_DescribeOffsets, _ = register_schema_pair("DescribeShareGroupOffsets")


def set_earliest(broker: BrokerProcess, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(timeout=30)


def produce(broker: BrokerProcess, topic: str, partition: int, count: int) -> None:
    with broker.connect() as c:
        for b in range(0, count, 10):
            recs = [(None, f"p{partition}-{i}".encode(), 1_700_000_000_000 + i) for i in range(b, b + 10)]
            assert c.produce(topic, partition, build_batch(recs)).error_code == 0


def start_offsets(broker: BrokerProcess, group: str) -> dict[int, int]:
    with broker.connect() as c:
        req = _DescribeOffsets.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)
        resp = c.request(ApiKey(90), 1, groups=[req])
    g = resp.groups[0]
    assert g.error_code == 0, g
    return {p.partition_index: p.start_offset for t in g.topics for p in t.partitions}


def spawn_worker(
    bootstrap: str, group: str, topic: str, records: int, mode: str, release: str = ""
) -> subprocess.CompletedProcess[str]:
    """The worker run to its end (share_confluent_worker.py's arguments), its output captured."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration.share_confluent_worker",
            bootstrap,
            group,
            topic,
            str(records),
            mode,
            release,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_worker(broker: BrokerProcess, group: str, topic: str, records: int, mode: str, release: str = ""):  # type: ignore[no-untyped-def]
    proc = spawn_worker(broker.bootstrap, group, topic, records, mode, release)
    assert proc.returncode == 0, (
        f"worker exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    events = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert events[-1] == {"closed": True}
    return events


def test_explicit_acknowledgement(broker: BrokerProcess, unique_topic: str) -> None:
    group, n = unique_topic + "-g", 50
    broker.create_topic(unique_topic, 1)
    produce(broker, unique_topic, 0, n)
    set_earliest(broker, group)

    events = run_worker(broker, group, unique_topic, n, "explicit", release="p0-3")
    recs = [tuple(e["rec"]) for e in events if "rec" in e]
    by_offset: dict[int, list[int]] = {}
    for _, offset, dc, _ in recs:
        by_offset.setdefault(offset, []).append(dc)
    assert by_offset.pop(3) == [1, 2]  # released once, redelivered with a higher delivery count
    assert by_offset == {o: [1] for o in range(n) if o != 3}
    assert [e for e in events if "commit" in e and e["commit"][2] is not None] == []
    assert [e for e in events if "error" in e] == []
    assert start_offsets(broker, group) == {0: n}


def test_implicit_acknowledgement(broker: BrokerProcess, unique_topic: str) -> None:
    group, per = unique_topic + "-g", 30
    broker.create_topic(unique_topic, 2)
    for p in (0, 1):
        produce(broker, unique_topic, p, per)
    set_earliest(broker, group)

    events = run_worker(broker, group, unique_topic, 2 * per, "implicit")
    recs = sorted((p, o, dc) for p, o, dc, _ in (e["rec"] for e in events if "rec" in e))
    assert recs == [(p, o, 1) for p in (0, 1) for o in range(per)]
    assert start_offsets(broker, group) == {0: per, 1: per}


def test_acknowledging_records_of_a_deleted_topic_fails_and_its_state_goes(
    broker: BrokerProcess, unique_topic: str
) -> None:
    """Consume with implicit acknowledgement, delete the topic, commit: the acknowledgements are
    answered with UNKNOWN_TOPIC_ID (as Kafka, for a topic id it no longer knows), never with
    success, and the share-partition state of the topic is deleted durably (a restart agrees)."""
    group, n = unique_topic + "-g", 20
    broker.create_topic(unique_topic, 1)
    produce(broker, unique_topic, 0, n)
    set_earliest(broker, group)

    events = run_worker(broker, group, unique_topic, n, "delete-topic")
    assert {"deleted": unique_topic} in events
    after = events[events.index({"deleted": unique_topic}) :]
    commits = [e["commit"] for e in after if "commit" in e]
    failed = [e for e in after if "commit_sync" in e]
    assert commits or failed, events
    assert all(c[2] is not None for c in commits), commits  # no acknowledgement was a success
    assert all("UNKNOWN_TOPIC" in c[2] or "Unknown topic" in c[2] for c in commits), commits
    assert start_offsets(broker, group) == {}
    broker.restart()
    assert start_offsets(broker, group) == {}
