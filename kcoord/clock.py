"""Injected time. State machines read a :class:`Clock`; tests drive a :class:`ManualClock`."""

from __future__ import annotations

import time
from typing import Final, Protocol

# Final: compiled, ``time.time_ns`` is a lookup on the module object at every call.
_time_ns: Final = time.time_ns


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (what Kafka stores in records)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return _time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("time does not go backwards")
        self._now += ms
