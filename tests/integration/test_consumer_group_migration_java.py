"""KIP-848 online migration with the official Java client (kafka-clients 4.3): one group, one
classic consumer (group.protocol=classic; the eager "range" assignor, or "cooperative-sticky")
and one consumer-protocol consumer (group.protocol=consumer), while records keep being produced.

- upgrade (group.consumer.migration.policy bidirectional or upgrade): the classic consumer
  consumes alone; the consumer-protocol one joins. The classic group becomes a consumer group
  (ConsumerGroupDescribe v1: MemberType 0 and 1; Admin listGroups/describeConsumerGroups: type
  Consumer), the classic member keeps its member id and rejoins at its member epoch, and the
  uniform assignor splits the partitions between the two, each consuming its own;
- downgrade: the consumer-protocol consumer closes. With the policy bidirectional the group is a
  classic group again (DescribeGroups: Stable, the classic member alone; listGroups: type
  Classic) whose rebalance gives the classic consumer every partition at the generation after
  the group epoch; with the policy upgrade it stays a consumer group with the classic member
  alone, every partition reconciled to it;
- a classic consumer that joins a consumer group is a member of it (whatever the policy), and
  the group downgrades when the consumer-protocol consumer leaves (policy bidirectional or
  downgrade);
- a policy without upgrade (disabled, downgrade): the consumer-protocol consumer cannot join the
  classic group that has a member; the Java client fails (its poll throws
  GroupIdNotFoundException: a fatal heartbeat error), and the classic consumer goes on with no
  rebalance.

Each time every record produced is consumed exactly once over the consumers, and the committed
offsets are the ends of the partitions. Each consumer commits synchronously after each poll (the
probe). The consumer-protocol consumer revokes from within poll, after its last commit; the
eager classic one gives up everything from within poll before it rejoins, and gets no record
until its rejoin completes. The cooperative classic one keeps consuming while it rebalances, and
the client itself refuses the commits of that time (RebalanceInProgressException) until the
rebalance completes, which may revoke their partitions: it also commits its positions from
onPartitionsRevoked (the probe's commitOnRevoke). The broker hands a partition to the other
member only once its owner has released it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import pytest

from tests.harness import BrokerFactory, BrokerProcess
from tests.integration import group_probe
from tests.integration.consumer_groups import (
    Group,
    Producer,
    consumer_group_flags,
    describe_classic_group,
    describe_group,
    wait_stable,
    wait_until,
)
from tests.integration.group_probe import JavaProbe, assignments, close, offsets, owned, records
from tests.integration.test_groups_java import committed

pytestmark = pytest.mark.java

# The group probe's fixtures, shared with the other Java test modules.
probe_classpath = group_probe.probe_classpath
java = group_probe.java

Java = Callable[..., JavaProbe]  # the java fixture: starts a GroupProbe JVM
PARTS = 4
SLOW = ("max.poll.records=10", "pollDelayMs=20")  # so that rebalances interleave with polls
MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER = 0, 1
GROUP_ID_NOT_FOUND = 69
ASSIGNORS = {
    "range": "org.apache.kafka.clients.consumer.RangeAssignor",
    "cooperative-sticky": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
}
# The one commit failure allowed: the cooperative classic client's own refusal while it rebalances.
REFUSED_WHILE_REBALANCING = (
    "COMMITFAIL RebalanceInProgressException Offset commit cannot be completed since the consumer "
    "is undergoing a rebalance"
)

Partitions = Collection[tuple[str, int]]  # (topic, partition)


def migration_broker(broker_factory: BrokerFactory, policy: str) -> BrokerProcess:
    return broker_factory([*consumer_group_flags(), "--group-consumer-migration-policy", policy])


def classic_member(java: Java, broker: BrokerProcess, group: str, topic: str, assignor: str) -> JavaProbe:
    strategy = f"partition.assignment.strategy={ASSIGNORS[assignor]}"
    cooperative = ("commitOnRevoke=true",) if assignor == "cooperative-sticky" else ()
    return java("member", broker.bootstrap, group, topic, "client.id=classic", strategy, *cooperative, *SLOW)


def consumer_member(java: Java, broker: BrokerProcess, group: str, topic: str) -> JavaProbe:
    return java(
        "member", broker.bootstrap, group, topic, "client.id=modern", "group.protocol=consumer", *SLOW
    )


def tps(partitions: Partitions) -> set[str]:
    """ "t-p" strings, as the probe prints them."""
    return {f"{t}-{p}" for t, p in partitions}


def since_last_assignment(probe: JavaProbe) -> list[tuple[int, int, str]]:
    """The records the member got after its last ASSIGNED line."""
    lines = probe.snapshot()
    last = max(i for i, line in enumerate(lines) if line.startswith("ASSIGNED "))
    return records(lines[last:])


def wait_consuming(probe: JavaProbe, topic: str, partitions: Partitions) -> None:
    """Until the member has consumed records of each of ``partitions``, and of no other, since
    its last assignment."""

    def consumed() -> set[tuple[str, int]]:
        return {(topic, p) for p, _, _ in since_last_assignment(probe)}

    probe.wait_for(lambda _: consumed() >= set(partitions), what=f"records of each of {sorted(partitions)}")
    assert consumed() == set(partitions)


def start_classic_alone(
    java: Java, broker: BrokerProcess, group: str, topic: str, assignor: str
) -> JavaProbe:
    """The classic consumer, consuming every partition in a Stable classic group."""
    classic = classic_member(java, broker, group, topic, assignor)
    classic.wait_for(lambda lines: len(records(lines)) >= 30, what="the classic consumer's first records")
    g = describe_classic_group(broker, group)
    everything = {(topic, p) for p in range(PARTS)}
    assert (g.state, g.protocol_type, g.protocol) == ("Stable", "consumer", assignor), g
    assert [(m.client_id, m.assigned) for m in g.members] == [("classic", everything)]
    assert owned(classic) == tps(everything)
    return classic


def wait_mixed(broker: BrokerProcess, group: str, topic: str, classic: JavaProbe, modern: JavaProbe) -> Group:
    """The consumer group Stable with both members, each of its own type, two partitions each,
    each client holding and consuming what the broker says it owns; the classic member at its
    member epoch as its generation."""
    g = wait_stable(broker, group, 2, "the group stable with both members")
    c, m = g.member("classic"), g.member("modern")
    assert (c.member_type, m.member_type) == (MEMBER_TYPE_CLASSIC, MEMBER_TYPE_CONSUMER)
    assert (len(c.assigned), len(m.assigned)) == (2, 2)  # uniform
    assert c.assigned | m.assigned == {(topic, p) for p in range(PARTS)}
    classic.wait_for(lambda _: owned(classic) == tps(c.assigned), what="the classic member's half")
    modern.wait_for(lambda _: owned(modern) == tps(m.assigned), what="the modern member's half")
    assert assignments(classic.snapshot())[-1][:2] == (c.member_epoch, c.member_id)
    wait_consuming(classic, topic, c.assigned)
    wait_consuming(modern, topic, m.assigned)
    return g


def wait_downgraded(broker: BrokerProcess, group: str, topic: str, classic: JavaProbe, mixed: Group) -> None:
    """The group classic again at the consumer group's epoch, after a rebalance that gave the
    classic member, same member id, every partition at the next generation."""
    member_id = mixed.member("classic").member_id
    everything = {(topic, p) for p in range(PARTS)}

    def classic_alone() -> bool:
        cg = describe_classic_group(broker, group)
        return cg.state == "Stable" and [(x.member_id, x.assigned) for x in cg.members] == [
            (member_id, everything)
        ]

    wait_until(classic_alone, "the downgraded classic group stable with the classic member alone")
    assert describe_group(broker, group).error_code == GROUP_ID_NOT_FOUND  # not a consumer group
    classic.wait_for(lambda _: owned(classic) == tps(everything), what="every partition back")
    assert assignments(classic.snapshot())[-1][:2] == (mixed.group_epoch + 1, member_id)
    wait_consuming(classic, topic, everything)


def finish_exactly_once(
    broker: BrokerProcess,
    producer: Producer,
    group: str,
    topic: str,
    probes: tuple[JavaProbe, ...],
    refused_allowed: bool = False,
) -> None:
    """More records, then stop producing: every one consumed once over ``probes``, every commit
    accepted (but those the client refused while rebalancing, if ``refused_allowed``), and the
    group's committed offsets the ends of the partitions."""
    mark = producer.total()
    wait_until(lambda: producer.total() >= mark + 40, "more records produced")
    everything = producer.stop()
    probes[0].wait_for(lambda _: set(offsets(probes)) >= everything, what="every record consumed")
    consumed = offsets(probes)
    twice = sorted(k for k, n in consumed.items() if n > 1)
    assert not twice, f"{len(twice)} records consumed more than once, e.g. {twice[:10]}"
    assert set(consumed) == everything
    failed = [
        line
        for p in probes
        for line in p.snapshot()
        if line.startswith(("COMMITFAIL", "ERROR"))
        and not (refused_allowed and line.startswith(REFUSED_WHILE_REBALANCING))
    ]
    assert not failed, failed
    with broker.connect() as c:
        wait_until(
            lambda: committed(c, group, topic, PARTS) == dict(enumerate(producer.produced)),
            "the last commits",
            timeout=10,
        )


