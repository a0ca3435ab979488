"""kcoord: a lightweight Kafka wire-protocol-compatible coordination broker.

The modules of the request path may also exist compiled with mypyc (``setup.py``), beside their
sources. Python imports an extension module before a source, so the compiled ones run, unless:

- ``KCOORD_PURE=1`` is set (pure Python, to compare the two or to debug);
- a compiled module's source is newer than the compiled code, as after editing a checkout without rebuilding
  (``pip install -e .``): the compiled code of every module would otherwise run silently in
  place of the edited source, since compiled modules call each other directly;
- the library they share (``kcoord__mypyc``) is missing.

Then every compiled module is imported from its source, which is always there.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from pathlib import Path

__version__ = "0.1.0"


class _SourceFinder:
    """Imports the given modules from their sources (a meta path finder placed first)."""

    def __init__(self, sources: dict[str, Path]) -> None:
        self.sources = sources

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        source = self.sources.get(fullname)
        return None if source is None else importlib.util.spec_from_file_location(fullname, source)


def _compiled_modules(package: Path) -> dict[str, tuple[Path, Path]]:
    """Module name -> (extension, source) for each module built beside its source."""
    found: dict[str, tuple[Path, Path]] = {}
    for suffix in EXTENSION_SUFFIXES:
        for ext in package.rglob(f"*{suffix}"):
            source = ext.with_name(ext.name[: -len(suffix)] + ".py")
            if source.exists():
                parts = ext.relative_to(package.parent).with_name(source.stem).parts
                found[".".join(parts)] = (ext, source)
    return found


def _choose(package: Path, shared: str) -> bool:
    """Whether the compiled modules of ``package`` run (``shared``: the library they share); if
    they must not, they are imported from their sources from now on."""
    modules = _compiled_modules(package)
    if not modules:
        return False
    reason = None
    if os.environ.get("KCOORD_PURE"):
        reason = ""
    elif (library := importlib.util.find_spec(shared)) is None or library.origin is None:
        reason = f"their shared library {shared} is missing"
    else:
        # The library holds the compiled code; a rebuild leaves unchanged per-module stubs as they were.
        built = os.stat(library.origin).st_mtime
        stale = sorted(name for name, (_ext, src) in modules.items() if src.stat().st_mtime > built)
        if stale:
            reason = f"{stale[0]} (and {len(stale) - 1} more) changed since they were built"
    if reason is None:
        return True
    if reason:
        print(
            f"kcoord: running the pure Python modules: {reason}; `pip install -e .` rebuilds them",
            file=sys.stderr,
        )
    sys.meta_path.insert(0, _SourceFinder({name: src for name, (_ext, src) in modules.items()}))
    return False


compiled: bool = _choose(Path(__file__).parent, "kcoord__mypyc")  # whether the request path runs compiled
