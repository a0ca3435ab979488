"""Coordinator snapshots with the real broker and kafka-python: a restart after a clean shutdown
replays no log at all, one after kill -9 replays only the log after the last periodic snapshot,
and a snapshot the recovered log no longer covers is refused (full replay) -- with the committed
offsets a client fetches the same every time. The broker's "loaded coordinator partitions" line
says how many records came from a snapshot and how many from the log."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from kcoord.runtime.snapshot import snapshot_files
from tests.group_client import commit, fetch_all
from tests.harness import BrokerFactory, BrokerProcess

pytestmark = pytest.mark.slow

PARTITIONS = 4


def last_load(b: BrokerProcess) -> tuple[int, int]:
    """(records from a snapshot, records from the log) of the broker's last __consumer_offsets load."""
    lines = [
        line
        for line in b.log_text().splitlines()
        if "loaded coordinator partitions" in line and "__consumer_offsets" in line
    ]
    assert lines, b.log_text()
    fields = dict(re.findall(r"(\w+)=(\d+)", lines[-1]))
    return int(fields["snapshot_records"]), int(fields["log_records"])


def offsets_dir(b: BrokerProcess) -> Path:
    return b.data_dir / "__consumer_offsets-0"


def commit_with_kafka_python(b: BrokerProcess, group: str, topic: str, rounds: int) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        for r in range(1, rounds + 1):
            consumer.commit({tp: OffsetAndMetadata(r * 10 + tp.partition, "", -1) for tp in tps})
        return {tp.partition: rounds * 10 + tp.partition for tp in tps}
    finally:
        consumer.close()


def fetch_with_kafka_python(b: BrokerProcess, group: str, topic: str) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()


def test_restart_after_clean_shutdown_loads_the_snapshot(
    broker_factory: BrokerFactory, unique_topic: str
) -> None:
    b = broker_factory()
    b.create_topic(unique_topic, PARTITIONS)
    groups = [f"{unique_topic}-g{i}" for i in range(3)]
    expected = {g: commit_with_kafka_python(b, g, unique_topic, rounds=20) for g in groups}

    b.stop()
    assert [p.name for p in snapshot_files(offsets_dir(b))] != []
    b.start()
    from_snapshot, from_log = last_load(b)
    assert from_log == 0  # the snapshot covers the whole log: nothing replayed
    assert from_snapshot == len(groups) * PARTITIONS  # the latest commit of each key, not 20 of them
    for g in groups:
        assert fetch_with_kafka_python(b, g, unique_topic) == expected[g]

    # More commits, then kill -9: the snapshot is now older than the log; its tail is replayed.
    expected[groups[0]] = commit_with_kafka_python(b, groups[0], unique_topic, rounds=25)
    b.kill()
    b.start()
    from_snapshot, from_log = last_load(b)
    assert from_snapshot == len(groups) * PARTITIONS and from_log == 25 * PARTITIONS
    for g in groups:
        assert fetch_with_kafka_python(b, g, unique_topic) == expected[g]


def test_kill_9_under_commits_replays_only_after_the_last_snapshot(
    broker_factory: BrokerFactory, unique_topic: str
) -> None:
    interval = 200
    b = broker_factory(["--coordinator-snapshot-interval-records", str(interval)])
    b.create_topic(unique_topic, PARTITIONS)
    groups = [f"{unique_topic}-g{i}" for i in range(4)]
    acked = dict.fromkeys(groups, 0)
    stop = threading.Event()

    def committer(group: str) -> None:
        try:
            with b.connect() as c:
                for offset in range(1, 100_000):
                    if stop.is_set():
                        return
                    commit(c, group, unique_topic, PARTITIONS, offset)
                    acked[group] = offset
        except (OSError, ConnectionError):
            return  # the broker died under us

    threads = [threading.Thread(target=committer, args=(g,), daemon=True) for g in groups]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while min(acked.values()) < 300 and time.monotonic() < deadline:
        time.sleep(0.01)
    b.kill()  # commits in flight, a snapshot perhaps being written
    stop.set()
    for t in threads:
        t.join(10)
    assert min(acked.values()) >= 300, acked
    assert snapshot_files(offsets_dir(b)), "no periodic snapshot was written"

    b.start()
    from_snapshot, from_log = last_load(b)
    assert from_snapshot > 0
    # At most the interval plus what was appended while the last snapshot was written.
    assert from_log < 4 * interval, (from_snapshot, from_log)
    with b.connect() as c:
        after = fetch_all(c, groups)
    for g in groups:
        offsets = set(after[g].values())
        assert len(offsets) == 1, f"{g}: a commit request was applied in part: {after[g]}"
        assert offsets.pop() >= acked[g], f"{g}: an acknowledged commit was lost"


def test_a_snapshot_beyond_the_recovered_log_is_refused(
    broker_factory: BrokerFactory, unique_topic: str
) -> None:
    """Recovery cut the log below the snapshot's offset (the tail it covered was torn): the
    snapshot is ignored with a warning and deleted, and the log replayed in full."""
    b = broker_factory()
    b.create_topic(unique_topic, PARTITIONS)
    group = unique_topic + "-g"
    commit_with_kafka_python(b, group, unique_topic, rounds=5)
    b.stop()
    (snap,) = snapshot_files(offsets_dir(b))
    # Tear the last batch (the 5th commit request): recovery truncates it, the snapshot covers it.
    segment = max(offsets_dir(b).glob("*.log"))
    data = segment.read_bytes()
    segment.write_bytes(data[:-7])
    (b.data_dir / ".kcoord_cleanshutdown").unlink()  # as after a crash: recovery runs
    b.start()
    assert "ignoring coordinator snapshot" in b.log_text()
    assert not snap.exists()
    from_snapshot, from_log = last_load(b)
    assert from_snapshot == 0 and from_log == 4 * PARTITIONS
    assert fetch_with_kafka_python(b, group, unique_topic) == {p: 40 + p for p in range(PARTITIONS)}
