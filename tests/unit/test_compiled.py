"""The request path compiled with mypyc (setup.py) and the same modules in pure Python.

The suite runs whichever the install built: compiled where mypyc and a C compiler were there
(as in CI), pure Python otherwise. These tests check that a build's compiled modules are the
ones in use, that kcoord falls back to the sources whenever the compiled modules must not run,
and that the pure path still passes the codec, record and replay tests the compiled one passes
(both are checked against kafka-python's encoders, or against replay, so they agree byte for
byte).
"""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

import kcoord

REPO = Path(__file__).resolve().parents[2]
PACKAGE = Path(kcoord.__file__).parent


def _setup_list() -> list[str]:
    """The module names setup.py compiles."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "COMPILED":
            return [p.removesuffix(".py").replace("/", ".") for p in ast.literal_eval(node.value)]
    raise AssertionError("setup.py has no COMPILED list")


def test_a_build_runs_every_compiled_module() -> None:
    if not kcoord._compiled_modules(PACKAGE):  # the modules built beside their sources, as kcoord finds them
        pytest.skip("installed as pure Python (no mypyc or C compiler, or KCOORD_PURE_BUILD)")
    if os.environ.get("KCOORD_PURE"):
        assert not kcoord.compiled
        return
    assert kcoord.compiled, "built, but kcoord fell back to the sources (stale build?)"
    for name in _setup_list():
        module = importlib.import_module(name)
        assert module.__file__ is not None
        assert module.__file__.endswith(tuple(EXTENSION_SUFFIXES)), f"{name} runs from {module.__file__}"


def _fake_package(root: Path, so_newer: bool) -> Path:
    """A package with one module as source and as a "compiled" file that cannot load, and the
    library the compiled modules share (``fakeshared``), built before or after the source."""
    package = root / "fakepkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text("WHERE = 'source'\n")
    (package / f"mod{EXTENSION_SUFFIXES[0]}").write_bytes(b"not an ELF file")
    shared = root / "fakeshared.py"
    shared.write_text("")
    source_time = 1_700_000_000
    os.utime(package / "mod.py", (source_time, source_time))
    built = source_time + (10 if so_newer else -10)
    os.utime(shared, (built, built))
    return package


@pytest.fixture
def clean_imports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("KCOORD_PURE", raising=False)
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("fakepkg")]:
        del sys.modules[name]


def test_a_fresh_build_with_its_library_runs_compiled(clean_imports: Path) -> None:
    package = _fake_package(clean_imports, so_newer=True)
    before = list(sys.meta_path)
    assert kcoord._choose(package, shared="fakeshared") is True
    assert sys.meta_path == before
    with pytest.raises(ImportError):  # the extension is what Python would import
        importlib.import_module("fakepkg.mod")


@pytest.mark.parametrize(
    ("so_newer", "shared", "pure", "warning"),
    [
        (False, "fakeshared", False, "fakepkg.mod (and 0 more) changed since they were built"),
        (True, "kcoord_no_such_library__mypyc", False, "kcoord_no_such_library__mypyc is missing"),
        (True, "fakeshared", True, ""),
    ],
    ids=["stale", "no-shared-library", "KCOORD_PURE"],
)
def test_the_sources_run_when_the_compiled_modules_must_not(
    clean_imports: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    so_newer: bool,
    shared: str,
    pure: bool,
    warning: str,
) -> None:
    package = _fake_package(clean_imports, so_newer=so_newer)
    if pure:
        monkeypatch.setenv("KCOORD_PURE", "1")
    assert kcoord._choose(package, shared=shared) is False
    assert importlib.import_module("fakepkg.mod").WHERE == "source"
    err = capsys.readouterr().err
    assert (warning in err) if warning else err == ""


# The pure path's share of the suite: the hand-written codecs and record encoders against
# kafka-python, and the coordinators' replay against their live state.
PURE_TESTS = [
    "tests/unit/test_offsets_codec.py",
    "tests/unit/test_produce_codec.py",
    "tests/unit/test_groups_codec.py",
    "tests/unit/test_records.py",
    "tests/unit/test_group_records.py",
    "tests/unit/test_group_replay.py",
    "tests/unit/test_group_offsets.py",
    "tests/unit/test_reply.py",
    "tests/unit/test_flush.py",
    "tests/unit/test_log.py",
    "tests/unit/test_group_run_queue.py",  # marked pure: skipped on the compiled modules
]


def test_the_pure_path_passes_what_the_compiled_one_does() -> None:
    if not kcoord.compiled:
        pytest.skip("the suite runs the pure path already")
    env = dict(os.environ, KCOORD_PURE="1")
    check = (
        "import kcoord, kcoord.server.dispatcher as d\n"
        "assert not kcoord.compiled and d.__file__.endswith('.py')"
    )
    subprocess.run([sys.executable, "-c", check], env=env, check=True, cwd=REPO)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *PURE_TESTS],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
