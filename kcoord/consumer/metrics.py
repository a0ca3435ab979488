"""group-coordinator-metrics of KIP-848 consumer groups, under Kafka's names and tags
(GroupCoordinatorMetrics): ``group-count{protocol=consumer}``, ``consumer-group-count{state=...}``
with Kafka's state names, and the ``consumer-group-rebalance`` meter (rate and count), which Kafka
records each time a heartbeat bumps a group epoch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kcoord.consumer.group import ConsumerGroup, ConsumerGroupState
from kcoord.metrics import Metrics, tags

REBALANCE = "consumer-group-rebalance"


def register_consumer_group_metrics(
    metrics: Metrics, groups: Callable[[], Iterable[ConsumerGroup]]
) -> Callable[[], None]:
    """Register the gauges over ``groups`` (every consumer group of the broker, when read); return
    what records a rebalance."""
    metrics.gauge("group-count", tags(protocol="consumer"), lambda: sum(1 for _ in groups()))
    for state in ConsumerGroupState:
        metrics.gauge(
            "consumer-group-count",
            tags(state=state.value),
            lambda state=state: sum(1 for g in groups() if g.state is state),  # type: ignore[misc]
        )
    meter = metrics.meter(REBALANCE, ())
    return lambda: meter.record(metrics.clock.now_ms())
