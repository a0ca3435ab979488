"""KIP-848 consumer groups over raw sockets: ConsumerGroupHeartbeat v0 and v1, ConsumerGroupDescribe
v0 and v1, and what a consumer group does to the other group APIs, checked against Kafka 4.3's
group coordinator (GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid,
GroupMetadataManager, ConsumerGroup):

- every error of ConsumerGroupHeartbeat, at both versions, with its code and message, and nothing
  left behind by a refused join: INVALID_REQUEST (the request's own checks, made before the
  group is looked at), UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION (v1: v0 has no
  SubscribedTopicRegex field, so a v0 join by regex alone is an INVALID_REQUEST), FENCED_MEMBER_EPOCH,
  UNKNOWN_MEMBER_ID, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED (this
  module's broker allows 3 members), GROUP_ID_NOT_FOUND; an error answer carries no member id,
  epoch 0 and no assignment, as Kafka's (an exception turned into a response);
- joining: epoch 1 in a new group, group.consumer.heartbeat.interval.ms, the assignment by topic
  id; a v0 member may come without a member id and gets one; a member may lag one epoch behind
  (a lost answer) and may rejoin with epoch 0 after it was fenced (KAFKA-19233, Kafka 4.3);
- ConsumerGroupDescribe v0/v1 (v1 adds MemberType), GROUP_ID_NOT_FOUND for unknown groups and
  groups of another type, with Kafka's empty fields;
- ListGroups v4/v5 (types and states filters), OffsetCommit v9 by member epoch (and v8 refused:
  UNSUPPORTED_VERSION), OffsetFetch v9 member checks, DeleteGroups;
- the records of a group in __consumer_offsets, decoded here by hand in Kafka's byte layout
  (not with kcoord's codecs): key types 3, 5, 6, 7, 8 and 16, group and member ids, epochs.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from kafka.protocol.consumer.group import JoinGroupRequest

from kcoord.protocol.errors import ErrorCode
from tests.coordinator_log import log_records, offsets_partition
from tests.group_client import (
    JOIN,
    LEAVE,
    STATIC_LEAVE,
    Consumer,
    assignment_of,
    commit_offsets,
    describe,
    described_assignment,
    fetch_groups,
    heartbeat,
    reconcile,
    topic_ids,
)
from tests.harness import BrokerProcess, shared_broker
from tests.wire import ApiKey, Conn

OFFSETS_PARTITIONS = 3
HEARTBEAT_INTERVAL_MS = 1_500  # not the default (5000): the answers must carry the broker's setting
MAX_SIZE = 3

_cgbroker_started, cgbroker = shared_broker(
    "cgbroker",
    [
        "--offsets-topic-num-partitions",
        str(OFFSETS_PARTITIONS),
        "--group-consumer-heartbeat-interval-ms",
        str(HEARTBEAT_INTERVAL_MS),
        "--group-consumer-max-size",
        str(MAX_SIZE),
        "--group-initial-rebalance-delay-ms",
        "0",
    ],
)

VERSIONS = [0, 1]


@pytest.fixture
def topic(cgbroker: BrokerProcess, unique_topic: str) -> str:
    """A topic of 3 partitions."""
    cgbroker.create_topic(unique_topic, 3)
    return unique_topic


@pytest.fixture
def conn(cgbroker: BrokerProcess) -> Any:
    with cgbroker.connect() as c:
        yield c


def assert_error(resp: Any, code: int, *fragments: str) -> None:
    """An error answer as Kafka makes it from an exception: the code and a message (containing
    ``fragments``), no member id, epoch 0, no heartbeat interval and no assignment."""
    assert resp.error_code == code, resp
    assert resp.error_message, resp
    for fragment in fragments:
        assert fragment in resp.error_message, (fragment, resp.error_message)
    assert (resp.member_id, resp.member_epoch, resp.heartbeat_interval_ms, resp.assignment) == (
        None,
        0,
        0,
        None,
    ), resp


def assert_no_group(c: Conn, group: str) -> None:
    (d,) = describe(c, [group])
    assert d.error_code == ErrorCode.GROUP_ID_NOT_FOUND, d


def join_fields(topics: list[str] | None, **more: Any) -> dict[str, Any]:
    """A valid join: epoch 0, a rebalance timeout, owning nothing."""
    return {
        "member_epoch": JOIN,
        "rebalance_timeout_ms": 30_000,
        "subscribed_topic_names": topics,
        "topic_partitions": {},
        **more,
    }


# --- INVALID_REQUEST and UNSUPPORTED_ASSIGNOR: the request's own checks -----------------------------
OWNED = {uuid.UUID(int=7): [0]}

INVALID = {
    # case: (fields over a valid join, code, Kafka's message)
    "empty-member-id-heartbeat": (
        {"member_id": "", "member_epoch": 1},
        ErrorCode.INVALID_REQUEST,
        "MemberId can't be empty.",
    ),
    "empty-member-id-leave": (
        {"member_id": "", "member_epoch": LEAVE},
        ErrorCode.INVALID_REQUEST,
        "MemberId can't be empty.",
    ),
    "blank-member-id-heartbeat": (
        {"member_id": "  ", "member_epoch": 1},
        ErrorCode.INVALID_REQUEST,
        "MemberId can't be empty.",
    ),
    "blank-group-id": ({"group_id": "  "}, ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
    "blank-instance-id": ({"instance_id": "  "}, ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."),
    "blank-rack-id": ({"rack_id": " \t"}, ErrorCode.INVALID_REQUEST, "RackId can't be empty."),
    # Java's String.trim() drops every character up to U+0020, control characters included.
    "control-char-group-id": ({"group_id": "\x01"}, ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
    "join-without-rebalance-timeout": (
        {"rebalance_timeout_ms": -1},
        ErrorCode.INVALID_REQUEST,
        "RebalanceTimeoutMs must be provided in first request.",
    ),
    "join-owning-partitions": (
        {"topic_partitions": OWNED},
        ErrorCode.INVALID_REQUEST,
        "TopicPartitions must be empty when (re-)joining.",
    ),
    "join-with-null-owned": (
        {"topic_partitions": None},
        ErrorCode.INVALID_REQUEST,
        "TopicPartitions must be empty when (re-)joining.",
    ),
    "join-without-subscription": (
        {"subscribed_topic_names": None},
        ErrorCode.INVALID_REQUEST,
        "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
    ),
    "static-leave-without-instance": (
        {"member_epoch": STATIC_LEAVE},
        ErrorCode.INVALID_REQUEST,
        "InstanceId can't be null.",
    ),
    "epoch-below-minus-two": ({"member_epoch": -3}, ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
    "unknown-server-assignor": (
        {"server_assignor": "sticky"},
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
    ),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_requests(conn: Conn, topic: str, version: int, case: str) -> None:
    fields, code, message = INVALID[case]
    group = f"{topic}-g"
    request = {"group_id": group, "member_id": str(uuid.uuid4()), **join_fields([topic]), **fields}
    resp = heartbeat(conn, version, **request)
    assert_error(resp, code)
    assert resp.error_message == message
    # Refused before the group is looked at: no group was created.
    assert_no_group(conn, group)


@pytest.mark.parametrize("version", VERSIONS)
def test_join_without_member_id(conn: Conn, topic: str, version: int) -> None:
    """v0: the coordinator makes the member id (KIP-1082 made it the client's from v1)."""
    group = f"{topic}-g"
    resp = heartbeat(conn, version, group_id=group, member_id="", **join_fields([topic]))
    if version >= 1:
        assert_error(resp, ErrorCode.INVALID_REQUEST)
        assert resp.error_message == "MemberId can't be empty."
        assert_no_group(conn, group)
        return
    assert (resp.error_code, resp.member_epoch) == (0, 1), resp
    assert uuid.UUID(resp.member_id)  # a made-up id, usable from now on
    (d,) = describe(conn, [group])
    assert [m.member_id for m in d.members] == [resp.member_id]


# --- regular expressions (v1) ---------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_regex_subscription(conn: Conn, topic: str, version: int) -> None:
    group = f"{topic}-g"
    bad = heartbeat(
        conn,
        version,
        group_id=group,
        member_id=str(uuid.uuid4()),
        **join_fields(None, subscribed_topic_regex="["),
    )
    if version == 0:
        # v0 has no SubscribedTopicRegex: the regex is not on the wire, and the join has no subscription.
        assert_error(bad, ErrorCode.INVALID_REQUEST)
        assert bad.error_message.startswith("Either SubscribedTopicNames or SubscribedTopicRegex")
    else:
        assert_error(bad, ErrorCode.INVALID_REGULAR_EXPRESSION)
        assert (
            bad.error_message
            == "SubscribedTopicRegex `[` is not a valid regular expression: missing closing ]."
        )
    assert_no_group(conn, group)

    # A valid one (v1) subscribes to the topics it matches; at v0 it is dropped, names count.
    pattern = topic.replace("-", "\\-") + ".*"
    good = Consumer(conn, group, topics=[] if version == 0 else None, regex=pattern, version=version)
    resp = good.join()
    assert resp.error_code == 0, resp
    (d,) = describe(conn, [group])
    (m,) = d.members
    tid = topic_ids(conn, [topic])[topic]
    if version == 0:
        assert (m.subscribed_topic_regex, m.subscribed_topic_names, good.owned) == (None, [], {})
    else:
        assert (m.subscribed_topic_regex, m.subscribed_topic_names) == (pattern, [])
        assert good.owned == {tid: frozenset({0, 1, 2})}


def test_invalid_regex_is_checked_after_the_member(conn: Conn, topic: str) -> None:
    """Kafka compiles a regex when a member subscribes to one the group does not have yet, in the
    group's operation: an unknown member, a wrong epoch or a full group is refused for that first."""
    group = f"{topic}-g"
    a = Consumer(conn, group, topics=[topic])
    assert a.join().error_code == 0
    stranger = heartbeat(conn, 1, group_id=group, member_id="x", member_epoch=5, subscribed_topic_regex="[")
    assert_error(stranger, ErrorCode.UNKNOWN_MEMBER_ID)
    assert_error(a.beat(member_epoch=5, subscribed_topic_regex="["), ErrorCode.FENCED_MEMBER_EPOCH)
    for _ in range(MAX_SIZE - 1):
        assert Consumer(conn, group, topics=[topic]).join().error_code == 0
    full = heartbeat(
        conn, 1, group_id=group, member_id=str(uuid.uuid4()), **join_fields(None, subscribed_topic_regex="(")
    )
    assert_error(full, ErrorCode.GROUP_MAX_SIZE_REACHED)
    own = a.beat(subscribed_topic_regex="(")
    assert_error(own, ErrorCode.INVALID_REGULAR_EXPRESSION)
    assert (
        own.error_message == "SubscribedTopicRegex `(` is not a valid regular expression: missing closing )."
    )


# --- joining, heartbeats, leaving ------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_join_heartbeat_leave(conn: Conn, topic: str, version: int) -> None:
    group = f"{topic}-g"
    tid = topic_ids(conn, [topic])[topic]
    a = Consumer(conn, group, topics=[topic], version=version)
    resp = a.join()
    assert (resp.error_code, resp.error_message, resp.member_id, resp.member_epoch) == (
        0,
        None,
        a.member_id,
        1,
    )
    assert resp.heartbeat_interval_ms == HEARTBEAT_INTERVAL_MS
    assert assignment_of(resp) == {tid: frozenset({0, 1, 2})}
    # A steady heartbeat: same epoch, no assignment sent (it did not change).
    resp = a.beat()
    assert (resp.error_code, resp.member_epoch, resp.assignment) == (0, 1, None)
    assert resp.heartbeat_interval_ms == HEARTBEAT_INTERVAL_MS
    # A full request (rebalance timeout, topic names and owned partitions all set) gets it again.
    resp = a.beat(rebalance_timeout_ms=30_000, subscribed_topic_names=[topic])
    assert (resp.error_code, assignment_of(resp)) == (0, {tid: frozenset({0, 1, 2})})

    # A second member: the partitions move only once the first has given them up.
    b = Consumer(conn, group, topics=[topic], version=version)
    assert b.join().error_code == 0
    owned = reconcile([a, b], {(tid, p) for p in range(3)})
    assert sorted(len(ps) for ps in owned.values()) == [1, 2]
    (d,) = describe(conn, [group])
    assert (d.group_state, d.group_epoch, d.assignment_epoch) == ("Stable", 2, 2)

    resp = b.leave()
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, b.member_id, LEAVE)
    (d,) = describe(conn, [group])
    assert [m.member_id for m in d.members] == [a.member_id]
    assert d.group_epoch == 3
    # Leaving twice: the member is unknown now.
    assert_error(b.leave(), ErrorCode.UNKNOWN_MEMBER_ID, b.member_id, group)


