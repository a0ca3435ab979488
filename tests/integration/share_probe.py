"""Drive tests/java/ShareProbe.java (KafkaShareConsumer and Admin of kafka-clients 4.3) from a
test, line by line. The waiting and command plumbing is group_probe.JavaProbe's; only the JVM's
main class differs.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.group_probe import JAVA_DIR, JavaProbe, build_probe

# Short timers for dedicated brokers: lock durations and session timeouts a test can wait out.
FAST_SHARE_FLAGS = [
    "--group-share-min-record-lock-duration-ms", "1000",
    "--group-share-min-session-timeout-ms", "6000",
    "--group-share-session-timeout-ms", "10000",
    "--group-share-min-heartbeat-interval-ms", "500",
    "--group-share-heartbeat-interval-ms", "1000",
]  # fmt: skip

JVM_FLAGS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def build_share_probe(out_dir: Path) -> str:
    """Compile ShareProbe.java beside GroupProbe.java (build_probe); return the classpath."""
    cp = build_probe(out_dir)
    subprocess.run(
        ["javac", "-d", str(out_dir), "-cp", cp, str(JAVA_DIR / "ShareProbe.java")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return cp


class ShareProbe(JavaProbe):
    """One ShareProbe JVM: a share consumer, an Admin, or a throughput run."""

    def __init__(self, classpath: str, args: list[str], log_path: Path) -> None:
        # JavaProbe.__init__ runs GroupProbe; the same setup with ShareProbe as the main class.
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            ["java", *JVM_FLAGS, "-cp", classpath, "ShareProbe", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._read_upto = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()


# --- parsing consumer output ------------------------------------------------------------------
def deliveries(lines: list[str]) -> list[tuple[int, int, int, str]]:
    """(partition, offset, delivery count, value) of every REC line, in order."""
    out = []
    for line in lines:
        if line.startswith("REC "):
            _, p, o, dc, v = line.split(" ", 4)
            out.append((int(p), int(o), int(dc), v))
    return out


def delivered(lines: list[str]) -> Counter[tuple[int, int]]:
    """How often each (partition, offset) was delivered."""
    return Counter((p, o) for p, o, _, _ in deliveries(lines))


def commit_failures(lines: list[str]) -> list[str]:
    """COMMIT / ACKCB lines that report an error."""
    return [x for x in lines if x.startswith(("COMMIT ", "ACKCB ")) and not x.endswith(" ok")]


# --- fixtures (test modules import them by name) ----------------------------------------------
_classpaths: dict[str, str] = {}


@pytest.fixture(scope="session")
def share_classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The probe's classpath, compiled once per test session (each module that uses the fixture
    registers its own copy, hence the cache); skips without a JDK or jars."""
    if "cp" not in _classpaths:
        try:
            _classpaths["cp"] = build_share_probe(tmp_path_factory.mktemp("share-probe"))
        except Exception as e:  # no JDK or no jars on this machine
            pytest.skip(f"Java share probe unavailable: {e}")
    return _classpaths["cp"]


@pytest.fixture
def java(share_classpath: str, tmp_path: Path) -> Iterator[Callable[..., ShareProbe]]:
    """A starter of ShareProbe JVMs (``start("consumer", bootstrap, group, topic, "k=v", ...)``);
    every JVM it started is ended at the end of the test."""
    started: list[ShareProbe] = []

    def start(*args: str) -> ShareProbe:
        p = ShareProbe(share_classpath, list(args), tmp_path / f"java{len(started)}.log")
        started.append(p)
        return p

    try:
        yield start
    finally:
        for p in started:
            p.close()


# --- waiting on the Admin ------------------------------------------------------------------------
def wait_until(probe: Callable[[], object], what: str, timeout: float = 30.0) -> object:
    """Until ``probe()`` is truthy (e.g. an Admin answer reaching the expected state)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def admin_until(admin: ShareProbe, command: str, expected: list[str], timeout: float = 30.0) -> None:
    """Repeat an admin command until it answers ``expected``."""
    seen: list[list[str]] = []

    def check() -> bool:
        seen.append(admin.admin(command))
        return seen[-1] == expected

    try:
        wait_until(check, f"{command!r} to answer {expected}", timeout)
    except AssertionError:
        raise AssertionError(f"{command!r}: expected {expected}, last answer {seen[-1:]}") from None


def close(*consumers: ShareProbe) -> None:
    """Close consumers (close(): final acknowledgements, leave the group); they exit 0."""
    for c in consumers:
        c.send("close")
    for c in consumers:
        c.wait_line("CLOSED")
        assert c.wait_exit() == 0
