"""The official Java client (kafka-clients 4.3) in KIP-848 consumer groups (group.protocol=consumer).

- a consumer subscribes, polls, commits (commitSync) and closes; a new consumer of the group
  resumes exactly after the commit;
- three consumers join one after the other, and one leaves, while records keep being produced:
  every offset is consumed exactly once (each member commits after each poll and revokes only
  from within poll, after its last commit; the broker hands a partition over only once its
  previous owner has revoked it);
- a consumer that stops polling leaves the group itself when max.poll.interval.ms (its rebalance
  timeout) passes; a frozen one (SIGSTOP: no heartbeat at all) is fenced by the broker's session
  timeout; one that heartbeats but never revokes is fenced by its rebalance timeout (a wire-level
  member: the Java client revokes from poll, so it cannot heartbeat without revoking). Each time
  the other member gets the partitions and consumes them;
- static membership (group.instance.id): a restart within the session timeout keeps the assignment,
  with no rebalance for the other member;
- a regular-expression subscription, by java.util.regex.Pattern (matched by the client) and by
  SubscriptionPattern (RE2J, resolved by the broker), picks up a topic created later;
- Admin: listGroups shows the group's type (Consumer) and state; describeConsumerGroups its type,
  assignor (uniform by default), epochs and members (id, instance, client id, host, assignment).

The broker runs with a short session timeout and fast heartbeats (consumer_groups.py); the probe's
ASSIGNED lines are printed from the rebalance listener, which the client calls from poll.
"""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Callable

import pytest

from kcoord.protocol.messages import request_class
from tests.harness import BrokerFactory, BrokerProcess
from tests.integration import group_probe
from tests.integration.consumer_groups import (
    Producer,
    consumer_group_flags,
    describe_group,
    produce,
    wait_stable,
    wait_until,
)
from tests.integration.group_probe import JavaProbe, assignments, close, commits, offsets, owned, records
from tests.integration.test_groups_java import committed
from tests.wire import ApiKey

pytestmark = pytest.mark.java

# The group probe's fixtures, shared with test_groups_java.py.
probe_classpath = group_probe.probe_classpath
java = group_probe.java

CONSUMER = "group.protocol=consumer"
Java = Callable[..., JavaProbe]  # the java fixture: starts a GroupProbe JVM
_HB = request_class(ApiKey.ConsumerGroupHeartbeat)


@pytest.fixture
def kbroker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(consumer_group_flags())


def member(java: Java, broker: BrokerProcess, group: str, topic: str, *extra: str) -> JavaProbe:
    """A GroupProbe member of ``group`` on the consumer protocol."""
    return java("member", broker.bootstrap, group, topic, CONSUMER, *extra)


def tps(topic: str, *partitions: int) -> set[str]:
    return {f"{topic}-{p}" for p in partitions}


# --- 1. consume, commit, close, resume ------------------------------------------------------------
def test_consume_commit_close_and_resume(kbroker: BrokerProcess, java: Java, unique_topic: str) -> None:
    group = unique_topic + "-g"
    kbroker.create_topic(unique_topic, 3)
    produce(kbroker, unique_topic, 3, 10)

    first = member(java, kbroker, group, unique_topic, "client.id=first")
    first.wait_for(lambda lines: commits(lines) == {0: 10, 1: 10, 2: 10}, what="commits of 10")
    g = describe_group(kbroker, group)
    assert (g.state, [(m.client_id, m.assigned) for m in g.members]) == (
        "Stable",
        [("first", {(unique_topic, p) for p in range(3)})],
    )
    close(first)
    assert sorted(records(first.snapshot())) == sorted(
        (p, i, f"p{p}-{i}") for p in range(3) for i in range(10)
    )
    with kbroker.connect() as c:
        assert committed(c, group, unique_topic, 3) == {0: 10, 1: 10, 2: 10}
    # The member left on close (heartbeat with epoch -1): the group is Empty and keeps its offsets.
    g = describe_group(kbroker, group)
    assert (g.state, g.members) == ("Empty", ())

    produce(kbroker, unique_topic, 3, 5, start=10)
    second = member(java, kbroker, group, unique_topic, "client.id=second")
    second.wait_for(lambda lines: commits(lines) == {0: 15, 1: 15, 2: 15}, what="commits of 15")
    close(second)
    # The new consumer starts at the committed offsets: only the 15 new records, once each.
    assert sorted(records(second.snapshot())) == sorted(
        (p, i, f"p{p}-{i}") for p in range(3) for i in range(10, 15)
    )
    with kbroker.connect() as c:
        assert committed(c, group, unique_topic, 3) == {0: 15, 1: 15, 2: 15}