# --- FENCED_MEMBER_EPOCH ---------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_member_epochs(conn: Conn, cgbroker: BrokerProcess, topic: str, version: int) -> None:
    group = f"{topic}-g"
    t2, t3 = f"{topic}-2", f"{topic}-3"
    cgbroker.create_topic(t2, 1)
    cgbroker.create_topic(t3, 1)
    ids = topic_ids(conn, [topic, t2, t3])
    a = Consumer(conn, group, topics=[topic], version=version)
    assert a.join().member_epoch == 1

    # Ahead of the coordinator: fenced.
    resp = a.beat(member_epoch=2)
    assert_error(resp, ErrorCode.FENCED_MEMBER_EPOCH, "greater member epoch (2)", "(1)")

    # Each subscription change bumps the group epoch; the member, which only gains partitions,
    # follows at once: epoch 3, previous epoch 2.
    a.topics = [topic, t2]
    assert a.beat(subscribed_topic_names=a.topics).member_epoch == 2
    a.topics = [topic, t2, t3]
    assert a.beat(subscribed_topic_names=a.topics).member_epoch == 3
    assert a.owned == {ids[topic]: frozenset({0, 1, 2}), ids[t2]: frozenset({0}), ids[t3]: frozenset({0})}

    # Behind, and not the previous epoch: fenced.
    resp = a.beat(member_epoch=1)
    assert_error(resp, ErrorCode.FENCED_MEMBER_EPOCH, "smaller member epoch (1)", "(3)")
    # The previous epoch is a lost answer: accepted if it owns only partitions it still has...
    resp = a.beat(member_epoch=2, topic_partitions={ids[topic]: [0, 1]})
    assert (resp.error_code, resp.member_epoch) == (0, 3), resp
    # ... not if it does not say what it owns.
    resp = a.beat(member_epoch=2, topic_partitions=None)
    assert_error(resp, ErrorCode.FENCED_MEMBER_EPOCH, "smaller member epoch (2)")

    # A fenced member abandons its partitions and rejoins with epoch 0 and its member id:
    # Kafka 4.3 (KAFKA-19233) gives it back its epoch and assignment, without a rebalance.
    resp = a.join()
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, a.member_id, 3), resp
    assert assignment_of(resp) == {
        ids[topic]: frozenset({0, 1, 2}),
        ids[t2]: frozenset({0}),
        ids[t3]: frozenset({0}),
    }
    (d,) = describe(conn, [group])
    assert (d.group_epoch, [m.member_epoch for m in d.members]) == (3, [3])