# --- upgrade, then downgrade ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "assignor"),
    [("bidirectional", "range"), ("bidirectional", "cooperative-sticky"), ("upgrade", "range")],
)
def test_mixed_group_migrates_and_consumes_everything_once(
    broker_factory: BrokerFactory, java: Java, unique_topic: str, policy: str, assignor: str
) -> None:
    broker = migration_broker(broker_factory, policy)
    group, topic = unique_topic + "-g", unique_topic
    broker.create_topic(topic, PARTS)
    producer = Producer(broker, topic, PARTS)
    producer.start()
    admin = java("admin", broker.bootstrap)
    classic = start_classic_alone(java, broker, group, topic, assignor)
    classic_id = assignments(classic.snapshot())[0][1]
    assert admin.admin("list") == [f"GROUP {group} Stable Classic consumer"]

    # Upgrade: the consumer-protocol member's join makes a consumer group of the classic group.
    modern = consumer_member(java, broker, group, topic)
    mixed = wait_mixed(broker, group, topic, classic, modern)
    assert mixed.member("classic").member_id == classic_id
    assert admin.admin("list") == [f"GROUP {group} Stable Consumer consumer"]
    epoch = mixed.group_epoch
    assert (
        admin.admin(f"describe-type {group}")[0] == f"TDESC {group} Consumer Stable uniform 2 {epoch} {epoch}"
    )
    assert describe_classic_group(broker, group).state == "Dead"  # not a classic group any more

    # The consumer-protocol member leaves.
    close(modern)
    if policy == "bidirectional":
        wait_downgraded(broker, group, topic, classic, mixed)
        assert admin.admin("list") == [f"GROUP {group} Stable Classic consumer"]
    else:
        # No downgrade: the classic member alone in the consumer group, reconciled to everything.
        g = wait_stable(broker, group, 1, "the consumer group with the classic member alone")
        everything = {(topic, p) for p in range(PARTS)}
        assert (g.members[0].member_id, g.members[0].member_type) == (classic_id, MEMBER_TYPE_CLASSIC)
        assert g.members[0].assigned == everything
        assert admin.admin("list") == [f"GROUP {group} Stable Consumer consumer"]
        classic.wait_for(lambda _: owned(classic) == tps(everything), what="every partition back")
        assert assignments(classic.snapshot())[-1][:2] == (g.members[0].member_epoch, classic_id)
        wait_consuming(classic, topic, everything)

    cooperative = assignor == "cooperative-sticky"
    finish_exactly_once(broker, producer, group, topic, (classic, modern), refused_allowed=cooperative)
    close(classic)


