"""Offset history with real clients: kafka-python commits (plain and in transactions) at known
times; the history, offsets-at and reset-offsets API and the ``kcoord groups history`` /
``reset-offsets --to-commit-at`` commands read them back; history survives the log cleaner and
a restart, and expires after offsets.history.retention.ms."""

from __future__ import annotations

import datetime as dt
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

from kcoord.testing.broker import BrokerThread
from tests.integration.cli import kcoord

COMPACTING = {
    "group.initial.rebalance.delay.ms": 0,
    "offsets.topic.segment.bytes": 2048,  # many closed segments for the cleaner
    "log.cleaner.backoff.ms": 100,
    "log.cleaner.min.cleanable.ratio": 0.01,
    "log.cleaner.delete.retention.ms": 1,
}


def start(data_dir: Path, **settings: Any) -> BrokerThread:
    return BrokerThread(data_dir, {**COMPACTING, **settings}, http=True).start()


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerThread]:
    b = start(tmp_path / "data")
    yield b
    b.stop()


def call(b: BrokerThread, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{b.http_url}{path}", data=data, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def topic_with_records(b: BrokerThread, topic: str, partitions: int = 2, count: int = 50) -> None:
    KafkaAdminClient(bootstrap_servers=b.bootstrap).create_topics([NewTopic(topic, partitions, 1)])
    producer = KafkaProducer(bootstrap_servers=b.bootstrap)
    for i in range(count):
        producer.send(topic, b"x", partition=i % partitions)
    producer.flush()
    producer.close()


def standalone(b: BrokerThread, group: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=b.bootstrap, group_id=group, enable_auto_commit=False)


def commit(c: KafkaConsumer, topic: str, offsets: dict[int, int]) -> int:
    """Commit and return a time just after the broker stored it."""
    c.commit({TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})
    time.sleep(0.02)
    after = int(time.time() * 1000)
    time.sleep(0.02)
    return after


def churn(b: BrokerThread, n: int = 60) -> None:
    """Commits of another group, so that segments roll and the cleaner has work."""
    c = standalone(b, "churn")
    for i in range(n):
        c.commit({TopicPartition("t", 0): OffsetAndMetadata(i % 40, "x" * 40, -1)})
    c.close()


def changes(b: BrokerThread, group: str, query: str = "") -> list[tuple[int, int]]:
    status, doc = call(b, f"/api/groups/{group}/history{query}")
    assert status == 200, doc
    return [(c["partition"], c["offset"]) for c in doc["changes"]]


def iso(ms: int) -> str:
    return (
        dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def test_history_by_member_survives_compaction_and_restart(tmp_path: Path) -> None:
    b = start(tmp_path / "data")
    try:
        topic_with_records(b, "t")
        consumer = KafkaConsumer(
            "t", bootstrap_servers=b.bootstrap, group_id="g", client_id="history-client",
            enable_auto_commit=False, auto_offset_reset="earliest",
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        member = call(b, "/api/groups/g")[1]["members"][0]["member_id"]
        for offsets in ({0: 5, 1: 7}, {0: 10}, {0: 15}):
            commit(consumer, "t", offsets)
        consumer.close()
        status, doc = call(b, "/api/groups/g/history?topic=t")
        assert status == 200 and doc["group"] == "g"
        assert [(c["partition"], c["offset"]) for c in doc["changes"]] == [(0, 5), (1, 7), (0, 10), (0, 15)]
        assert {(c["member_id"], c["client_id"], c["lag"]) for c in doc["changes"]} == {
            (member, "history-client", None)
        }
        table = kcoord(None, "groups", "history", "g", "--http-server", b.http_url)
        assert table.code == 0 and table.stdout.count(member) == 4
        # Compaction keeps the commits but only the group's last metadata record (written when it
        # emptied, after them): who committed is no longer derivable then, and says so (null).
        before = {
            "group": "g",
            "changes": [c | {"member_id": None, "client_id": None} for c in doc["changes"]],
        }

        # A group deleted long ago disappears, history and all, once the cleaner has run.
        doomed = standalone(b, "doomed")
        commit(doomed, "t", {0: 1})
        commit(doomed, "t", {0: 2})
        doomed.close()
        assert kcoord(b, "groups", "delete", "doomed").code == 0  # type: ignore[arg-type]
        assert call(b, "/api/groups/doomed/history")[0] == 200  # no live state, but history
        deadline = time.monotonic() + 30
        while call(b, "/api/groups/doomed/history")[0] != 404:
            assert time.monotonic() < deadline, "the cleaner never compacted __consumer_offsets"
            churn(b, 20)
            time.sleep(0.2)
        assert call(b, "/api/groups/g/history?topic=t")[1] == before  # g's history was kept
    finally:
        b.stop()

    b = start(tmp_path / "data")
    try:
        assert call(b, "/api/groups/g/history?topic=t")[1] == before
        live = call(b, "/api/groups/g")[1]["offsets"]
        assert [(o["partition"], o["offset"]) for o in live] == [(0, 15), (1, 7)]
        run = kcoord(
            None, "groups", "history", "g", "--topic", "t", "--http-server", b.http_url, "-o", "json"
        )
        assert run.code == 0 and run.json() == before
        table = kcoord(None, "groups", "history", "g", "--http-server", b.http_url)
        assert table.code == 0 and table.stdout.split("\n")[0].split()[3] == "PREVIOUS-OFFSET"
        assert [line.split()[3:5] for line in table.stdout.splitlines()[1:]] == [
            ["-", "5"], ["-", "7"], ["5", "10"], ["10", "15"]
        ]  # fmt: skip
        assert kcoord(None, "groups", "history", "nobody", "--http-server", b.http_url).code == 1
    finally:
        b.stop()


def test_history_expires_after_its_retention(tmp_path: Path) -> None:
    b = start(tmp_path / "data", **{"offsets.history.retention.ms": 1500})
    try:
        topic_with_records(b, "t")
        c = standalone(b, "g")
        for o in (1, 2, 3):
            commit(c, "t", {0: o})
        c.close()
        assert changes(b, "g") == [(0, 1), (0, 2), (0, 3)]
        deadline = time.monotonic() + 30
        while changes(b, "g") != [(0, 3)]:
            assert time.monotonic() < deadline, "history outlived offsets.history.retention.ms"
            churn(b, 20)
            time.sleep(0.2)
        assert [o["offset"] for o in call(b, "/api/groups/g")[1]["offsets"]] == [3]
    finally:
        b.stop()


def test_offsets_at_and_reset_to_commit_at(broker: BrokerThread) -> None:
    topic_with_records(broker, "t")
    c = standalone(broker, "g")
    before_first = int(time.time() * 1000) - 1
    after_5 = commit(c, "t", {0: 5, 1: 3})
    after_10 = commit(c, "t", {0: 10})
    commit(c, "t", {0: 20, 1: 30})

    def at(when: str) -> list[tuple[int, int]]:
        status, doc = call(broker, f"/api/groups/g/offsets-at?timestamp={when}")
        assert status == 200, doc
        return [(o["partition"], o["offset"]) for o in doc["offsets"]]

    assert at(str(before_first)) == []
    assert at(str(after_5)) == [(0, 5), (1, 3)]
    assert at(iso(after_10)) == [(0, 10), (1, 3)]
    assert call(broker, "/api/groups/g/offsets-at?timestamp=yesterday")[0] == 400
    assert call(broker, "/api/groups/nobody/offsets-at?timestamp=0")[1]["error"] == "GROUP_ID_NOT_FOUND"

    status, doc = call(broker, "/api/groups/g/reset-offsets", {"to_commit_at": after_5, "execute": False})
    assert status == 200 and doc["executed"] is False and doc["timestamp"] == after_5
    assert doc["plan"] == [
        {"topic": "t", "partition": 0, "current_offset": 20, "new_offset": 5},
        {"topic": "t", "partition": 1, "current_offset": 30, "new_offset": 3},
    ]
    assert c.committed(TopicPartition("t", 0)) == 20  # a dry run changes nothing

    status, doc = call(
        broker, "/api/groups/g/reset-offsets", {"to_commit_at": iso(after_10), "execute": True}
    )
    assert status == 200 and doc["executed"] is True
    assert [(p["partition"], p["new_offset"]) for p in doc["plan"]] == [(0, 10), (1, 3)]
    assert [c.committed(TopicPartition("t", p)) for p in (0, 1)] == [10, 3]

    # The CLI: a dry run first, then --execute, with the time as an ISO date in UTC.
    url = ("--http-server", broker.http_url)
    dry = kcoord(None, "groups", "reset-offsets", "g", "--to-commit-at", iso(after_5), *url)
    assert dry.code == 0 and "Dry run" in dry.stderr and "NEW-OFFSET" in dry.stdout
    assert c.committed(TopicPartition("t", 0)) == 10
    run = kcoord(
        None, "groups", "reset-offsets", "g", "--to-commit-at", iso(after_5), "--execute", *url, "-o", "json"
    )
    assert run.code == 0 and run.json()["executed"] is True
    assert [(p["partition"], p["current_offset"], p["new_offset"]) for p in run.json()["partitions"]] == [
        (0, 10, 5),
        (1, 3, 3),
    ]
    assert [c.committed(TopicPartition("t", p)) for p in (0, 1)] == [5, 3]
    # The rewinds are history too.
    assert changes(broker, "g")[-2:] == [(0, 5), (1, 3)]
    c.close()


def test_reset_is_refused_while_the_group_has_members(broker: BrokerThread) -> None:
    topic_with_records(broker, "t")
    consumer = KafkaConsumer(
        "t", bootstrap_servers=broker.bootstrap, group_id="busy", enable_auto_commit=False,
        auto_offset_reset="earliest",
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
    after = commit(consumer, "t", {0: 4})
    commit(consumer, "t", {0: 9})
    status, doc = call(broker, "/api/groups/busy/reset-offsets", {"to_commit_at": after, "execute": True})
    assert status == 409 and doc["error"] == "NON_EMPTY_GROUP"
    run = kcoord(None, "groups", "reset-offsets", "busy", "--to-commit-at", str(after), "--execute",
                 "--http-server", broker.http_url)  # fmt: skip
    assert run.code == 1 and "NON_EMPTY_GROUP" in run.stderr
    assert consumer.committed(TopicPartition("t", 0)) == 9
    consumer.close()


def test_transactional_commits_appear_once_committed(broker: BrokerThread) -> None:
    topic_with_records(broker, "t", partitions=1)
    topic_with_records(broker, "out", partitions=1, count=1)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="history-txn")
    producer.init_transactions()

    def txn_commit(offset: int) -> None:
        producer.begin_transaction()
        producer.send("out", b"y")
        producer.send_offsets_to_transaction(
            {TopicPartition("t", 0): OffsetAndMetadata(offset, "", -1)}, "tg"
        )

    txn_commit(3)
    producer.abort_transaction()
    txn_commit(4)
    producer.commit_transaction()
    txn_commit(6)
    producer.flush()
    pending = call(broker, "/api/groups/tg/history")
    producer.commit_transaction()
    producer.close()
    assert pending[0] == 200 and [c["offset"] for c in pending[1]["changes"]] == [4]
    # EndTxn answers once the transaction is prepared; the COMMIT marker follows it.
    deadline = time.monotonic() + 10
    while changes(broker, "tg") != [(0, 4), (0, 6)]:
        assert time.monotonic() < deadline, changes(broker, "tg")
        time.sleep(0.05)
    # A transactional commit takes effect at its COMMIT marker, after the commit was stamped: the
    # API says when (effective_at), and rewinding to that time includes it; to the stamp does not.
    status, doc = call(broker, "/api/groups/tg/history")
    assert status == 200, doc
    last = doc["changes"][-1]
    assert last["offset"] == 6 and last["effective_at"] > last["commit_timestamp"]
    for when, offset in ((last["effective_at"], 6), (last["commit_timestamp"], 4)):
        status, plan = call(broker, "/api/groups/tg/reset-offsets", {"to_commit_at": when, "execute": False})
        assert status == 200 and [p["new_offset"] for p in plan["plan"]] == [offset], plan
