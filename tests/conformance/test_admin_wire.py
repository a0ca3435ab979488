"""The admin APIs of one node over raw sockets: DeleteRecords, DescribeLogDirs, legacy
AlterConfigs, ListConfigResources, ElectLeaders, Alter/ListPartitionReassignments, at every
advertised version and with each error Kafka answers."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import request_class
from kcoord.server.api_table import build_table
from tests.harness import BrokerProcess
from tests.unit.logutil import decode, written
from tests.wire import ApiKey, Conn, build_batch

TABLE = build_table()
T0 = 1_700_000_000_000
NODE = 1  # the harness broker's node.id


def served(key: ApiKey) -> list[int]:
    spec = TABLE.get(key)
    assert spec is not None
    return list(range(spec.min_version, spec.max_version + 1))


# --- requests ------------------------------------------------------------------------------------
def delete_records(
    c: Conn, version: int, offsets: dict[str, list[tuple[int, int]]]
) -> dict[tuple[str, int], Any]:
    req = request_class(ApiKey.DeleteRecords)
    topics = [
        req.DeleteRecordsTopic(
            name=name,
            partitions=[
                req.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=p, offset=o) for p, o in parts
            ],
        )
        for name, parts in offsets.items()
    ]
    resp = c.request(ApiKey.DeleteRecords, version, topics=topics, timeout_ms=5000)
    out = {}
    for t in resp.topics:
        for p in t.partitions:
            assert (t.name, p.partition_index) not in out, "a partition answered twice"
            out[(t.name, p.partition_index)] = p
    return out


def describe_log_dirs(c: Conn, version: int, topics: dict[str, list[int]] | None) -> Any:
    req = request_class(ApiKey.DescribeLogDirs)
    return c.request(
        ApiKey.DescribeLogDirs,
        version,
        topics=None
        if topics is None
        else [req.DescribableLogDirTopic(topic=t, partitions=ps) for t, ps in topics.items()],
    )


def elect(c: Conn, version: int, partitions: dict[str, list[int]] | None, election_type: int = 0) -> Any:
    req = request_class(ApiKey.ElectLeaders)
    return c.request(
        ApiKey.ElectLeaders,
        version,
        election_type=election_type,
        topic_partitions=None
        if partitions is None
        else [req.TopicPartitions(topic=t, partitions=ps) for t, ps in partitions.items()],
        timeout_ms=5000,
    )


def reassign(
    c: Conn,
    version: int,
    targets: dict[str, list[tuple[int, list[int] | None]]],
    allow_rf_change: bool = True,
) -> Any:
    req = request_class(ApiKey.AlterPartitionReassignments)
    return c.request(
        ApiKey.AlterPartitionReassignments,
        version,
        timeout_ms=5000,
        allow_replication_factor_change=allow_rf_change,
        topics=[
            req.ReassignableTopic(
                name=t,
                partitions=[
                    req.ReassignableTopic.ReassignablePartition(partition_index=p, replicas=r)
                    for p, r in parts
                ],
            )
            for t, parts in targets.items()
        ],
    )


def list_reassignments(c: Conn, topics: dict[str, list[int]] | None) -> Any:
    req = request_class(ApiKey.ListPartitionReassignments)
    return c.request(
        ApiKey.ListPartitionReassignments,
        0,
        timeout_ms=5000,
        topics=None
        if topics is None
        else [req.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps) for t, ps in topics.items()],
    )


def alter_configs(
    c: Conn,
    version: int,
    resources: list[tuple[int, str, list[tuple[str, str | None]]]],
    validate_only: bool = False,
) -> list[tuple[int, str, int, str | None]]:
    req = request_class(ApiKey.AlterConfigs)
    resp = c.request(
        ApiKey.AlterConfigs,
        version,
        resources=[
            req.AlterConfigsResource(
                resource_type=rt,
                resource_name=name,
                configs=[req.AlterConfigsResource.AlterableConfig(name=k, value=v) for k, v in configs],
            )
            for rt, name, configs in resources
        ],
        validate_only=validate_only,
    )
    return [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in resp.responses]


def describe_configs(c: Conn, resource_type: int, name: str) -> dict[str, tuple[str | None, bool]]:
    """name -> (value, set on the resource itself: config source DYNAMIC_TOPIC_CONFIG or GROUP_CONFIG)."""
    req = request_class(ApiKey.DescribeConfigs)
    resp = c.request(
        ApiKey.DescribeConfigs,
        4,
        resources=[
            req.DescribeConfigsResource(
                resource_type=resource_type, resource_name=name, configuration_keys=None
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    (r,) = resp.results
    assert r.error_code == 0, r
    return {e.name: (e.value, e.config_source in (1, 8)) for e in r.configs}


def list_config_resources(c: Conn, version: int, types: list[int]) -> Any:
    return c.request(ApiKey.ListConfigResources, version, resource_types=types)


# --- fixtures ------------------------------------------------------------------------------------
@pytest.fixture
def topic13(broker: BrokerProcess, unique_topic: str) -> str:
    """Partition 0: offsets 0-12 in three batches (0-3, 4-7, 8-12), record i at T0 + 10*i;
    partition 1 empty."""
    with broker.connect() as c:
        c.create_topic(unique_topic, partitions=2)
        for first, n in ((0, 4), (4, 4), (8, 5)):
            recs = [(f"k{i}".encode(), f"v{i}".encode(), T0 + 10 * i) for i in range(first, first + n)]
            assert c.produce(unique_topic, 0, build_batch(recs)).base_offset == first
    return unique_topic


# --- DeleteRecords -------------------------------------------------------------------------------
@pytest.mark.parametrize("version", served(ApiKey.DeleteRecords))
def test_delete_records_moves_the_log_start_offset(broker: BrokerProcess, topic13: str, version: int) -> None:
    with broker.connect() as c:
        got = delete_records(c, version, {topic13: [(0, 6)]})
        assert (got[(topic13, 0)].error_code, got[(topic13, 0)].low_watermark) == (0, 6)
        # ListOffsets earliest (and earliest local) follow; latest does not move.
        assert c.list_offsets(topic13, 0, -2).offset == 6
        assert c.list_offsets(topic13, 0, -4, version=8).offset == 6
        assert c.list_offsets(topic13, 0, -1).offset == 13
        # Fetch below it is out of range; at it, the batch holding it, with the new start offset.
        assert c.fetch(topic13, 0, 5).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert c.fetch(topic13, 0, 0).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        p = c.fetch(topic13, 0, 6)
        assert (p.error_code, p.log_start_offset, p.high_watermark) == (0, 6, 13)
        assert [r[0] for r in decode(p.records)] == list(range(4, 13))  # whole batches, as Kafka
        # A timestamp lookup skips the deleted records, even within a batch.
        r = c.list_offsets(topic13, 0, 0)
        assert (r.offset, r.timestamp) == (6, T0 + 60)
        r = c.list_offsets(topic13, 0, T0 + 45)
        assert (r.offset, r.timestamp) == (6, T0 + 60)
        r = c.list_offsets(topic13, 0, T0 + 75)
        assert (r.offset, r.timestamp) == (8, T0 + 80)
        # Produce answers with the new log start offset too.
        assert c.produce(topic13, 0, build_batch(count=1)).log_start_offset == 6
        # An offset below the log start offset changes nothing: the low watermark stays.
        got = delete_records(c, version, {topic13: [(0, 2)]})
        assert (got[(topic13, 0)].error_code, got[(topic13, 0)].low_watermark) == (0, 6)
        assert c.list_offsets(topic13, 0, -2).offset == 6
        # -1 is the high watermark: everything goes.
        got = delete_records(c, version, {topic13: [(0, -1), (1, -1)]})
        assert (got[(topic13, 0)].error_code, got[(topic13, 0)].low_watermark) == (0, 14)
        assert (got[(topic13, 1)].error_code, got[(topic13, 1)].low_watermark) == (0, 0)
        assert c.list_offsets(topic13, 0, -2).offset == 14
        assert c.fetch(topic13, 0, 14).error_code == 0
        assert c.fetch(topic13, 0, 13).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert c.list_offsets(topic13, 0, 0).offset == -1  # no record left
        # New records continue after it.
        assert c.produce(topic13, 0, build_batch(count=2)).base_offset == 14
        p = c.fetch(topic13, 0, 14)
        assert [r[0] for r in decode(p.records)] == [14, 15]


def test_delete_records_errors(broker: BrokerProcess, topic13: str) -> None:
    with broker.connect() as c:
        got = delete_records(
            c,
            2,
            {
                topic13: [(0, 14), (1, -2), (7, 0)],
                topic13 + "-missing": [(0, 0)],
                "__consumer_offsets": [(0, 0), (9999, 0)],
            },
        )
        expected = {
            (topic13, 0): ErrorCode.OFFSET_OUT_OF_RANGE,  # above the high watermark (13)
            (topic13, 1): ErrorCode.OFFSET_OUT_OF_RANGE,  # negative, not -1
            (topic13, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            (topic13 + "-missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ("__consumer_offsets", 0): ErrorCode.INVALID_TOPIC_EXCEPTION,  # Kafka's internal-topic refusal
            ("__consumer_offsets", 9999): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert {k: v.error_code for k, v in got.items()} == expected
        assert {v.low_watermark for v in got.values()} == {-1}
        # Nothing moved.
        assert c.list_offsets(topic13, 0, -2).offset == 0
        assert c.list_offsets("__consumer_offsets", 0, -2).offset == 0
        # Exactly the high watermark is allowed.
        got = delete_records(c, 0, {topic13: [(0, 13)]})
        assert (got[(topic13, 0)].error_code, got[(topic13, 0)].low_watermark) == (0, 13)


def test_delete_records_partition_named_twice(broker: BrokerProcess, topic13: str) -> None:
    """Kafka keys the request by partition: one answer, the last offset given."""
    with broker.connect() as c:
        got = delete_records(c, 1, {topic13: [(0, 9), (0, 3)]})
        assert list(got) == [(topic13, 0)]
        assert got[(topic13, 0)].low_watermark == 3
        assert c.list_offsets(topic13, 0, -2).offset == 3


def test_delete_records_refused_without_delete_policy(broker_factory: Any) -> None:
    """A compact-only topic (its policy set in topics.json, as a topic stored earlier):
    POLICY_VIOLATION, as Kafka answers for cleanup.policy=compact."""
    b = broker_factory()
    b.create_topic("legacy-compact")
    with b.connect() as c:
        c.produce("legacy-compact", 0, build_batch(count=3))
    b.stop()
    topics_file = b.data_dir / "topics.json"
    data = json.loads(topics_file.read_text())
    data["topics"]["legacy-compact"]["configs"] = {"cleanup.policy": "compact"}
    topics_file.write_text(json.dumps(data))
    b.start()
    with b.connect() as c:
        got = delete_records(c, 2, {"legacy-compact": [(0, 1)]})
        assert (got[("legacy-compact", 0)].error_code, got[("legacy-compact", 0)].low_watermark) == (
            ErrorCode.POLICY_VIOLATION,
            -1,
        )
        assert c.list_offsets("legacy-compact", 0, -2).offset == 0


def _segments(directory: Path) -> list[int]:
    return sorted(int(p.stem) for p in directory.glob("*.log"))


def test_delete_records_survives_restart_and_retention_deletes_the_segments_below(
    broker_factory: Any,
) -> None:
    b = broker_factory(["--log-retention-check-interval-ms", "200"])
    with b.connect() as c:
        # Batches 10 ms apart with segment.ms 1: one batch per segment.
        c.create_topic("dr", configs={"segment.ms": "1", "retention.ms": "-1"})
        for i in range(12):
            c.produce("dr", 0, build_batch([(None, bytes(500), T0 + 10 * i)]))
    directory = b.data_dir / "dr-0"
    assert _segments(directory)[:3] == [0, 1, 2]
    with b.connect() as c:
        before = describe_log_dirs(c, 4, {"dr": [0]}).results[0].topics[0].partitions[0].partition_size
        got = delete_records(c, 2, {"dr": [(0, 5)]})
        assert got[("dr", 0)].low_watermark == 5
        deadline = time.monotonic() + 10
        while _segments(directory)[0] != 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _segments(directory)[0] == 5, "segments wholly below the log start offset stay"
        after = describe_log_dirs(c, 4, {"dr": [0]}).results[0].topics[0].partitions[0].partition_size
        assert after < before
    # In the middle of a segment, after a clean restart.
    with b.connect() as c:
        assert delete_records(c, 2, {"dr": [(0, 7)]})[("dr", 0)].low_watermark == 7
    b.restart()
    with b.connect() as c:
        assert c.list_offsets("dr", 0, -2).offset == 7
        assert c.fetch("dr", 0, 6).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert c.fetch("dr", 0, 7).error_code == 0
        assert c.produce("dr", 0, build_batch(count=1)).base_offset == 12


# --- DescribeLogDirs ------------------------------------------------------------------------------
def _size_on_disk(data_dir: Path, topic: str, p: int) -> int:
    """The partition's size as Kafka counts it: its segments' batches (a preallocated active
    segment's file is longer)."""
    return sum(len(written(f)) for f in (data_dir / f"{topic}-{p}").glob("*.log"))


@pytest.mark.parametrize("version", served(ApiKey.DescribeLogDirs))
def test_describe_log_dirs(broker: BrokerProcess, topic13: str, version: int) -> None:
    with broker.connect() as c:
        resp = describe_log_dirs(c, version, None)
        if version >= 3:
            assert resp.error_code == 0
        (result,) = resp.results
        assert result.error_code == 0
        assert result.log_dir == str(broker.data_dir.absolute())
        topics = {t.name: t for t in result.topics}
        assert "__consumer_offsets" in topics
        parts = {p.partition_index: p for p in topics[topic13].partitions}
        assert set(parts) == {0, 1}
        assert parts[0].partition_size == _size_on_disk(broker.data_dir, topic13, 0) > 0
        assert parts[1].partition_size == 0
        assert {(p.offset_lag, p.is_future_key) for p in parts.values()} == {(0, False)}
        if version >= 4:
            assert result.total_bytes >= result.usable_bytes > 0
        if version >= 5:
            assert result.is_cordoned is False
        # Named partitions only; unknown ones are left out, and topics left with none too.
        resp = describe_log_dirs(c, version, {topic13: [1, 7], topic13 + "-missing": [0]})
        (result,) = resp.results
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in result.topics] == [
            (topic13, [1])
        ]
        assert describe_log_dirs(c, version, {}).results[0].topics == []


