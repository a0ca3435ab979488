"""When appended bytes reach the disk: ``log.flush.policy``.

``always``: a write is acknowledged only after an fsync that covers it. Writers do not fsync
themselves; they wait on :meth:`Flusher.commit`, and one flush round syncs every log that was
written since the previous round, so concurrent writers (many partitions, many group
coordinators) share each fsync: group commit.
``interval``: every ``log.flush.interval.ms`` the same round runs; writers do not wait.
``os``: the page cache decides; fsync happens only on segment roll and clean shutdown.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from typing import TYPE_CHECKING

import structlog

if TYPE_CHECKING:
    from kcoord.storage.log import Log

log = structlog.get_logger(__name__)


class Flusher:
    def __init__(self, policy: str = "always", interval_ms: int = 1000) -> None:
        if policy not in ("always", "interval", "os"):
            raise ValueError(f"unknown log.flush.policy {policy!r}")
        self.policy = policy
        self.interval_ms = interval_ms
        self._dirty: dict[Log, int] = {}  # log -> end offset to cover
        self._waiters: list[asyncio.Future[None]] = []
        self._wakeup: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        # One thread: fsyncs of one round run back to back, off the event loop.
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kcoord-fsync")
        self.rounds = 0  # flush rounds completed (tests and metrics)

    @property
    def waits_for_disk(self) -> bool:
        return self.policy == "always"

    def start(self) -> None:
        self._wakeup = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="kcoord-flusher")

    async def stop(self) -> None:
        """Flush everything still dirty, then stop."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._round()
        self._executor.shutdown(wait=True)

    def mark_dirty(self, target: Log, urgent: bool = False) -> None:
        """Note that ``target`` has bytes to sync; ``urgent`` (a rolled segment) runs a round now."""
        self._dirty[target] = target.log_end_offset
        if (urgent or self.policy == "always") and self._wakeup is not None:
            self._wakeup.set()

    def commit(self, target: Log) -> asyncio.Future[None] | None:
        """A future that completes once ``target``'s current end is durable (None: no wait)."""
        self.mark_dirty(target)
        if self.policy != "always":
            return None
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        return fut

    def sync_now(self) -> None:
        """Synchronous flush of everything dirty (shutdown paths without a loop)."""
        dirty, self._dirty = self._dirty, {}
        for target, end in dirty.items():
            target.sync()
            target.mark_flushed(end)

    async def _run(self) -> None:
        assert self._wakeup is not None
        timeout = self.interval_ms / 1000 if self.policy == "interval" else None
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            self._wakeup.clear()
            try:
                await self._round()
            except Exception:  # a failing disk must not stop the loop silently
                log.exception("flush round failed")

    async def _round(self) -> None:
        dirty, self._dirty = self._dirty, {}
        waiters, self._waiters = self._waiters, []
        if dirty:
            segments = []
            for target in dirty:
                segments.extend(target.take_unsynced_segments())
            for seg in segments:
                seg.pin()
            try:
                await asyncio.get_running_loop().run_in_executor(self._executor, _fsync_all, segments)
            except BaseException as e:
                for fut in waiters:
                    if not fut.done():
                        fut.set_exception(e if isinstance(e, Exception) else RuntimeError("flush cancelled"))
                raise
            finally:
                for seg in segments:
                    seg.unpin()
            for target, end in dirty.items():
                target.mark_flushed(end)
            self.rounds += 1
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)


def _fsync_all(segments: list) -> None:
    for seg in segments:
        seg.fsync()
