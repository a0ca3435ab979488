"""What the benchmark scripts share: paths, building kload and librdkafka's mock (mockpeer),
starting kcoord, finding Tansu, and a few hand-encoded requests (ApiVersions, OffsetFetch) for
probes that kload does not make.

Stdlib only (plus kcoord itself for the offline log writer in restart.py).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shlex
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
KLOAD_DIR = BENCH_DIR / "kload"
BUILD_DIR = KLOAD_DIR / "build"  # gitignored
# kcoord as the suite runs it: durable defaults spelled out, and no initial rebalance delay (only
# the rebalance workload joins groups; the delay would otherwise dominate its time to Stable)
KCOORD_ARGS = ["--log-flush-policy", "always", "--group-initial-rebalance-delay-ms", "0"]
DEFAULT_TANSU_SCRIPTS = (REPO.parent / "shared" / "tools" / "tansu", Path("/work/shared/tools/tansu"))


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def build_kload() -> Path:
    """Build kload and limit-server into bench/kload/build with kload's own Makefile."""
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    src_link = BUILD_DIR / "src"
    if not src_link.exists():
        src_link.symlink_to(Path("..") / "src")
    proc = subprocess.run(
        ["make", "-s", "-C", str(BUILD_DIR), "-f", str(KLOAD_DIR / "Makefile"), "kload", "limit-server"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"building kload failed:\n{proc.stdout}{proc.stderr}")
    return BUILD_DIR


def build_mockpeer() -> tuple[str | None, str]:
    """(path of mockpeer built against the installed confluent-kafka wheel's librdkafka, or None; why)."""
    try:
        import confluent_kafka
    except ImportError:
        return None, "confluent-kafka is not installed"
    libdir = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    libs = sorted(libdir.glob("librdkafka-*.so.1"))
    if not libs:
        return None, f"no librdkafka in {libdir}"
    build_kload()  # the build dir and its src link
    proc = subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(BUILD_DIR),
            "-f",
            str(KLOAD_DIR / "Makefile"),
            f"RDK_LIBDIR={libdir}",
            f"RDK_LIB={libs[0]}",
            "mockpeer",
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return None, f"building mockpeer failed: {(proc.stdout + proc.stderr).strip()[-300:]}"
    return str(BUILD_DIR / "mockpeer"), "built"


def raise_fd_limit() -> None:
    """1000-member rebalances need >1000 sockets in kload and in the broker (children inherit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def compile_kcoord() -> None:
    """Byte-compile kcoord's modules as ``pip install`` does for a user's installation.

    A checkout run under ``PYTHONDONTWRITEBYTECODE`` (these machines set it) compiles every
    module from source at each start: a third of the imports' instructions (3.42 G against 2.26 G
    with the bytecode), which an installed broker never pays. Start-up rows measure the latter.
    """
    import importlib.util

    spec = importlib.util.find_spec("kcoord")
    assert spec is not None and spec.submodule_search_locations
    for location in spec.submodule_search_locations:
        subprocess.run([sys.executable, "-m", "compileall", "-q", location], check=True)


def kcoord_cmd(
    port: int | str, log_dir: str | Path, extra: list[str] | None = None, http_setting: bool = True
) -> list[str]:
    """``kcoord serve`` as the broker's own process (so its PID is the one to measure).
    ``http_setting``: the tree knows http.listeners (an A/B base may predate it)."""
    return [
        sys.executable,
        "-m",
        "kcoord.cli",
        "serve",
        "--listeners",
        f"PLAINTEXT://127.0.0.1:{port}",
        "--log-dirs",
        str(log_dir),
        # No operations endpoint: a run starts several brokers, which would all want its port.
        *(["--http-listeners="] if http_setting else []),
        *(extra or []),
    ]


def find_tansu() -> tuple[str | None, str]:
    """(path of the Tansu binary, or None; how it was found or why it is absent).

    KCOORD_TANSU may name the binary or the shared ``tools/tansu`` script that prints its path;
    otherwise ``../shared/tools/tansu`` beside the repo and /work/shared/tools/tansu are tried.
    """
    env = os.environ.get("KCOORD_TANSU")
    candidates = [Path(env)] if env else list(DEFAULT_TANSU_SCRIPTS)
    tried = []
    for cand in candidates:
        tried.append(str(cand))
        if not cand.is_file() or not os.access(cand, os.X_OK):
            continue
        with open(cand, "rb") as f:
            is_script = f.read(2) == b"#!"
        if not is_script:
            return str(cand), f"KCOORD_TANSU={cand}" if env else str(cand)
        proc = subprocess.run([str(cand)], capture_output=True, text=True)
        path = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        if proc.returncode == 0 and path and os.access(path, os.X_OK):
            return path, f"{path} (from {cand})"
        return None, f"{cand} failed (rc {proc.returncode}): {proc.stderr.strip()[-300:]}"
    how = "KCOORD_TANSU" if env else "default paths"
    return None, f"no Tansu binary ({how} tried: {', '.join(tried)}); set KCOORD_TANSU to its binary"


def rss_mb(pid: int) -> float | None:
    """A process's resident memory (VmRSS) in MB; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def start_kcoord(
    data_dir: Path, log_path: Path, timeout: float = 120.0
) -> tuple[subprocess.Popen[bytes], int]:
    """``kcoord serve`` on a free port over ``data_dir`` (output appended to ``log_path``), once
    it accepts connections: (process, port)."""
    port = free_port()
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(kcoord_cmd(port, data_dir), stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while not port_open(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                stop_process(proc, 10)
            raise SystemExit(f"kcoord did not start; see {log_path}")
        time.sleep(0.05)
    return proc, port


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str], timeout: float = 30.0) -> None:
    """SIGTERM (kcoord's clean shutdown), then SIGKILL if it has not exited within ``timeout``."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def shell_join(cmd: list[str]) -> str:
    return " ".join(shlex.quote(c) for c in cmd)


# --- a minimal Kafka client for probes -------------------------------------------------------------
_H = struct.Struct(">h")
_I = struct.Struct(">i")


def _str(s: str) -> bytes:
    b = s.encode()
    return _H.pack(len(b)) + b


def _request(api_key: int, version: int, corr: int, body: bytes) -> bytes:
    msg = _H.pack(api_key) + _H.pack(version) + _I.pack(corr) + _str("kcoord-bench") + body
    return _I.pack(len(msg)) + msg


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return bytes(buf)


def roundtrip(sock: socket.socket, api_key: int, version: int, body: bytes, corr: int = 1) -> bytes:
    """Send one non-flexible request; return the response body after the correlation id."""
    sock.sendall(_request(api_key, version, corr, body))
    (size,) = _I.unpack(_recv_exact(sock, 4))
    resp = _recv_exact(sock, size)
    if _I.unpack_from(resp, 0)[0] != corr:
        raise ConnectionError("correlation id mismatch")
    return resp[4:]


def api_versions(port: int, timeout: float = 5.0) -> dict[int, tuple[int, int]]:
    """ApiVersions v0: {api_key: (min, max)}."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        body = roundtrip(s, 18, 0, b"")
    (err,) = _H.unpack_from(body, 0)
    if err:
        raise ConnectionError(f"ApiVersions error {err}")
    (n,) = _I.unpack_from(body, 2)
    out = {}
    for i in range(n):
        key, lo, hi = struct.unpack_from(">hhh", body, 6 + 6 * i)
        out[key] = (lo, hi)
    return out


