"""A flush round's operations (kcoord/storage/sync_thread.py) do the same on the C thread of
_sync_thread.c as in Python: the same successes, the same first error, hints that never fail."""

from __future__ import annotations

import asyncio
import errno
import os
import select
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kcoord.storage.flush import Flusher
from kcoord.storage.sync_thread import (
    DROP_PAGES,
    FDATASYNC,
    FSYNC,
    SYNCFS,
    SyncOp,
    SyncThread,
    run_ops,
    sync_error,
)

needs_c_thread = pytest.mark.skipif(SyncThread is None, reason="the C sync thread is not built")


# Syncs fail here on purpose: recorded, not halting (conftest.py).
pytestmark = pytest.mark.usefixtures("halts")


def _ended(eventfd: int) -> bool:
    """Wait up to 10 s for the thread's eventfd (poll: a full test run holds descriptors above
    select's limit)."""
    poller = select.poll()
    poller.register(eventfd, select.POLLIN)
    return bool(poller.poll(10_000))


def _on_c_thread(ops: list[SyncOp]) -> None:
    assert SyncThread is not None
    thread = SyncThread()
    try:
        thread.submit(ops)
        assert _ended(thread.fileno()), "the round never ended"
        outcome = thread.result()
        assert outcome is not None
        code, fd, elapsed_ns = outcome
        assert elapsed_ns >= 0
        if code != 0:
            raise sync_error(code, fd)
    finally:
        thread.close()


@pytest.fixture(params=["python", pytest.param("c-thread", marks=needs_c_thread)])
def run(request: pytest.FixtureRequest) -> Callable[[list[SyncOp]], None]:
    return run_ops if request.param == "python" else _on_c_thread


@pytest.fixture
def written(tmp_path: Path) -> Iterator[int]:
    fd = os.open(tmp_path / "segment", os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, os.urandom(3 * 4096))
    yield fd
    os.close(fd)


@pytest.fixture
def pipe() -> Iterator[int]:
    r, w = os.pipe()
    yield r
    os.close(r)
    os.close(w)


def test_a_round_of_syncs_and_hints_on_a_file_succeeds(
    run: Callable[[list[SyncOp]], None], written: int
) -> None:
    run([(FDATASYNC, written, 0, 0), (FSYNC, written, 0, 0), (DROP_PAGES, written, 0, 8192)])


def test_a_failed_sync_raises_its_errno_and_ends_the_round(
    run: Callable[[list[SyncOp]], None], pipe: int, written: int
) -> None:
    # A pipe cannot be synced (EINVAL); the closed descriptor after it would fail with EBADF.
    closed = os.dup(written)
    os.close(closed)
    with pytest.raises(OSError) as failed:
        run([(FDATASYNC, written, 0, 0), (FDATASYNC, pipe, 0, 0), (FDATASYNC, closed, 0, 0)])
    assert failed.value.errno == errno.EINVAL


def test_a_refused_page_cache_hint_fails_no_round(
    run: Callable[[list[SyncOp]], None], pipe: int, written: int
) -> None:
    """posix_fadvise on a pipe fails with ESPIPE: a hint, so the syncs after it still run and the
    round succeeds."""
    run([(DROP_PAGES, pipe, 0, 4096), (FDATASYNC, written, 0, 0)])


@needs_c_thread
def test_the_c_thread_takes_one_round_at_a_time_and_refuses_bad_operations(written: int) -> None:
    assert SyncThread is not None
    thread = SyncThread()
    try:
        assert thread.result() is None  # nothing submitted
        with pytest.raises(ValueError, match="unknown sync operation 9"):
            thread.submit([(9, written, 0, 0)])
        with pytest.raises(TypeError):
            thread.submit([(FDATASYNC, "not a descriptor", 0, 0)])  # type: ignore[list-item]
        with pytest.raises(TypeError):
            thread.submit(((FDATASYNC, written, 0, 0),))  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="a tuple"):
            thread.submit([[FDATASYNC, written, 0, 0]])  # type: ignore[list-item]
        thread.submit([(FDATASYNC, written, 0, 0)] * 50)
        with pytest.raises(RuntimeError, match="in flight"):
            thread.submit([(FDATASYNC, written, 0, 0)])
        assert _ended(thread.fileno())
        assert thread.result() == (0, -1, pytest.approx(0, abs=10**10))
        assert thread.result() is None  # read once
        thread.submit([])  # ready again; an empty round ends at once
        assert _ended(thread.fileno())
        assert thread.result() is not None
    finally:
        thread.close()
    assert thread.fileno() == -1
    thread.close()  # twice is harmless
    with pytest.raises(RuntimeError, match="closed"):
        thread.submit([])