# --- ElectLeaders -----------------------------------------------------------------------------------
@pytest.mark.parametrize("version", served(ApiKey.ElectLeaders))
def test_elect_leaders_not_needed(broker: BrokerProcess, topic13: str, version: int) -> None:
    with broker.connect() as c:
        for election_type in (0, 1) if version >= 1 else (0,):
            resp = elect(c, version, {topic13: [0, 1, 5], topic13 + "-missing": [0]}, election_type)
            if version >= 1:
                assert resp.error_code == 0
            got = {
                (t.topic, p.partition_id): (p.error_code, p.error_message)
                for t in resp.replica_election_results
                for p in t.partition_result
            }
            assert got == {
                (topic13, 0): (
                    ErrorCode.ELECTION_NOT_NEEDED,
                    "Leader election not needed for topic partition.",
                ),
                (topic13, 1): (
                    ErrorCode.ELECTION_NOT_NEEDED,
                    "Leader election not needed for topic partition.",
                ),
                (topic13, 5): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic13}-5"),
                (topic13 + "-missing", 0): (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"No such topic as {topic13}-missing",
                ),
            }
        # All partitions: those needing no election are left out, every topic is listed.
        resp = elect(c, version, None)
        topics = {t.topic: t.partition_result for t in resp.replica_election_results}
        assert topics[topic13] == [] and topics["__consumer_offsets"] == []


