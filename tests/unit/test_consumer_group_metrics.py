"""Consumer group metrics under Kafka's names, read as an exporter reads them, while real
heartbeats move groups through their states."""

from __future__ import annotations

from pathlib import Path

from kcoord.classic.group import GroupConfig
from kcoord.clock import ManualClock
from kcoord.consumer.metrics import register_consumer_group_metrics
from kcoord.consumer.store import ConsumerGroups
from kcoord.metrics import Metrics
from tests.unit.grouputil import FakeTopics, Harness, new_store
from tests.unit.test_consumer_group import Consumer

STATES = ("Empty", "Assigning", "Reconciling", "Stable", "Dead")


def test_group_counts_by_state_and_rebalances(tmp_path: Path) -> None:
    clock = ManualClock()
    metrics = Metrics(clock)
    topics = FakeTopics()
    topics.put("t1", 4)
    harnesses: list[Harness] = []
    rebalanced = register_consumer_group_metrics(
        metrics, lambda: (g for h in harnesses for g in h.state.kind(ConsumerGroups).groups.values())
    )
    h = Harness(tmp_path, new_state=lambda: new_store(GroupConfig(), topics, consumer_rebalanced=rebalanced))
    harnesses.append(h)

    def counts() -> dict[str, float]:
        return {s: metrics.value("consumer-group-count", state=s) for s in STATES}

    assert metrics.value("group-count", protocol="consumer") == 0
    a, b = Consumer(h, "g1", "a"), Consumer(h, "g1", "b")
    a.join("t1")
    assert counts() == {"Empty": 0, "Assigning": 0, "Reconciling": 0, "Stable": 1, "Dead": 0}
    b.join("t1")  # a still owns b's partitions
    assert counts()["Reconciling"] == 1
    a.beat(), a.beat(), b.beat()
    assert counts()["Stable"] == 1
    Consumer(h, "g2", "c").join("t1")
    Consumer(h, "g2", "c").leave()
    assert metrics.value("group-count", protocol="consumer") == 2
    assert counts() == {"Empty": 1, "Assigning": 0, "Reconciling": 0, "Stable": 1, "Dead": 0}
    # Kafka counts the epoch bumps heartbeats make (three joins), not fencing or leaving.
    assert metrics.value("consumer-group-rebalance-count") == 3
    clock.advance(10_000)
    assert metrics.value("consumer-group-rebalance-rate") > 0
    # Replaying the log at start-up is no rebalance.
    h.restart()
    assert metrics.value("consumer-group-rebalance-count") == 3
