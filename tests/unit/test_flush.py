"""The flusher's group commit: appends deferred to the round, callbacks after the sync."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import mmap
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kcoord.protocol.records import build_batch, read_header
from kcoord.storage import log_dir_failure
from kcoord.storage.flush import INLINE_SYNC_MAX_NS, Flusher
from kcoord.storage.log import Log, LogConfig
from kcoord.storage.segment import DROP_MIN_BYTES
from tests.harness import REPO

# Syncs fail here on purpose: recorded, not halting (conftest.py).
pytestmark = pytest.mark.usefixtures("halts")


def test_deferred_appends_are_synced_in_the_round_that_runs_them(tmp_path: Path) -> None:
    async def main() -> list[str]:
        flusher = Flusher("always", directory=tmp_path)
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)
        events: list[str] = []
        synced: list[int] = []
        real_sync = flusher._sync

        def spy_sync(segments: list) -> None:
            synced.append(log_.log_end_offset)
            real_sync(segments)

        flusher._sync = spy_sync  # type: ignore[method-assign]
        flusher.start()

        def append() -> None:
            events.append("append")
            data = build_batch([(b"k", b"v")], 1)
            log_.append(data, [read_header(data)], 1)
            flusher.when_durable(log_, lambda error: events.append(f"durable {error}"))

        flusher.before_next_round(append)
        assert events == []  # nothing is written before the round
        for _ in range(200):
            await asyncio.sleep(0.005)
            if len(events) == 2:
                break
        assert synced == [1]  # the record appended at the start of the round was in its sync
        assert log_.high_watermark == 1
        await flusher.stop()
        log_.close()
        return events

    assert asyncio.run(main()) == ["append", "durable None"]


@pytest.mark.parametrize("idle", [False, True], ids=["on-the-flusher-thread", "on-the-loop"])
def test_a_failed_sync_reaches_the_callbacks(tmp_path: Path, idle: bool, halts: list[BaseException]) -> None:
    """The round's writers hear of the failure, then the broker halts (log_dir_failure)."""
    boom = OSError(5, "EIO")

    async def main() -> list[object]:
        flusher = Flusher("always", directory=tmp_path)
        flusher.idle = lambda: idle
        if not idle:
            flusher.inline_sync_max_bytes = -1  # no round is small enough for the loop's thread
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)

        def failing_sync(segments: list) -> None:
            raise boom

        flusher._sync = failing_sync  # type: ignore[method-assign]
        got: list[object] = []
        data = build_batch([(b"k", b"v")], 1)
        log_.append(data, [read_header(data)], 1)
        flusher.when_durable(log_, got.append)
        with contextlib.suppress(OSError):
            await flusher._round()
        assert log_.high_watermark == 0  # not durable: not visible
        log_.close()
        flusher.close()
        return got

    got = asyncio.run(main())
    assert len(got) == 1 and got[0] is boom
    assert halts == [boom]


_HALTING_ROUND = """
import asyncio, os, sys
from pathlib import Path
from kcoord.storage.flush import Flusher

class PipeLog:  # a file whose fdatasync fails (EINVAL)
    log_end_offset = 1
    def __init__(self, fd): self.fd, self.device = fd, -1
    def take_unsynced_segments(self): return [self]
    def mark_flushed(self, end): print("flushed", flush=True)
    def sync_ops(self, ops): ops.append((0, self.fd, 0, 0))
    def drop_ops(self, ops): pass
    def pin(self): pass
    def unpin(self): pass

async def main():
    flusher = Flusher("always", directory=Path(sys.argv[1]))
    flusher.idle = lambda: sys.argv[2] == "inline"
    flusher.inline_sync_max_bytes = -1
    flusher.start()
    r, _w = os.pipe()
    good = PipeLog(os.open(Path(sys.argv[1]) / "file", os.O_RDWR | os.O_CREAT))

    def heard(e):
        print("writer heard", type(e).__name__, flush=True)
        # A writer of the next round, on a file whose sync succeeds: never answered.
        flusher.when_durable(good, lambda e: print("next round", e, flush=True))

    flusher.when_durable(PipeLog(r), heard)
    await asyncio.sleep(5)
    print("still running", flush=True)

asyncio.run(main())
"""


