"""``kcoord groups`` against a real broker with real groups: a classic group (kafka-python), a
KIP-848 consumer group (confluent-kafka, group.protocol=consumer) and a share group
(confluent-kafka's ShareConsumer in a child process). What the command prints is checked against
what the clients read themselves (committed offsets and high watermarks through kafka-python,
share-partition start offsets through DescribeShareGroupOffsets)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from tests.harness import REPO, BrokerProcess, shared_broker
from tests.integration.cli import kcoord, kcoord_json, kcoord_process
from tests.integration.consumer_groups import consumer_group_flags, wait_until

# Short share-group sessions: the share member below is killed, and its session must end soon.
SHARE_FLAGS = ["--group-share-session-timeout-ms", "6000", "--group-share-heartbeat-interval-ms", "500"]
_started, cbroker = shared_broker("cbroker", [*consumer_group_flags(), *SHARE_FLAGS], scope="module")

# Records of partition 0 carry these timestamps: T0, T0 + 1 s, ... (2026-01-02T03:04:05Z).
T0 = int(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC).timestamp() * 1000)
PER_PARTITION = 10


def produce_timed(broker: BrokerProcess, topic: str) -> int:
    """Partition 0: T0 + i s; partition 1: now - 10 min + i min. Returns the time of the
    production (ms)."""
    now = int(time.time() * 1000)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(PER_PARTITION):
        p.send(topic, f"a{i}".encode(), partition=0, timestamp_ms=T0 + i * 1000)
        p.send(topic, f"b{i}".encode(), partition=1, timestamp_ms=now - 600_000 + i * 60_000)
    p.flush()
    p.close()
    return now


def create_topic(broker: BrokerProcess, topic: str, partitions: int) -> None:
    run = kcoord(broker, "topics", "create", topic, "--partitions", str(partitions))
    assert run.code == 0, run


def committed(broker: BrokerProcess, group: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets as kafka-python's admin client reads them."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        found = admin.list_group_offsets(group)[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): om.offset for tp, om in found.items() if om.offset >= 0}


def high_watermarks(broker: BrokerProcess, topic: str, partitions: int) -> dict[int, int]:
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        ends = c.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
    finally:
        c.close()
    return {tp.partition: o for tp, o in ends.items()}


def group_row(broker: BrokerProcess, group: str, *args: str) -> dict[str, Any] | None:
    rows = kcoord_json(broker, "groups", "list", *args)["groups"]
    found = [r for r in rows if r["group_id"] == group]
    return found[0] if found else None


def plan_of(doc: dict[str, Any]) -> dict[tuple[str, int], tuple[int | None, int]]:
    return {(p["topic"], p["partition"]): (p["current_offset"], p["new_offset"]) for p in doc["partitions"]}


def reset(broker: BrokerProcess, group: str, *args: str) -> dict[str, Any]:
    return kcoord_json(broker, "groups", "reset-offsets", group, *args)


# --- a classic group ----------------------------------------------------------------------------
def test_classic_group(cbroker: BrokerProcess, unique_topic: str) -> None:
    topic, group = unique_topic, unique_topic + "-g"
    create_topic(cbroker, topic, 2)
    produced_at = produce_timed(cbroker, topic)
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=cbroker.bootstrap,
        group_id=group,
        client_id="cli-test-classic",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        wait_until(lambda: consumer.poll(200) is not None and consumer.assignment(), "an assignment")
        consumer.commit(
            {
                TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1),
                TopicPartition(topic, 1): OffsetAndMetadata(7, "", -1),
            }
        )

        # list, with and without a matching --state
        row = group_row(cbroker, group, "--state", "Stable")
        assert row == {
            "group_id": group,
            "type": "classic",
            "state": "Stable",
            "protocol": "range",
            "protocol_type": "consumer",
            "members": 1,
        }
        assert group_row(cbroker, group, "--state", "Empty") is None
        assert group_row(cbroker, group, "--type", "share") is None

        # describe: the lag is the high watermark minus the committed offset, as clients read them
        doc = kcoord_json(cbroker, "groups", "describe", group)["groups"][0]
        assert (doc["type"], doc["state"], len(doc["members"])) == ("classic", "Stable", 1)
        member = doc["members"][0]
        assert member["client_id"] == "cli-test-classic"
        assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == [(topic, 0), (topic, 1)]
        hw, comm = high_watermarks(cbroker, topic, 2), committed(cbroker, group)
        assert comm == {(topic, 0): 4, (topic, 1): 7}
        lags = {o["partition"]: (o["current_offset"], o["log_end_offset"], o["lag"]) for o in doc["offsets"]}
        assert lags == {p: (comm[(topic, p)], hw[p], hw[p] - comm[(topic, p)]) for p in (0, 1)}
        assert {o["member_id"] for o in doc["offsets"]} == {member["member_id"]}

        # the table shows the same numbers
        table = kcoord(cbroker, "groups", "describe", group)
        assert table.code == 0, table
        assert any(line.split()[:5] == [topic, "0", "4", "10", "6"] for line in table.stdout.splitlines())

        # nothing may be reset or deleted under an active member
        refused = kcoord(
            cbroker, "groups", "reset-offsets", group, "--all-topics", "--to-earliest", "--execute"
        )
        assert refused.code == 1
        assert "NON_EMPTY_GROUP" in refused.stderr and "inactive" in refused.stderr
        refused = kcoord(cbroker, "groups", "delete", group)
        assert refused.code == 1 and "NON_EMPTY_GROUP" in refused.stdout
        assert committed(cbroker, group) == {(topic, 0): 4, (topic, 1): 7}
    finally:
        consumer.close()

    wait_until(lambda: group_row(cbroker, group, "--state", "Empty"), "the group to be Empty")
    tp0, tp1 = (topic, 0), (topic, 1)
    both = ("--topic", topic)

    # each option: the dry run changes nothing, --execute commits exactly the plan
    cases: list[tuple[tuple[str, ...], dict[tuple[str, int], int]]] = [
        (("--to-earliest",), {tp0: 0, tp1: 0}),
        (("--to-latest",), {tp0: 10, tp1: 10}),
        (("--to-offset", "3"), {tp0: 3, tp1: 3}),
        (("--to-offset", "99"), {tp0: 10, tp1: 10}),  # beyond the log end: the log end
        (("--shift-by", "-2"), {tp0: 8, tp1: 8}),  # from the previous case's 10
        (("--shift-by", "-100"), {tp0: 0, tp1: 0}),  # before the log start: the log start
        # partition 0: the first record at or after T0 + 5 s; partition 1: none that old -> its first
        (("--to-datetime", "2026-01-02T03:04:10.000Z"), {tp0: 5, tp1: 0}),
        # partition 0: nothing that recent -> the log end; partition 1: now - 5.5 min -> offset 5
        (("--by-duration", "PT5M30S"), {tp0: 10, tp1: 5}),
        (("--to-current",), {tp0: 10, tp1: 5}),
    ]
    assert time.time() * 1000 - produced_at < 25_000, "by-duration's margin is 30 s"
    for option, expected in cases:
        before = committed(cbroker, group)
        dry = reset(cbroker, group, *both, *option)
        assert dry["executed"] is False
        assert {tp: new for tp, (_, new) in plan_of(dry).items()} == expected, option
        assert {tp: cur for tp, (cur, _) in plan_of(dry).items()} == before, option
        assert committed(cbroker, group) == before, f"a dry run changed offsets: {option}"
        done = reset(cbroker, group, *both, *option, "--execute")
        assert done["executed"] is True and all(p["error"] is None for p in done["partitions"])
        assert committed(cbroker, group) == expected, option

    # one partition only; --to-datetime without a zone is local time
    local = dt.datetime.fromtimestamp((T0 + 2000) / 1000).strftime("%Y-%m-%dT%H:%M:%S.000")
    done = reset(cbroker, group, "--topic", f"{topic}:0", "--to-datetime", local, "--execute")
    assert plan_of(done) == {tp0: (10, 2)}
    assert committed(cbroker, group) == {tp0: 2, tp1: 5}

    # the table of a dry run, through the installed entry point's module
    run = kcoord_process(cbroker, "groups", "reset-offsets", group, "--all-topics", "--to-latest")
    assert run.code == 0, run
    assert [line.split() for line in run.stdout.splitlines()][1:] == [
        [group, topic, "0", "2", "10"],
        [group, topic, "1", "5", "10"],
    ]
    assert "Dry run" in run.stderr

    # delete-offsets, then delete
    deleted = kcoord_json(cbroker, "groups", "delete-offsets", group, "--topic", f"{topic}:0")
    assert deleted["offsets"] == [{"topic": topic, "partition": 0, "error": None}]
    assert committed(cbroker, group) == {tp1: 5}
    assert kcoord_json(cbroker, "groups", "delete", group) == {"groups": [{"group_id": group, "error": None}]}
    assert group_row(cbroker, group) is None
    gone = kcoord(cbroker, "groups", "describe", group, "--output", "json")
    assert gone.code == 1
    assert gone.json()["groups"] == [
        {
            "group_id": group,
            "error": {"code": 69, "name": "GROUP_ID_NOT_FOUND", "message": f"Group {group} not found."},
        }
    ]
    assert "GROUP_ID_NOT_FOUND" in gone.stderr


def test_reset_creates_a_group_that_does_not_exist(cbroker: BrokerProcess, unique_topic: str) -> None:
    """As with Kafka's tool: resetting a new group's offsets commits them, which creates it."""
    topic, group = unique_topic, unique_topic + "-g"
    create_topic(cbroker, topic, 2)
    produce_timed(cbroker, topic)
    done = reset(cbroker, group, "--topic", topic, "--to-offset", "6", "--execute")
    assert plan_of(done) == {(topic, 0): (None, 6), (topic, 1): (None, 6)}
    assert committed(cbroker, group) == {(topic, 0): 6, (topic, 1): 6}
    assert group_row(cbroker, group, "--state", "Empty")["type"] == "classic"  # type: ignore[index]


def test_usage_errors_exit_with_status_2(cbroker: BrokerProcess, unique_topic: str) -> None:
    topic, group = unique_topic, unique_topic + "-g"
    create_topic(cbroker, topic, 1)
    for args in [
        ("--topic", topic),  # no reset option
        ("--topic", topic, "--to-earliest", "--to-latest"),  # two
        ("--to-earliest",),  # no scope
        ("--topic", topic, "--all-topics", "--to-earliest"),  # two scopes
        ("--topic", topic, "--by-duration", "1h"),
        ("--topic", topic, "--to-datetime", "yesterday"),
        ("--topic", f"{topic}:x", "--to-earliest"),
        ("--topic", topic, "--shift-by", "1"),  # nothing committed to shift
        ("--topic", topic, "--to-earliest", "--execute", "--dry-run"),
    ]:
        run = kcoord(cbroker, "groups", "reset-offsets", group, *args)
        assert run.code == 2, (args, run)
        assert "Error" in run.stderr, (args, run)
    assert kcoord(cbroker, "groups", "list", "--state", "Sleeping").code == 2
    missing = kcoord(cbroker, "groups", "reset-offsets", group, "--topic", f"{topic}:5", "--to-earliest")
    assert missing.code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr
    helped = kcoord(None, "groups", "reset-offsets", "--help")
    assert helped.code == 0 and "Exit status" in helped.stdout


# --- a KIP-848 consumer group -------------------------------------------------------------------
def test_consumer_protocol_group(cbroker: BrokerProcess, unique_topic: str) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic, group = unique_topic, unique_topic + "-g"
    create_topic(cbroker, topic, 2)
    produce_timed(cbroker, topic)
    consumer = ck.Consumer(
        {
            "bootstrap.servers": cbroker.bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": "cli-test-kip848",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 2 * PER_PARTITION:
            assert time.monotonic() < deadline, f"only {got} records"
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got += 1
        consumer.commit(
            offsets=[ck.TopicPartition(topic, 0, 3), ck.TopicPartition(topic, 1, 9)], asynchronous=False
        )

        row = group_row(cbroker, group, "--type", "consumer")
        assert row is not None
        assert (row["type"], row["state"], row["protocol"], row["members"]) == (
            "consumer",
            "Stable",
            "uniform",
            1,
        )
        doc = kcoord_json(cbroker, "groups", "describe", group)["groups"][0]
        assert doc["type"] == "consumer" and doc["epoch"] >= 1
        assert [m["client_id"] for m in doc["members"]] == ["cli-test-kip848"]
        hw, comm = high_watermarks(cbroker, topic, 2), committed(cbroker, group)
        assert comm == {(topic, 0): 3, (topic, 1): 9}
        lags = {o["partition"]: o["lag"] for o in doc["offsets"]}
        assert lags == {p: hw[p] - comm[(topic, p)] for p in (0, 1)} == {0: 7, 1: 1}

        refused = kcoord(cbroker, "groups", "reset-offsets", group, "--all-topics", "--to-earliest")
        assert refused.code == 1 and "NON_EMPTY_GROUP" in refused.stderr
    finally:
        consumer.close()

    wait_until(lambda: group_row(cbroker, group, "--state", "Empty"), "the consumer group to be Empty")
    done = reset(cbroker, group, "--all-topics", "--to-earliest", "--execute")
    assert plan_of(done) == {(topic, 0): (3, 0), (topic, 1): (9, 0)}
    assert committed(cbroker, group) == {(topic, 0): 0, (topic, 1): 0}
    assert group_row(cbroker, group)["type"] == "consumer"  # type: ignore[index]
    deleted = kcoord_json(cbroker, "groups", "delete-offsets", group, "--topic", topic)
    assert [o["error"] for o in deleted["offsets"]] == [None, None]
    assert committed(cbroker, group) == {}
    assert kcoord(cbroker, "groups", "delete", group).code == 0
    assert group_row(cbroker, group) is None


# --- a share group ------------------------------------------------------------------------------
def share_worker(broker: BrokerProcess, group: str, topic: str, records: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.integration.share_confluent_worker",
            broker.bootstrap,
            group,
            topic,
            str(records),
            "implicit",
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_share_group(cbroker: BrokerProcess, unique_topic: str) -> None:
    pytest.importorskip("confluent_kafka")
    from tests.integration.test_share_confluent import set_earliest, start_offsets

    topic, group = unique_topic, unique_topic + "-g"
    create_topic(cbroker, topic, 2)
    produce_timed(cbroker, topic)
    set_earliest(cbroker, group)

    # a member that consumes everything and stays (it waits for records that never come)
    worker = share_worker(cbroker, group, topic, 10_000)
    try:

        def all_acknowledged() -> bool:
            try:
                return start_offsets(cbroker, group) == {0: 10, 1: 10}
            except AssertionError:  # the group does not exist before the member's first heartbeat
                return False

        wait_until(all_acknowledged, "every record acknowledged", 60)
        row = group_row(cbroker, group, "--type", "share")
        assert row is not None and (row["state"], row["members"]) == ("Stable", 1)
        refused = kcoord(cbroker, "groups", "reset-offsets", group, "--all-topics", "--to-earliest")
        assert refused.code == 1 and "NON_EMPTY_GROUP" in refused.stderr
        refused = kcoord(cbroker, "groups", "delete-offsets", group, "--topic", topic)
        assert refused.code == 1 and "NON_EMPTY_GROUP" in refused.stderr
    finally:
        worker.terminate()
        worker.wait(30)

    # the member is gone once its session times out or it left
    wait_until(lambda: group_row(cbroker, group, "--state", "Empty"), "the share group to be Empty", 60)
    KafkaProducer(bootstrap_servers=cbroker.bootstrap).send(topic, b"late", partition=1).get(10)
    doc = kcoord_json(cbroker, "groups", "describe", group)["groups"][0]
    assert (doc["type"], doc["members"]) == ("share", [])
    hw, spso = high_watermarks(cbroker, topic, 2), start_offsets(cbroker, group)
    assert (
        {o["partition"]: (o["start_offset"], o["log_end_offset"], o["lag"]) for o in doc["offsets"]}
        == {p: (spso[p], hw[p], hw[p] - spso[p]) for p in (0, 1)}
        == {0: (10, 10, 0), 1: (10, 11, 1)}
    )

    dry = reset(cbroker, group, "--topic", f"{topic}:1", "--to-offset", "4")
    assert plan_of(dry) == {(topic, 1): (10, 4)} and start_offsets(cbroker, group) == {0: 10, 1: 10}
    done = reset(cbroker, group, "--all-topics", "--to-earliest", "--execute")
    assert plan_of(done) == {(topic, 0): (10, 0), (topic, 1): (10, 0)}
    assert start_offsets(cbroker, group) == {0: 0, 1: 0}
    done = reset(cbroker, group, "--topic", topic, "--to-datetime", "2026-01-02T03:04:07Z", "--execute")
    assert start_offsets(cbroker, group) == {0: 2, 1: 0}

    bad = kcoord(cbroker, "groups", "delete-offsets", group, "--topic", f"{topic}:0")
    assert bad.code == 2  # a share group's offsets go by whole topics
    deleted = kcoord_json(cbroker, "groups", "delete-offsets", group, "--topic", topic)
    assert deleted["offsets"] == [{"topic": topic, "partition": None, "error": None}]
    assert start_offsets(cbroker, group) == {}
    assert kcoord(cbroker, "groups", "delete", group).code == 0
    assert group_row(cbroker, group) is None