# --- UNKNOWN_MEMBER_ID and GROUP_ID_NOT_FOUND -----------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_unknown_members(conn: Conn, topic: str, version: int) -> None:
    group = f"{topic}-g"
    a = Consumer(conn, group, topics=[topic], version=version)
    assert a.join().error_code == 0
    ghost = str(uuid.uuid4())
    for epoch in (1, LEAVE):
        resp = heartbeat(conn, version, group_id=group, member_id=ghost, member_epoch=epoch)
        assert_error(resp, ErrorCode.UNKNOWN_MEMBER_ID, f"Member {ghost} is not a member of group {group}.")
    for epoch in (1, STATIC_LEAVE):
        resp = heartbeat(
            conn, version, group_id=group, member_id=ghost, member_epoch=epoch, instance_id="nobody"
        )
        assert_error(resp, ErrorCode.UNKNOWN_MEMBER_ID, "Instance id nobody is unknown.")
    (d,) = describe(conn, [group])
    assert [m.member_id for m in d.members] == [a.member_id]


@pytest.mark.parametrize("version", VERSIONS)
def test_group_id_not_found(conn: Conn, topic: str, version: int) -> None:
    unknown = f"{topic}-nobody"
    for epoch in (1, LEAVE):
        resp = heartbeat(conn, version, group_id=unknown, member_id=str(uuid.uuid4()), member_epoch=epoch)
        assert_error(resp, ErrorCode.GROUP_ID_NOT_FOUND, unknown)
    assert_no_group(conn, unknown)

    # A classic group with members (of a protocol type Kafka cannot upgrade) keeps its id.
    classic = f"{topic}-classic"
    join = conn.request(
        ApiKey.JoinGroup,
        5,
        group_id=classic,
        session_timeout_ms=30_000,
        rebalance_timeout_ms=30_000,
        member_id="",
        group_instance_id="classic-1",
        protocol_type="connect",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="default", metadata=b"")],
    )
    assert join.error_code == 0, join
    resp = heartbeat(conn, version, group_id=classic, member_id=str(uuid.uuid4()), **join_fields([topic]))
    assert_error(resp, ErrorCode.GROUP_ID_NOT_FOUND, classic)
    (d,) = describe(conn, [classic])
    assert (d.error_code, d.group_id) == (ErrorCode.GROUP_ID_NOT_FOUND, classic)
    assert "not a consumer group" in d.error_message
    classic_described = conn.request(
        ApiKey.DescribeGroups, 5, groups=[classic], include_authorized_operations=False
    )
    assert [m.member_id for m in classic_described.groups[0].members] == [join.member_id]

    # An empty classic group (offsets only) becomes a consumer group, its offsets kept.
    simple = f"{topic}-simple"
    assert commit_offsets(conn, simple, {(topic, 0): 42}) == {(topic, 0): 0}
    member = Consumer(conn, simple, topics=[topic], version=version)
    assert member.join().error_code == 0
    (d,) = describe(conn, [simple])
    assert (d.error_code, [m.member_id for m in d.members]) == (0, [member.member_id])
    assert fetch_groups(conn, [simple])[simple] == (0, {(topic, 0): 42})


