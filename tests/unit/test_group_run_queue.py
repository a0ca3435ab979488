"""The coordinator runtime's run queue: the ready actors drained in one event-loop pass."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import structlog

from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig, build_config
from kcoord.runtime.outcome import Outcome
from kcoord.server.coordinators import group_runtime
from kcoord.storage.flush import Flusher
from tests.unit.grouputil import FakeTopics


class _Actor:
    def __init__(self, name: str, events: list[str], fail: bool = False) -> None:
        self.name, self.events, self.fail = name, events, fail

    def _drain(self) -> None:
        self.events.append(self.name)
        asyncio.get_running_loop().call_soon(self.events.append, f"next pass after {self.name}")
        if self.fail:
            raise RuntimeError("actor bug")


@pytest.mark.pure  # fake actors in the runtime's run queue
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


def test_a_partition_wide_operation_leaves_no_actor_and_no_error(tmp_path: Path) -> None:
    # A transaction marker runs on a whole partition under a PartitionKey, which no state holds
    # and no group's deadline names: the group store is never asked about it (compiled, it would
    # refuse a key that is not a group id), and its actor goes once it has run.
    async def main() -> tuple[list[str], int]:
        config = build_config({}, {"log_dirs": str(tmp_path), "offsets_topic_num_partitions": 1})
        flusher = Flusher("os")
        coordinator = group_runtime(config, flusher, ManualClock(), FakeTopics(), lambda _gid: None)
        coordinator.open(unclean=False)
        ran: list[str] = []

        def op(state: object, now: int) -> Outcome:
            ran.append(type(state).__name__)
            return Outcome()

        with structlog.testing.capture_logs() as logs:
            coordinator.tell_partition(0, op)
            await asyncio.sleep(0.01)
        coordinator.close()
        assert [e for e in logs if e["log_level"] == "error"] == []
        return ran, len(coordinator.actors)

    assert asyncio.run(main()) == (["GroupStore"], 0)