# --- 2. sharing the partitions while producing ----------------------------------------------------
def test_members_share_partitions_while_producing(
    kbroker: BrokerProcess, java: Java, unique_topic: str
) -> None:
    group = unique_topic + "-g"
    parts = 6
    kbroker.create_topic(unique_topic, parts)
    producer = Producer(kbroker, unique_topic, parts)
    producer.start()
    slow = ("max.poll.records=10", "pollDelayMs=20")  # so that rebalances interleave with polls
    a = member(java, kbroker, group, unique_topic, "client.id=a", *slow)
    a.wait_for(lambda lines: len(records(lines)) >= 30, what="A's first records")
    b = member(java, kbroker, group, unique_topic, "client.id=b", *slow)
    b.wait_for(lambda lines: len(records(lines)) >= 30, what="B's first records")
    g2 = wait_stable(kbroker, group, 2, "A and B stable")
    assert [len(m.assigned) for m in g2.members] == [3, 3]
    c = member(java, kbroker, group, unique_topic, "client.id=c", *slow)
    c.wait_for(lambda lines: len(records(lines)) >= 30, what="C's first records")
    g3 = wait_stable(kbroker, group, 3, "A, B and C stable")
    assert [len(m.assigned) for m in g3.members] == [2, 2, 2]
    assert set().union(*(m.assigned for m in g3.members)) == {(unique_topic, p) for p in range(parts)}
    assert g3.group_epoch == g3.assignment_epoch > g2.group_epoch

    # A leaves while records keep coming: B and C take its partitions over from its last commit.
    close(a)
    mark = producer.total()
    wait_stable(kbroker, group, 2, "B and C stable")
    wait_until(lambda: producer.total() >= mark + 60, "more records produced")
    everything = producer.stop()
    members = (a, b, c)
    b.wait_for(lambda _: set(offsets(members)) >= everything, what="every record consumed by A, B or C")
    close(b, c)

    consumed = offsets(members)
    twice = sorted(k for k, n in consumed.items() if n > 1)
    assert not twice, f"{len(twice)} records consumed more than once, e.g. {twice[:10]}"
    assert set(consumed) == everything
    # Every commit succeeded: a commit racing a heartbeat that moved the member's epoch on is
    # valid for the partitions it still holds (KIP-1251).
    failed = [
        (m.snapshot()[0], line) for m in members for line in m.snapshot() if line.startswith("COMMITFAIL")
    ]
    assert not failed, failed
    with kbroker.connect() as conn:
        assert committed(conn, group, unique_topic, parts) == dict(enumerate(producer.produced))