# --- static members: UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID ----------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_static_members(conn: Conn, topic: str, version: int) -> None:
    group = f"{topic}-g"
    tid = topic_ids(conn, [topic])[topic]
    a = Consumer(conn, group, topics=[topic], instance_id="inst", version=version)
    assert a.join().member_epoch == 1
    b = Consumer(conn, group, topics=[topic], instance_id="inst", version=version)

    # The instance id is held: a second instance can neither join nor heartbeat with it.
    assert_error(b.join(), ErrorCode.UNRELEASED_INSTANCE_ID, b.member_id, "inst", a.member_id)
    resp = b.beat(member_epoch=1)
    assert_error(resp, ErrorCode.FENCED_INSTANCE_ID, b.member_id, "inst", f"fenced by member {a.member_id}")

    # A static leave (-2) keeps the member, and its assignment, for its next instance...
    resp = a.leave(STATIC_LEAVE)
    assert (resp.error_code, resp.member_id, resp.member_epoch) == (0, a.member_id, STATIC_LEAVE)
    (d,) = describe(conn, [group])
    assert [(m.member_id, m.instance_id, m.member_epoch) for m in d.members] == [(a.member_id, "inst", -2)]
    # ... which takes its place and its partitions, without a rebalance.
    resp = b.join()
    assert (resp.error_code, resp.member_epoch) == (0, 1), resp
    assert b.owned == {tid: frozenset({0, 1, 2})}
    (d,) = describe(conn, [group])
    assert (d.group_epoch, [(m.member_id, m.member_epoch) for m in d.members]) == (1, [(b.member_id, 1)])
    # The previous instance is fenced now.
    resp = a.beat(member_epoch=1)
    assert_error(resp, ErrorCode.FENCED_INSTANCE_ID, f"fenced by member {b.member_id}")
    assert_error(a.leave(), ErrorCode.FENCED_INSTANCE_ID, f"fenced by member {b.member_id}")


