"""The broker under test as a subprocess: start, stop (SIGTERM), kill -9, restart."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.wire import Conn

REPO = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 30.0


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


# Ports this process handed out: a broker's listeners are picked one after the other before it
# binds any, so one free port could be picked twice (the suite's secure broker, five ports, failed
# to start once with "address already in use" on one of them).
_handed_out: set[int] = set()


def _worker_ports(lo: int, hi: int) -> tuple[int, int]:
    """This pytest-xdist worker's share of [lo, hi]: the workers are separate processes, each
    with its own ``_handed_out``, so two of them could hand out one port between its check here
    and a broker binding it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ...
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or count <= 1:
        return lo, hi
    share = (hi - lo + 1) // count
    start = lo + int(worker[2:]) * share
    return start, start + share - 1


def free_port() -> int:
    """A free port below the kernel's ephemeral range: a broker restarted on its old port after
    a kill must find it free, and outgoing connections of other processes (which take ephemeral
    ports) could otherwise grab it while the broker is down. Never one handed out before."""
    rng = random.Random()
    lo, hi = _worker_ports(20000, min(_ephemeral_start() - 1, 32767))
    for _ in range(200):
        port = rng.randint(lo, hi)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            _handed_out.add(port)
            return port
    with socket.socket() as s:  # everything taken: let the kernel choose
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_LIMIT_FILE_SIZE = (
    "import os, resource, sys; "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.RLIM_INFINITY)); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


class BrokerProcess:
    """A kcoord broker subprocess bound to 127.0.0.1:<port>, data in ``data_dir``."""

    def __init__(self, data_dir: Path, log_path: Path, extra_args: list[str] | None = None) -> None:
        self.data_dir = data_dir
        self.log_path = log_path
        self.extra_args = list(extra_args or [])
        self.host = "127.0.0.1"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        # The most bytes any file of the broker may hold (RLIMIT_FSIZE; None: no limit): a write
        # past it fails with EFBIG, as a full disk's fails with ENOSPC.
        self.file_size_limit: int | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        serve = self._serve_command()
        if self.file_size_limit is None:
            return serve
        # Set in a process of its own that then becomes the broker (exec keeps the limit):
        # preexec_fn is not safe in a test process that has threads.
        return [sys.executable, "-c", _LIMIT_FILE_SIZE, str(self.file_size_limit), *serve]

    def _serve_command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "kcoord.cli",
            "serve",
            "--listeners",
            f"PLAINTEXT://{self.host}:{self.port}",
            "--log-dirs",
            str(self.data_dir),
            "--http-listeners=",  # many brokers run at once: no HTTP endpoint unless a test asks
            *self.extra_args,
        ]

    def start(self) -> BrokerProcess:
        assert self.proc is None or self.proc.poll() is not None, "broker already running"
        self.starts += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("KCOORD_")}
        with open(self.log_path, "ab") as logf:
            logf.write(f"===== start #{self.starts}: {' '.join(self.command())}\n".encode())
            logf.flush()
            self.proc = subprocess.Popen(
                self.command(),
                stdout=logf,
                stderr=subprocess.STDOUT,
                cwd=REPO,
                env=env,
            )
        self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Until the broker answers ApiVersions (the port may be bound before it serves)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with Conn(self.host, self.port, timeout=2.0) as c:
                    if c.api_versions(version=3).error_code == 0:
                        return
            except OSError as e:
                last = e
            time.sleep(0.05)
        raise RuntimeError(
            f"broker did not answer ApiVersions in {START_TIMEOUT_S}s ({last!r}):\n{self.log_text()}"
        )

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM: a clean shutdown (flush, coordinator snapshots, clean-shutdown marker), which
        must end with exit status 0: a shutdown that fails part-way skips what comes after."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"broker ignored SIGTERM for {timeout}s") from None
            if self.proc.returncode != 0:
                raise AssertionError(
                    f"broker exited with {self.proc.returncode} on SIGTERM:\n{self.log_text()}"
                )
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL: the process dies where it is, as in a power cut of the process."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def restart(self) -> BrokerProcess:
        if self.running:
            self.stop()
        return self.start()

    def connect(self) -> Conn:
        return Conn(self.host, self.port)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no broker log)"

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        with self.connect() as c:
            c.create_topic(name, partitions, configs)


def api_versions_ok(broker: BrokerProcess) -> bool:
    """A fresh connection gets successful ApiVersions answers (v0 and v3)."""
    with broker.connect() as c:
        return c.api_versions(version=3).error_code == 0 and c.api_versions(version=0).error_code == 0


