"""confluent-kafka 2.16 (librdkafka) in KIP-848 consumer groups (group.protocol=consumer).

- a consumer subscribes, consumes, commits synchronously and closes; a new consumer of the group
  resumes exactly after the commit;
- two consumers share a topic's partitions while records keep being produced: every offset is
  consumed exactly once. Each commits every message synchronously before polling again, and has
  rebalance callbacks, so librdkafka applies a revocation from within poll (not from its own
  thread while the application still holds a message), after the last commit;
- a regular-expression subscription ("^...", resolved by the broker) picks up a topic created
  later;
- KIP-848 online migration: a classic consumer (group.protocol=classic, eager "range") consumes
  alone; a consumer-protocol consumer joins (the classic group becomes a consumer group, the
  partitions are shared) and leaves (a classic group again, every partition back to the classic
  consumer): every record once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from tests.harness import BrokerFactory, BrokerProcess
from tests.integration.consumer_groups import (
    Producer,
    consumer_group_flags,
    describe_classic_group,
    describe_group,
    produce,
    wait_stable,
    wait_until,
)

ck = pytest.importorskip("confluent_kafka")


@pytest.fixture
def kbroker(broker_factory: BrokerFactory) -> BrokerProcess:
    return broker_factory(consumer_group_flags())


def consumer_conf(
    broker: BrokerProcess, group: str, client_id: str, protocol: str = "consumer"
) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "client.id": client_id,
    }
    if protocol == "classic":  # the consumer protocol's timing is the broker's
        conf.update({"heartbeat.interval.ms": 300, "session.timeout.ms": 10000})
    return conf


def consume(consumer: Any, n: int, timeout: float = 30.0) -> list[tuple[int, int, str]]:
    """Poll until ``n`` messages: (partition, offset, value) of each."""
    got: list[tuple[int, int, str]] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"only {len(got)} of {n} messages in {timeout}s: {got}"
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        got.append((msg.partition(), msg.offset(), msg.value().decode()))
    return got


def committed(consumer: Any, topic: str, partitions: int) -> dict[int, int]:
    tps = [ck.TopicPartition(topic, p) for p in range(partitions)]
    return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}


def test_consume_commit_close_and_resume(kbroker: BrokerProcess, unique_topic: str) -> None:
    group, parts = unique_topic + "-g", 3
    kbroker.create_topic(unique_topic, parts)
    produce(kbroker, unique_topic, parts, 10)

    first = ck.Consumer(consumer_conf(kbroker, group, "first"))
    first.subscribe([unique_topic])
    got = consume(first, 30)
    assert sorted(got) == sorted((p, i, f"p{p}-{i}") for p in range(parts) for i in range(10))
    done = first.commit(asynchronous=False)
    assert sorted((tp.partition, tp.offset, tp.error) for tp in done) == [(p, 10, None) for p in range(parts)]
    assert committed(first, unique_topic, parts) == dict.fromkeys(range(parts), 10)
    g = describe_group(kbroker, group)
    assert (g.state, [m.client_id for m in g.members]) == ("Stable", ["first"])
    assert g.members[0].assigned == {(unique_topic, p) for p in range(parts)}
    first.close()  # leaves the group (heartbeat with epoch -1)
    g = describe_group(kbroker, group)
    assert (g.state, g.members) == ("Empty", ())

    produce(kbroker, unique_topic, parts, 5, start=10)
    second = ck.Consumer(consumer_conf(kbroker, group, "second"))
    second.subscribe([unique_topic])
    got = consume(second, 15)
    # It starts at the committed offsets: only the new records, once each.
    assert sorted(got) == sorted((p, i, f"p{p}-{i}") for p in range(parts) for i in range(10, 15))
    done = second.commit(asynchronous=False)
    assert sorted((tp.partition, tp.offset, tp.error) for tp in done) == [(p, 15, None) for p in range(parts)]
    assert second.poll(0.5) is None  # nothing more, nothing again
    second.close()
    assert describe_group(kbroker, group).state == "Empty"


class Member(threading.Thread):
    """A confluent-kafka consumer polling in its own thread: commits each message synchronously
    before the next poll; notes every message and every rebalance callback."""

    def __init__(
        self, broker: BrokerProcess, group: str, topic: str, client_id: str, protocol: str = "consumer"
    ) -> None:
        super().__init__(daemon=True)
        self.consumer = ck.Consumer(consumer_conf(broker, group, client_id, protocol))
        self.consumer.subscribe([topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.messages: list[tuple[int, int]] = []
        self.events: list[str] = []
        self.failures: list[str] = []
        self._done = threading.Event()

    def _assigned(self, consumer: Any, partitions: list[Any]) -> None:
        self.events.append("assigned " + ",".join(str(tp.partition) for tp in partitions))

    def _revoked(self, consumer: Any, partitions: list[Any]) -> None:
        self.events.append("revoked " + ",".join(str(tp.partition) for tp in partitions))

    def run(self) -> None:
        try:
            while not self._done.is_set():
                msg = self.consumer.poll(0.1)
                if msg is None:
                    continue
                if msg.error():
                    self.failures.append(f"poll: {msg.error()}")
                    continue
                self.messages.append((msg.partition(), msg.offset()))
                try:
                    self.consumer.commit(message=msg, asynchronous=False)
                except ck.KafkaException as e:
                    self.failures.append(f"commit of {msg.partition()}@{msg.offset()}: {e}")
            self.consumer.close()
        except Exception as e:  # shown by the test
            self.failures.append(repr(e))

    def stop(self) -> None:
        self._done.set()
        self.join(30)
        assert not self.is_alive(), "consumer did not close"


def test_two_consumers_share_partitions_while_producing(kbroker: BrokerProcess, unique_topic: str) -> None:
    group, parts = unique_topic + "-g", 4
    kbroker.create_topic(unique_topic, parts)
    producer = Producer(kbroker, unique_topic, parts)
    producer.start()
    a = Member(kbroker, group, unique_topic, "a")
    a.start()
    try:
        wait_until(lambda: len(a.messages) >= 40, "A's first messages")
        b = Member(kbroker, group, unique_topic, "b")
        b.start()
        try:
            g = wait_stable(kbroker, group, 2, "A and B stable")
            assert sorted(len(m.assigned) for m in g.members) == [2, 2]
            wait_until(lambda: len(b.messages) >= 40, "B's first messages")
        finally:
            everything = producer.stop()

            def all_consumed() -> bool:
                return set(a.messages) | set(b.messages) >= everything

            wait_until(all_consumed, "every record consumed by A or B", timeout=30)
            b.stop()
    finally:
        a.stop()

    consumed = Counter(a.messages + b.messages)
    twice = sorted(k for k, n in consumed.items() if n > 1)
    assert not twice, f"{len(twice)} records consumed more than once, e.g. {twice[:10]}"
    assert set(consumed) == everything
    assert not a.failures and not b.failures, (a.failures, b.failures)
    assert any(e.startswith("revoked") for e in a.events), a.events  # A gave partitions to B
    checker = ck.Consumer(consumer_conf(kbroker, group, "checker"))
    try:
        assert committed(checker, unique_topic, parts) == dict(enumerate(producer.produced))
    finally:
        checker.close()
    assert describe_group(kbroker, group).state == "Empty"


def test_regex_subscription_picks_up_new_topic(kbroker: BrokerProcess, unique_topic: str) -> None:
    """librdkafka sends a "^..." subscription as SubscribedTopicRegex: the broker resolves it,
    again when a matching topic is created."""
    group, first, later = unique_topic + "-g", unique_topic + "-a", unique_topic + "-b"
    kbroker.create_topic(first, 2)
    kbroker.create_topic(unique_topic + "x", 1)  # does not match
    produce(kbroker, first, 2, 3, prefix=first + ":")
    consumer = ck.Consumer(consumer_conf(kbroker, group, "rx"))
    try:
        consumer.subscribe([f"^{unique_topic}-.*"])
        got = consume(consumer, 6)
        member = describe_group(kbroker, group).member("rx")
        assert (member.subscribed_topic_names, member.assigned) == ((), {(first, 0), (first, 1)})
        assert member.subscribed_topic_regex is not None and unique_topic in member.subscribed_topic_regex

        kbroker.create_topic(later, 3)
        produce(kbroker, later, 3, 2, prefix=later + ":")
        got += consume(consumer, 6)
        assert sorted(v for _, _, v in got) == sorted(
            [f"{first}:p{p}-{i}" for p in range(2) for i in range(3)]
            + [f"{later}:p{p}-{i}" for p in range(3) for i in range(2)]
        )
    finally:
        consumer.close()


def test_classic_group_upgraded_and_downgraded(kbroker: BrokerProcess, unique_topic: str) -> None:
    """KIP-848 online migration with librdkafka on both protocols: a classic consumer (eager
    "range") consumes alone; a consumer-protocol consumer joins, which makes a consumer group of
    the classic group, and the two share the partitions; it leaves, which makes a classic group of
    it again, and the classic consumer gets every partition back. Every record once."""
    group, parts = unique_topic + "-g", 4
    kbroker.create_topic(unique_topic, parts)
    everything = {(unique_topic, p) for p in range(parts)}
    producer = Producer(kbroker, unique_topic, parts)
    producer.start()
    a = Member(kbroker, group, unique_topic, "a", protocol="classic")
    a.start()
    b: Member | None = None
    try:
        wait_until(lambda: len(a.messages) >= 40, "A's first messages")
        cg = describe_classic_group(kbroker, group)
        assert (cg.state, cg.protocol, [(m.client_id, m.assigned) for m in cg.members]) == (
            "Stable",
            "range",
            [("a", everything)],
        )
        b = Member(kbroker, group, unique_topic, "b")
        b.start()
        g = wait_stable(kbroker, group, 2, "the upgraded group stable with A and B")
        ga, gb = g.member("a"), g.member("b")
        assert (ga.member_id, ga.member_type, gb.member_type) == (cg.members[0].member_id, 0, 1)
        assert (len(ga.assigned), len(gb.assigned), ga.assigned | gb.assigned) == (2, 2, everything)
        mark = len(a.messages)
        wait_until(
            lambda: {(unique_topic, p) for p, _ in a.messages[mark:]} == ga.assigned, "A consuming its half"
        )
        wait_until(lambda: {(unique_topic, p) for p, _ in b.messages} == gb.assigned, "B consuming its half")

        b.stop()  # leaves: the last consumer-protocol member
        wait_until(
            lambda: (
                [(m.member_id, m.assigned) for m in describe_classic_group(kbroker, group).members]
                == [(ga.member_id, everything)]
                and describe_classic_group(kbroker, group).state == "Stable"
            ),
            "the downgraded classic group stable with A alone",
        )
        assert describe_group(kbroker, group).error_code == 69  # GROUP_ID_NOT_FOUND: not a consumer group
        mark = len(a.messages)
        wait_until(lambda: {(unique_topic, p) for p, _ in a.messages[mark:]} == everything, "A consuming all")
    finally:
        produced = producer.stop()
        wait_until(
            lambda: set(a.messages) | set(b.messages if b else []) >= produced, "every record consumed", 30
        )
        a.stop()
    assert b is not None
    consumed = Counter(a.messages + b.messages)
    twice = sorted(k for k, n in consumed.items() if n > 1)
    assert not twice, f"{len(twice)} records consumed more than once, e.g. {twice[:10]}"
    assert set(consumed) == produced
    assert not a.failures and not b.failures, (a.failures, b.failures)
    checker = ck.Consumer(consumer_conf(kbroker, group, "checker", "classic"))
    try:
        assert committed(checker, unique_topic, parts) == dict(enumerate(producer.produced))
    finally:
        checker.close()
