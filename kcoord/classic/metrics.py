"""group-coordinator-metrics of classic groups, under Kafka's names and tags
(GroupCoordinatorMetrics): ``group-count{protocol=classic}``, ``classic-group-count{state=...}``
with Kafka's state names, and the ``group-completed-rebalance`` meter (rate and count), which Kafka
records when the leader's SyncGroup completes a rebalance (CompletingRebalance -> Stable).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kcoord.classic.group import ClassicGroup, GroupState
from kcoord.metrics import Meter, Metrics, tags

COMPLETED_REBALANCE = "group-completed-rebalance"


def register_classic_group_metrics(metrics: Metrics, groups: Callable[[], Iterable[ClassicGroup]]) -> Meter:
    """Register the gauges over ``groups`` (every classic group of the broker, when read); return
    the completed-rebalance meter."""
    metrics.gauge(
        "group-count",
        tags(protocol="classic"),
        lambda: sum(1 for g in groups() if not g.is_in(GroupState.DEAD)),
    )
    for state in GroupState:
        metrics.gauge(
            "classic-group-count",
            tags(state=state.value),
            lambda state=state: sum(1 for g in groups() if g.state is state),  # type: ignore[misc]
        )
    return metrics.meter(COMPLETED_REBALANCE, ())
