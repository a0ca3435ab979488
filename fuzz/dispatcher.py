"""Fuzz target: request frames through the broker's dispatcher (header, version gate, every
request decoder it reaches, the handlers), in process, on a started broker with a topic, a group
and a transactional id. A frame is answered, or refused with CloseConnection (its connection
closed); a handler failing (the dispatcher logs it and answers UNKNOWN_SERVER_ERROR) or any other
exception is a finding.

    python fuzz/dispatcher.py -runs=1000000 fuzz/corpus/dispatcher

The corpus (fuzz/make_corpus.py) holds a valid request of every served API and version.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import atheris

# The repository's kcoord, whatever is installed (run as python fuzz/<target>.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports(include=["kcoord"], enable_loader_override=False):
    from kcoord.config import BrokerConfig
    from kcoord.protocol.errors import CloseConnection
    from kcoord.security.principal import ANONYMOUS
    from kcoord.server import dispatcher as dispatcher_module
    from kcoord.server.app import Broker
    from kcoord.server.dispatcher import DeferredAnswer


class HandlerFailed(Exception):
    """What the dispatcher logged as a handler's crash."""


class _Log:
    def exception(self, event: str, **kw: Any) -> None:
        raise HandlerFailed(f"{event} {kw}")

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: None


class _Conn:
    peer = peer_host = "127.0.0.1"
    listener = "PLAINTEXT"
    principal = ANONYMOUS

    def close_after_answer(self, reason: str) -> None:
        pass

    def authenticated(self, *a: Any, **k: Any) -> None:
        pass


dispatcher_module.log = _Log()  # type: ignore[assignment]
loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
broker = Broker(
    BrokerConfig(
        log_dirs=tempfile.mkdtemp(prefix="kcoord-fuzz-dispatch-"),
        listeners="PLAINTEXT://127.0.0.1:0",
        http_listeners="",
        log_flush_policy="os",
        group_initial_rebalance_delay_ms=0,
    )
)
loop.run_until_complete(broker.start())
broker.partitions.create_topic("fuzz", 2, {})
conn = _Conn()


def one(data: bytes) -> None:
    async def run() -> None:
        try:
            result = broker.dispatcher.dispatch(data, conn)
        except CloseConnection:
            return
        if isinstance(result, DeferredAnswer):
            done: list[BaseException | None] = []
            result.then(lambda _v, e: done.append(e))
            for _ in range(3):  # let a coordinator operation run; long polls are left waiting
                await asyncio.sleep(0)
            if done and done[0] is not None and not isinstance(done[0], CloseConnection):
                raise done[0]

    loop.run_until_complete(run())


if __name__ == "__main__":
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()
