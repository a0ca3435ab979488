"""Kafka's socket-server-metrics: what the network layer counts per listener (connections opened,
closed, open; authentications that succeeded or failed), and the connections the quotas refused."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from kcoord.metrics import Metrics, tags


@dataclass(slots=True)
class ListenerStats:
    """What Kafka's socket-server-metrics count per listener."""

    created: int = 0
    closed: int = 0
    authenticated: int = 0
    failed_authentication: int = 0

    def connection_count(self) -> int:
        return self.created - self.closed


def register_socket_server_metrics(
    metrics: Metrics, listeners: Mapping[str, ListenerStats], refused: Counter[str]
) -> None:
    """Kafka's socket-server-metrics, per listener (one network thread: ``networkProcessor`` 0),
    plus the connections the quotas closed at accept, by reason (kcoord's own: Kafka's acceptor
    waits for a free slot where kcoord closes the excess)."""
    for name, stats in listeners.items():
        t = tags(listener=name, networkProcessor="0")
        metrics.socket_server_gauge("connection-count", t, stats.connection_count)
        metrics.socket_server_gauge("connection-creation-total", t, lambda s=stats: s.created)
        metrics.socket_server_gauge("connection-close-total", t, lambda s=stats: s.closed)
        metrics.socket_server_gauge("successful-authentication-total", t, lambda s=stats: s.authenticated)
        metrics.socket_server_gauge("failed-authentication-total", t, lambda s=stats: s.failed_authentication)
    for reason in ("per_ip", "broker"):
        metrics.socket_server_gauge(
            "connection-refused-total", tags(reason=reason), lambda r=reason: refused[r]
        )