def test_elect_leaders_unknown_election_type(broker: BrokerProcess, topic13: str) -> None:
    with broker.connect() as c:
        resp = elect(c, 2, {topic13: [0]}, election_type=2)
        assert resp.error_code == ErrorCode.INVALID_REQUEST
        ((t,),) = [r.partition_result for r in resp.replica_election_results]
        assert (t.partition_id, t.error_code) == (0, ErrorCode.INVALID_REQUEST)


# --- Alter/ListPartitionReassignments ------------------------------------------------------------------
@pytest.mark.parametrize("version", served(ApiKey.AlterPartitionReassignments))
def test_alter_partition_reassignments(broker: BrokerProcess, topic13: str, version: int) -> None:
    with broker.connect() as c:
        resp = reassign(
            c,
            version,
            {
                topic13: [
                    (0, [NODE]),
                    (1, []),
                    (0, [NODE + 1]),
                    (1, [NODE, NODE]),
                    (1, [NODE, 7]),
                    (0, None),
                    (4, [NODE]),
                ],
                topic13 + "-missing": [(0, [NODE])],
            },
            allow_rf_change=False,
        )
        assert (resp.error_code, resp.error_message) == (0, None)
        if version >= 1:
            assert resp.allow_replication_factor_change is False
        got = [
            (t.name, p.partition_index, p.error_code, p.error_message)
            for t in resp.responses
            for p in t.partitions
        ]
        assign = "The manual partition assignment includes"
        assert got == [
            (topic13, 0, 0, None),
            (topic13, 1, ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"{assign} an empty replica list."),
            (
                topic13,
                0,
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"{assign} broker 2, but no such broker is registered.",
            ),
            (topic13, 1, ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"{assign} the broker 1 more than once."),
            (
                topic13,
                1,
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"{assign} broker 7, but no such broker is registered.",
            ),
            (topic13, 0, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, "No partition reassignment is in progress."),
            (topic13, 4, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic13}:4."),
            (
                topic13 + "-missing",
                0,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Unable to find a topic named {topic13}-missing.",
            ),
        ]
        # Nothing is ever in progress.
        for topics in (None, {topic13: [0, 1]}, {topic13 + "-missing": [0]}):
            listed = list_reassignments(c, topics)
            assert (listed.error_code, listed.error_message, listed.topics) == (0, None, [])


