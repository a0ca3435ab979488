"""Group coordinator APIs over raw sockets, at the versions the seeds specify.

Requests are kafka-python 3's message classes sent by tests/wire.py; the __consumer_offsets
records are read back through Fetch and decoded here by hand, independently of kcoord's own
codecs, against Kafka's byte layout:

- OffsetCommit v2/v3 with RetentionTimeMs writes offset-commit value v1 with
  expire_timestamp = commit_timestamp + retention, and the offset expires then (KIP-211);
  OffsetCommit v4 (no retention field) and later write value v3;
- OffsetFetch: v1 has no top-level error and no null topics; v2+ topics = null returns every
  committed offset with a top-level error code (KIP-88); unknown partitions are -1, no error;
- DescribeGroups: an unknown group is Dead (error NONE) before v6, GROUP_ID_NOT_FOUND from v6;
- KIP-289: group id "" works for OffsetCommit/OffsetFetch (with a deprecation warning in the
  broker log, once per client) and can be described; JoinGroup/SyncGroup/Heartbeat/LeaveGroup/
  OffsetDelete/DeleteGroups answer INVALID_GROUP_ID (kcoord's spec; Kafka 4 still deletes "");
- JoinGroup: MEMBER_ID_REQUIRED only from v4;
- OffsetCommit: OFFSET_METADATA_TOO_LARGE (offset.metadata.max.bytes, counted as Kafka counts
  a Java string), UNKNOWN_TOPIC_OR_PARTITION for unknown topics and partitions;
- FindCoordinator v0..v6 (batched keys from v4);
- __consumer_offsets is an internal topic in Metadata, read-only for Produce, and a Fetch of
  it returns the coordinator log byte for byte as it is on disk.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer.group import (
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import request_class
from tests import coordinator_log
from tests.coordinator_log import (
    OFFSETS_TOPIC,
    batches,
    fetch_log,
    group_key,
    offset_key,
    parse_offset_value,
)
from tests.harness import BrokerFactory, BrokerProcess, shared_broker
from tests.legacy_log import ShareMember
from tests.unit.logutil import written
from tests.wire import ApiKey, Conn, build_batch

OFFSETS_PARTITIONS = 5
RETENTION_CHECK_MS = 200

CTopic = OffsetCommitRequest.OffsetCommitRequestTopic
CPart = CTopic.OffsetCommitRequestPartition
FTopic = OffsetFetchRequest.OffsetFetchRequestTopic
FGroup = OffsetFetchRequest.OffsetFetchRequestGroup
FGroupTopic = FGroup.OffsetFetchRequestTopics
JProtocol = JoinGroupRequest.JoinGroupRequestProtocol


# --- a broker for this module -----------------------------------------------------------------
def broker_args() -> list[str]:
    return [
        "--group-initial-rebalance-delay-ms",
        "0",
        "--offsets-topic-num-partitions",
        str(OFFSETS_PARTITIONS),
        "--offsets-retention-check-interval-ms",
        str(RETENTION_CHECK_MS),
    ]


# The module's broker (5 coordinator partitions, no initial rebalance delay).
_gbroker_started, gbroker = shared_broker("gbroker", broker_args())


@pytest.fixture
def topic(gbroker: BrokerProcess, unique_topic: str) -> str:
    gbroker.create_topic(unique_topic, 3)
    return unique_topic


# --- helpers ----------------------------------------------------------------------------------
def records_for(c: Conn, group: str, key: bytes) -> list[tuple[int, int, bytes | None]]:
    return coordinator_log.records_for(c, group, key, OFFSETS_PARTITIONS)


def commit(
    c: Conn,
    version: int,
    group: str,
    offsets: list[tuple[str, int, int]],
    retention_ms: int = -1,
    metadata: str | None = "",
    leader_epoch: int = -1,
    client_id: str = "kcoord-tests",
) -> dict[tuple[str, int], int]:
    """A standalone commit (generation -1, no member); error code per (topic, partition)."""
    by_topic: dict[str, list[Any]] = {}
    for t, p, o in offsets:
        by_topic.setdefault(t, []).append(
            CPart(
                partition_index=p,
                committed_offset=o,
                committed_leader_epoch=leader_epoch,
                committed_metadata=metadata,
            )
        )
    resp = c.request(
        ApiKey.OffsetCommit,
        version,
        client_id=client_id,
        group_id=group,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=retention_ms,
        topics=[CTopic(name=t, partitions=parts) for t, parts in by_topic.items()],
    )
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def fetch_offsets(
    c: Conn,
    version: int,
    group: str,
    topics: list[tuple[str, list[int]]] | None,
    client_id: str = "kcoord-tests",
) -> tuple[int, dict[tuple[str, int], tuple[int, str | None, int]]]:
    """(top-level error, {(topic, partition): (offset, metadata, error)}) for OffsetFetch v1-v7."""
    req_topics = None if topics is None else [FTopic(name=t, partition_indexes=ps) for t, ps in topics]
    resp = c.request(
        ApiKey.OffsetFetch,
        version,
        client_id=client_id,
        group_id=group,
        topics=req_topics,
        require_stable=False,
    )
    out = {
        (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
        for t in resp.topics
        for p in t.partitions
    }
    return (resp.error_code if version >= 2 else 0), out


def wait_until(pred: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# --- FindCoordinator --------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(7))
def test_find_coordinator_every_version(gbroker: BrokerProcess, version: int) -> None:
    with gbroker.connect() as c:
        resp = c.request(
            ApiKey.FindCoordinator, version, key="some-group", key_type=0, coordinator_keys=["g-a", "g-b"]
        )
    if version < 4:
        assert (resp.error_code, resp.node_id, resp.host, resp.port) == (0, 1, gbroker.host, gbroker.port)
        return
    # v4+: batched keys, one answer per key, in order.
    assert [(x.key, x.error_code, x.node_id, x.host, x.port) for x in resp.coordinators] == [
        (k, 0, 1, gbroker.host, gbroker.port) for k in ("g-a", "g-b")
    ]


# --- OffsetCommit and the records it writes -----------------------------------------------------
def test_offset_commit_v3_retention_writes_value_v1_and_expires(gbroker: BrokerProcess, topic: str) -> None:
    group = topic + "-retained"
    retention_ms = 1500
    with gbroker.connect() as c:
        before = int(time.time() * 1000)
        assert commit(c, 3, group, [(topic, 0, 42)], retention_ms=retention_ms, metadata="meta") == {
            (topic, 0): 0
        }
        after = int(time.time() * 1000)
        (rec,) = records_for(c, group, offset_key(group, topic, 0))
        value = parse_offset_value(rec[2])  # type: ignore[arg-type]
        assert value["version"] == 1
        assert (value["offset"], value["metadata"]) == (42, "meta")
        assert before - 1000 <= value["commit_timestamp"] <= after + 1000  # the broker's clock
        assert value["expire_timestamp"] == value["commit_timestamp"] + retention_ms

        # The offset expires at expire_timestamp (offsets.retention.minutes is a week here).
        assert fetch_offsets(c, 3, group, [(topic, [0])])[1][(topic, 0)][0] == 42
        wait_until(
            lambda: fetch_offsets(c, 3, group, [(topic, [0])])[1][(topic, 0)] == (-1, "", 0),
            timeout=30,
            what="the offset to expire",
        )
        tombstones = [r for r in records_for(c, group, offset_key(group, topic, 0)) if r[2] is None]
        assert len(tombstones) == 1
        assert tombstones[0][1] >= value["expire_timestamp"]  # not before its time
        # The standalone group had nothing else: it is gone too, with its tombstone.
        assert [r[2] for r in records_for(c, group, group_key(group))] == [None]
        d = c.request(ApiKey.DescribeGroups, 0, groups=[group])
        assert d.groups[0].group_state == "Dead"


@pytest.mark.parametrize(
    ("version", "retention_ms", "epoch", "expected"),
    [
        (2, -1, -1, (3, -1)),  # no retention time given: value v3
        (3, -1, -1, (3, -1)),
        (2, 3_600_000, -1, (1, None)),
        (4, -1, -1, (3, -1)),  # KIP-211: v4 has no retention time at all
        (6, -1, 9, (3, 9)),  # v6 adds the leader epoch, which value v3 keeps
        (8, -1, 9, (3, 9)),
    ],
)
def test_offset_commit_value_version(
    gbroker: BrokerProcess,
    topic: str,
    version: int,
    retention_ms: int,
    epoch: int,
    expected: tuple[int, int | None],
) -> None:
    group = f"{topic}-v{version}"
    with gbroker.connect() as c:
        codes = commit(c, version, group, [(topic, 1, 7)], retention_ms=retention_ms, leader_epoch=epoch)
        assert codes == {(topic, 1): 0}
        (rec,) = records_for(c, group, offset_key(group, topic, 1))
        value = parse_offset_value(rec[2])  # type: ignore[arg-type]
    assert (value["version"], value.get("leader_epoch")) == expected
    assert (value["offset"], value["metadata"]) == (7, "")
    if value["version"] == 1:
        assert value["expire_timestamp"] == value["commit_timestamp"] + retention_ms


def test_offset_metadata_too_large(gbroker: BrokerProcess, topic: str) -> None:
    group = topic + "-meta"
    with gbroker.connect() as c:
        # offset.metadata.max.bytes (4096) is compared with the Java string's length.
        assert commit(c, 8, group, [(topic, 0, 1)], metadata="m" * 4096) == {(topic, 0): 0}
        assert commit(c, 8, group, [(topic, 1, 1)], metadata="é" * 4096) == {(topic, 1): 0}
        assert commit(c, 8, group, [(topic, 0, 2), (topic, 1, 2)], metadata="m" * 4097) == {
            (topic, 0): ErrorCode.OFFSET_METADATA_TOO_LARGE,
            (topic, 1): ErrorCode.OFFSET_METADATA_TOO_LARGE,
        }
        assert commit(c, 3, group, [(topic, 2, 5)], metadata="é" * 4097) == {
            (topic, 2): ErrorCode.OFFSET_METADATA_TOO_LARGE
        }
        _, got = fetch_offsets(c, 5, group, [(topic, [0, 1, 2])])
    assert got == {(topic, 0): (1, "m" * 4096, 0), (topic, 1): (1, "é" * 4096, 0), (topic, 2): (-1, "", 0)}


def test_commit_to_unknown_topic_or_partition(gbroker: BrokerProcess, topic: str) -> None:
    group = topic + "-unknown"
    missing = topic + "-missing"
    with gbroker.connect() as c:
        for version in (2, 4, 8):
            codes = commit(c, version, group, [(topic, 0, 3), (topic, 7, 3), (missing, 0, 3)])
            assert codes == {
                (topic, 0): 0,
                (topic, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                (missing, 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            }, version
        # Unknown partitions and topics fetch as -1 with no error; nothing was stored for them.
        error, got = fetch_offsets(c, 2, group, [(topic, [0, 7]), (missing, [0])])
        assert error == 0
        assert got == {(topic, 0): (3, "", 0), (topic, 7): (-1, "", 0), (missing, 0): (-1, "", 0)}
        assert fetch_offsets(c, 2, group, None) == (0, {(topic, 0): (3, "", 0)})


# --- OffsetFetch --------------------------------------------------------------------------------
def test_offset_fetch_v1_and_v2_null_topics(gbroker: BrokerProcess, topic: str, unique_topic: str) -> None:
    group = topic + "-kip88"
    other = unique_topic + "-b"
    gbroker.create_topic(other, 2)
    with gbroker.connect() as c:
        assert commit(c, 2, group, [(topic, 0, 10), (topic, 2, 12), (other, 1, 21)], metadata="x") == {
            (topic, 0): 0,
            (topic, 2): 0,
            (other, 1): 0,
        }
        everything = {(topic, 0): (10, "x", 0), (topic, 2): (12, "x", 0), (other, 1): (21, "x", 0)}
        # v1: the partitions asked for, unknown ones as -1 with no error; no top-level error.
        _, got = fetch_offsets(c, 1, group, [(topic, [0, 1])])
        assert got == {(topic, 0): (10, "x", 0), (topic, 1): (-1, "", 0)}
        # v2+ (KIP-88): topics = null returns every committed offset, with a top-level error code.
        for version in (2, 3, 5, 7):
            assert fetch_offsets(c, version, group, None) == (0, everything), version
        assert fetch_offsets(c, 2, group + "-nobody", None) == (0, {})
        # v8+: the same per group, several groups at once.
        resp = c.request(
            ApiKey.OffsetFetch,
            8,
            groups=[FGroup(group_id=group, topics=None), FGroup(group_id=group + "-nobody", topics=None)],
            require_stable=True,
        )
        assert [(g.group_id, g.error_code) for g in resp.groups] == [(group, 0), (group + "-nobody", 0)]
        assert {
            (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in resp.groups[0].topics
            for p in t.partitions
        } == everything
        assert resp.groups[1].topics == []

    # Before v2 the topics array is not nullable: Kafka cannot parse such a request and closes
    # the connection.
    with gbroker.connect() as c:
        body = struct.pack(">h", len(group)) + group.encode() + struct.pack(">i", -1)
        c.send_frame(struct.pack(">hhih", ApiKey.OffsetFetch, 1, 99, 5) + b"tests" + body)
        assert c.is_closed_by_peer()


# --- DescribeGroups -----------------------------------------------------------------------------
def test_describe_unknown_group_v0_dead_v6_not_found(gbroker: BrokerProcess, topic: str) -> None:
    known = topic + "-known"
    unknown = topic + "-unknown"
    with gbroker.connect() as c:
        assert commit(c, 8, known, [(topic, 0, 1)]) == {(topic, 0): 0}
        v0 = c.request(ApiKey.DescribeGroups, 0, groups=[unknown, known])
        v6 = c.request(ApiKey.DescribeGroups, 6, groups=[unknown, known], include_authorized_operations=False)
    assert [(g.group_id, g.error_code, g.group_state, g.members) for g in v0.groups] == [
        (unknown, 0, "Dead", []),
        (known, 0, "Empty", []),
    ]
    u, k = v6.groups
    assert (u.group_id, u.error_code, u.group_state) == (unknown, ErrorCode.GROUP_ID_NOT_FOUND, "Dead")
    assert u.error_message
    assert (k.group_id, k.error_code, k.group_state, k.protocol_type) == (known, 0, "Empty", "")


# --- KIP-289: the empty group id ------------------------------------------------------------------
def test_empty_group_id(gbroker: BrokerProcess, topic: str) -> None:
    client = topic + "-client"  # the deprecation warning is logged once per client id
    with gbroker.connect() as c:
        assert commit(c, 2, "", [(topic, 0, 5)], client_id=client) == {(topic, 0): 0}
        assert commit(c, 8, "", [(topic, 1, 6)], client_id=client) == {(topic, 1): 0}
        _, got = fetch_offsets(c, 1, "", [(topic, [0, 1])], client_id=client)
        assert got == {(topic, 0): (5, "", 0), (topic, 1): (6, "", 0)}
        err, got = fetch_offsets(c, 2, "", None, client_id=client)
        assert err == 0
        assert got[(topic, 0)] == (5, "", 0)

        # Group management needs a real group id.
        join = c.request(
            ApiKey.JoinGroup,
            5,
            group_id="",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[JProtocol(name="range", metadata=b"")],
        )
        assert join.error_code == ErrorCode.INVALID_GROUP_ID
        sync = c.request(
            ApiKey.SyncGroup,
            3,
            group_id="",
            generation_id=1,
            member_id="m",
            group_instance_id=None,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id="m", assignment=b"")],
        )
        assert sync.error_code == ErrorCode.INVALID_GROUP_ID
        hb = c.request(
            ApiKey.Heartbeat, 3, group_id="", generation_id=1, member_id="m", group_instance_id=None
        )
        assert hb.error_code == ErrorCode.INVALID_GROUP_ID
        assert (
            c.request(ApiKey.LeaveGroup, 1, group_id="", member_id="m").error_code
            == ErrorCode.INVALID_GROUP_ID
        )
        leave = c.request(
            ApiKey.LeaveGroup,
            4,
            group_id="",
            members=[LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None)],
        )
        assert leave.error_code == ErrorCode.INVALID_GROUP_ID
        od = c.request(
            ApiKey.OffsetDelete,
            0,
            group_id="",
            topics=[
                OffsetDeleteRequest.OffsetDeleteRequestTopic(
                    name=topic,
                    partitions=[
                        OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                            partition_index=0
                        )
                    ],
                )
            ],
        )
        assert od.error_code == ErrorCode.INVALID_GROUP_ID
        assert fetch_offsets(c, 2, "", [(topic, [0])])[1] == {(topic, 0): (5, "", 0)}

        # "" can be described (its offsets are real); DeleteGroups refuses it as the group
        # management APIs do (the KIP-289 rule in kcoord/apis/groups.py), and its offsets stay.
        d = c.request(ApiKey.DescribeGroups, 6, groups=[""], include_authorized_operations=False)
        assert (d.groups[0].error_code, d.groups[0].group_state) == (0, "Empty")
        dg = c.request(ApiKey.DeleteGroups, 2, groups_names=[""])
        assert [(r.group_id, r.error_code) for r in dg.results] == [("", ErrorCode.INVALID_GROUP_ID)]
        assert fetch_offsets(c, 2, "", None)[1][(topic, 0)] == (5, "", 0)

    warnings = [
        line
        for line in gbroker.log_text().splitlines()
        if "deprecated" in line and f"client_id={client}" in line
    ]
    assert len(warnings) == 1, warnings


# --- JoinGroup ------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", range(10))
def test_member_id_required_only_from_join_group_v4(gbroker: BrokerProcess, topic: str, version: int) -> None:
    group = f"{topic}-join-v{version}"
    fields = {
        "group_id": group,
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [JProtocol(name="range", metadata=b"meta")],
        "reason": None,
    }
    with gbroker.connect() as c:
        first = c.request(ApiKey.JoinGroup, version, member_id="", **fields)
        assert first.member_id
        if version >= 4:
            # KIP-394: a new member gets its id first, then joins with it.
            assert (first.error_code, first.generation_id) == (ErrorCode.MEMBER_ID_REQUIRED, -1)
            joined = c.request(ApiKey.JoinGroup, version, member_id=first.member_id, **fields)
        else:
            joined = first
        assert (joined.error_code, joined.generation_id, joined.member_id) == (0, 1, first.member_id)
        assert joined.leader == first.member_id
        assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(first.member_id, b"meta")]
        # Leaving ends the group's generation: the next one starts from an Empty group.
        if version >= 3:
            leave = c.request(
                ApiKey.LeaveGroup,
                3,
                group_id=group,
                members=[LeaveGroupRequest.MemberIdentity(member_id=first.member_id, group_instance_id=None)],
            )
            assert [m.error_code for m in leave.members] == [0]
        else:
            assert c.request(ApiKey.LeaveGroup, 0, group_id=group, member_id=first.member_id).error_code == 0


def test_heartbeat_and_sync_for_unknown_members(gbroker: BrokerProcess, topic: str) -> None:
    group = topic + "-nobody"
    with gbroker.connect() as c:
        hb = c.request(ApiKey.Heartbeat, 0, group_id=group, generation_id=1, member_id="ghost")
        assert hb.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        sync = c.request(
            ApiKey.SyncGroup,
            0,
            group_id=group,
            generation_id=1,
            member_id="ghost",
            assignments=[],
        )
        assert sync.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_classic_apis_on_a_share_group(gbroker: BrokerProcess, topic: str) -> None:
    """Kafka's classicGroupJoin answers INCONSISTENT_GROUP_PROTOCOL for a group of another type
    than classic and consumer; its SyncGroup, Heartbeat and LeaveGroup UNKNOWN_MEMBER_ID."""
    group = topic + "-share"
    with gbroker.connect() as c:
        ShareMember(c, group, [topic]).heartbeat()
        join = c.request(
            ApiKey.JoinGroup,
            5,
            group_id=group,
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[JProtocol(name="range", metadata=b"")],
        )
        assert (join.error_code, join.member_id) == (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "")
        hb = c.request(
            ApiKey.Heartbeat, 3, group_id=group, generation_id=1, member_id="m", group_instance_id=None
        )
        assert hb.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        sync = c.request(
            ApiKey.SyncGroup,
            3,
            group_id=group,
            generation_id=1,
            member_id="m",
            group_instance_id=None,
            assignments=[],
        )
        assert sync.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        leave = c.request(ApiKey.LeaveGroup, 1, group_id=group, member_id="m")
        assert leave.error_code == ErrorCode.UNKNOWN_MEMBER_ID


# --- __consumer_offsets as a topic --------------------------------------------------------------
def test_consumer_offsets_is_internal_and_read_only(gbroker: BrokerProcess, topic: str) -> None:
    req = request_class(ApiKey.Metadata)
    with gbroker.connect() as c:
        every = c.request(
            ApiKey.Metadata,
            12,
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        listed = {t.name: t for t in every.topics}
        assert listed[OFFSETS_TOPIC].is_internal is True
        assert listed[topic].is_internal is False
        named = c.request(
            ApiKey.Metadata,
            12,
            topics=[req.MetadataRequestTopic(name=OFFSETS_TOPIC, topic_id=None)],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        (t,) = named.topics
        assert (t.name, t.error_code, t.is_internal) == (OFFSETS_TOPIC, 0, True)
        assert sorted(p.partition_index for p in t.partitions) == list(range(OFFSETS_PARTITIONS))
        assert {p.leader_id for p in t.partitions} == {1}
        # Clients cannot write to it (Kafka: INVALID_TOPIC_EXCEPTION for internal topics).
        # The offsets-expiry task of this shared broker may append tombstones meanwhile, so the
        # check is that the client's bytes are nowhere in the log, not that the end is unmoved.
        before = c.list_offsets(OFFSETS_TOPIC, 0, -2).offset
        marker = f"not-a-coordinator-record-{topic}".encode()
        r = c.produce(OFFSETS_TOPIC, 0, build_batch([(marker, marker, 1_700_000_000_000)]))
        assert r.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        fetched = c.fetch(OFFSETS_TOPIC, 0, before, max_bytes=64 << 20)
        assert fetched.error_code == 0
        assert marker not in bytes(fetched.records or b"")


def test_consumer_offsets_fetch_is_the_log_on_disk(broker_factory: BrokerFactory, unique_topic: str) -> None:
    b = broker_factory(broker_args())
    b.create_topic(unique_topic, 2)
    groups = [f"{unique_topic}-{i}" for i in range(12)]
    with b.connect() as c:
        for n, g in enumerate(groups):
            assert commit(c, 8, g, [(unique_topic, 0, n), (unique_topic, 1, n + 1)], metadata=g) == {
                (unique_topic, 0): 0,
                (unique_topic, 1): 0,
            }
        fetched = {p: fetch_log(c, p) for p in range(OFFSETS_PARTITIONS)}
    for p in range(OFFSETS_PARTITIONS):
        segments = sorted(Path(b.data_dir, f"{OFFSETS_TOPIC}-{p}").glob("*.log"))
        on_disk = b"".join(written(s) for s in segments)
        assert fetched[p] == on_disk, p
    # Each group's records are where Kafka puts them: abs(hashCode(group)) % partitions.
    with b.connect() as c:
        for g in groups:
            assert len(records_for(c, g, offset_key(g, unique_topic, 0))) == 1
    assert sum(len(batches(d)) for d in fetched.values()) == len(groups)
