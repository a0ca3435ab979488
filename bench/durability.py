"""The durability floor: what one durable write costs on the disk kcoord's logs live on.

    python -m bench.durability            # sync latency in the temp dir (where the bench's logs go)
    python -m bench.durability --dir PATH --samples 2000

With ``log.flush.policy=always`` an OffsetCommit is answered only after an fsync that covers its
record; Tansu's memory engine and the limit server answer without one. A closed-loop client with
N requests in flight waits, for each request, at least one round trip plus one whole sync that
started after the request's record was written (a sync already running cannot cover it). By
Little's law no broker that syncs before answering can then answer more than

    N / (N / limit req/s + sync latency)

requests per second, however fast its code: the limit server's rate gives the round trip of the
same load (canned answers, no work). That is the *durable ceiling* of a commit row; the summary
marks a row whose target lies above it. The sync latency is the median of the faster of two ways
to make a small write durable: an append + fdatasync (what kcoord does) and an overwrite inside a
file already written and synced + fdatasync (no metadata to journal; what a preallocating log
could do); the median, not the mean, keeps the ceiling an upper bound under a skewed distribution.

Each way's kernel CPU per write + sync (``sys_us``, from the thread's rusage) is printed too: a
broker that syncs before answering pays at least that for every sync, however little its own
code costs, and with N requests in flight at least that over N per request (the CPU floor of the
depth-1 rows, against a mock that syncs nothing).

Produce rows move data, not requests: their ceiling is the disk's sequential write bandwidth, what
a broker that makes every byte durable before answering can sustain. It is measured as new 1 MiB
appends to a fresh file (kcoord's segments grow the same way) for ``BANDWIDTH_MB``, then one
fdatasync, timed together; the best of ``BANDWIDTH_RUNS``, so it stays an upper bound.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RECORD = b"x" * 120  # about one offset-commit record batch
BANDWIDTH_MB = 512  # more than the page cache takes without writeback on a 2-core 24 GB machine
BANDWIDTH_RUNS = 2


def _append_fdatasync(fd: int, i: int) -> None:
    os.write(fd, RECORD)
    os.fdatasync(fd)


def _overwrite_fdatasync(fd: int, i: int) -> None:
    os.pwrite(fd, RECORD, (i * 128) % (1 << 20))
    os.fdatasync(fd)


def _time(path: Path, write: Any, samples: int, prewrite: bool) -> tuple[list[float], float]:
    """(seconds of each write + sync, the thread's kernel CPU microseconds per write + sync)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        if prewrite:
            os.write(fd, b"\0" * (1 << 20))
            os.fsync(fd)
        for i in range(20):  # warm up
            write(fd, i)
        out = []
        sys0 = resource.getrusage(resource.RUSAGE_THREAD).ru_stime
        for i in range(samples):
            t0 = time.perf_counter()
            write(fd, i)
            out.append(time.perf_counter() - t0)
        sys_s = resource.getrusage(resource.RUSAGE_THREAD).ru_stime - sys0
        return out, sys_s / samples * 1e6
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def _summary(timed: tuple[list[float], float]) -> dict[str, float]:
    xs = sorted(timed[0])
    return {
        "min_us": xs[0] * 1e6,
        "median_us": statistics.median(xs) * 1e6,
        "p99_us": xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e6,
        "sys_us": timed[1],
    }


def write_bandwidth(path: Path, megabytes: int = BANDWIDTH_MB) -> float:
    """MB/s (10^6 bytes) of ``megabytes`` of new 1 MiB appends made durable by one fdatasync."""
    chunk = b"\xa5" * (1 << 20)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        t0 = time.perf_counter()
        for _ in range(megabytes):
            os.write(fd, chunk)
        os.fdatasync(fd)
        return megabytes * (1 << 20) / 1e6 / (time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def measure(
    directory: str | Path | None = None, samples: int = 500, bandwidth: bool = False
) -> dict[str, Any]:
    """Sync latencies (µs) of small durable writes in ``directory`` (default: the temp dir), and
    with ``bandwidth`` the disk's durable sequential write rate (MB/s)."""
    with tempfile.TemporaryDirectory(prefix="kcoord-bench-sync-", dir=directory) as d:
        append = _summary(_time(Path(d) / "append", _append_fdatasync, samples, prewrite=False))
        overwrite = _summary(_time(Path(d) / "overwrite", _overwrite_fdatasync, samples, prewrite=True))
        mb_s = (
            max(write_bandwidth(Path(d) / "bandwidth") for _ in range(BANDWIDTH_RUNS)) if bandwidth else None
        )
    return {
        "directory": str(directory or tempfile.gettempdir()),
        "samples": samples,
        "append_fdatasync": append,
        "overwrite_fdatasync": overwrite,
        "floor_us": min(append["median_us"], overwrite["median_us"]),
        "sync_sys_us": min(append["sys_us"], overwrite["sys_us"]),
        "write_mb_s": mb_s,
    }


def ceiling(in_flight: int, limit_rps: float | None, sync_us: float | None) -> float | None:
    """The most req/s a broker that syncs before answering can give ``in_flight`` requests."""
    if not limit_rps or sync_us is None or in_flight <= 0:
        return None
    return in_flight / (in_flight / limit_rps + sync_us / 1e6)


def connections_and_depth(config: str) -> tuple[int, int]:
    """(c, d) of a kload matrix row id such as ``commit c8 d16 p1`` (1 where it names none)."""
    c = d = 1
    for word in config.split():
        if word[:1] == "c" and word[1:].isdigit():
            c = int(word[1:])
        elif word[:1] == "d" and word[1:].isdigit():
            d = int(word[1:])
    return c, d


def in_flight(config: str) -> int:
    """Requests in flight of a kload matrix row: c x d."""
    c, d = connections_and_depth(config)
    return c * d


def describe(r: dict[str, Any]) -> str:
    a, o = r["append_fdatasync"], r["overwrite_fdatasync"]
    return (
        f"durability floor in {r['directory']}: append + fdatasync median {a['median_us']:.0f} us "
        f"(min {a['min_us']:.0f}, p99 {a['p99_us']:.0f}); overwrite + fdatasync median "
        f"{o['median_us']:.0f} us (min {o['min_us']:.0f}, p99 {o['p99_us']:.0f}); "
        f"floor {r['floor_us']:.0f} us per sync"
        + (f", {r['sync_sys_us']:.0f} us of kernel CPU per sync" if r.get("sync_sys_us") is not None else "")
        + (
            f"; durable sequential writes {r['write_mb_s']:.0f} MB/s (the produce rows' ceiling)"
            if r.get("write_mb_s")
            else ""
        )
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.durability",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--dir", default=None, help="directory on the filesystem to measure (default: temp dir)")
    ap.add_argument("--samples", type=int, default=500)
    ap.add_argument(
        "--bandwidth", action="store_true", help=f"also time {BANDWIDTH_MB} MB of durable appends"
    )
    args = ap.parse_args(argv)
    print(describe(measure(args.dir, args.samples, args.bandwidth)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
