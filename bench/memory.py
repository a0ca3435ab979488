"""Memory benchmark: kcoord's resident memory holding the committed offsets of G groups x P
partitions (issue 15: RSS <= 150 MB with 10 k groups x 10 partitions).

    python -m bench.memory                          # 10,000 groups x 10 partitions
    python -m bench.memory --groups 1000 --partitions 64

A fresh ``kcoord serve`` (modules byte-compiled first, no HTTP endpoint) is filled by kload's
fetch-offsets workload, whose set-up pass commits an offset for every partition 0..P-1 of every
group kbench-g00000.. (one OffsetCommit per group) and whose measured second reads them back and
checks every value; then the broker restarts on the same directory (the state from the log or its
snapshot) and is read again. Prints the broker's VmRSS empty, after the commits, and after the
restart, against the target; benchmarks print, they never fail the test suite.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python bench/memory.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common

TARGET_MB = 150.0  # issue 15, with 10 k groups x 10 partitions committed
TARGET_GROUPS, TARGET_PARTITIONS = 10_000, 10


def _kload(port: int, pid: int, groups: int, partitions: int) -> dict[str, Any]:
    k = subprocess.run(
        [
            str(common.BUILD_DIR / "kload"),
            "--port", str(port), "-w", "fetch-offsets", "-G", str(groups), "-P", str(partitions),
            "-c", "8", "-d", "16", "-T", "1", "--warmup", "0", "--server-pid", str(pid),
        ],
        capture_output=True,
        text=True,
    )  # fmt: skip
    if k.returncode != 0:
        raise SystemExit(f"kload fetch-offsets failed (rc {k.returncode}):\n{k.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(k.stdout.strip().splitlines()[-1])
    return result


def run(
    groups: int = TARGET_GROUPS, partitions: int = TARGET_PARTITIONS, out: Path | None = None
) -> dict[str, Any]:
    common.compile_kcoord()
    common.build_kload()
    out = out or Path(tempfile.mkdtemp(prefix="kcoord-memory-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="kcoord-memory-data-"))
    log = out / "memory-kcoord.log"
    try:
        proc, port = common.start_kcoord(data, log)
        try:
            empty = common.rss_mb(proc.pid)
            filled_run = _kload(port, proc.pid, groups, partitions)
            time.sleep(0.5)  # let the flusher and the snapshot writer settle
            filled = common.rss_mb(proc.pid)
        finally:
            common.stop_process(proc, 60)
        proc, port = common.start_kcoord(data, log)
        try:
            restarted_run = _kload(port, proc.pid, groups, partitions)
            restarted = common.rss_mb(proc.pid)
        finally:
            common.stop_process(proc, 60)
    finally:
        shutil.rmtree(data, ignore_errors=True)
    return {
        "groups": groups,
        "partitions": partitions,
        "empty_mb": empty,
        "filled_mb": filled,
        "restarted_mb": restarted,
        "valid": bool(filled_run.get("valid", True)) and bool(restarted_run.get("valid", True)),
        "log": str(log),
    }


def describe(r: dict[str, Any]) -> str:
    worst = max(r["filled_mb"] or 0.0, r["restarted_mb"] or 0.0)
    at_target = (r["groups"], r["partitions"]) == (TARGET_GROUPS, TARGET_PARTITIONS)
    verdict = ("met" if worst <= TARGET_MB else "NOT MET") if at_target else "n/a (another size)"
    return (
        f"memory with {r['groups']:,} groups x {r['partitions']} partitions committed: RSS empty "
        f"{r['empty_mb']:.0f} MB, after the commits {r['filled_mb']:.0f} MB, after a restart "
        f"{r['restarted_mb']:.0f} MB (offsets read back {'correct' if r['valid'] else 'WRONG'}); "
        f"target <= {TARGET_MB:.0f} MB with 10,000 x 10 (issue 15): {verdict}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.memory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--groups", type=int, default=TARGET_GROUPS)
    ap.add_argument("--partitions", type=int, default=TARGET_PARTITIONS)
    ap.add_argument("--out", default="", help="logs directory (default: a temp dir)")
    args = ap.parse_args(argv)
    r = run(args.groups, args.partitions, Path(args.out) if args.out else None)
    print(describe(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