# --- 3. members that stop -------------------------------------------------------------------------
def test_stalled_consumer_leaves_after_max_poll_interval(
    broker_factory: BrokerFactory, java: Java, unique_topic: str
) -> None:
    """A consumer that stops calling poll keeps heartbeating from its background thread, so the
    broker's session timeout never passes; when max.poll.interval.ms (the rebalance timeout it
    sent) passes, the Java client leaves the group itself (heartbeat with epoch -1) and rejoins
    at its next poll, after onPartitionsLost."""
    broker = broker_factory(consumer_group_flags(session_timeout_ms=30_000))
    group, parts = unique_topic + "-g", 4
    broker.create_topic(unique_topic, parts)
    produce(broker, unique_topic, parts, 5)
    a = member(java, broker, group, unique_topic, "client.id=a", "max.poll.interval.ms=2000")
    a.wait_for(lambda lines: commits(lines) == dict.fromkeys(range(parts), 5), what="A's commits")
    b = member(java, broker, group, unique_topic, "client.id=b")
    wait_stable(broker, group, 2, "A and B stable")
    a_parts = owned(a)
    assert len(a_parts) == 2

    a.send("stall")
    a.wait_line("STALLED")
    stalled_at = time.monotonic()
    produce(broker, unique_topic, parts, 5, start=5)
    g = wait_stable(broker, group, 1, "A out of the group", timeout=20)
    out_after = time.monotonic() - stalled_at
    assert g.members[0].client_id == "b"
    assert g.members[0].assigned == {(unique_topic, p) for p in range(parts)}
    assert 1.7 <= out_after < 8, f"A left {out_after:.1f}s after it stopped polling"
    b.wait_for(lambda lines: commits(lines) == dict.fromkeys(range(parts), 10), what="B's commits of all")

    # Polling again, A gives up the partitions it lost and joins as a new member epoch.
    a.send("resume")
    a.wait_line("LOST")
    wait_stable(broker, group, 2, "A back in the group")
    produce(broker, unique_topic, parts, 5, start=10)
    everything = {(p, o) for p in range(parts) for o in range(15)}
    a.wait_for(lambda _: set(offsets((a, b))) >= everything, what="every record consumed")
    close(a, b)
    consumed = offsets((a, b))
    assert set(consumed) == everything
    assert max(consumed.values()) == 1, f"consumed twice: {[k for k, n in consumed.items() if n > 1]}"
    with broker.connect() as c:
        assert committed(c, group, unique_topic, parts) == dict.fromkeys(range(parts), 15)


def test_frozen_consumer_fenced_by_session_timeout(
    broker_factory: BrokerFactory, java: Java, unique_topic: str
) -> None:
    """SIGSTOP freezes the whole JVM (no poll, no heartbeat): the broker fences the member once
    its session timeout passes and gives its partitions to the other member. When the JVM runs
    again, the fenced member may hand the records it had fetched to the application before its
    next heartbeat tells it it is fenced (UNKNOWN_MEMBER_ID): Kafka's at-least-once window, as
    with any broker. Its commit of them is refused and it calls onPartitionsLost, then rejoins."""
    session_ms = 3000
    broker = broker_factory(consumer_group_flags(session_timeout_ms=session_ms))
    group, parts = unique_topic + "-g", 4
    broker.create_topic(unique_topic, parts)
    produce(broker, unique_topic, parts, 5)
    a = member(java, broker, group, unique_topic, "client.id=a")
    a.wait_for(lambda lines: commits(lines) == dict.fromkeys(range(parts), 5), what="A's commits")
    b = member(java, broker, group, unique_topic, "client.id=b")
    wait_stable(broker, group, 2, "A and B stable")
    a_parts = owned(a)

    a.proc.send_signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        produce(broker, unique_topic, parts, 5, start=5)
        g = wait_stable(broker, group, 1, "A fenced", timeout=20)
        fenced_after = time.monotonic() - frozen_at
        assert (g.members[0].client_id, len(g.members[0].assigned)) == ("b", parts)
        assert session_ms / 1000 - 0.5 <= fenced_after < session_ms / 1000 + 5, fenced_after
        b.wait_for(lambda lines: commits(lines) == dict.fromkeys(range(parts), 10), what="B's commits of all")
    finally:
        a.proc.send_signal(signal.SIGCONT)
    thawed = len(a.snapshot())
    a.wait_line("LOST", after=thawed)
    wait_stable(broker, group, 2, "A back in the group")
    produce(broker, unique_topic, parts, 5, start=10)
    everything = {(p, o) for p in range(parts) for o in range(15)}
    a.wait_for(lambda _: set(offsets((a, b))) >= everything, what="every record consumed")
    close(a, b)

    consumed = offsets((a, b))
    assert set(consumed) == everything
    # Only what A read after the thaw, before it learnt it was fenced, of partitions it then lost,
    # was read twice; none of it was committed by A.
    after_thaw = a.snapshot()[thawed:]
    lost_at = next(i for i, line in enumerate(after_thaw) if line.startswith("LOST"))
    zombie = {(p, o) for p, o, _ in records(after_thaw[:lost_at])}
    twice = {k for k, n in consumed.items() if n > 1}
    assert twice <= zombie
    assert {f"{unique_topic}-{p}" for p, _ in zombie} <= a_parts
    assert not commits(after_thaw[:lost_at])
    with broker.connect() as c:
        assert committed(c, group, unique_topic, parts) == dict.fromkeys(range(parts), 15)


