"""Deadlines by key with the earliest at hand, for a state's ``next_deadline``: the runtime asks
for it after every operation, and a group of a thousand members heartbeating in turn would
otherwise scan them all each time (Kafka keeps one timer per member instead).

A heap sits beside the dict; its entries are checked against the dict when read, so setting a
key again or removing it costs nothing until the stale entry reaches the top. Only item
assignment, ``setdefault``, ``pop`` and ``del`` may change it (``dict.update`` would bypass the
heap).
"""

from __future__ import annotations

import heapq


class Deadlines(dict[str, int]):
    __slots__ = ("_heap",)

    def __init__(self) -> None:
        super().__init__()
        self._heap: list[tuple[int, str]] = []

    def __setitem__(self, key: str, deadline: int) -> None:
        super().__setitem__(key, deadline)
        heap = self._heap
        heapq.heappush(heap, (deadline, key))
        if len(heap) > 4 * len(self) + 64:  # many keys set again and again: drop the stale entries
            self._heap = [(d, k) for k, d in self.items()]
            heapq.heapify(self._heap)

    def setdefault(self, key: str, deadline: int) -> int:
        if key in self:
            return self[key]
        self[key] = deadline
        return deadline

    def earliest(self) -> int | None:
        heap = self._heap
        get = self.get
        while heap:
            deadline, key = heap[0]
            if get(key) == deadline:
                return deadline
            heapq.heappop(heap)
        return None
