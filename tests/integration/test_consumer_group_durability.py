"""A KIP-848 consumer group across kill -9 and restart, driven over raw sockets (no JVM).

Three members (dynamic by topic name, static, and by regex) join a 6-partition topic with
ConsumerGroupHeartbeat, reconcile until the group is Stable, and commit offsets with OffsetCommit
v9 and their member epochs. The broker is killed with SIGKILL and restarted on the same data
directory. Then:

- ConsumerGroupDescribe shows the same group: state, group and assignment epochs, assignor, and
  every member with its epoch, subscription, assignment and target;
- OffsetFetch (v9, each member's id and epoch) returns the committed offsets;
- the members heartbeat again with their member ids and epochs and keep their partitions: no
  rebalance (same group epoch), and their epochs are good for OffsetCommit v9;
- a member fenced by its epoch rejoins with epoch 0 and its id and gets its partitions back, still
  without a rebalance (KAFKA-19233);
- once the members' sessions lapse (the session timers restart with the broker), the group is
  empty; the members rejoining with epoch 0 get every partition back, each exactly once, and the
  offsets are still there.

A second test kills the broker in the middle of a rebalance (members still revoking partitions
for a new one): the in-flight state comes back as it was, and the rebalance completes.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kcoord.protocol.errors import ErrorCode
from tests.group_client import (
    Consumer,
    TopicPartition,
    commit_offsets,
    describe,
    described_assignment,
    fetch_groups,
    reconcile,
    topic_ids,
    wait_until,
)
from tests.harness import BrokerFactory, BrokerProcess

pytestmark = pytest.mark.slow

PARTITIONS = 6
SESSION_MS = 5_000


def snapshot(c: Any, group: str) -> dict[str, Any]:
    """Everything ConsumerGroupDescribe v1 says of the group, members by member id."""
    (d,) = describe(c, [group])
    assert d.error_code == 0, d
    return {
        "state": d.group_state,
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor": d.assignor_name,
        "members": {
            m.member_id: (
                m.instance_id,
                m.rack_id,
                m.member_epoch,
                m.client_id,
                m.client_host,
                tuple(m.subscribed_topic_names),
                m.subscribed_topic_regex,
                described_assignment(m.assignment),
                described_assignment(m.target_assignment),
                m.member_type,
            )
            for m in d.members
        },
    }


def offsets_of(
    owned: dict[str, set[TopicPartition]], names: dict[uuid.UUID, str]
) -> dict[tuple[str, int], int]:
    """The offset each member commits for its partitions: 100 * partition + 7."""
    return {(names[t], p): 100 * p + 7 for parts in owned.values() for t, p in parts}


def commit_all(c: Any, group: str, consumers: list[Consumer], names: dict[uuid.UUID, str]) -> None:
    """Each member commits its own partitions with OffsetCommit v9 and its member epoch."""
    for m in consumers:
        offsets = offsets_of({m.member_id: m.partitions()}, names)
        codes = commit_offsets(c, group, offsets, version=9, generation=m.epoch, member=m.member_id)
        assert codes == dict.fromkeys(offsets, 0), (m.member_id, codes)


def test_consumer_group_survives_kill_9(broker_factory: BrokerFactory, unique_topic: str) -> None:
    b: BrokerProcess = broker_factory(
        [
            "--group-consumer-session-timeout-ms",
            str(SESSION_MS),
            "--group-consumer-heartbeat-interval-ms",
            "500",
        ]
    )
    topic, group = unique_topic, unique_topic + "-g"
    b.create_topic(topic, PARTITIONS)

    c = b.connect()
    tid = topic_ids(c, [topic])[topic]
    names = {tid: topic}
    everything = {(tid, p) for p in range(PARTITIONS)}
    consumers = [
        Consumer(c, group, topics=[topic], client_id="dynamic"),
        Consumer(c, group, topics=[topic], instance_id="static-1", client_id="static"),
        Consumer(c, group, regex=topic.replace("-", "\\-"), client_id="by-regex"),
    ]
    for m in consumers:
        assert m.join().error_code == 0, m.last
    owned = reconcile(consumers, everything)
    assert all(len(parts) == 2 for parts in owned.values()), owned
    commit_all(c, group, consumers, names)
    committed = offsets_of(owned, names)
    assert sorted(committed) == sorted((topic, p) for p in range(PARTITIONS))
    before = snapshot(c, group)
    assert before["state"] == "Stable"
    assert {m: v[2] for m, v in before["members"].items()} == {
        m.member_id: before["group_epoch"] for m in consumers
    }
    c.close()

    b.kill()
    b.start()

    with b.connect() as c:
        for m in consumers:
            m.c = c
        # The group as it was: epochs, members, assignments, targets.
        assert snapshot(c, group) == before
        # The offsets, fetched as each member (v9 checks the member id and epoch).
        for m in consumers:
            assert fetch_groups(c, [group], version=9, member_id=m.member_id, member_epoch=m.epoch)[
                group
            ] == (
                0,
                committed,
            )

        # The members heartbeat on with their ids and epochs: they keep their partitions, no rebalance.
        for m in consumers:
            epoch, mine = m.epoch, m.partitions()
            resp = m.beat()
            assert (resp.error_code, resp.member_epoch) == (0, epoch), resp
            assert m.partitions() == mine == owned[m.member_id]
        assert snapshot(c, group) == before
        commit_all(c, group, consumers, names)  # their epochs are still the group's

        # A member fenced by its epoch rejoins with epoch 0 and gets its partitions back (KAFKA-19233).
        fenced = consumers[0]
        resp = fenced.beat(member_epoch=fenced.epoch + 1)
        assert resp.error_code == ErrorCode.FENCED_MEMBER_EPOCH, resp
        resp = fenced.join()
        assert (resp.error_code, resp.member_epoch) == (0, before["group_epoch"]), resp
        assert fenced.partitions() == owned[fenced.member_id]
        assert snapshot(c, group) == before

        # Silent members: their sessions (restarted with the broker) lapse and they are fenced.
        def emptied() -> bool:
            (d,) = describe(c, [group])
            return d.group_state == "Empty" and d.members == []

        wait_until(emptied, "the members' sessions to lapse", timeout=SESSION_MS / 1000 + 15, interval=0.2)
        (d,) = describe(c, [group])
        assert d.group_epoch > before["group_epoch"]

        # They rejoin with epoch 0 and their ids: every partition is assigned again, once.
        for m in consumers:
            assert m.join().error_code == 0, m.last
        again = reconcile(consumers, everything)
        assert set().union(*again.values()) == everything
        (d,) = describe(c, [group])
        assert d.group_epoch > before["group_epoch"]
        assert {m.member_id for m in d.members} == {m.member_id for m in consumers}
        assert fetch_groups(c, [group])[group] == (0, committed)
        commit_all(c, group, consumers, names)


def test_rebalance_in_flight_survives_kill_9(broker_factory: BrokerFactory, unique_topic: str) -> None:
    """Killed while members still revoke partitions for a new member: after the restart the group
    is where it was (target assignment, members' epochs and partitions pending revocation), and
    the rebalance completes without a partition ever owned twice."""
    b: BrokerProcess = broker_factory()
    topic, group = unique_topic, unique_topic + "-g"
    b.create_topic(topic, PARTITIONS)
    c = b.connect()
    tid = topic_ids(c, [topic])[topic]
    everything = {(tid, p) for p in range(PARTITIONS)}
    first = [Consumer(c, group, topics=[topic]) for _ in range(2)]
    for m in first:
        assert m.join().error_code == 0
    reconcile(first, everything)
    late = Consumer(c, group, topics=[topic])
    assert late.join().error_code == 0
    for m in first:  # told to revoke; they have not yet
        assert m.send(member_epoch=m.epoch).error_code == 0
    before = snapshot(c, group)
    assert before["state"] == "Reconciling"
    assert before["group_epoch"] == before["assignment_epoch"] == 3
    assert sorted(v[2] for v in before["members"].values()) == [2, 2, 3]  # the first two still at 2
    assert late.partitions() == set()  # nothing is free for it yet
    c.close()

    b.kill()
    b.start()

    with b.connect() as c:
        for m in [*first, late]:
            m.c = c
        assert snapshot(c, group) == before
        # The partitions the first two revoke are still theirs until they say they gave them up.
        resp = late.beat()
        assert (resp.error_code, resp.member_epoch, late.partitions()) == (0, 3, set()), resp
        again = reconcile([*first, late], everything)
        assert sorted(len(parts) for parts in again.values()) == [2, 2, 2]
        assert snapshot(c, group)["group_epoch"] == 3