class WireMember(threading.Thread):
    """A consumer-protocol member on the wire that heartbeats every 200 ms and always reports
    the partitions of its first assignment as owned: it never revokes."""

    def __init__(self, broker: BrokerProcess, group: str, topic: str, rebalance_timeout_ms: int) -> None:
        super().__init__(daemon=True)
        self.broker, self.group, self.topic = broker, group, topic
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: list[tuple[uuid.UUID, list[int]]] = []
        self.errors: list[int | str] = []  # error codes, or the exception that ended the thread
        self._done = threading.Event()

    def beat(self, c) -> object:  # type: ignore[no-untyped-def]
        join = self.epoch == 0
        return c.request(
            ApiKey.ConsumerGroupHeartbeat,
            1,
            group_id=self.group,
            member_id=self.member_id,
            member_epoch=self.epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if join else -1,
            subscribed_topic_names=[self.topic] if join else None,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=[_HB.TopicPartitions(topic_id=t, partitions=ps) for t, ps in self.owned],
        )

    def run(self) -> None:
        try:
            self._run()
        except Exception as e:  # shown by the test's assertions
            self.errors.append(repr(e))

    def _run(self) -> None:
        with self.broker.connect() as c:
            while not self._done.is_set():
                resp = self.beat(c)
                if resp.error_code:  # type: ignore[attr-defined]
                    self.errors.append(resp.error_code)  # type: ignore[attr-defined]
                    return
                self.epoch = resp.member_epoch  # type: ignore[attr-defined]
                assignment = resp.assignment  # type: ignore[attr-defined]
                if assignment is not None and not self.owned:
                    self.owned = [(tp.topic_id, list(tp.partitions)) for tp in assignment.topic_partitions]
                time.sleep(0.2)

    def stop(self) -> None:
        self._done.set()
        self.join(5)


def test_unrevoking_member_fenced_by_rebalance_timeout(
    broker_factory: BrokerFactory, java: Java, unique_topic: str
) -> None:
    """A member that keeps heartbeating but never gives up a partition it must revoke is fenced
    when its rebalance timeout passes (the broker's session timeout is far longer); the newcomer
    then gets everything. Until then it gets nothing the other still owns."""
    broker = broker_factory(consumer_group_flags(session_timeout_ms=30_000))
    group, parts = unique_topic + "-g", 4
    broker.create_topic(unique_topic, parts)
    produce(broker, unique_topic, parts, 5)
    wire = WireMember(broker, group, unique_topic, rebalance_timeout_ms=2000)
    wire.start()
    try:
        wait_stable(broker, group, 1, "the wire member stable")
        wait_until(lambda: wire.owned or wire.errors, "the wire member's assignment")
        assert not wire.errors and sorted(wire.owned[0][1]) == list(range(parts)), (wire.errors, wire.owned)
        b = member(java, broker, group, unique_topic, "client.id=b")
        b.wait_for(lambda lines: len(assignments(lines)) >= 1, what="B joined")
        joined_at = time.monotonic()
        g = describe_group(broker, group)
        assert g.state == "Reconciling" and g.member("b").assigned == frozenset(), g
        wait_until(lambda: wire.errors, "the wire member fenced", timeout=15)
        fenced_after = time.monotonic() - joined_at
        assert wire.errors == [25], wire.errors  # UNKNOWN_MEMBER_ID: it was removed
        assert 1.0 <= fenced_after < 6, fenced_after
        g = wait_stable(broker, group, 1, "B alone")
        assert g.member("b").assigned == {(unique_topic, p) for p in range(parts)}
        b.wait_for(lambda lines: commits(lines) == dict.fromkeys(range(parts), 5), what="B's commits of all")
        assert owned(b) == tps(unique_topic, *range(parts))
        close(b)
    finally:
        wire.stop()