class BrokerFactory:
    def __init__(self, tmp_path: Path, on_create=None) -> None:  # type: ignore[no-untyped-def]
        self.tmp_path = tmp_path
        self.on_create = on_create
        self.brokers: list[BrokerProcess] = []

    def __call__(self, extra_args: list[str] | None = None, start: bool = True) -> BrokerProcess:
        """A new broker with its own data directory; ``extra_args`` are more ``serve`` flags."""
        n = len(self.brokers)
        b = BrokerProcess(self.tmp_path / f"broker{n}-data", self.tmp_path / f"broker{n}.log", extra_args)
        self.brokers.append(b)
        if self.on_create is not None:
            self.on_create(b)
        return b.start() if start else b

    def close(self) -> None:
        for b in self.brokers:
            if b.proc is not None and b.proc.poll() is None:
                with contextlib.suppress(AssertionError):
                    b.stop()


def track_broker(request: Any, broker: BrokerProcess) -> None:
    """Attach ``broker``'s log to the report if the requesting test fails (see conftest)."""
    node = request.node
    if not hasattr(node, "_kcoord_brokers"):
        node._kcoord_brokers = []
    node._kcoord_brokers.append(broker)


def shared_broker(name: str, args: list[str] | None = None, scope: str = "module") -> tuple[Any, Any]:
    """Fixtures for one broker shared by the tests of a ``scope``: ``_<name>_started`` starts it
    once (with ``args``) and stops it at the end; ``<name>`` hands it to each test, restarting it
    if an earlier test left it dead, and attaches its log to the test's failure report.

    Assign both to module attributes: ``_started, gbroker = shared_broker("gbroker", [...])``.
    """
    started = f"_{name}_started"

    @pytest.fixture(scope=scope, name=started)  # type: ignore[call-overload]
    def _start(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
        root = tmp_path_factory.mktemp(name)
        b = BrokerProcess(root / "data", root / "broker.log", args)
        b.start()
        yield b
        if b.running:
            b.stop()

    @pytest.fixture(name=name)
    def _hand_out(request: pytest.FixtureRequest) -> BrokerProcess:
        b: BrokerProcess = request.getfixturevalue(started)
        if not b.running:
            b.start()
        track_broker(request, b)
        return b

    return _start, _hand_out


def wait_assigned(consumer: Any, n: int) -> None:
    """Poll a kafka-python consumer until ``n`` partitions are assigned. kafka-python 3.0.12 now
    and then completes a join with nothing assigned (its leader logs "No partition metadata for
    topic ..." for a topic that exists: a metadata response raced its assignment) and then waits
    for its next metadata refresh, minutes later; subscribing again makes it join again."""
    topics = sorted(consumer.subscription() or ())
    for _attempt in range(3):
        deadline = time.monotonic() + 10
        while len(consumer.assignment()) < n and time.monotonic() < deadline:
            consumer.poll(timeout_ms=200)
        if len(consumer.assignment()) == n:
            return
        consumer.unsubscribe()
        consumer.subscribe(topics)
    assert len(consumer.assignment()) == n


def read_to_end(
    bootstrap: str, partitions: list[tuple[str, int]], isolation: str, idle_s: float, timeout_s: float = 60
) -> list[Any]:
    """Every record a kafka-python consumer at ``isolation`` gets from the start of ``partitions``
    (a list of ``ConsumerRecord``, in no particular order across partitions).

    It reads up to the end offsets (the last stable offset at read_committed) and stops there if
    nothing more can become visible: at read_uncommitted, or when the last stable offset is the
    high watermark (no transaction open and none with markers still to come). Otherwise, as a
    transaction committed just before may have its markers on their way, it goes on until the
    end has not moved for ``idle_s``, as an iterating consumer with ``consumer_timeout_ms``
    would, without paying that wait when the log is settled."""
    from kafka import KafkaConsumer, TopicPartition

    host, port = bootstrap.rsplit(":", 1)
    tps = [TopicPartition(t, p) for t, p in partitions]
    level = 1 if isolation == "read_committed" else 0
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    out: list[Any] = []
    try:
        consumer.assign(tps)
        with Conn(host, int(port)) as c:
            last_end: dict[Any, int] | None = None
            moved = time.monotonic()
            deadline = moved + timeout_s
            while True:
                end = {tp: c.list_offsets(tp.topic, tp.partition, -1, isolation=level).offset for tp in tps}
                hw = {tp: c.list_offsets(tp.topic, tp.partition, -1).offset for tp in tps}
                if end != last_end:
                    last_end, moved = end, time.monotonic()
                settled = end == hw or time.monotonic() - moved >= idle_s
                if settled and all(consumer.position(tp) >= end[tp] for tp in tps):
                    return out
                assert time.monotonic() < deadline, f"read {len(out)} records, not at {end} in {timeout_s}s"
                for recs in consumer.poll(timeout_ms=100).values():
                    out.extend(recs)
    finally:
        consumer.close()


def socket_server_metrics(http_port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The socket-server-metrics samples of /metrics, as Prometheus parses them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {
        (s.name.removeprefix("kafka_server_socket_server_metrics_"), frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("kafka_server_socket_server_metrics_")
    }