class _OneFileLog:
    """A log whose one file is a descriptor the test picks (a pipe fails its sync)."""

    log_end_offset = 1

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.device = -1
        self.flushed: list[int] = []

    def take_unsynced_segments(self) -> list[_OneFileLog]:
        return [self]

    def mark_flushed(self, end_offset: int) -> None:
        self.flushed.append(end_offset)

    def sync_ops(self, ops: list[SyncOp]) -> None:
        ops.append((FDATASYNC, self.fd, 0, 0))

    def drop_ops(self, ops: list[SyncOp]) -> None:
        pass

    def pin(self) -> None:
        pass

    def unpin(self) -> None:
        pass


@needs_c_thread
def test_a_busy_flusher_syncs_its_rounds_on_the_c_thread(
    tmp_path: Path, pipe: int, written: int, halts: list[BaseException]
) -> None:
    """Rounds that may not sync on the loop go to the C thread (no Python thread is started), and
    a failed sync there reaches the round's writers and the next round's, as on a Python thread."""

    async def main() -> list[str]:
        flusher = Flusher("always", directory=tmp_path)
        flusher.idle = lambda: False
        flusher.inline_sync_max_bytes = -1  # every round is too big for the loop's thread
        flusher.start()
        events: list[str] = []
        good, bad = _OneFileLog(written), _OneFileLog(pipe)
        for i, target in enumerate((good, bad, good, good)):
            flusher.when_durable(target, lambda e, t=target: events.append(f"{t.fd} {e!r}"))
            for _ in range(10_000):  # one round at a time: each stands on its own
                if len(events) > i:
                    break
                await asyncio.sleep(0.001)
        assert good.flushed == [1, 1] and bad.flushed == []  # the third round failed too
        assert not any(t.name.startswith("kcoord-fsync") for t in threading.enumerate())
        assert flusher.sync_ns > 0
        await flusher.stop()
        return events

    events = asyncio.run(main())
    assert events[0] == f"{written} None"
    assert events[1].startswith(f"{pipe} OSError(22, ")
    # The round after a failed one fails with it (it may have overlapped it), the next succeeds.
    assert events[2] == f"{written} {events[1].split(' ', 1)[1]}"
    assert events[3] == f"{written} None"
    assert [type(e).__name__ for e in halts] == ["OSError"]  # the failed sync's own round


class _SlowLog(_OneFileLog):
    """A round that syncs the whole filesystem many times: long enough to be caught in flight."""

    def sync_ops(self, ops: list[SyncOp]) -> None:
        ops.extend([(SYNCFS, self.fd, 0, 0)] * 200)


@needs_c_thread
def test_closing_with_a_round_on_the_c_thread_fails_its_writers(tmp_path: Path) -> None:
    """A flusher closed without stop() (which waits for its rounds) while a C thread syncs: the
    thread finishes the round, but nothing reads its outcome any more, so the writers hear of an
    error instead of waiting forever; the segments are unpinned once the thread is done."""
    directory = os.open(tmp_path, os.O_RDONLY)

    async def main() -> list[str]:
        flusher = Flusher("always", directory=tmp_path)
        flusher.idle = lambda: False
        flusher.inline_sync_max_bytes = -1
        flusher.start()
        events: list[str] = []
        flusher.when_durable(_SlowLog(directory), lambda e: events.append(repr(e)))
        for _ in range(10_000):
            if flusher._native_rounds:
                break
            await asyncio.sleep(0)
        assert flusher._native_rounds, "the round never reached the C thread"
        flusher.close()  # no await since the check: the eventfd's reader cannot have run
        assert not flusher._native_rounds
        for _ in range(1000):
            if events:
                break
            await asyncio.sleep(0.001)
        return events

    try:
        assert asyncio.run(main()) == ["RuntimeError('the flusher closed while a round was syncing')"]
    finally:
        os.close(directory)


@needs_c_thread
def test_a_flusher_stopped_and_started_on_another_loop_syncs_there(tmp_path: Path, written: int) -> None:
    flusher = Flusher("always", directory=tmp_path)
    flusher.idle = lambda: False
    flusher.inline_sync_max_bytes = -1

    async def one_round() -> list[str]:
        flusher.start()
        events: list[str] = []
        flusher.when_durable(_OneFileLog(written), lambda e: events.append(repr(e)))
        for _ in range(10_000):
            if events:
                break
            await asyncio.sleep(0.001)
        await flusher.stop()
        return events

    assert asyncio.run(one_round()) == ["None"]
    assert asyncio.run(one_round()) == ["None"]
