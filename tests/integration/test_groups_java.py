"""The official Java client (kafka-clients 4.3, classic protocol) in consumer groups.

- a consumer subscribes, polls, commits (commitSync) and closes; a new consumer in the same
  group resumes exactly after the commit;
- two members share a topic through a rebalance: every record is consumed at least once, and
  a member started after both closed re-reads nothing below the last commit;
- static membership (group.instance.id): a restart within the session timeout keeps the
  assignment without a rebalance (same generation), a second instance with the same id fences
  the first (FENCED_INSTANCE_ID), Admin.removeMembersFromConsumerGroup removes it;
- Admin: list/describe groups, list/alter/delete group offsets, delete groups (NON_EMPTY_GROUP
  while a member is active).
"""

from __future__ import annotations

import pytest
from kafka.protocol.consumer.group import OffsetFetchRequest

from tests.harness import BrokerFactory, BrokerProcess
from tests.integration import group_probe
from tests.integration.group_probe import assignments, commits, records
from tests.wire import ApiKey, Conn, build_batch

pytestmark = pytest.mark.java

FAST_GROUPS = ["--group-initial-rebalance-delay-ms", "0"]


# The group probe's fixtures, shared with test_consumer_groups_java.py.
probe_classpath = group_probe.probe_classpath
java = group_probe.java


@pytest.fixture
def fast_broker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(FAST_GROUPS)


def produce(broker: BrokerProcess, topic: str, partitions: int, per_partition: int, start: int = 0) -> None:
    """``per_partition`` records on each partition, value "p<partition>-<n>" for n from ``start``."""
    with broker.connect() as c:
        for p in range(partitions):
            recs = [(None, f"p{p}-{start + i}".encode(), 1_700_000_000_000 + i) for i in range(per_partition)]
            assert c.produce(topic, p, build_batch(recs)).error_code == 0


def committed(c: Conn, group: str, topic: str, partitions: int) -> dict[int, int]:
    req = OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=list(range(partitions)))
    resp = c.request(ApiKey.OffsetFetch, 5, group_id=group, topics=[req], require_stable=False)
    assert resp.error_code == 0
    return {p.partition_index: p.committed_offset for p in resp.topics[0].partitions}


def describe(c: Conn, group: str) -> object:
    resp = c.request(ApiKey.DescribeGroups, 5, groups=[group], include_authorized_operations=False)
    return resp.groups[0]


def member_args(broker: BrokerProcess, group: str, topic: str, *extra: str) -> tuple[str, ...]:
    return ("member", broker.bootstrap, group, topic, *extra)


