"""Small metadata files replaced atomically (topics.json, meta.properties, ...)."""

from __future__ import annotations

import os
from pathlib import Path

from kcoord.storage.write_fully import write_fully


class DirectoryNotSynced(OSError):
    """``path`` holds the new content, but its directory's sync failed: a crash may bring the old
    content back. Callers that undo their change on a failed write must not undo this one as if
    the old content were still in place."""


def atomic_write(path: Path, data: bytes | bytearray | memoryview) -> None:
    """Replace ``path`` so that a crash leaves either the old or the new content. Raises OSError
    with ``path`` unchanged, or DirectoryNotSynced once it is replaced."""
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
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as e:
        raise DirectoryNotSynced(
            e.errno, f"{path} was replaced, but its directory not synced: {e.strerror}"
        ) from e
