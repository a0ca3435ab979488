"""The network layer's listeners: they accept connections (server/connection.py, whose
Processor this server is) and stop gracefully, answering what is in flight.

An SSL or SASL_SSL listener speaks TLS (server/listeners.py); a connection is refused beyond the
connection quotas (server/connection_quotas.py) and closed after ``connections.max.idle.ms``
without traffic.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import structlog

from kcoord.endpoints import Endpoint
from kcoord.server.connection import KafkaConnection, Processor, ShutdownSignal
from kcoord.server.connection_quotas import ConnectionQuotas
from kcoord.server.dispatcher import Dispatcher
from kcoord.server.listeners import ListenerSecurity

log = structlog.get_logger(__name__)


class KafkaServer(Processor):
    """The listeners: each accepts connections of its security protocol into this processor."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        endpoints: list[Endpoint],
        max_frame_bytes: int,
        shutdown: ShutdownSignal | None = None,
        security: dict[str, ListenerSecurity] | None = None,
        quotas: ConnectionQuotas | None = None,
        idle_ms: int = 0,
    ) -> None:
        super().__init__(
            dispatcher, [ep.name for ep in endpoints], max_frame_bytes, shutdown, security, quotas
        )
        self.idle_ms = idle_ms
        self._idle_task: asyncio.Task[None] | None = None
        self.endpoints = endpoints
        self.bound: dict[str, tuple[str, int]] = {}
        self._servers: list[asyncio.Server] = []

    async def start(self) -> None:
        loop = self.loop = asyncio.get_running_loop()
        for ep in self.endpoints:
            host = ep.host or "0.0.0.0"
            security = self.security.get(ep.name)
            srv = await loop.create_server(
                lambda name=ep.name: KafkaConnection(self, name),
                host,
                ep.port,
                reuse_address=True,
                ssl=security.ssl_context if security is not None else None,
            )
            self._servers.append(srv)
            # (uvloop's ``sockets`` is a list where asyncio's stubs say tuple.)
            sock = cast(Any, srv).sockets[0].getsockname()
            self.bound[ep.name] = (host, sock[1])
            protocol = security.protocol if security is not None else "PLAINTEXT"
            log.info("listening", listener=ep.name, host=host, port=sock[1], security_protocol=protocol)
        if self.idle_ms > 0:
            self._idle_task = loop.create_task(self._close_idle(), name="kcoord-idle-connections")

    async def _close_idle(self) -> None:
        """connections.max.idle.ms, as Kafka's Selector: close what sent and received nothing."""
        limit = self.idle_ms / 1000
        while True:
            await asyncio.sleep(max(limit / 10, 0.05))
            cutoff = time.monotonic() - limit
            for conn in [c for c in self.connections if c.last_active < cutoff and not c._queue]:
                conn._abort(f"idle for more than {self.idle_ms} ms (connections.max.idle.ms)")

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting, let in-flight requests finish and their responses go out."""
        self.shutdown.trigger()
        if self._idle_task is not None:
            self._idle_task.cancel()
        for srv in self._servers:
            srv.close()
        for conn in list(self.connections):
            conn.stop_reading()
        drains = [conn.drain() for conn in list(self.connections)]
        if drains:
            await asyncio.wait_for(asyncio.gather(*drains, return_exceptions=True), grace_s)
        await asyncio.sleep(0)  # let completion callbacks write their responses
        for conn in list(self.connections):
            conn.close()
        for srv in self._servers:
            await srv.wait_closed()
