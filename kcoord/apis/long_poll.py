"""The waiting of a request that has too little to answer yet (Fetch and ShareFetch below MinBytes).

A long poll answers as soon as it can say enough, and otherwise waits until something it reads
from may have changed (a partition's high watermark moved, a share group's records became
available again), its MaxWaitMs is up, or the broker starts to stop; then it looks again. No
Task per request: waiting is a callback on each source and one event-loop timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

Waiter = Callable[[], None]


class WakeSource(Protocol):
    """Something that calls its waiters once when it changes (each waiter at most once)."""

    def add_waiter(self, waiter: Waiter) -> None: ...

    def remove_waiter(self, waiter: Waiter) -> None: ...


class Shutdown(WakeSource, Protocol):
    """Wakes its waiters when the broker starts to stop."""

    @property
    def stopping(self) -> bool: ...


class LongPoll:
    def __init__(self, max_wait_ms: int, shutdown: Shutdown) -> None:
        self._loop = asyncio.get_running_loop()
        self.deadline = self._loop.time() + max(max_wait_ms, 0) / 1000
        self._shutdown = shutdown

    @property
    def over(self) -> bool:
        """The time is up, or the broker is stopping: answer with what there is."""
        return self._shutdown.stopping or self._loop.time() >= self.deadline

    def wait(self, sources: Sequence[WakeSource], then: Callable[[], None]) -> None:
        """Call ``then`` once, on the event-loop pass after the first source wakes this poll, its
        deadline passes, or the broker starts to stop (never on the waking source's stack)."""
        every = [*sources, self._shutdown]
        fired = False

        def wake() -> None:
            nonlocal fired
            if fired:
                return
            fired = True
            timer.cancel()
            for source in every:
                source.remove_waiter(wake)
            self._loop.call_soon(then)

        for source in every:
            source.add_waiter(wake)
        timer = self._loop.call_at(self.deadline, wake)
        if self._shutdown.stopping:
            wake()