@pytest.mark.parametrize("where", ["inline", "off-loop"])
def test_a_failed_sync_halts_the_process_after_its_writers_heard(tmp_path: Path, where: str) -> None:
    """Not recorded this time: the process exits with status 1 once the failed round's writer was
    answered, before any later round settles (the kernel reports a writeback error once)."""
    run = subprocess.run(
        [sys.executable, "-c", _HALTING_ROUND, str(tmp_path), where],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert run.returncode == log_dir_failure.EXIT_CODE, run.stderr[-2000:]
    # (structlog, unconfigured here, logs to stdout.)
    printed = [line for line in run.stdout.splitlines() if "[critical" not in line]
    assert printed == ["writer heard OSError"]
    assert "halting, as Kafka does" in run.stdout + run.stderr


def _append_one(log_: Log, flusher: Flusher, events: list[str], name: str) -> None:
    data = build_batch([(name.encode(), b"v")], 1)
    log_.append(data, [read_header(data)], 1)
    flusher.when_durable(log_, lambda error: events.append(f"{name} {type(error).__name__}"))


async def _two_overlapping_rounds(
    tmp_path: Path, first_fails: bool, release_second_first: bool
) -> tuple[list[str], int, int]:
    """Round 1 syncs while a write arrives: round 2 starts without waiting for round 1's sync."""
    flusher = Flusher("always", directory=tmp_path)
    flusher.inline_sync_max_bytes = -1  # rounds on the flusher's thread, where they can overlap
    log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)
    gates = [threading.Event(), threading.Event()]
    started: list[int] = []

    def gated_sync(segments: list) -> None:
        n = len(started)
        started.append(n)
        assert gates[n].wait(10)
        if n == 0 and first_fails:
            raise OSError(5, "EIO")

    flusher._sync = gated_sync  # type: ignore[method-assign]
    flusher.start()
    events: list[str] = []
    _append_one(log_, flusher, events, "a")
    while len(started) < 1:
        await asyncio.sleep(0.001)
    _append_one(log_, flusher, events, "b")
    for _ in range(2000):
        if len(started) == 2:
            break
        await asyncio.sleep(0.001)
    overlapped = len(started)
    order = [1, 0] if release_second_first else [0, 1]
    gates[order[0]].set()
    await asyncio.sleep(0.05)
    gates[order[1]].set()
    for _ in range(2000):
        if len(events) == 2:
            break
        await asyncio.sleep(0.001)
    hw = log_.high_watermark
    flusher._sync = lambda segments: None  # type: ignore[method-assign]
    with contextlib.suppress(Exception):
        await flusher.stop()
    log_.close()
    return events, overlapped, hw


def test_a_second_round_syncs_while_the_first_is_still_syncing(tmp_path: Path) -> None:
    events, overlapped, hw = asyncio.run(_two_overlapping_rounds(tmp_path, False, False))
    assert overlapped == 2
    assert events == ["a NoneType", "b NoneType"]
    assert hw == 2


def test_rounds_settle_in_order_even_when_the_later_sync_ends_first(tmp_path: Path) -> None:
    events, overlapped, hw = asyncio.run(_two_overlapping_rounds(tmp_path, False, True))
    assert overlapped == 2
    assert events == ["a NoneType", "b NoneType"]
    assert hw == 2


def test_a_round_that_overlapped_a_failed_one_fails_too(tmp_path: Path) -> None:
    # Its sync may have returned success after the other's writeback error was reported.
    events, overlapped, hw = asyncio.run(_two_overlapping_rounds(tmp_path, True, True))
    assert overlapped == 2
    assert events == ["a OSError", "b OSError"]
    assert hw == 0