# --- 4. static membership -------------------------------------------------------------------------
def test_static_member_restart_keeps_assignment(
    kbroker: BrokerProcess, java: Java, unique_topic: str
) -> None:
    group, parts = unique_topic + "-g", 4
    kbroker.create_topic(unique_topic, parts)
    produce(kbroker, unique_topic, parts, 5)
    a = member(java, kbroker, group, unique_topic, "client.id=a", "group.instance.id=instance-a")
    a.wait_for(lambda lines: commits(lines) == dict.fromkeys(range(parts), 5), what="A's commits")
    b = member(java, kbroker, group, unique_topic, "client.id=b", "group.instance.id=instance-b")
    before = wait_stable(kbroker, group, 2, "A and B stable")
    a_parts, b_parts = before.member("a").assigned, before.member("b").assigned
    assert len(a_parts) == len(b_parts) == 2
    b.wait_for(lambda lines: owned(b) == {f"{t}-{p}" for t, p in b_parts}, what="B's partitions")
    b_lines = [x for x in b.snapshot() if not x.startswith(("REC ", "COMMITTED "))]

    # A static member's close is a temporary leave (epoch -2): it keeps its partitions.
    close(a)
    g = describe_group(kbroker, group)
    assert (g.member("a").member_epoch, g.member("a").assigned) == (-2, a_parts), g
    assert g.group_epoch == before.group_epoch

    # Its next instance, within the session timeout, takes its place with the same partitions.
    produce(kbroker, unique_topic, parts, 3, start=5)
    a2 = member(java, kbroker, group, unique_topic, "client.id=a2", "group.instance.id=instance-a")
    after = wait_stable(kbroker, group, 2, "A's new instance stable")
    assert after.member("a2").assigned == a_parts
    assert after.member("a2").instance_id == "instance-a"
    assert after.member("a2").member_id != before.member("a").member_id
    assert after.member("b") == before.member("b")  # same epoch, same partitions
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    a_tps = {f"{t}-{p}" for t, p in a_parts}
    a2.wait_for(lambda lines: owned(a2) == a_tps, what="A2 owns A's partitions")

    # Each resumes after the commits: A2 reads only the new records of A's partitions.
    a_nums = sorted(p for _, p in a_parts)
    a2.wait_for(lambda lines: commits(lines) == dict.fromkeys(a_nums, 8), what="A2's commits")
    got = sorted((p, o) for p, o, _ in records(a2.snapshot()))
    assert got == [(p, o) for p in a_nums for o in range(5, 8)]
    b_nums = sorted(p for _, p in b_parts)
    b.wait_for(lambda lines: commits(lines) == dict.fromkeys(b_nums, 8), what="B's commits")
    got = sorted((p, o) for p, o, _ in records(b.snapshot()))
    assert got == [(p, o) for p in b_nums for o in range(5, 8)]
    # B saw no rebalance: no callback since its assignment.
    assert [x for x in b.snapshot() if not x.startswith(("REC ", "COMMITTED "))] == b_lines
    close(a2, b)


# --- 5. regular-expression subscriptions ----------------------------------------------------------
@pytest.mark.parametrize(
    "how",
    [
        # the client matches a java.util.regex.Pattern against its metadata, refreshed every second
        pytest.param(("pattern", "metadata.max.age.ms=1000"), id="Pattern"),
        # the broker resolves an RE2J SubscriptionPattern whenever the topics change
        pytest.param(("subscriptionPattern",), id="SubscriptionPattern"),
    ],
)
def test_regex_subscription_picks_up_new_topic(
    kbroker: BrokerProcess,
    java: Java,
    unique_topic: str,
    how: tuple[str, ...],
) -> None:
    group, first, later = unique_topic + "-g", unique_topic + "-a", unique_topic + "-b"
    regex = unique_topic + "-.*"
    kbroker.create_topic(first, 2)
    kbroker.create_topic(unique_topic + "x", 1)  # does not match
    produce(kbroker, first, 2, 3, prefix=first + ":")
    m = member(java, kbroker, group, "-", "client.id=rx", f"{how[0]}={regex}", *how[1:])
    m.wait_for(lambda lines: len(records(lines)) >= 6, what="the first topic's records")
    g = describe_group(kbroker, group)
    if how[0] == "pattern":
        assert g.member("rx").subscribed_topic_names == (first,)
    else:
        assert (g.member("rx").subscribed_topic_names, g.member("rx").subscribed_topic_regex) == ((), regex)
    assert g.member("rx").assigned == {(first, 0), (first, 1)}

    kbroker.create_topic(later, 3)
    produce(kbroker, later, 3, 2, prefix=later + ":")
    m.wait_for(lambda lines: len(records(lines)) >= 12, what="the later topic's records", timeout=30)
    close(m)
    values = sorted(v for _, _, v in records(m.snapshot()))
    assert values == sorted(
        [f"{first}:p{p}-{i}" for p in range(2) for i in range(3)]
        + [f"{later}:p{p}-{i}" for p in range(3) for i in range(2)]
    )
    assert owned(m) == set()  # closed: everything revoked
    assert m.wait_exit() == 0