def offset_fetch(sock: socket.socket, group: str, topic: str, partition: int) -> tuple[int, int, int]:
    """OffsetFetch v2 of one partition: (top-level error, partition error, committed offset)."""
    body = _str(group) + _I.pack(1) + _str(topic) + _I.pack(1) + _I.pack(partition)
    r = roundtrip(sock, 9, 2, body)
    pos = 0
    (ntopics,) = _I.unpack_from(r, pos)
    pos += 4
    perr, offset = -1, -1
    for _ in range(ntopics):
        (tl,) = _H.unpack_from(r, pos)
        pos += 2 + tl
        (nparts,) = _I.unpack_from(r, pos)
        pos += 4
        for _ in range(nparts):
            _part, offset = struct.unpack_from(">iq", r, pos)
            pos += 12
            (ml,) = _H.unpack_from(r, pos)
            pos += 2 + max(ml, 0)
            (perr,) = _H.unpack_from(r, pos)
            pos += 2
    (top_err,) = _H.unpack_from(r, pos)
    return top_err, perr, offset


class ProbeTimeout(Exception):
    pass


def wait_offset_fetch(
    port: int, group: str, topic: str, partition: int, deadline: float, proc: subprocess.Popen | None = None
) -> tuple[float, int]:
    """Poll until an OffsetFetch of (group, topic, partition) answers without error.

    Returns (monotonic time of the answer, committed offset). Raises ProbeTimeout or
    RuntimeError (the broker exited)."""
    while True:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with rc {proc.returncode}")
        if time.monotonic() > deadline:
            raise ProbeTimeout("no OffsetFetch answer before the deadline")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2.0) as s:
                while True:
                    top, perr, offset = offset_fetch(s, group, topic, partition)
                    if top == 0 and perr == 0:
                        return time.monotonic(), offset
                    if time.monotonic() > deadline:
                        raise ProbeTimeout(f"OffsetFetch kept failing: errors {top}/{perr}")
                    time.sleep(0.002)
        except (ConnectionError, OSError):
            time.sleep(0.002)