def test_stop_flushes_after_an_earlier_failed_round(tmp_path: Path) -> None:
    # The shutdown round overlaps no other round, so an earlier failure must not fail it.
    async def main() -> tuple[list[str], int]:
        flusher = Flusher("always", directory=tmp_path)
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)
        real_sync = flusher._sync

        def failing_sync(segments: list) -> None:
            raise OSError(5, "EIO")

        events: list[str] = []
        flusher._sync = failing_sync  # type: ignore[method-assign]
        _append_one(log_, flusher, events, "a")
        with contextlib.suppress(OSError):
            await flusher._round()
        flusher._sync = real_sync  # type: ignore[method-assign]
        _append_one(log_, flusher, events, "b")
        await flusher.stop()
        hw = log_.high_watermark
        log_.close()
        return events, hw

    events, hw = asyncio.run(main())
    assert events == ["a OSError", "b NoneType"]
    assert hw == 2


def test_the_round_after_a_failed_one_on_the_loop_fails_with_it_and_the_next_succeeds(tmp_path: Path) -> None:
    # Rounds synced on the loop's thread keep no future when they succeed; a failed one's error
    # must still reach the round after it (whose sync may report success for lost pages).
    async def main() -> tuple[list[str], int]:
        flusher = Flusher("always", directory=tmp_path)
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)
        real_sync = flusher._sync
        failing = [True]
        loop_thread = threading.get_ident()
        on_loop: list[bool] = []

        def sync(segments: list) -> None:
            on_loop.append(threading.get_ident() == loop_thread)
            if failing[0]:
                raise OSError(5, "EIO")
            real_sync(segments)

        flusher._sync = sync  # type: ignore[method-assign]
        events: list[str] = []
        for name in ("a", "b", "c"):
            _append_one(log_, flusher, events, name)
            with contextlib.suppress(Exception):
                await flusher._round()
            failing[0] = False
        assert on_loop == [True, True, True]
        await flusher.stop()
        hw = log_.high_watermark
        log_.close()
        return events, hw

    events, hw = asyncio.run(main())
    assert events == ["a OSError", "b OSError", "c NoneType"]
    assert hw == 3


def test_after_round_hooks_run_on_the_pass_that_released_the_writers(tmp_path: Path) -> None:
    # The server writes the answers a round released from this hook: it must run after every
    # callback of the round, before the event loop runs anything else, and a failing hook must
    # not keep the others from running.
    async def main() -> list[str]:
        flusher = Flusher("always", directory=tmp_path)
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)
        events: list[str] = []

        def released(error: BaseException | None) -> None:
            events.append("released")
            asyncio.get_running_loop().call_soon(events.append, "next pass")

        def failing_hook() -> None:
            events.append("failing hook")
            raise RuntimeError("boom")

        flusher.after_round += [failing_hook, lambda: events.append("write pass")]
        flusher.start()
        data = build_batch([(b"k", b"v")], 1)
        log_.append(data, [read_header(data)], 1)
        flusher.when_durable(log_, released)
        for _ in range(200):
            await asyncio.sleep(0.005)
            if "next pass" in events:
                break
        await flusher.stop()
        log_.close()
        return events

    assert asyncio.run(main()) == ["released", "failing hook", "write pass", "next pass"]


