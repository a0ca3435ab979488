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
        wake = _Wake([*sources, self._shutdown], then, self._loop)
        for source in wake.sources:
            source.add_waiter(wake)
        wake.timer = self._loop.call_at(self.deadline, wake)
        if self._shutdown.stopping:
            wake()


class _Wake:
    """The waiter a long poll hands its sources and its timer. An object that lets go of them
    once it fires, not a closure: a closure that names itself (to remove itself from the sources)
    holds its own cell, and the timer that holds it was held back by it, cycles that left every
    long poll, and the request it answers, to the cyclic GC."""

    __slots__ = ("loop", "sources", "then", "timer")

    def __init__(
        self, sources: list[WakeSource], then: Callable[[], None], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.sources = sources
        self.then: Callable[[], None] | None = then
        self.loop = loop
        self.timer: asyncio.TimerHandle | None = None

    def __call__(self) -> None:
        then = self.then
        if then is None:  # fired already
            return
        self.then = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        sources, self.sources = self.sources, []
        for source in sources:
            source.remove_waiter(self)
        self.loop.call_soon(then)
