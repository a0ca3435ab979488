"""Kafka's ``Utils.writeFully``: a write to a file may take fewer bytes than it was given (a disk
filling up takes what fits, then fails the next write), and a file that silently lacks the rest
is corrupt: a cleaned segment would lose every batch after the gap when it is recovered, a
metadata file replaced atomically would hold half its JSON. Every byte is written, or the write
raises.
"""

from __future__ import annotations

import os


def write_fully(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    written = os.write(fd, view)
    while written < len(view):
        written += os.write(fd, view[written:])