# --- GROUP_MAX_SIZE_REACHED ----------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_group_max_size(conn: Conn, topic: str, version: int) -> None:
    group = f"{topic}-g"
    members = [Consumer(conn, group, topics=[topic], version=version) for _ in range(MAX_SIZE)]
    for m in members:
        assert m.join().error_code == 0
    extra = Consumer(conn, group, topics=[topic], version=version)
    resp = extra.join()
    assert_error(resp, ErrorCode.GROUP_MAX_SIZE_REACHED, f"maximum capacity of {MAX_SIZE} members")
    # Members already in the group go on.
    assert members[0].beat().error_code == 0
    # Once one leaves, there is room again.
    assert members[1].leave().error_code == 0
    assert extra.join().error_code == 0
    (d,) = describe(conn, [group])
    assert len(d.members) == MAX_SIZE


# --- ConsumerGroupDescribe -----------------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_describe(conn: Conn, topic: str, version: int) -> None:
    group = f"{topic}-g"
    tid = topic_ids(conn, [topic])[topic]
    a = Consumer(conn, group, topics=[topic], instance_id="a-inst", client_id="client-a")
    b = Consumer(conn, group, topics=[topic], client_id="client-b")
    assert a.join(rack_id="rack-a").error_code == 0
    assert b.join(server_assignor="range").error_code == 0
    owned = reconcile([a, b], {(tid, p) for p in range(3)})
    unknown = f"{topic}-unknown"

    d, nobody = describe(conn, [group, unknown], version=version, include_authorized_operations=True)
    assert (d.error_code, d.error_message, d.group_id, d.group_state) == (0, None, group, "Stable")
    assert (d.group_epoch, d.assignment_epoch) == (2, 2)
    assert d.assignor_name == "range"  # the one the members ask for, over the default (uniform)
    # Kafka 4's AclEntry.supportedOperations(GROUP): READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS,
    # ALTER_CONFIGS (AclOperation codes 3, 6, 8, 10, 11).
    assert d.authorized_operations == 1 << 3 | 1 << 6 | 1 << 8 | 1 << 10 | 1 << 11
    members = {m.member_id: m for m in d.members}
    assert set(members) == {a.member_id, b.member_id}
    for consumer, instance, rack, client in (
        (a, "a-inst", "rack-a", "client-a"),
        (b, None, None, "client-b"),
    ):
        m = members[consumer.member_id]
        assert (m.instance_id, m.rack_id, m.client_id, m.client_host) == (
            instance,
            rack,
            client,
            "/127.0.0.1",
        )
        assert (m.member_epoch, m.subscribed_topic_names, m.subscribed_topic_regex) == (2, [topic], None)
        mine = {p for _, p in owned[consumer.member_id]}
        assert described_assignment(m.assignment) == {tid: frozenset(mine)}
        assert described_assignment(m.target_assignment) == {tid: frozenset(mine)}
        assert {t.topic_name for t in m.assignment.topic_partitions} == {topic}
        # MemberType is v1's: 1 for a member of the consumer protocol; the default -1 before.
        assert m.member_type == (1 if version >= 1 else -1)
    # Unknown: GROUP_ID_NOT_FOUND with a message, the other fields left at their defaults.
    assert (nobody.error_code, nobody.group_id) == (ErrorCode.GROUP_ID_NOT_FOUND, unknown)
    assert nobody.error_message == f"Group {unknown} not found."
    assert (nobody.group_state, nobody.group_epoch, nobody.assignment_epoch, nobody.members) == ("", 0, 0, [])
    assert nobody.authorized_operations == -(2**31)

    (plain,) = describe(conn, [group], version=version, include_authorized_operations=False)
    assert plain.authorized_operations == -(2**31)


