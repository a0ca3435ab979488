"""Small metadata files replaced atomically (topics.json, meta.properties, ...)."""

from __future__ import annotations

import os
from pathlib import Path

from kcoord.storage.write_fully import write_fully


def atomic_write(path: Path, data: bytes | bytearray | memoryview) -> None:
    """Replace ``path`` so that a crash leaves either the old or the new content."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_fully(fd, data)
        os.fsync(fd)
    except BaseException:
        # A full disk: the part written is of no use, and holds space the disk lacks.
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