def test_a_round_syncs_on_the_loop_thread_while_idle_or_small(tmp_path: Path) -> None:
    """With nothing else to do, or little to sync, the sync runs where the writer waits (no hop
    to the flusher's thread and back); a large round while other requests are owed answers, or
    one over enough files to take a syncfs, runs on the flusher's thread so the event loop serves
    them meanwhile. Either way the writer hears of it after the sync."""

    async def main() -> list[tuple[str, bool]]:
        flusher = Flusher("always", directory=tmp_path)
        logs = [Log.open(tmp_path / f"p-{i}", LogConfig(retention_ms=-1), flusher) for i in range(3)]
        loop_thread = threading.get_ident()
        synced_on: list[tuple[str, bool]] = []
        real_sync = flusher._sync
        idle = [True]
        flusher.idle = lambda: idle[0]
        case = [""]

        def spy_sync(segments: list) -> None:
            synced_on.append((case[0], threading.get_ident() == loop_thread))
            real_sync(segments)

        flusher._sync = spy_sync  # type: ignore[method-assign]
        flusher.start()
        events: list[str] = []
        big = b"x" * (flusher.inline_sync_max_bytes + 1)
        cases = (
            ("idle and large", True, big, 1),
            ("busy and small", False, b"v", 1),
            ("busy and large", False, big, 1),
            ("busy, small, over 3 files", False, b"v", 3),
            ("idle, over 3 files", True, b"v", 3),
        )
        for name, is_idle, value, files in cases:
            idle[0] = is_idle
            case[0] = name
            for log_ in logs[:files]:
                data = build_batch([(name.encode(), value)], 1)
                log_.append(data, [read_header(data)], 1)
                flusher.when_durable(
                    log_, lambda error, name=name: events.append(f"{name} {type(error).__name__}")
                )
            for _ in range(10_000):  # a sync on the flusher's thread of a loaded machine: seconds
                if sum(event.startswith(name) for event in events) == files:
                    break
                await asyncio.sleep(0.001)
        assert events == [f"{name} NoneType" for name, _, _, files in cases for _ in range(files)]
        assert [log_.high_watermark for log_ in logs] == [5, 2, 2]
        await flusher.stop()
        for log_ in logs:
            log_.close()
        return synced_on

    assert asyncio.run(main())[:5] == [
        ("idle and large", True),
        ("busy and small", True),
        ("busy and large", False),
        ("busy, small, over 3 files", False),
        ("idle, over 3 files", True),
    ]


def test_a_slow_disk_keeps_all_but_idle_rounds_off_the_loop(tmp_path: Path) -> None:
    """Syncs that took more than INLINE_SYNC_MAX_NS lately: a small round while other requests
    wait goes to the flusher's thread (the loop would stall that long each round); an idle
    round still syncs where its writer waits. Each sync's time moves the average."""

    async def main() -> tuple[list[bool], list[int]]:
        flusher = Flusher("always", directory=tmp_path)
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)
        loop_thread = threading.get_ident()
        on_loop: list[bool] = []
        averages: list[int] = []
        real_sync = flusher._sync
        idle = [False]
        flusher.idle = lambda: idle[0]

        def spy_sync(segments: list) -> None:
            on_loop.append(threading.get_ident() == loop_thread)
            real_sync(segments)

        flusher._sync = spy_sync  # type: ignore[method-assign]
        events: list[str] = []
        for name, is_idle in (("busy", False), ("idle", True)):
            idle[0] = is_idle
            flusher.sync_ns = 50 * INLINE_SYNC_MAX_NS
            _append_one(log_, flusher, events, name)
            await flusher._round()
            averages.append(flusher.sync_ns)
        assert events == ["busy NoneType", "idle NoneType"]
        log_.close()
        flusher.close()
        return on_loop, averages

    on_loop, averages = asyncio.run(main())
    assert on_loop == [False, True]
    assert all(average < 50 * INLINE_SYNC_MAX_NS for average in averages)


def test_a_round_that_fails_before_its_sync_fails_its_writers_and_the_next_round(tmp_path: Path) -> None:
    """A log that cannot say what to sync: the writers already taken for the round hear of the
    error (they were never answered before), and the next round fails with it."""

    class BrokenLog:
        log_end_offset = 1

        def take_unsynced_segments(self) -> list:
            raise OSError(5, "EIO")

        def mark_flushed(self, end_offset: int) -> None:
            raise AssertionError("never durable")

    async def main() -> list[str]:
        flusher = Flusher("always", directory=tmp_path)
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)
        events: list[str] = []
        flusher.when_durable(BrokenLog(), lambda error: events.append(f"broken {type(error).__name__}"))
        with contextlib.suppress(OSError):
            await flusher._round()
        for name in ("a", "b"):
            _append_one(log_, flusher, events, name)
            with contextlib.suppress(Exception):
                await flusher._round()
        log_.close()
        flusher.close()
        return events

    assert asyncio.run(main()) == ["broken OSError", "a OSError", "b NoneType"]


