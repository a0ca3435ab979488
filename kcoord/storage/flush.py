"""When appended bytes reach the disk: ``log.flush.policy``.

``always``: a write is acknowledged only after an fsync that covers it. Writers do not fsync
themselves; they wait on :meth:`Flusher.commit`, and one flush round syncs every log that was
written since the previous round, so concurrent writers (many partitions, many group
coordinators) share each fsync: group commit.
``interval``: every ``log.flush.interval.ms`` the same round runs; writers do not wait.
``os``: the page cache decides; fsync happens only on segment roll and clean shutdown.

Under ``interval`` and ``os`` a topic's ``flush.messages`` and ``flush.ms`` add Kafka's per-log
limits (the log asks for them, see ``Log.append``): a round runs as soon as that many appended
messages are unsynced, and at the latest that long after an append. Under ``always`` nothing
stays unsynced past its round, which is stricter than any such limit.

A round with several files to sync (commits of many groups touch many coordinator partitions)
makes one ``syncfs(2)`` on the log directory's filesystem instead of one fdatasync per file: the
kernel writes back and waits for every dirty file of that filesystem and commits its journal
once, and since Linux 5.8 reports writeback errors as fsync does. Files on other filesystems,
and rounds with few files, are fdatasynced one by one.

Two rounds may be syncing at once: writes that arrive while a round syncs start the next one
at once instead of waiting a whole sync for it to end, and the filesystem's journal commits
concurrent syncs together (two threads each syncing take about half the time per sync that one
does, measured on ext4 here). Rounds are settled in order: a round's writers hear of success only
once the round before it has settled too, and the round after a failed one fails with it: it
may have overlapped the failed one, and its sync may have returned success after the other's
writeback error had already been reported. Then the broker halts (``log_dir_failure``, as Kafka
does when its only log directory fails), once the failed round's writers have heard of it: the
kernel reports a writeback error once, so a later round's sync would succeed without the lost
bytes and move the high watermark past them.

A round's syncs run on a thread of their own when the event loop has something to do meanwhile:
a C thread (``sync_thread.py``) that takes the round as a list of operations on descriptors and
never takes the GIL, signalling an eventfd the loop watches when it is done. A Python worker
thread did this before (and still does where the C module is not built): waiting for the GIL the
serving loop holds, it cost acks=all produce at 8 x 16 a quarter of its throughput (the C thread
measured 1.29-1.35x the MB/s).
A round a writer waits for syncs on the loop's thread instead when either nothing else is to be
served (``idle``: the server owes at most one answer, the one waiting for this round) or the round
is small: at most ``INLINE_SYNC_MAX_BYTES`` appended since the previous round, in fewer files than
a syncfs takes (a syncfs waits for every dirty file of the filesystem, other programs' too, so
its length is not the round's to bound), on a disk whose recent syncs took less than
``INLINE_SYNC_MAX_NS``. Even through the C thread, a small round's hop costs more than its sync
keeps the loop from doing: the rounds get smaller and more numerous (more syncs, more per-round
work), and the loop is busy serving anyway. Sending them to the C thread measured 0.87-0.99x the
commits per second at 8 x 16 and 64 x 16 and 0.86-0.91x at 8 x 1; to the Python thread, 0.6-0.9x.
An inline round runs from its appends to its writers' callbacks in one call on the loop's next
pass after the write that asked for it, with no task, future or event to wake. A round nobody
waits for (acks=1 produce, ``os`` and ``interval`` rounds) always goes to the thread: inline, it
would hold up the next request for a sync no answer needs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

import structlog

from kcoord.storage import log_dir_failure
from kcoord.storage.sync_thread import (
    SYNCFS,
    NativeSyncThread,
    SyncOp,
    SyncThread,
    run_ops,
    sync_error,
    syncfs,
)

log = structlog.get_logger(__name__)

DurableCallback = Callable[[BaseException | None], None]

_perf_counter_ns: Final = time.perf_counter_ns  # compiled: no module attribute read per sync


class Segment(Protocol):
    """A file the flusher syncs (a log segment)."""

    fd: int  # -1 once closed
    device: int  # st_dev: one syncfs covers every file of a filesystem

    def sync_ops(self, ops: list[SyncOp]) -> None:
        """Add the operations that make the file's written bytes durable."""
        ...

    def drop_ops(self, ops: list[SyncOp]) -> None:
        """Add, after the syncs, a hint that the page cache may let go of old synced bytes."""
        ...

    def pin(self) -> None:
        """Keep the file open while the flusher syncs it (a roll or delete closes it after)."""
        ...

    def unpin(self) -> None: ...