def test_consume_commit_close_and_resume(fast_broker: BrokerProcess, java, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    group = unique_topic + "-g"
    fast_broker.create_topic(unique_topic, 3)
    produce(fast_broker, unique_topic, 3, 10)

    first = java(*member_args(fast_broker, group, unique_topic))
    first.wait_for(lambda lines: len(records(lines)) >= 30, what="30 records")
    first.wait_for(lambda lines: commits(lines) == {0: 10, 1: 10, 2: 10}, what="commits of 10")
    first.send("close")
    first.wait_line("CLOSED")
    assert first.wait_exit() == 0
    got = records(first.snapshot())
    assert sorted(got) == sorted((p, i, f"p{p}-{i}") for p in range(3) for i in range(10))
    with fast_broker.connect() as c:
        assert committed(c, group, unique_topic, 3) == {0: 10, 1: 10, 2: 10}
        # A dynamic member leaves on close: the group is Empty and keeps its offsets.
        assert describe(c, group).group_state == "Empty"

    produce(fast_broker, unique_topic, 3, 5, start=10)
    second = java(*member_args(fast_broker, group, unique_topic))
    second.wait_for(lambda lines: len(records(lines)) >= 15, what="15 new records")
    second.send("close")
    second.wait_line("CLOSED")
    # The new consumer starts at the committed offsets: only the 15 new records, once each.
    assert sorted(records(second.snapshot())) == sorted(
        (p, i, f"p{p}-{i}") for p in range(3) for i in range(10, 15)
    )
    with fast_broker.connect() as c:
        assert committed(c, group, unique_topic, 3) == {0: 15, 1: 15, 2: 15}


def test_two_member_rebalance_loses_nothing(fast_broker: BrokerProcess, java, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    group = unique_topic + "-g"
    parts, per = 4, 60
    fast_broker.create_topic(unique_topic, parts)
    produce(fast_broker, unique_topic, parts, per)
    everything = {(p, i) for p in range(parts) for i in range(per)}
    slow = ("max.poll.records=5", "pollDelayMs=25")

    a = java(*member_args(fast_broker, group, unique_topic, *slow))
    a.wait_for(lambda lines: len(records(lines)) >= 20, what="A's first records")
    b = java(*member_args(fast_broker, group, unique_topic, *slow))

    def consumed() -> set[tuple[int, int]]:
        return {(p, o) for p, o, _ in records(a.snapshot()) + records(b.snapshot())}

    # B joins while A is still consuming: a rebalance splits the partitions between them.
    b.wait_for(lambda lines: any(parts_ for _, _, parts_ in assignments(lines)), what="B's partitions")
    a.wait_for(lambda lines: len(assignments(lines)) >= 2, what="A's second assignment")
    b.wait_for(lambda _: consumed() >= everything, what="every record consumed by A or B")
    gen_a, gen_b = assignments(a.snapshot())[-1][0], assignments(b.snapshot())[-1][0]
    assert gen_a == gen_b >= 2
    assert set(assignments(a.snapshot())[-1][2]).isdisjoint(assignments(b.snapshot())[-1][2])

    for m in (a, b):
        m.send("close")
    for m in (a, b):
        m.wait_line("CLOSED")
    assert consumed() == everything
    with fast_broker.connect() as c:
        assert committed(c, group, unique_topic, parts) == dict.fromkeys(range(parts), per)

    # A member restarted after the commits reads only what came after them.
    produce(fast_broker, unique_topic, parts, 3, start=per)
    c_ = java(*member_args(fast_broker, group, unique_topic))
    c_.wait_for(lambda lines: len(records(lines)) >= 3 * parts, what="the new records")
    c_.send("close")
    c_.wait_line("CLOSED")
    got = sorted((p, o) for p, o, _ in records(c_.snapshot()))
    assert got == sorted((p, o) for p in range(parts) for o in range(per, per + 3))


def test_static_member_restart_and_fencing(fast_broker: BrokerProcess, java, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    group = unique_topic + "-g"
    fast_broker.create_topic(unique_topic, 2)
    produce(fast_broker, unique_topic, 2, 5)
    static = ("group.instance.id=instance-1", "session.timeout.ms=30000")

    first = java(*member_args(fast_broker, group, unique_topic, *static))
    first.wait_for(lambda lines: commits(lines) == {0: 5, 1: 5}, what="commits")
    gen, _, parts = assignments(first.snapshot())[-1]
    assert sorted(parts) == [f"{unique_topic}-0", f"{unique_topic}-1"]
    first.send("close")  # a static member does not send LeaveGroup on close
    first.wait_line("CLOSED")
    with fast_broker.connect() as c:
        d = describe(c, group)
        assert (d.group_state, [m.group_instance_id for m in d.members]) == ("Stable", ["instance-1"])
        described_before = d

    # Restart within the session timeout: same assignment, same generation, no rebalance.
    second = java(*member_args(fast_broker, group, unique_topic, *static))
    second.wait_line("ASSIGNED")
    gen2, member2, parts2 = assignments(second.snapshot())[-1]
    assert (gen2, sorted(parts2)) == (gen, sorted(parts))
    produce(fast_broker, unique_topic, 2, 1, start=5)
    second.wait_for(lambda lines: commits(lines) == {0: 6, 1: 6}, what="the new records committed")
    assert sorted((p, o) for p, o, _ in records(second.snapshot())) == [(0, 5), (1, 5)]
    with fast_broker.connect() as c:
        d = describe(c, group)
        assert [(m.member_id, m.group_instance_id) for m in d.members] == [(member2, "instance-1")]
        assert d.group_state == "Stable"
        assert described_before.members[0].member_id != member2

    # A second live instance with the same id takes over; the first one is fenced.
    third = java(*member_args(fast_broker, group, unique_topic, *static))
    third.wait_line("ASSIGNED")
    assert assignments(third.snapshot())[-1][0] == gen
    second.wait_line("FENCED")

    # The admin client removes the static member by its group.instance.id.
    third.send("halt")
    third.wait_exit()
    admin = java("admin", fast_broker.bootstrap)
    assert admin.admin(f"remove-static {group} instance-1") == []
    assert admin.admin(f"describe {group}") == [f"DESC {group} Empty - 0"]
    assert admin.admin(f"remove-static {group} instance-1")[0].startswith("ERR UnknownMemberIdException")


def test_admin_group_operations(fast_broker: BrokerProcess, java, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    group, other = unique_topic + "-g", unique_topic + "-standalone"
    fast_broker.create_topic(unique_topic, 2)
    produce(fast_broker, unique_topic, 2, 4)
    member = java(*member_args(fast_broker, group, unique_topic, "client.id=probe-member"))
    member.wait_for(lambda lines: commits(lines) == {0: 4, 1: 4}, what="commits")
    member_id = assignments(member.snapshot())[-1][1]
    admin = java("admin", fast_broker.bootstrap)
    # A standalone group (offsets only, no protocol type) beside the consumer group.
    assert admin.admin(f"alter {other} {unique_topic}:0:2") == []

    listed = admin.admin("list")
    assert f"GROUP {group} Stable Classic consumer" in listed
    assert f"GROUP {other} Empty Classic -" in listed
    assert admin.admin(f"describe {group}") == [
        f"DESC {group} Stable range 1",
        f"MEMBER {group} {member_id} - probe-member {unique_topic}-0,{unique_topic}-1",
    ]
    assert admin.admin(f"offsets {group}") == [f"OFFSET {unique_topic} 0 4 -", f"OFFSET {unique_topic} 1 4 -"]

    # While the member is active: no deletion, no offset changes under its feet.
    assert admin.admin(f"delete {group}") == [f"NOTDELETED {group} GroupNotEmptyException"]
    out = admin.admin(f"delete-offsets {group} {unique_topic}:0")
    assert out[0].startswith("ERR GroupSubscribedToTopicException"), out
    out = admin.admin(f"alter {group} {unique_topic}:0:1")
    assert out[0].startswith("ERR UnknownMemberIdException"), out

    member.send("close")
    member.wait_line("CLOSED")
    assert admin.admin(f"describe {group}") == [f"DESC {group} Empty - 0"]
    assert admin.admin(f"alter {group} {unique_topic}:0:1 {unique_topic}:1:3") == []
    assert admin.admin(f"offsets {group}") == [f"OFFSET {unique_topic} 0 1 -", f"OFFSET {unique_topic} 1 3 -"]
    assert admin.admin(f"delete-offsets {group} {unique_topic}:1") == []
    assert admin.admin(f"offsets {group}") == [f"OFFSET {unique_topic} 0 1 -"]
    out = admin.admin(f"alter {group} {unique_topic}-missing:0:1")
    assert out[0].startswith("ERR UnknownTopicOrPartitionException"), out

    assert sorted(admin.admin(f"delete {group} {other} {unique_topic}-never")) == sorted(
        [
            f"DELETED {group}",
            f"DELETED {other}",
            f"NOTDELETED {unique_topic}-never GroupIdNotFoundException",
        ]
    )
    listed = admin.admin("list")
    assert not [x for x in listed if unique_topic in x]
    assert admin.admin(f"describe {group}") == [f"DESCERR {group} GroupIdNotFoundException"]
    assert admin.admin(f"offsets {group}") == []
    with fast_broker.connect() as c:
        assert committed(c, group, unique_topic, 2) == {0: -1, 1: -1}
