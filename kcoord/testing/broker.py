"""A kcoord broker in a background thread with its own event loop, for tests in any program.

The broker runs exactly as ``kcoord serve`` runs it (the same :class:`~kcoord.server.app.Broker`),
on a uvloop loop of its own thread, so that synchronous test code and clients (kafka-python,
confluent-kafka) can use it from the main thread. Only its addresses cross threads.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from kcoord.config import BrokerConfig, build_config, field_name
from kcoord.server.app import Broker

START_TIMEOUT_S = 30.0


class BrokerThread:
    """Start with :meth:`start`, stop with :meth:`stop`; ``bootstrap`` is "host:port"."""

    def __init__(self, data_dir: Path, settings: dict[str, Any] | None = None, http: bool = False) -> None:
        values: dict[str, Any] = {
            "listeners": "PLAINTEXT://127.0.0.1:0",  # the kernel picks a free port
            "log_dirs": str(data_dir),
            "http_listeners": "http://127.0.0.1:0" if http else "",
        }
        values.update({field_name(k): v for k, v in (settings or {}).items()})
        self.config: BrokerConfig = build_config({}, values)
        self.host = "127.0.0.1"
        self.port = 0
        self.http_url: str | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> BrokerThread:
        self._thread = threading.Thread(target=self._run, name="kcoord-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise RuntimeError(f"kcoord did not start in {START_TIMEOUT_S} s")
        if self._error is not None:
            raise RuntimeError("kcoord failed to start") from self._error
        return self

    def stop(self, timeout: float = 30.0) -> None:
        if self._loop is not None and self._stop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        import uvloop

        loop = self._loop = uvloop.new_event_loop()
        try:
            loop.run_until_complete(self._serve())
        except BaseException as e:  # reported to the starting thread, or lost at shutdown
            self._error = e
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        broker = Broker(self.config)
        await broker.start()
        try:
            self.host, self.port = next(iter(broker.server.bound.values()))
            if broker.ops is not None and broker.ops.bound:
                host, port = broker.ops.bound[0]
                self.http_url = f"http://{host}:{port}"
            self._ready.set()
            stop_waiting = asyncio.ensure_future(self._stop.wait())
            fatal = asyncio.ensure_future(broker.fatal.wait())
            await asyncio.wait([stop_waiting, fatal], return_when=asyncio.FIRST_COMPLETED)
            stop_waiting.cancel()
            fatal.cancel()
        finally:
            await broker.stop()