# --- 6. Admin -------------------------------------------------------------------------------------
def test_admin_lists_and_describes_consumer_group(
    broker_factory: BrokerFactory, java: Java, unique_topic: str
) -> None:
    session_ms = 3000  # the static member's session, waited out at the end
    kbroker = broker_factory(consumer_group_flags(session_timeout_ms=session_ms))
    group, parts = unique_topic + "-g", 3
    kbroker.create_topic(unique_topic, parts)
    produce(kbroker, unique_topic, parts, 2)
    a = member(java, kbroker, group, unique_topic, "client.id=client-a")
    a.wait_for(lambda lines: commits(lines) == dict.fromkeys(range(parts), 2), what="A's commits")
    b = member(java, kbroker, group, unique_topic, "client.id=client-b", "group.instance.id=instance-b")
    g = wait_stable(kbroker, group, 2, "A and B stable")
    a_id, b_id = g.member("client-a").member_id, g.member("client-b").member_id
    a.wait_for(lambda lines: any(m == a_id for _, m, _ in assignments(lines)), what="A's member id")
    b.wait_for(lambda lines: any(m == b_id for _, m, _ in assignments(lines)), what="B's member id")

    def joined(ps: frozenset[tuple[str, int]]) -> str:
        return ",".join(sorted(f"{t}-{p}" for t, p in ps)) or "-"

    admin = java("admin", kbroker.bootstrap)
    assert f"GROUP {group} Stable Consumer consumer" in admin.admin("list")
    epoch = g.group_epoch
    described = admin.admin(f"describe-type {group}")
    assert described[0] == f"TDESC {group} Consumer Stable uniform 2 {epoch} {epoch}"
    a_parts, b_parts = joined(g.member("client-a").assigned), joined(g.member("client-b").assigned)
    assert sorted(described[1:]) == sorted(
        [
            f"TMEMBER {group} {a_id} - client-a /127.0.0.1 {epoch} {a_parts} {a_parts}",
            f"TMEMBER {group} {b_id} instance-b client-b /127.0.0.1 {epoch} {b_parts} {b_parts}",
        ]
    )
    assert sorted(a_parts.split(",") + b_parts.split(",")) == sorted(tps(unique_topic, *range(parts)))
    assert admin.admin(f"delete {group}") == [f"NOTDELETED {group} GroupNotEmptyException"]

    close(a)  # leaves; B (static) gets everything
    wait_stable(kbroker, group, 1, "B alone")
    close(b)  # a static member's close keeps it in the group (epoch -2) until its session lapses
    assert admin.admin("list") == [f"GROUP {group} Reconciling Consumer consumer"]
    described = admin.admin(f"describe-type {group}")
    assert described[0].startswith(f"TDESC {group} Consumer Reconciling uniform 1 ")
    assert described[1].startswith(f"TMEMBER {group} {b_id} instance-b client-b /127.0.0.1 -2 ")
    wait_until(
        lambda: admin.admin("list") == [f"GROUP {group} Empty Consumer consumer"],
        "the group Empty once the static member's session lapsed",
        timeout=session_ms / 1000 + 10,
        interval=0.5,
    )
    assert admin.admin(f"delete {group}") == [f"DELETED {group}"]
    assert admin.admin("list") == []
