"""Producer id allocation for idempotent producers (InitProducerId without transactions).

Ids must never be reused, also across restarts: they are handed out from blocks whose upper
bound is persisted before any id of the block is used (as Kafka's ProducerIdManager reserves
blocks from the controller).
"""

from __future__ import annotations

from pathlib import Path

from kcoord.storage.atomic import atomic_write

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "producer-ids"
        self._next = 0
        self._block_end = 0

    def open(self) -> None:
        try:
            reserved = int(self.path.read_text().strip())
        except FileNotFoundError:
            reserved = 0
        # Everything below the persisted bound may have been handed out before a crash.
        self._next = self._block_end = reserved

    def next_id(self) -> int:
        if self._next >= self._block_end:
            end = self._next + BLOCK_SIZE
            # The bound is raised only once it is on disk: raised before a write that failed, the
            # next calls handed out ids a restart would hand out again.
            atomic_write(self.path, f"{end}\n".encode())
            self._block_end = end
        pid = self._next
        self._next += 1
        return pid
