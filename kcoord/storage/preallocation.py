"""Preallocated segments (Kafka's ``log.preallocate``): the active segment's file is grown ahead
of its appends (by as much as it holds already, from 1 MiB to 16 MiB at a time; a coordinator
log's by 1 MiB of zeros, below) and trimmed to its data when the segment stops being active.

Why, measured on this VM's ext4 (the machine kind kcoord is benchmarked on):

- An append that has to allocate blocks waits for whatever holds the inode's block map, and a
  flush round's writeback holds it while allocating the previous appends' blocks: 100 KB
  appends took 40 us on average and up to 25-50 ms while a sync ran beside them; into allocated
  blocks, 22 us and at most 2 ms (kcoord's produce p99 was made of those stalls).
- An append that grows the file makes its fdatasync commit the new size to the journal: a
  200-byte append plus fdatasync took 127-154 us (median) growing the file and 90-94 us inside
  allocated space. That is the floor of a durable OffsetCommit answered one at a time.

Blocks reserved past the end of the file (``FALLOC_FL_KEEP_SIZE``) give the first gain only;
the file has to be sized beyond its data for the second, as Kafka's preallocation does (Kafka
sizes the file to ``segment.bytes`` at once). So a preallocated segment's file is longer than
its data while the segment is active: ``Segment.size`` is where the data ends, and the rest of
the file reads as zeros. Rolling the segment or closing the log trims the file (``trim``); after
a crash the zeros are still there, and opening the log (``Segment.load``), which ends a segment
at the first bytes that are not a batch, cuts them off. Unlike a torn write they are no sign of
damage: the segments after such a segment are kept.

Reserved blocks are unwritten extents, though: the writeback of each append into a new block
of them converts that extent, and the fdatasync then commits the conversion to the journal.
Coordinator logs append a few hundred bytes per commit and sync every flush round, so most of
their rounds paid for a conversion. Their segments (``LogConfig.preallocate_zeros``) are grown
by writing zeros instead, 1 MiB at a time, whose writeback is started at once: the blocks are
then allocated and written, and a round's sync is a plain overwrite (but for the round after
each chunk, which commits that chunk's allocation). Measured on this VM:

- pwrite + fdatasync of 19 KB (a round of 125 offset commits): 240-249 us median into reserved
  space, 160-166 us into written zeros; 100 KB: 314-369 against 196-201 us.
- kload commit 8 x 16, fresh broker per run, alternating: 79-90 k commits/s with reserved space
  against 92-107 k with written zeros (+8-19 % in each of four pairs), 9.5-10.7 against 8.4-9.5
  us of broker CPU per commit.

Topic partitions keep reserved space: their appends are large, and writing every byte twice (zeros,
then data, up to 16 MiB at a time) cut acks=1 produce at 8 x 16 from 700-780 to 230-320 MB/s.

A trimmed file is what the previous versions wrote. After a crash they cut the active segment's
zeros off as a torn tail. A rolled segment is trimmed in the same flush round that syncs the
first data written after the roll, so under ``log.flush.policy=always`` a crash can leave one
untrimmed only before anything after it was acknowledged; the previous versions would drop the
segments after it, which then hold only unacknowledged records.

Disk space: up to 16 MiB per partition beyond its data (1 MiB for a partition that holds less
than that, and for a coordinator log), counted by neither ``retention.bytes`` nor
DescribeLogDirs, which count data.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
from collections.abc import Callable
from typing import Any, cast

# Bytes added at a time, at most: 16 MiB hold ~160 produce requests of 100 KB, so the fallocate
# call (tens of microseconds) and the size change the next fdatasync commits are a small share
# of the appends they serve; at least 1 MiB (~10,000 offset commits).
PREALLOCATE_CHUNK_BYTES = 16 << 20
PREALLOCATE_MIN_BYTES = 1 << 20

# Zeros written ahead at a time (``write_zeros``). Each chunk costs its writer a page-cache
# write and one flush round a block allocation to commit: a larger one makes that round's wait
# longer, a smaller one more rounds wait (512 KiB measured as 1 MiB at 8 x 16 commits).
ZEROS_CHUNK_BYTES = 1 << 20
_ZEROS = bytes(ZEROS_CHUNK_BYTES)

_UNSUPPORTED = (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def _libc_function(names: tuple[str, ...], argtypes: tuple[Any, ...]) -> Callable[..., int] | None:
    """The first of ``names`` libc has (None where none is: not Linux), returning an int."""
    try:
        # The process's own symbols, libc among them: find_library("c") would run ``ldconfig -p``
        # in a child process at every start (a fork of the broker, slower the busier the machine).
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    for name in names:
        fn = getattr(libc, name, None)
        if fn is not None:
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
            return cast("Callable[..., int]", fn)
    return None


# 64-bit offsets everywhere; os has no sync_file_range.
_fallocate = _libc_function(
    ("fallocate64", "fallocate"), (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
)
_sync_file_range = _libc_function(
    ("sync_file_range",), (ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint)
)
_SYNC_FILE_RANGE_WRITE = 2


def grow(fd: int, start: int, end: int) -> int | None:
    """Allocate the file's blocks from ``start`` to ``end`` and make it at least that long.

    Returns None, or the errno of a failure. The caller stops preallocating on EOPNOTSUPP and the
    like (``unsupported``); a full disk is reported by the append that needs the space.
    """
    if _fallocate is None:
        return errno.ENOSYS
    if _fallocate(fd, 0, start, end - start) == 0:
        return None
    return ctypes.get_errno()


def write_zeros(fd: int, start: int, end: int) -> int | None:
    """Write zeros from ``start`` to ``end`` and start writing them back, without waiting.

    Space grown this way has its blocks allocated and written once the writeback is done, so an
    append into it changes no extent and its fdatasync commits nothing to the journal (the
    module's docstring). The writeback starts at once so that it is over, as a rule, before the
    next flush round's sync, which would otherwise wait for it.

    Returns None, or the errno of a failure (the file may then have grown part of the way).
    """
    zeros = memoryview(_ZEROS)
    pos = start
    try:
        while pos < end:
            pos += os.pwrite(fd, zeros[: min(len(zeros), end - pos)], pos)
    except OSError as e:
        return e.errno or errno.EIO
    if _sync_file_range is not None:
        _sync_file_range(fd, start, end - start, _SYNC_FILE_RANGE_WRITE)  # a hint: never fails a write
    return None


def unsupported(err: int) -> bool:
    return err in _UNSUPPORTED


def trim(fd: int, size: int) -> None:
    """Cut the file back to ``size``, where its data ends, keeping its modification time (the
    zeros past the data are no data; ListOffsets v0 answers with segments' times)."""
    st = os.fstat(fd)
    os.ftruncate(fd, size)
    # Only the file's owner may set its times (a broker with group write access gets EPERM):
    # then the file keeps the trim's time.
    with contextlib.suppress(PermissionError):
        os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


def is_zeros(fd: int, start: int, end: int) -> bool:
    """Whether the file holds only zero bytes from ``start`` to ``end``: space grown ahead of
    the data (or writes into it that a crash lost, none of them acknowledged under
    ``log.flush.policy=always``)."""
    chunk = 1 << 20
    pos = start
    while pos < end:
        data = os.pread(fd, min(chunk, end - pos), pos)
        if not data or data.count(0) != len(data):
            return False
        pos += len(data)
    return True
