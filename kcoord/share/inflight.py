"""The in-flight records of a share-partition: offsets in [SPSO, SPEO) held as runs of identical
state (state, delivery count, owning member, lock deadline), split on demand and merged back,
so that 500 records acquired together are one object. The KIP-932 rules that move records
between states live in partition.py; this is only the storage they act on.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from enum import IntEnum
from typing import NamedTuple


class RecordState(IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


TERMINAL = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
TRIVIAL = (RecordState.AVAILABLE, RecordState.ARCHIVED)  # with delivery count 0: "not delivered"


class InFlightBatch(NamedTuple):
    """A run of in-flight offsets in the same state (for inspection and tests)."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int
    member_id: str | None
    deadline: int | None


class Run:
    __slots__ = ("dc", "deadline", "first", "last", "member", "state")

    def __init__(
        self, first: int, last: int, state: RecordState, dc: int, member: str | None, deadline: int | None
    ) -> None:
        self.first = first
        self.last = last
        self.state = state
        self.dc = dc
        self.member = member
        self.deadline = deadline

    def same(self, o: Run) -> bool:
        return (
            self.state == o.state
            and self.dc == o.dc
            and self.member == o.member
            and self.deadline == o.deadline
        )

    def durable(self) -> tuple[int, int]:
        if self.state == RecordState.ACQUIRED:
            return RecordState.AVAILABLE, self.dc - 1
        return self.state, self.dc

    def is_gap(self) -> bool:
        return self.state == RecordState.ARCHIVED and self.dc == 0

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Run({self.first}-{self.last} {self.state.name} dc={self.dc} {self.member} {self.deadline})"


def _first(run: Run) -> int:
    return run.first


class InFlightRecords:
    """[SPSO, SPEO) as a list of runs, and the lock deadlines of the Acquired ones."""

    def __init__(self, start_offset: int) -> None:
        self.start_offset = start_offset  # SPSO
        self.end_offset = start_offset  # SPEO
        self._runs: list[Run] = []
        self._locks: dict[int, int] = {}  # lock deadline -> number of offsets acquired until then

    # --- the runs -----------------------------------------------------------------------------
    def _find(self, offset: int) -> int:
        """Index of the run holding ``offset`` (SPSO <= offset < SPEO)."""
        return bisect.bisect_right(self._runs, offset, key=_first) - 1

    def _split(self, offset: int) -> int:
        """Make ``offset`` the first offset of a run; returns that run's index (len at SPEO)."""
        if offset >= self.end_offset:
            return len(self._runs)
        i = self._find(offset)
        r = self._runs[i]
        if r.first == offset:
            return i
        tail = Run(offset, r.last, r.state, r.dc, r.member, r.deadline)
        r.last = offset - 1
        self._runs.insert(i + 1, tail)
        return i + 1

    def _lock(self, run: Run, sign: int) -> None:
        if run.state == RecordState.ACQUIRED and run.deadline is not None:
            n = self._locks.get(run.deadline, 0) + sign * (run.last - run.first + 1)
            if n:
                self._locks[run.deadline] = n
            else:
                del self._locks[run.deadline]

    def _update(
        self,
        first: int,
        last: int,
        change: Callable[[Run], tuple[RecordState, int, str | None, int | None]],
    ) -> None:
        """Set each run over [first, last] (inside [SPSO, SPEO)) to ``change(run)``."""
        i = self._split(first)
        j = self._split(last + 1)
        for r in self._runs[i:j]:
            state, dc, member, deadline = change(r)
            self._lock(r, -1)
            r.state, r.dc, r.member, r.deadline = state, dc, member, deadline
            self._lock(r, +1)
        self._coalesce(i - 1, j + 1)

    def _coalesce(self, lo: int, hi: int) -> None:
        runs = self._runs
        k = max(lo, 0) + 1
        hi = min(hi, len(runs) - 1)
        while k <= hi:
            if runs[k - 1].same(runs[k]):
                runs[k - 1].last = runs[k].last
                del runs[k]
                hi -= 1
            else:
                k += 1

    def _extend(
        self, last: int, state: RecordState, dc: int, member: str | None, deadline: int | None
    ) -> None:
        """Append [SPEO, last] in the given state; SPEO becomes last + 1."""
        run = Run(self.end_offset, last, state, dc, member, deadline)
        self._lock(run, +1)
        self._runs.append(run)
        self.end_offset = last + 1
        self._coalesce(len(self._runs) - 2, len(self._runs))

    def _advance_start(self) -> None:
        new_start = self.start_offset
        for r in self._runs:
            if r.state not in TERMINAL:
                break
            new_start = r.last + 1
        self._drop_below(new_start)

    def _drop_below(self, offset: int) -> None:
        if offset <= self.start_offset:
            return
        i = self._split(offset)
        for r in self._runs[:i]:
            self._lock(r, -1)
        del self._runs[:i]
        self.start_offset = offset
        self.end_offset = max(self.end_offset, offset)

    def _clear(self) -> None:
        self._runs = []
        self._locks = {}