# --- AlterConfigs (legacy) -------------------------------------------------------------------------
@pytest.mark.parametrize("version", served(ApiKey.AlterConfigs))
def test_alter_configs_replaces_the_topic_configs(
    broker: BrokerProcess, unique_topic: str, version: int
) -> None:
    with broker.connect() as c:
        c.create_topic(unique_topic, configs={"retention.ms": "3600000"})
        assert alter_configs(c, version, [(2, unique_topic, [("segment.ms", "600000")])]) == [
            (2, unique_topic, 0, None)
        ]
        described = describe_configs(c, 2, unique_topic)
        assert described["segment.ms"] == ("600000", True)
        assert described["retention.ms"] == ("604800000", False), "legacy AlterConfigs replaces the whole set"
        # ValidateOnly changes nothing.
        assert alter_configs(c, version, [(2, unique_topic, [])], validate_only=True) == [
            (2, unique_topic, 0, None)
        ]
        assert describe_configs(c, 2, unique_topic)["segment.ms"] == ("600000", True)
        # An empty set resets everything.
        assert alter_configs(c, version, [(2, unique_topic, [])]) == [(2, unique_topic, 0, None)]
        assert describe_configs(c, 2, unique_topic)["segment.ms"][1] is False


def test_alter_configs_errors(broker: BrokerProcess, unique_topic: str) -> None:
    with broker.connect() as c:
        c.create_topic(unique_topic, configs={"retention.ms": "3600000"})
        got = alter_configs(
            c,
            2,
            [
                (2, unique_topic, [("retention.ms", "not-a-number")]),
                (2, unique_topic + "-x", [("no.such.config", "1")]),
                (2, unique_topic + "-y", [("retention.ms", "1"), ("retention.ms", "2")]),
                (2, unique_topic + "-z", [("retention.ms", None)]),
                (2, unique_topic + "-missing", [("retention.ms", "1")]),
                (2, "__consumer_offsets", [("retention.ms", "1")]),
                (4, str(NODE), [("log.retention.ms", "1")]),
                (8, str(NODE), [("kafka", "DEBUG")]),
                (99, "x", []),
                (2, unique_topic + "-dup", []),
                (2, unique_topic + "-dup", []),
            ],
        )
        codes = [(name, code) for _, name, code, _ in got]
        assert codes == [
            (unique_topic, ErrorCode.INVALID_CONFIG),
            (unique_topic + "-x", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            (unique_topic + "-y", ErrorCode.INVALID_REQUEST),
            (unique_topic + "-z", ErrorCode.INVALID_REQUEST),
            (unique_topic + "-missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
            ("__consumer_offsets", ErrorCode.INVALID_REQUEST),
            (str(NODE), ErrorCode.INVALID_REQUEST),
            (str(NODE), ErrorCode.INVALID_REQUEST),
            ("x", ErrorCode.INVALID_REQUEST),
            (unique_topic + "-dup", ErrorCode.INVALID_REQUEST),
            (unique_topic + "-dup", ErrorCode.INVALID_REQUEST),
        ]
        messages = {name: msg for _, name, _, msg in got}
        assert messages[unique_topic + "-y"] == "Error due to duplicate config keys"
        assert messages[unique_topic + "-z"] == "Null value not supported for : retention.ms"
        assert messages["x"] == "Unknown resource type 99"
        assert messages[unique_topic + "-dup"] == "Each resource must appear at most once."
        # An unknown name on an existing topic, and the failed resource changed nothing.
        assert (
            alter_configs(c, 1, [(2, unique_topic, [("no.such.config", "1")])])[0][2]
            == ErrorCode.INVALID_CONFIG
        )
        assert describe_configs(c, 2, unique_topic)["retention.ms"] == ("3600000", True)


def test_alter_configs_group_and_list_config_resources(broker: BrokerProcess, unique_topic: str) -> None:
    group = f"legacy-{uuid.uuid4().hex[:8]}"
    with broker.connect() as c:
        c.create_topic(unique_topic)
        assert alter_configs(c, 0, [(32, group, [("share.record.lock.duration.ms", "20000")])]) == [
            (32, group, 0, None)
        ]
        assert describe_configs(c, 32, group)["share.record.lock.duration.ms"] == ("20000", True)
        assert alter_configs(c, 0, [(32, group, [("share.record.lock.duration.ms", "1")])])[0][2] == (
            ErrorCode.INVALID_CONFIG
        )
        listed = list_config_resources(c, 1, [])
        assert listed.error_code == 0
        resources = {(r.resource_type, r.resource_name) for r in listed.config_resources}
        assert {
            (32, group),
            (2, unique_topic),
            (2, "__consumer_offsets"),
            (4, str(NODE)),
            (8, str(NODE)),
        } <= resources
        assert {t for t, _ in resources} <= {2, 4, 8, 32}  # no client metrics resources
        only_groups = list_config_resources(c, 1, [32])
        assert {r.resource_type for r in only_groups.config_resources} == {32}
        assert group in {r.resource_name for r in only_groups.config_resources}
        only_topics = list_config_resources(c, 1, [2])
        assert {r.resource_type for r in only_topics.config_resources} == {2}
        assert list_config_resources(c, 1, [16]).config_resources == []
        brokers = list_config_resources(c, 1, [4, 8]).config_resources
        assert sorted((r.resource_type, r.resource_name) for r in brokers) == [(4, str(NODE)), (8, str(NODE))]
        # The overrides removed (legacy: an empty set), the group is no longer listed.
        assert alter_configs(c, 2, [(32, group, [])]) == [(32, group, 0, None)]
        assert describe_configs(c, 32, group)["share.record.lock.duration.ms"][1] is False
        assert group not in {r.resource_name for r in list_config_resources(c, 1, [32]).config_resources}


def test_list_config_resources_versions_and_errors(broker: BrokerProcess) -> None:
    with broker.connect() as c:
        # v0 was ListClientMetricsResources: kcoord has none.
        v0 = list_config_resources(c, 0, [])
        assert (v0.error_code, v0.config_resources) == (0, [])
        for bad in ([0], [99], [2, 3]):
            resp = list_config_resources(c, 1, bad)
            assert (resp.error_code, resp.config_resources) == (ErrorCode.UNSUPPORTED_VERSION, [])
