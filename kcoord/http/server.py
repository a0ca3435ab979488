"""The operations endpoint (``http.listeners``): ``/metrics``, ``/health`` and ``/api/``.

aiohttp's low-level server (``aiohttp.web.Server``) is an asyncio protocol factory: it runs on the
broker's own event loop (uvloop) beside the Kafka listeners, with no thread and no application
framework. Handlers read state as request handlers do, between operations on the same loop.

- ``/``, ``/groups/<id>``, ``/topics/<name>``, ``/static/``: the web console's HTML pages (see
  :mod:`kcoord.http.console`), answered before the routes below;
- ``/health``: 200 ``{"status": "ready"}`` once the logs are replayed and the Kafka listeners
  accept connections, 503 ``{"status": "starting"}`` (or ``"stopping"``) otherwise;
- ``/metrics``: Prometheus text (see :mod:`kcoord.http.prometheus`);
- ``/api/groups``, ``/api/groups/<id>``, ``/api/topics``: JSON (see :mod:`kcoord.http.views`);
- ``/api/groups/<id>/history``, ``/offsets-at``, ``POST .../reset-offsets``: offset history
  (see :mod:`kcoord.http.history`);
- anything else: 404; a method other than GET or HEAD: 405.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import structlog
from aiohttp import web
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from kcoord.apis.services import Services
from kcoord.endpoints import Endpoint
from kcoord.http import history, prometheus, views
from kcoord.http.console import Console

log = structlog.get_logger(__name__)


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, indent=2).encode() + b"\n",
        status=status,
        headers={"Content-Type": "application/json"},
    )


class OpsHttp:
    """Routes requests to the handlers; ``status`` says whether the broker is ready."""

    def __init__(self, services: Services, status: Callable[[], str]) -> None:
        self.services = services
        self.status = status
        self.registry = prometheus.registry(services)
        self.console = Console(services, status)

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        parts = request.raw_path.partition("?")[0].rstrip("/").split("/")
        if len(parts) == 5 and parts[1:3] == ["api", "groups"]:  # /api/groups/<group>/<action>
            body = await request.read() if request.method == "POST" else b""
            answer = await history.handle(
                self.services, request.method, unquote(parts[3]), parts[4], request.query, body
            )
            if answer is not None:
                return _json(answer[1], answer[0])
        if request.method not in ("GET", "HEAD"):
            return _json({"error": "method not allowed"}, 405)
        path = request.path.rstrip("/") or "/"
        if path == "/health":
            return self.health()
        if path == "/metrics":
            return self.metrics()
        if path == "/api/groups":
            return _json({"groups": [g.summary() for g in views.groups(self.services)]})
        if path.startswith("/api/groups/"):
            group = views.group(self.services, unquote(path.removeprefix("/api/groups/")))
            if group is None:
                return _json({"error": "no such group"}, 404)
            return _json(group.detail())
        if path == "/api/topics":
            return _json({"topics": views.topics(self.services)})
        return _json(
            {"error": "not found", "paths": ["/health", "/metrics", "/api/groups", "/api/topics"]}, 404
        )

    async def serve(self, request: web.BaseRequest) -> web.StreamResponse:
        """The console's pages, else the JSON API, /health and /metrics (:meth:`handle`)."""
        page = await self.console.handle(request)
        return page if page is not None else await self.handle(request)

    def health(self) -> web.Response:
        status = self.status()
        return _json({"status": status}, 200 if status == "ready" else 503)

    def metrics(self) -> web.Response:
        return web.Response(
            body=generate_latest(self.registry), headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4}
        )


class OpsServer:
    """Binds the ``http.listeners`` addresses on the running loop."""

    def __init__(self, app: OpsHttp, endpoints: list[Endpoint]) -> None:
        self.app = app
        self.endpoints = endpoints
        self.bound: list[tuple[str, int]] = []
        self._server: web.Server | None = None
        self._sockets: list[asyncio.Server] = []

    async def start(self) -> None:
        if not self.endpoints:
            return
        loop = asyncio.get_running_loop()
        self._server = web.Server(self.app.serve)
        for ep in self.endpoints:
            host = ep.host or "0.0.0.0"
            srv = await loop.create_server(self._server, host, ep.port, reuse_address=True)
            self._sockets.append(srv)
            port = srv.sockets[0].getsockname()[1]
            self.bound.append((host, port))
            log.info("listening", listener="HTTP", host=host, port=port)

    async def stop(self) -> None:
        for srv in self._sockets:
            srv.close()
        if self._server is not None:
            await self._server.shutdown(2.0)
        for srv in self._sockets:
            await srv.wait_closed()
        self._sockets.clear()