def test_a_round_nobody_waits_for_never_blocks_the_loop(tmp_path: Path) -> None:
    """An acks=1 produce marks its log dirty and is answered at once: syncing that round on the
    loop would hold up the client's next request for a sync no answer needs."""

    async def main() -> list[bool]:
        flusher = Flusher("always", directory=tmp_path)
        flusher.idle = lambda: True
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)
        loop_thread = threading.get_ident()
        on_loop: list[bool] = []
        real_sync = flusher._sync

        def spy_sync(segments: list) -> None:
            on_loop.append(threading.get_ident() == loop_thread)
            real_sync(segments)

        flusher._sync = spy_sync  # type: ignore[method-assign]
        flusher.start()
        data = build_batch([(b"k", b"v")], 1)
        log_.append(data, [read_header(data)], 1)
        flusher.mark_dirty(log_)
        for _ in range(2000):
            if log_.high_watermark == 1:
                break
            await asyncio.sleep(0.001)
        await flusher.stop()
        log_.close()
        return on_loop

    assert asyncio.run(main())[:1] == [False]


def _resident(path: Path) -> list[bool]:
    """Which of the file's pages are in the page cache (mincore(2) over a mapping of it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    c = ctypes
    libc.mmap.argtypes = [c.c_void_p, c.c_size_t, c.c_int, c.c_int, c.c_int, c.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = (size + PAGE - 1) // PAGE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), os.strerror(ctypes.get_errno())
        vec = (ctypes.c_ubyte * pages)()
        try:
            assert libc.mincore(addr, size, vec) == 0, os.strerror(ctypes.get_errno())
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return [bool(v & 1) for v in vec]


PAGE = 4096


@pytest.mark.parametrize("retain", [2 << 20, -1], ids=["retain-2MiB", "page-cache-decides"])
def test_synced_pages_behind_the_retained_tail_leave_the_page_cache(tmp_path: Path, retain: int) -> None:
    """A producing partition's synced pages further behind its end than log.cache.retain.bytes are
    dropped after the round that synced them; the tail stays cached, and every record reads back."""
    probe = tmp_path / "probe"
    probe.write_bytes(b"x" * (1 << 20))
    fd = os.open(probe, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    if any(_resident(probe)):
        pytest.skip("this filesystem keeps pages through POSIX_FADV_DONTNEED (tmpfs?)")
    values = [os.urandom(100_000) for _ in range(120)]  # ~12 MB

    async def main() -> Log:
        flusher = Flusher("always", directory=tmp_path)
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1, cache_retain_bytes=retain), flusher)
        flusher.start()
        done: list[BaseException | None] = []
        for i, value in enumerate(values):
            data = build_batch([(b"k", value)], 1)
            log_.append(data, [read_header(data)], 1)
            if i % 10 == 9:
                flusher.when_durable(log_, done.append)
                while len(done) < (i + 1) // 10:
                    await asyncio.sleep(0.001)
        assert done == [None] * 12
        await flusher.stop()
        return log_

    log_ = asyncio.run(main())
    resident = _resident(log_.active.path)
    size = log_.active.size  # the file runs further: preallocated
    tail = resident[(size - (2 << 20)) // PAGE : size // PAGE]
    assert sum(tail) >= len(tail) * 0.9  # the retained end is still cached
    head = resident[: (size - (2 << 20) - DROP_MIN_BYTES) // PAGE]
    if retain < 0:
        assert sum(head) >= len(head) * 0.9
    else:
        assert not any(head)
    got = []
    offset = 0
    while offset < log_.high_watermark:
        data = log_.read(offset, 1 << 20)
        h = read_header(data)
        got.append(data[: h.size])
        offset = h.last_offset + 1
    assert [bytes(g[-100_000 - 1 : -1]) for g in got] == values
    log_.close()
