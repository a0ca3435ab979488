"""Kafka's ConnectionQuotas: how many connections the broker, and each client address, may hold.

- ``max.connections.per.ip`` (and ``max.connections.per.ip.overrides``, ``host:count`` pairs by
  IP address or host name, resolved once at start): a connection beyond its address's limit is
  closed as soon as it is accepted, as Kafka's acceptor does ("Too many connections from ...").
- ``max.connections`` (broker-wide): Kafka's acceptor stops accepting until a connection closes,
  so the excess waits in the listen backlog. An asyncio server hands every connection over
  already accepted, so kcoord closes the excess at once instead; a client sees a closed
  connection and retries after its reconnect backoff, as it would after Kafka's backlog overflow.
- ``connections.max.idle.ms``: a connection that sent and received nothing for that long is
  closed, as Kafka's Selector closes idle channels; checked every tenth of the limit. A client
  that trickles one byte at a time is active by this measure, as in Kafka: it holds its own
  connection and nothing more (its partial frame stays in its own buffer, at most
  ``socket.request.max.bytes``, or ``sasl.server.max.receive.size`` before authentication).
"""

from __future__ import annotations

import socket
from collections import Counter

import structlog

log = structlog.get_logger(__name__)


class ConnectionQuotas:
    def __init__(self, max_connections: int, max_per_ip: int, overrides: dict[str, int]) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides: dict[str, int] = {}
        for host, count in overrides.items():
            self.overrides[_address(host)] = count
        self.counts: Counter[str] = Counter()
        self.total = 0
        self.refused: Counter[str] = Counter()  # reason -> connections closed at accept

    def limit_for(self, address: str) -> int:
        return self.overrides.get(address, self.max_per_ip)

    def accept(self, address: str) -> str | None:
        """Count a new connection from ``address``; why it must be closed, or None to keep it."""
        if self.counts[address] >= self.limit_for(address):
            self.refused["per_ip"] += 1
            return f"Too many connections from {address} (maximum = {self.limit_for(address)})"
        if self.total >= self.max_connections:
            self.refused["broker"] += 1
            return f"Too many connections (max.connections = {self.max_connections})"
        self.counts[address] += 1
        self.total += 1
        return None

    def release(self, address: str) -> None:
        if self.counts[address] <= 0:
            return
        self.counts[address] -= 1
        if not self.counts[address]:
            del self.counts[address]
        self.total -= 1


def _address(host: str) -> str:
    """An override's host as the address connections come from (Kafka resolves names once)."""
    try:
        return socket.gethostbyname(host)
    except OSError:
        log.warning("max.connections.per.ip.overrides: host does not resolve", host=host)
        return host
