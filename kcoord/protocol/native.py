"""The optional C codecs (``_native_codecs.c``): the byte layouts every offset commit and offset
fetch writes, which the Python encoders of ``offsets_codec``, ``records`` and ``groups.records``
mirror.

``codecs`` is the C module, or None when it must not run: it was not built (no C compiler; the
build is optional), ``KCOORD_PURE=1`` is set, or its source is newer than the built module (as
for the mypyc modules, kcoord/__init__.py). The encoders then run their Python bodies.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

_NAME = "kcoord.protocol._native_codecs"


class NativeCodecs(Protocol):
    """What ``_native_codecs.c`` defines (each function documented there)."""

    def offset_value(self, offset: int, leader_epoch: int, metadata: str, commit_timestamp: int) -> bytes: ...

    def commit_answer(
        self, topics: list[Any], version: int, correlation_id: int = ..., tagged: bool = ...
    ) -> bytes: ...

    def fetch_answer(
        self,
        version: int,
        topics: list[Any],
        error: int,
        groups: list[Any],
        correlation_id: int = ...,
        tagged: bool = ...,
    ) -> bytes: ...

    def batch_body(self, entries: Sequence[tuple[bytes | None, bytes | None]]) -> bytes: ...

    def keys_start_with(self, body: bytes, count: int, prefixes: tuple[bytes, ...]) -> bool: ...

    def records_problem(
        self, buffer: bytes | bytearray | memoryview, start: int, end: int, count: int
    ) -> str | None: ...


def load_extension(name: str, source: Path, what: str) -> ModuleType | None:
    """Import the C extension ``name`` built from ``source``, or None when it must not run: it was
    not built, ``KCOORD_PURE=1`` is set, its source is newer than the built module, or it does not
    load; ``what`` names it in the message saying so (the Python code then does the same work)."""
    if os.environ.get("KCOORD_PURE"):
        return None
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return None
    if source.exists() and source.stat().st_mtime > os.stat(spec.origin).st_mtime:
        print(
            f"kcoord: {what} changed since it was built, using the Python code;"
            " `pip install -e .` rebuilds it",
            file=sys.stderr,
        )
        return None
    try:
        return importlib.import_module(name)
    except ImportError as e:  # built for another Python, say
        print(f"kcoord: {what} does not load ({e}), using the Python code", file=sys.stderr)
        return None


codecs = cast(
    "NativeCodecs | None",
    load_extension(_NAME, Path(__file__).with_name("_native_codecs.c"), "the C codecs module"),
)
