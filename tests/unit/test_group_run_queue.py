"""The coordinator runtime's run queue: the ready actors drained in one event-loop pass."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig
from kcoord.server.coordinators import group_runtime
from kcoord.storage.flush import Flusher


class _Actor:
    def __init__(self, name: str, events: list[str], fail: bool = False) -> None:
        self.name, self.events, self.fail = name, events, fail

    def _drain(self) -> None:
        self.events.append(self.name)
        asyncio.get_running_loop().call_soon(self.events.append, f"next pass after {self.name}")
        if self.fail:
            raise RuntimeError("actor bug")


def test_after_run_hooks_run_on_the_pass_that_ran_the_actors(tmp_path: Path) -> None:
    # The server writes the answers the actors completed from this hook: it must run after every
    # actor of the pass (a failing one included), before the event loop runs anything else, and
    # a failing hook must not keep the others from running.
    async def main() -> list[str]:
        config, clock = BrokerConfig(), ManualClock()
        flusher = Flusher("always", directory=tmp_path)
        coordinator = group_runtime(config, flusher, clock, lambda _name: None, lambda _gid: None)
        events: list[str] = []

        def failing_hook() -> None:
            events.append("failing hook")
            raise RuntimeError("hook bug")

        coordinator.after_run += [failing_hook, lambda: events.append("write pass")]
        for actor in (_Actor("a", events, fail=True), _Actor("b", events)):
            coordinator.schedule(actor)  # type: ignore[arg-type]  # only _drain is called
        await asyncio.sleep(0.01)
        return events

    assert asyncio.run(main()) == [
        "a",
        "b",
        "failing hook",
        "write pass",
        "next pass after a",
        "next pass after b",
    ]