# --- ListGroups -------------------------------------------------------------------------------------
def test_list_groups(conn: Conn, topic: str) -> None:
    group = f"{topic}-g"
    a = Consumer(conn, group, topics=[topic])
    assert a.join().error_code == 0

    def listed(version: int, states: list[str], types: list[str]) -> dict[str, tuple[str, ...]]:
        fields: dict[str, Any] = {"states_filter": states, "types_filter": types}
        resp = conn.request(ApiKey.ListGroups, version, **fields)
        assert resp.error_code == 0
        return {
            g.group_id: (g.protocol_type, g.group_state) + ((g.group_type,) if version >= 5 else ())
            for g in resp.groups
        }

    assert listed(5, [], ["consumer"])[group] == ("consumer", "Stable", "consumer")
    assert listed(5, [], ["Consumer"])[group] == ("consumer", "Stable", "consumer")  # case-insensitive
    assert group not in listed(5, [], ["classic"])
    assert listed(5, ["stable"], [])[group] == ("consumer", "Stable", "consumer")
    assert group not in listed(5, ["Empty"], [])
    assert listed(4, ["Stable"], [])[group] == ("consumer", "Stable")
    assert a.leave().error_code == 0
    assert listed(5, ["Empty"], ["consumer"])[group] == ("consumer", "Empty", "consumer")


