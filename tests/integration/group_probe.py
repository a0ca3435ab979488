"""Drive tests/java/GroupProbe.java (the official Java client) from a test, line by line.

The probe is compiled once per session with javac into a temporary directory (faster than
source-file mode at every start); each ``JavaProbe`` is one JVM: a group member or an Admin.
The fixtures ``probe_classpath`` and ``java`` are shared by the test modules that import them by
name (``java = group_probe.java``).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
JAVA_DIR = REPO / "tests" / "java"
PREFIX = "@@ "


def build_probe(out_dir: Path) -> str:
    """Compile GroupProbe.java against kafka-clients 4.3; return the classpath to run it.

    Raises RuntimeError with the reason when Java or the client jars are not available.
    """
    if shutil.which("java") is None or shutil.which("javac") is None:
        raise RuntimeError("java/javac not installed")
    jars = subprocess.run(
        ["bash", str(JAVA_DIR / "client-jars.sh"), "4.3.0"], capture_output=True, text=True, timeout=600
    )
    if jars.returncode != 0 or not jars.stdout.strip():
        raise RuntimeError(f"kafka-clients jars unavailable: {jars.stderr.strip()[-500:]}")
    cp = jars.stdout.strip()
    out_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["javac", "-d", str(out_dir), "-cp", cp, str(JAVA_DIR / "GroupProbe.java")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return f"{cp}:{out_dir}"


class JavaProbe:
    """One probe JVM (GroupProbe unless ``main`` names another compiled probe class); its "@@ "
    lines are collected as they arrive."""

    def __init__(self, classpath: str, args: list[str], log_path: Path, main: str = "GroupProbe") -> None:
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            ["java", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath, main, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._read_upto = 0  # for admin(): lines before this index belong to earlier commands
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.rstrip("\n")
            if not line.startswith(PREFIX):
                continue
            with self._cond:
                self.lines.append(line[len(PREFIX) :])
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    # --- waiting ----------------------------------------------------------------------------
    def snapshot(self) -> list[str]:
        with self._cond:
            return list(self.lines)

    def wait_for(self, pred: Callable[[list[str]], object], timeout: float = 60.0, what: str = "") -> object:
        """Until ``pred(lines)`` is truthy; returns its value. Fails on timeout or exit."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = pred(self.lines)
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(
                        f"java probe: no {what or 'expected output'} (exit={self.proc.poll()}); "
                        f"last lines: {self.lines[-15:]}\n{self.stderr_tail()}"
                    )
                self._cond.wait(min(left, 0.5))

    def wait_line(self, prefix: str, after: int = 0, timeout: float = 60.0) -> str:
        """The first line starting with ``prefix`` at index >= ``after``."""

        def find(lines: list[str]) -> str | None:
            return next((x for x in lines[after:] if x.startswith(prefix)), None)

        return str(self.wait_for(find, timeout, what=repr(prefix)))

    def stderr_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except FileNotFoundError:
            return ""

    # --- commands ---------------------------------------------------------------------------
    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def admin(self, command: str, timeout: float = 60.0) -> list[str]:
        """Run one admin command; its output lines (without the final DONE)."""
        start = self._read_upto
        self.send(command)

        def done(lines: list[str]) -> int | None:
            for i in range(start, len(lines)):
                if lines[i] == "DONE":
                    return i + 1
            return None

        end = int(self.wait_for(done, timeout, what=f"DONE for {command!r}"))  # type: ignore[arg-type]
        self._read_upto = end
        return self.snapshot()[start : end - 1]

    def wait_exit(self, timeout: float = 60.0) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        """End the JVM: EOF on stdin ends an admin and halts a member (no commit, no leave)."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


# --- fixtures (test modules import them by name) ----------------------------------------------
_classpaths: dict[str, str] = {}


@pytest.fixture(scope="session")
def probe_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The probe's classpath, compiled once per test session (each module that uses the fixture
    registers its own copy, hence the cache); skips without a JDK or jars."""
    if "cp" not in _classpaths:
        try:
            _classpaths["cp"] = build_probe(tmp_path_factory.mktemp("group-probe"))
        except Exception as e:  # no JDK or no jars on this machine
            pytest.skip(f"Java group probe unavailable: {e}")
    return _classpaths["cp"]


@pytest.fixture
def java(probe_classpath: str, tmp_path: Path) -> Iterator[Callable[..., JavaProbe]]:
    """Start GroupProbe JVMs: ``java("member", bootstrap, group, topic, "k=v", ...)``; every JVM
    it started is ended at the end of the test."""
    started: list[JavaProbe] = []

    def start(*args: str) -> JavaProbe:
        p = JavaProbe(probe_classpath, list(args), tmp_path / f"java{len(started)}.log")
        started.append(p)
        return p

    try:
        yield start
    finally:
        for p in started:
            p.close()


# --- parsing member output ----------------------------------------------------------------------
def records(lines: list[str]) -> list[tuple[int, int, str]]:
    """(partition, offset, value) of every REC line."""
    out = []
    for line in lines:
        if line.startswith("REC "):
            _, p, o, v = line.split(" ", 3)
            out.append((int(p), int(o), v))
    return out


def commits(lines: list[str]) -> dict[int, int]:
    """The last committed offset per partition."""
    out: dict[int, int] = {}
    for line in lines:
        if line.startswith("COMMITTED "):
            _, p, o = line.split()
            out[int(p)] = int(o)
    return out


def assignments(lines: list[str]) -> list[tuple[int, str, list[str]]]:
    """(generation, member id, partitions) of every ASSIGNED line."""
    out = []
    for line in lines:
        if line.startswith("ASSIGNED "):
            _, gen, member, parts = line.split()
            out.append((int(gen), member, [] if parts == "-" else parts.split(",")))
    return out


def close(*probes: JavaProbe) -> None:
    """commitSync and close each (a dynamic member leaves the group), then wait for their exit."""
    for p in probes:
        p.send("close")
    for p in probes:
        p.wait_line("CLOSED")
        assert p.wait_exit() == 0


def owned(probe: JavaProbe) -> set[str]:
    """The partitions the member owns after its last rebalance callback ("t-p" strings)."""
    parts: set[str] = set()
    for line in probe.snapshot():
        if line.startswith("ASSIGNED "):
            parts = set(assignments([line])[0][2])
        elif line.startswith(("REVOKED ", "LOST ")):
            gone = line.split(" ", 1)[1]
            parts -= set() if gone == "-" else set(gone.split(","))
    return parts


def offsets(probes: tuple[JavaProbe, ...] | list[JavaProbe]) -> Counter[tuple[int, int]]:
    """How many times each (partition, offset) was consumed, over all the probes."""
    return Counter((p, o) for m in probes for p, o, _ in records(m.snapshot()))