# --- a classic consumer joins a consumer group ----------------------------------------------------
@pytest.mark.parametrize(
    ("policy", "assignor"),
    [("bidirectional", "range"), ("bidirectional", "cooperative-sticky"), ("downgrade", "range")],
)
def test_classic_member_joins_consumer_group_then_downgrades(
    broker_factory: BrokerFactory, java: Java, unique_topic: str, policy: str, assignor: str
) -> None:
    broker = migration_broker(broker_factory, policy)
    group, topic = unique_topic + "-g", unique_topic
    broker.create_topic(topic, PARTS)
    producer = Producer(broker, topic, PARTS)
    producer.start()
    modern = consumer_member(java, broker, group, topic)
    modern.wait_for(lambda lines: len(records(lines)) >= 30, what="the modern consumer's first records")
    assert describe_group(broker, group).member("modern").assigned == {(topic, p) for p in range(PARTS)}

    classic = classic_member(java, broker, group, topic, assignor)
    mixed = wait_mixed(broker, group, topic, classic, modern)
    close(modern)
    wait_downgraded(broker, group, topic, classic, mixed)

    cooperative = assignor == "cooperative-sticky"
    finish_exactly_once(broker, producer, group, topic, (classic, modern), refused_allowed=cooperative)
    close(classic)


# --- a policy without upgrade -----------------------------------------------------------------
@pytest.mark.parametrize("policy", ["disabled", "downgrade"])
def test_consumer_protocol_member_cannot_join_classic_group(
    broker_factory: BrokerFactory, java: Java, unique_topic: str, policy: str
) -> None:
    broker = migration_broker(broker_factory, policy)
    group, topic = unique_topic + "-g", unique_topic
    broker.create_topic(topic, PARTS)
    producer = Producer(broker, topic, PARTS)
    producer.start()
    classic = start_classic_alone(java, broker, group, topic, "range")
    callbacks = ("ASSIGNED", "REVOKED", "LOST")
    before = [x for x in classic.snapshot() if x.startswith(callbacks)]

    modern = consumer_member(java, broker, group, topic)
    error = modern.wait_line("ERROR ", timeout=30)
    assert error == (
        f"ERROR GroupIdNotFoundException Cannot upgrade classic group {group} to consumer group because "
        "online upgrade is disabled."
    )
    assert modern.wait_exit(10) == 3
    assert not records(modern.snapshot()) and not assignments(modern.snapshot())

    # The classic group is as it was: the classic member alone, no rebalance.
    g = describe_classic_group(broker, group)
    assert (g.state, [(x.client_id, x.assigned) for x in g.members]) == (
        "Stable",
        [("classic", {(topic, p) for p in range(PARTS)})],
    )
    assert describe_group(broker, group).error_code == GROUP_ID_NOT_FOUND
    finish_exactly_once(broker, producer, group, topic, (classic,))
    assert [x for x in classic.snapshot() if x.startswith(callbacks)] == before
    close(classic)