# --- offsets of a consumer group -----------------------------------------------------------------------
def test_offset_commit_and_fetch_by_member_epoch(conn: Conn, topic: str) -> None:
    group = f"{topic}-g"
    a = Consumer(conn, group, topics=[topic])
    assert a.join().member_epoch == 1
    offsets = {(topic, p): 10 + p for p in range(3)}

    def commit(version: int, epoch: int, member: str = a.member_id) -> dict[tuple[str, int], int]:
        return commit_offsets(conn, group, offsets, version=version, generation=epoch, member=member)

    assert commit(9, 1) == dict.fromkeys(offsets, 0)
    assert commit(9, 2) == dict.fromkeys(offsets, ErrorCode.STALE_MEMBER_EPOCH)
    assert commit(9, 1, member="ghost") == dict.fromkeys(offsets, ErrorCode.UNKNOWN_MEMBER_ID)
    # Without a member, only while the group has no members.
    assert commit(9, -1, member="") == dict.fromkeys(offsets, ErrorCode.UNKNOWN_MEMBER_ID)
    # A member of the consumer protocol must commit with v9+ (ConsumerGroup.validateOffsetCommit).
    assert commit(8, 1) == dict.fromkeys(offsets, ErrorCode.UNSUPPORTED_VERSION)

    committed = (0, {(topic, p): 10 + p for p in range(3)})
    assert fetch_groups(conn, [group], version=9, member_id=a.member_id, member_epoch=1)[group] == committed
    assert fetch_groups(conn, [group], version=9)[group] == committed  # no member: no check
    assert fetch_groups(conn, [group], version=8)[group] == committed
    stale = fetch_groups(conn, [group], version=9, member_id=a.member_id, member_epoch=2)[group]
    assert stale == (ErrorCode.STALE_MEMBER_EPOCH, {})
    ghost = fetch_groups(conn, [group], version=9, member_id="ghost", member_epoch=1)[group]
    assert ghost == (ErrorCode.UNKNOWN_MEMBER_ID, {})

    # Once the group is empty, standalone commits are accepted again.
    assert a.leave().error_code == 0
    assert commit(8, -1, member="") == dict.fromkeys(offsets, 0)


# --- DeleteGroups ---------------------------------------------------------------------------------
def test_delete_groups(conn: Conn, topic: str) -> None:
    group = f"{topic}-g"
    a = Consumer(conn, group, topics=[topic])
    assert a.join().error_code == 0
    assert commit_offsets(conn, group, {(topic, 0): 5}, version=9, generation=1, member=a.member_id) == {
        (topic, 0): 0
    }

    def delete() -> int:
        (result,) = conn.request(ApiKey.DeleteGroups, 2, groups_names=[group]).results
        assert result.group_id == group
        return result.error_code

    assert delete() == ErrorCode.NON_EMPTY_GROUP
    assert a.leave().error_code == 0
    (d,) = describe(conn, [group])
    assert (d.group_state, d.members) == ("Empty", [])
    assert delete() == 0
    assert_no_group(conn, group)
    assert fetch_groups(conn, [group])[group] == (0, {})
    assert delete() == ErrorCode.GROUP_ID_NOT_FOUND
    # The id is free again: a new group starts over from epoch 1.
    assert Consumer(conn, group, topics=[topic]).join().member_epoch == 1