class Log(Protocol):
    """What the flusher needs of a log: where it ends, and which of its files hold unsynced bytes."""

    @property
    def log_end_offset(self) -> int: ...

    def take_unsynced_segments(self) -> Sequence[Segment]: ...

    def mark_flushed(self, end_offset: int) -> None: ...


class Flusher:
    def __init__(
        self, policy: str = "always", interval_ms: int = 1000, directory: Path | None = None
    ) -> None:
        if policy not in ("always", "interval", "os"):
            raise ValueError(f"unknown log.flush.policy {policy!r}")
        self.policy = policy
        self.interval_ms = interval_ms
        self._dirty: dict[Log, int] = {}  # log -> end offset to cover
        # Bytes the logs appended since the last round began (Log.append counts them): what the
        # next round's sync writes back, which decides where it runs (the module's docstring).
        self.unsynced_bytes = 0
        self.inline_sync_max_bytes = INLINE_SYNC_MAX_BYTES  # an attribute: tests lower it
        self._callbacks: list[DurableCallback] = []
        self._appenders: list[Callable[[], None]] = []
        # Run after each round's writers heard of it, on the same pass (the server writes the
        # answers they released at once instead of a loop pass later).
        self.after_round: list[Callable[[], None]] = []
        # Whether the broker has nothing else to serve (the module's docstring says what for).
        self.idle: Callable[[], bool] = _never
        # How a round makes its segments durable: an attribute, so that tests can wrap or fail it
        # (a compiled class's methods cannot be replaced).
        self._sync: Callable[[list[Segment]], None] = self._sync_segments
        self._loop: asyncio.AbstractEventLoop | None = None  # while the flusher runs
        self._round_due = False  # a round is scheduled (see _request_round)
        self._interval_timer: asyncio.TimerHandle | None = None
        self._rounds_in_flight: set[asyncio.Task[None]] = set()
        # The previous round's outcome, its own sync error or None once it has settled; None: the
        # previous round synced on the loop and succeeded (or none ran), so nothing to inherit.
        self._previous: asyncio.Future[BaseException | None] | None = None
        # How long recent syncs took (ns, a moving average over about eight): a disk slower than
        # INLINE_SYNC_MAX_NS has no round synced on the loop's thread but idle ones.
        self.sync_ns = 0
        # A C thread per round in flight (sync_thread.py): a round's syncs run back to back, off
        # the event loop and without the GIL. Started with the flusher; those not syncing a round:
        self._sync_threads: list[NativeSyncThread] = []
        self._idle_sync_threads: list[NativeSyncThread] = []
        # Rounds on a C thread, by its eventfd: what they wait for, and the segments they pinned.
        self._native_rounds: dict[int, tuple[asyncio.Future[tuple[int, int, int]], list[Segment]]] = {}
        self._started_on: asyncio.AbstractEventLoop | None = None  # the loop watching their eventfds
        # Python threads instead where the C module is missing, or a test replaces _sync.
        self._executor = concurrent.futures.ThreadPoolExecutor(
            ROUNDS_IN_FLIGHT, thread_name_prefix="kcoord-fsync"
        )
        self._fs = _FilesystemSync.open(directory) if directory is not None else None
        # Logs with a flush.ms deadline pending -> the timer that runs a round for them.
        self._deadlines: dict[Log, asyncio.TimerHandle] = {}

    @property
    def waits_for_disk(self) -> bool:
        return self.policy == "always"

    def start(self) -> None:
        # The loop is looked up once: asyncio's get_running_loop() makes a getpid(2) syscall per
        # call, and a lone client's every request used to make seven.
        self._loop = asyncio.get_running_loop()
        if self._started_on is not self._loop:
            self._close_sync_threads()  # started on another loop, which watched their eventfds
        if SyncThread is not None and not self._sync_threads:
            self._started_on = self._loop
            for _ in range(ROUNDS_IN_FLIGHT):
                thread = SyncThread()
                self._sync_threads.append(thread)
                self._idle_sync_threads.append(thread)
                self._loop.add_reader(thread.fileno(), self._native_round_ended, thread)
        if self.policy == "interval":
            self._interval_timer = self._loop.call_later(self.interval_ms / 1000, self._interval_due)
        if self._appenders or self._dirty or self._callbacks:
            self._request_round()

    async def stop(self) -> None:
        """Flush everything still dirty, then stop."""
        for timer in self._deadlines.values():
            timer.cancel()  # the last round below syncs those logs anyway
        self._deadlines.clear()
        if self._interval_timer is not None:
            self._interval_timer.cancel()
            self._interval_timer = None
        self._loop = None  # no round starts on its own from now on
        while self._rounds_in_flight:
            await asyncio.wait(self._rounds_in_flight)
        self._previous = None  # the last round overlaps none: an earlier failure is not its own
        try:
            await self._round()
        finally:
            self._executor.shutdown(wait=True)
            self.close()

    def mark_dirty(self, target: Log, urgent: bool = False) -> None:
        """Note that ``target`` has bytes to sync; ``urgent`` (a rolled segment) runs a round now."""
        self._dirty[target] = target.log_end_offset
        if urgent or self.policy == "always":
            self._request_round()

    def flush_within(self, target: Log, ms: int) -> None:
        """Have a round sync ``target`` at the latest ``ms`` from now (a topic's flush.ms): one
        timer per log, armed by the first unsynced append after the previous deadline, so no
        appended byte waits longer than ``ms`` for its fsync. Only while the flusher runs (as
        urgent rounds): a stopped flusher syncs everything when it stops."""
        loop = self._loop
        if loop is None or target in self._deadlines:
            return
        # Event-loop timers overflow far below Long.MAX_VALUE ms; syncing earlier than asked is
        # always allowed, so a longer deadline is capped at about 24 days.
        delay = min(max(ms, 0), MAX_DEADLINE_MS) / 1000
        self._deadlines[target] = loop.call_later(delay, self._deadline_due, target)

    def _deadline_due(self, target: Log) -> None:
        del self._deadlines[target]
        self.mark_dirty(target, urgent=True)

    def _interval_due(self) -> None:
        loop = self._loop
        if loop is None:
            return
        self._interval_timer = loop.call_later(self.interval_ms / 1000, self._interval_due)
        self._request_round()

    def when_durable(self, target: Log, callback: DurableCallback) -> None:
        """Call ``callback(None)`` once ``target``'s current end is durable, or with the error that
        failed the flush (a plain callback: no future, and no loop pass to complete one). Only for
        the ``always`` policy."""
        self.mark_dirty(target)
        self._callbacks.append(callback)

    def before_next_round(self, appender: Callable[[], None]) -> None:
        """Run ``appender`` at the start of the next round, before it picks the logs to sync.

        Writers whose records wait for an fsync anyway append them then: everything that came in
        while the previous round was syncing goes to the log as one batch per log (fewer writes,
        batches and index entries) instead of one batch per event-loop pass.
        """
        self._appenders.append(appender)
        self._request_round()

    def _request_round(self) -> None:
        """Start a round two passes of the event loop from now, unless one is already due.

        Not in this pass, so that everything it writes goes into the round, and not in the next
        one either: between the two the loop polls its sockets, and the requests read then join
        the round too (starting on the next pass made half as large rounds, twice the fsyncs and
        thread hand-offs at 8 clients x depth 1, measured with perf's syscall tracepoints)."""
        if self._round_due or self._loop is None:
            return
        self._round_due = True
        self._loop.call_soon(self._loop.call_soon, self._start_round)

    def _start_round(self) -> None:
        self._round_due = False
        if self._loop is None or not (self._appenders or self._dirty or self._callbacks):
            return
        if len(self._rounds_in_flight) >= ROUNDS_IN_FLIGHT:
            return  # the first of them to end asks again
        task = self._begin_round()
        if isinstance(task, asyncio.Task):
            self._rounds_in_flight.add(task)
            task.add_done_callback(self._round_done)
        elif task is not None:
            log.error("flush round failed", exc_info=task)

    def _round_done(self, task: asyncio.Task[None]) -> None:
        self._rounds_in_flight.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # A failing disk must not stop the flusher silently; the writers already have the error.
            log.error("flush round failed", exc_info=task.exception())
        # Writes that came while the rounds in flight were the most allowed wait for a round; with
        # nothing waiting, the round asked for here finds nothing to do.
        self._request_round()

    async def _round(self) -> None:
        """One round, awaited: what ``stop`` runs last (and tests run by hand)."""
        task = self._begin_round()
        if isinstance(task, asyncio.Task):
            await task
        elif task is not None:
            raise task

    def _begin_round(self) -> asyncio.Task[None] | BaseException | None:
        """Append and pick what one round syncs, then sync and settle it at once when a writer waits
        and the round is small or nothing else is to be served (returns the round's error, or
        None), else start a task that syncs on the flusher's thread (returns the task)."""
        loop = asyncio.get_running_loop() if self._loop is None else self._loop
        previous = self._previous
        callbacks: list[DurableCallback] = []
        try:
            appenders, self._appenders = self._appenders, []
            for append in appenders:
                try:
                    append()
                except Exception:  # the appender reports its own failure to its writers
                    log.exception("append before flush failed")
            dirty, self._dirty = self._dirty, {}
            callbacks, self._callbacks = self._callbacks, []
            round_bytes, self.unsynced_bytes = self.unsynced_bytes, 0
            segments: list[Segment] = []
            for target in dirty:
                segments.extend(target.take_unsynced_segments())
            if (
                callbacks
                and (previous is None or previous.done())
                and not self._rounds_in_flight
                and (self._small(round_bytes, dirty, segments) or self.idle())
            ):
                own_error = self._sync_pinned(segments)
                before = previous.result() if previous is not None else None
                # Settled before any later round begins: the next one overlaps none of it and
                # inherits only its own failure, so a success needs no future (two method calls
                # and a future per round at depth 1).
                self._previous = None if own_error is None else _settled(loop, own_error)
                handed, callbacks = callbacks, []
                self._settle(dirty, handed, own_error or before)
                if own_error is not None:
                    _halt_on_failed_sync(own_error)
                    return own_error
                if before is not None:
                    return RuntimeError("an earlier flush round failed")
                return None
        except BaseException as e:
            error = e if isinstance(e, Exception) else RuntimeError("flush round failed")
            self._previous = _settled(loop, error)
            _run_callbacks(callbacks, error)  # taken for this round: its writers must hear of it
            raise
        settled: asyncio.Future[BaseException | None] = loop.create_future()
        self._previous = settled
        return loop.create_task(self._finish_round(previous, settled, dirty, callbacks, segments))

    async def _finish_round(
        self,
        previous: asyncio.Future[BaseException | None] | None,
        settled: asyncio.Future[BaseException | None],
        dirty: dict[Log, int],
        callbacks: list[DurableCallback],
        segments: list[Segment],
    ) -> None:
        own_error: BaseException | None = None
        before: BaseException | None = None
        try:
            if segments:
                try:
                    await self._sync_off_loop(segments)
                except BaseException as e:
                    own_error = e if isinstance(e, Exception) else RuntimeError("flush cancelled")
            # Settled in order; a cancelled wait here must still settle this round's writers.
            if previous is not None:
                try:
                    before = await asyncio.shield(previous)
                except asyncio.CancelledError:
                    before = RuntimeError("flush cancelled")
            self._settle(dirty, callbacks, own_error or before)
        finally:
            settled.set_result(own_error)
        if own_error is not None:
            _halt_on_failed_sync(own_error)
            raise own_error
        if before is not None:
            raise RuntimeError("an overlapping flush round failed") from before

    def _small(self, round_bytes: int, dirty: dict[Log, int], segments: list[Segment]) -> bool:
        """A round whose sync is short enough to run on the loop's thread although other requests
        may be waiting to be served (the module's docstring): few bytes, in few files, none of
        them a segment rolled since the last round (its sync commits the journal for the size and
        allocation changes of both), on a disk whose recent syncs were quick."""
        return (
            round_bytes <= self.inline_sync_max_bytes
            and len(segments) < SYNCFS_MIN_FILES
            and len(segments) <= len(dirty)
            and self.sync_ns <= INLINE_SYNC_MAX_NS
        )

    async def _sync_off_loop(self, segments: list[Segment]) -> None:
        """Sync a round's segments on a C thread of sync_thread.py while the loop serves, or on a
        Python worker thread without one (or when a test replaced ``_sync``). The segments stay
        pinned until the thread is done with their descriptors."""
        loop = asyncio.get_running_loop()
        for seg in segments:
            seg.pin()
        handed = False  # to the C thread, which unpins them when its round ends
        try:
            if self._sync != self._sync_segments:
                await loop.run_in_executor(self._executor, self._timed_sync, segments)
                return
            ops = self._plan(segments)  # here: the segments' page-cache marks are the loop's
            if not self._idle_sync_threads:  # no C module: both rounds in flight have one each
                await loop.run_in_executor(self._executor, self._timed_run, ops)
                return
            thread = self._idle_sync_threads.pop()
            future: asyncio.Future[tuple[int, int, int]] = loop.create_future()
            try:
                thread.submit(ops)
            except BaseException:
                self._idle_sync_threads.append(thread)
                raise
            self._native_rounds[thread.fileno()] = (future, segments)
            handed = True
        finally:
            if not handed:
                for seg in segments:
                    seg.unpin()
        code, fd, elapsed_ns = await future
        self._note_sync_ns(elapsed_ns)
        if code != 0:
            raise sync_error(code, fd)

    def _native_round_ended(self, thread: NativeSyncThread) -> None:
        """A C thread's eventfd became readable: its round's syncs are over."""
        fd = thread.fileno()
        try:
            outcome = thread.result()
        except OSError as e:  # the eventfd itself failed: the thread is of no more use
            _stop_watching(self._started_on or asyncio.get_running_loop(), fd)
            self._end_native_round(fd, e)
            return
        if outcome is None:
            return
        self._idle_sync_threads.append(thread)
        self._end_native_round(fd, outcome)

    def _end_native_round(self, fd: int, outcome: tuple[int, int, int] | BaseException) -> None:
        entry = self._native_rounds.pop(fd, None)
        if entry is None:
            return
        future, segments = entry
        for seg in segments:
            seg.unpin()
        if future.done():  # its round was cancelled meanwhile
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)

    def _note_sync_ns(self, elapsed_ns: int) -> None:
        """Fold one sync's time into ``sync_ns``, the moving average over about eight."""
        self.sync_ns = (self.sync_ns * 7 + elapsed_ns) >> 3

    def _timed_sync(self, segments: list[Segment]) -> None:
        """``_sync``, timed into ``sync_ns`` (on whichever thread it runs)."""
        start = _perf_counter_ns()
        try:
            self._sync(segments)
        finally:
            self._note_sync_ns(_perf_counter_ns() - start)

    def _timed_run(self, ops: list[SyncOp]) -> None:
        """A planned round's operations run in Python, timed into ``sync_ns`` (a worker thread)."""
        start = _perf_counter_ns()
        try:
            run_ops(ops)
        finally:
            self._note_sync_ns(_perf_counter_ns() - start)

    def _sync_pinned(self, segments: list[Segment]) -> BaseException | None:
        """Sync on this thread: the error, or None."""
        if not segments:
            return None
        for seg in segments:
            seg.pin()
        try:
            self._timed_sync(segments)
        except Exception as e:
            return e
        finally:
            for seg in segments:
                seg.unpin()
        return None

    def _settle(
        self, dirty: dict[Log, int], callbacks: list[DurableCallback], error: BaseException | None
    ) -> None:
        if error is None:
            for target, end in dirty.items():
                target.mark_flushed(end)
        _run_callbacks(callbacks, error)
        if callbacks:
            for hook in self.after_round:
                try:
                    hook()
                except Exception:
                    log.exception("after-round hook failed")

    def _sync_segments(self, segments: list[Segment]) -> None:
        """Make the segments' written bytes durable on this thread (the loop's, for a round the
        module's docstring says may sync there; a Python worker's without the C threads)."""
        run_ops(self._plan(segments))

    def _plan(self, segments: list[Segment]) -> list[SyncOp]:
        """What syncing the segments takes: one syncfs for those on the log directory's filesystem
        when they are enough, fdatasyncs for the rest, then the page-cache hints."""
        ops: list[SyncOp] = []
        fs = self._fs
        rest = segments
        if fs is not None and len(segments) >= SYNCFS_MIN_FILES:
            rest = [seg for seg in segments if not fs.covers(seg)]
            if len(rest) < len(segments):
                ops.append((SYNCFS, fs.fd, 0, 0))
        for seg in rest:
            seg.sync_ops(ops)
        for seg in segments:
            seg.drop_ops(ops)
        return ops

    def close(self) -> None:
        self._close_sync_threads()
        if self._fs is not None:
            self._fs.close()

    def _close_sync_threads(self) -> None:
        """Stop the C threads (each after the round it may be syncing); a round still waited for
        fails, since nothing will read its outcome now (``stop`` waits for every round first)."""
        loop = self._started_on
        for thread in self._sync_threads:
            fd = thread.fileno()
            if loop is not None and not loop.is_closed():
                _stop_watching(loop, fd)
            thread.close()
            self._end_native_round(fd, RuntimeError("the flusher closed while a round was syncing"))
        self._sync_threads = []
        self._idle_sync_threads = []
        self._started_on = None


