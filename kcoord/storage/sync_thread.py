"""What a flush round does to make its files durable, as a list of operations on descriptors.

A round is planned on the event loop's thread (which segments, which of their pages the page
cache may drop) and run either here, by :func:`run_ops` (on the loop's thread, or a Python worker
thread when a test replaces the flusher's sync), or by the C thread of ``_sync_thread.c``, which
runs the same operations without taking the GIL and signals an eventfd when it is done
(``SyncThread``, None when the C module is not built or must not run: ``KCOORD_PURE=1``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final, Protocol, cast

from kcoord.protocol.native import load_extension

# The operations; _sync_thread.c numbers them the same.
FDATASYNC: Final = 0
FSYNC: Final = 1
SYNCFS: Final = 2
DROP_PAGES: Final = 3  # posix_fadvise(DONTNEED) of (offset, length): a hint, never an error

SyncOp = tuple[int, int, int, int]  # (operation, fd, offset, length)


def run_ops(ops: list[SyncOp]) -> None:
    """Run a round's operations on this thread; the first failed sync raises (and ends it)."""
    for op, fd, offset, length in ops:
        if op == FDATASYNC:
            os.fdatasync(fd)
        elif op == FSYNC:
            os.fsync(fd)
        elif op == SYNCFS and syncfs is not None:
            syncfs(fd)
        elif op == SYNCFS:
            raise OSError(errno.ENOSYS, "syncfs is not available here")
        elif op == DROP_PAGES:
            # A hint, which must never fail the round that made the bytes durable.
            with contextlib.suppress(OSError):
                os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)
        else:
            raise ValueError(f"unknown sync operation {op}")


def sync_error(code: int, fd: int) -> OSError:
    """The error a failed sync of the C thread stands for (as ``os.fdatasync`` raises it)."""
    return OSError(code, f"sync of descriptor {fd} failed: {os.strerror(code)}")


class NativeSyncThread(Protocol):
    """What ``_sync_thread.c``'s ``SyncThread`` offers (its methods are documented there)."""

    def submit(self, ops: list[SyncOp]) -> None: ...

    def result(self) -> tuple[int, int, int] | None: ...

    def fileno(self) -> int: ...

    def close(self) -> None: ...


def _load_sync_thread() -> type[NativeSyncThread] | None:
    module = load_extension(
        "kcoord.storage._sync_thread",
        Path(__file__).with_name("_sync_thread.c"),
        "the C sync thread module",
    )
    return None if module is None else cast(type[NativeSyncThread], module.SyncThread)


def _load_syncfs() -> Callable[[int], None] | None:
    """syncfs(2) through ctypes (Linux), or None where the C library has none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int]

    def syncfs(fd: int) -> None:
        if function(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs failed: {os.strerror(err)}")

    return syncfs


syncfs: Final = _load_syncfs()
SyncThread: Final = _load_sync_thread()