# --- the records in __consumer_offsets --------------------------------------------------------------
def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = struct.unpack_from(">h", buf, pos)
    return buf[pos + 2 : pos + 2 + n].decode(), pos + 2 + n


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def group_records(c: Conn, group: str) -> list[tuple[int, tuple[str, ...], bytes | None]]:
    """(key type, key strings after the group id, value) of the group's KIP-848 records, in log
    order. Keys are Kafka's: int16 type, then int16-length strings (group id first)."""
    out = []
    for _, _, key, value in log_records(c, offsets_partition(group, OFFSETS_PARTITIONS)):
        (kind,) = struct.unpack_from(">h", key, 0)
        if kind not in (3, 4, 5, 6, 7, 8, 16):
            continue
        gid, pos = _string(key, 2)
        if gid != group:
            continue
        rest = []
        while pos < len(key):
            s, pos = _string(key, pos)
            rest.append(s)
        out.append((kind, tuple(rest), value))
    return out


def epoch_of(value: bytes) -> int:
    """Types 3 and 6: int16 version 0, then the (group or assignment) epoch as an int32."""
    version, epoch = struct.unpack_from(">hi", value, 0)
    assert version == 0
    return epoch


def regex_topics(value: bytes) -> list[str]:
    """Type 16 value v0 (flexible): a compact array of compact strings, then version and time."""
    (version,) = struct.unpack_from(">h", value, 0)
    assert version == 0
    n, pos = _uvarint(value, 2)
    topics = []
    for _ in range(n - 1):
        size, pos = _uvarint(value, pos)
        topics.append(value[pos : pos + size - 1].decode())
        pos += size - 1
    return topics


def test_records_in_consumer_offsets(conn: Conn, cgbroker: BrokerProcess, topic: str) -> None:
    group, by_regex = f"{topic}-g", f"{topic}-r"
    other = f"{topic}-other"
    cgbroker.create_topic(other, 1)
    a = Consumer(conn, group, topics=[topic])
    assert a.join().error_code == 0
    pattern = topic.replace("-", "\\-") + "(\\-other)?"
    r = Consumer(conn, by_regex, regex=pattern)
    assert r.join().error_code == 0
    (d,) = describe(conn, [group])

    records = group_records(conn, group)
    assert {kind for kind, _, _ in records} == {3, 5, 6, 7, 8}
    # Member records are keyed by member id; the group-wide ones by the group id alone.
    assert {kind: keys for kind, keys, _ in records} == {
        3: (),
        5: (a.member_id,),
        6: (),
        7: (a.member_id,),
        8: (a.member_id,),
    }
    assert all(value is not None for _, _, value in records)
    (epoch,) = [epoch_of(v) for k, _, v in records if k == 3]  # type: ignore[arg-type]
    (assignment_epoch,) = [epoch_of(v) for k, _, v in records if k == 6]  # type: ignore[arg-type]
    assert (epoch, assignment_epoch) == (d.group_epoch, d.assignment_epoch) == (1, 1)

    regex_records = group_records(conn, by_regex)
    assert {kind for kind, _, _ in regex_records} == {3, 5, 6, 7, 8, 16}
    ((keys, value),) = [(keys, v) for k, keys, v in regex_records if k == 16]
    assert keys == (pattern,)
    assert sorted(regex_topics(value)) == sorted([topic, other])  # type: ignore[arg-type]

    # Leaving writes tombstones for the member's records and a new group epoch.
    assert a.leave().error_code == 0
    after = group_records(conn, group)[len(records) :]
    assert [(k, keys, v is None) for k, keys, v in after[:3]] == [
        (8, (a.member_id,), True),
        (7, (a.member_id,), True),
        (5, (a.member_id,), True),
    ]
    assert [epoch_of(v) for k, _, v in after if k == 3] == [2]  # type: ignore[arg-type]