def _never() -> bool:
    return False


def _halt_on_failed_sync(error: BaseException) -> None:
    """A round's sync failed (an OSError; not a round cancelled or closed): log_dir_failure."""
    if isinstance(error, OSError):
        log_dir_failure.halt(error)


def _stop_watching(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    """``loop.remove_reader(fd)``, called untyped: uvloop's returns None where asyncio's is typed
    bool, and compiled code checks what a call returns against its declared type (a TypeError
    that ended every broker's clean shutdown before its coordinator snapshots were written)."""
    remove: Any = loop.remove_reader
    remove(fd)


def _settled(
    loop: asyncio.AbstractEventLoop, error: BaseException | None
) -> asyncio.Future[BaseException | None]:
    """A round's outcome, already known (what the next round inherits)."""
    fut: asyncio.Future[BaseException | None] = loop.create_future()
    fut.set_result(error)
    return fut


def _run_callbacks(callbacks: list[DurableCallback], error: BaseException | None) -> None:
    for callback in callbacks:
        try:
            callback(error)
        except Exception:  # one writer's bug must not keep the others' answers back
            log.exception("flush callback failed")


MAX_DEADLINE_MS: Final = 2**31 - 1

# ~85 us of sequential writeback here on top of the sync's own ~100 us: as long as the hop to the
# flusher's thread and back costs in CPU and wake-up latency. Coordinator rounds stay below it
# (an offset commit is ~75 bytes of log: 1,024 commits in flight make ~75 KiB).
INLINE_SYNC_MAX_BYTES: Final = 128 * 1024
# Syncs here take 0.1-0.3 ms; a disk whose syncs take more than 1 ms on average (a spinning disk,
# a throttled or network volume) would hold every other request for that long each round, where
# the hop to the thread costs ~0.1 ms: its rounds go to the thread (idle ones excepted).
INLINE_SYNC_MAX_NS: Final = 1_000_000

# Two, not more: a round that overlaps a failed one must fail with it; with two in flight the
# only round that can overlap another is the one right after it, which is the one that inherits
# the failure (four in flight measured no faster).
ROUNDS_IN_FLIGHT: Final = 2

# One syncfs costs about as much as two or three fdatasyncs (measured on this machine kind).
SYNCFS_MIN_FILES: Final = 3


class _FilesystemSync:
    """The log directory, held open for syncfs(2) on its filesystem (Linux; None elsewhere)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.dev = os.fstat(fd).st_dev

    @classmethod
    def open(cls, directory: Path) -> _FilesystemSync | None:
        if syncfs is None:
            return None
        directory.mkdir(parents=True, exist_ok=True)
        return cls(os.open(directory, os.O_RDONLY))

    def covers(self, seg: Segment) -> bool:
        return seg.fd >= 0 and seg.device == self.dev

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
