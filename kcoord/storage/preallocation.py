"""Reserving a segment's disk blocks ahead of its appends (Kafka's ``log.preallocate``).

On ext4, an append that has to allocate blocks waits for whatever holds the inode's block map,
and a flush round's writeback holds it while it allocates the blocks of the previous appends:
appends of 100 KB took 40 us on average and up to 25-50 ms while a sync ran (measured on this
VM's ext4 with a syncing thread beside a writing one; kcoord's produce p99 was made of these
stalls). With the blocks reserved beforehand, the same appends took 22 us and at most 2 ms.

kcoord reserves with ``fallocate(FALLOC_FL_KEEP_SIZE)``: the blocks are allocated past the end
of the file and its size stays the size of its data. Kafka's own preallocation sets the file's
size to ``segment.bytes`` and trims it on close, so its recovery has to find the end of the data
inside the file; with the size untouched, opening, recovering and reading a segment are the same
with or without a reservation, and the previous versions read these files unchanged. What a
segment reserved and did not use is given back (``release``) when it stops being active; after a
crash it stays reserved until the segment is truncated or deleted.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from collections.abc import Callable

FALLOC_FL_KEEP_SIZE = 0x01

# Bytes reserved at a time: a chunk covers ~160 produce requests of 100 KB, so the fallocate
# call (tens of microseconds) is a small share of the appends it serves.
PREALLOCATE_CHUNK_BYTES = 16 << 20


def _libc_fallocate() -> Callable[[int, int, int, int], int] | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        fn = libc.fallocate
    except (OSError, AttributeError):  # not Linux: no preallocation
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fn.restype = ctypes.c_int
    return fn


_fallocate = _libc_fallocate()


def reserve(fd: int, offset: int, length: int) -> bool:
    """Allocate ``length`` bytes of blocks from ``offset`` without changing the file's size.

    False when the filesystem or platform cannot (the caller stops asking); a full disk is not
    reported here: the append that needs the space will be.
    """
    if _fallocate is None:
        return False
    if _fallocate(fd, FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return True
    return ctypes.get_errno() not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def release(fd: int) -> None:
    """Give back the blocks reserved past the end of the file, keeping its size and its
    modification time (ListOffsets v0 answers with segments' modification times)."""
    st = os.fstat(fd)
    # Truncating to the file's own size frees the blocks past it (ext4, xfs) and never shortens
    # it; it also marks the file modified, which it was not.
    os.ftruncate(fd, st.st_size)
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
