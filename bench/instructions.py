"""Instructions per request: kcoord's CPU cost under one kload row, counted by callgrind.

    python -m bench.instructions                                   # commit c8 d16 p1, this checkout
    python -m bench.instructions --base /tmp/kcoord-base --rows 'commit c1 d1 p1,commit c8 d16 p1'

The req/s and CPU µs of ``python -m bench.ab`` move ±30 % between repeats on this machine kind,
which hides a change worth a few per cent. The instructions kcoord executes per request do not:
repeated counts agree within ±0.1 %. Each tree (``--base``, then this checkout) is started under
``valgrind --tool=callgrind --instr-atstart=no``: the start-up, the topic setup and a warm-up run
are not counted; instrumentation is switched on (``callgrind_control -i on``, counters zeroed)
only for the measured kload run, and the dump after it gives the instructions (Ir) of every
thread of the broker, the kernel's work excluded. kcoord runs some 50x slower under valgrind, so
rows that depend on timing (the flusher's group commit, idle detection) see fewer requests per
round than without it: compare trees on the same row, not rows with each other.

Needs valgrind (Debian's ``valgrind`` package: ``callgrind_control`` is in it) and kload (built
as ``python -m bench`` builds it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as ``python bench/instructions.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common

ROWS = {  # row name -> kload workload and flags, as in kload's bench matrix
    "commit c1 d1 p1": ("commit", "-c 1 -d 1 -P 1"),
    "commit c8 d1 p1": ("commit", "-c 8 -d 1 -P 1"),
    "commit c8 d16 p1": ("commit", "-c 8 -d 16 -P 1"),
    "commit c8 d16 p10": ("commit", "-c 8 -d 16 -P 10"),
    "fetch-offsets c64 d1 p1": ("fetch-offsets", "-c 64 -d 1 -P 1"),
    "fetch-offsets c8 d16 p10": ("fetch-offsets", "-c 8 -d 16 -P 10"),
    "produce c8 d16": ("produce", "-c 8 -d 16"),
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default=None, help="another kcoord source tree to count too (a git worktree)")
    ap.add_argument("--rows", default="commit c8 d16 p1", help=f"comma list of: {', '.join(ROWS)}")
    ap.add_argument("--seconds", type=float, default=10, help="length of the counted kload run")
    ap.add_argument("--repeats", type=int, default=1)
    return ap.parse_args(argv)


def count(tree: Path, workload: str, flags: str, seconds: float) -> tuple[int, int]:
    """(instructions, requests) of one counted kload run against kcoord from ``tree``."""
    kload = str(common.build_kload() / "kload")
    data = tempfile.mkdtemp(prefix="kcoord-ir-")
    out = Path(data) / "callgrind.out"
    port = common.free_port()
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out}",
        *common.kcoord_cmd(port, Path(data) / "logs", common.KCOORD_ARGS),
    ]
    env = dict(os.environ, PYTHONPATH=str(tree))
    with open(Path(data) / "kcoord.log", "wb") as log:
        proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 300
        while not common.port_open(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"kcoord from {tree} did not start under valgrind ({data}/kcoord.log)")
            time.sleep(0.5)
        base = [kload, "--port", str(port), "-w", workload, *flags.split()]
        subprocess.run([*base[:4], "setup", *flags.split()], capture_output=True, check=True)
        # A warm-up outside the count: first-use paths (routes, group creation) are not per request.
        subprocess.run([*base, "--no-create", "-T", "3", "--warmup", "0"], capture_output=True, check=True)
        control = ["callgrind_control", str(proc.pid)]
        subprocess.run([*control[:1], "-i", "on", *control[1:]], capture_output=True, check=True)
        subprocess.run([*control[:1], "-z", *control[1:]], capture_output=True, check=True)
        run = subprocess.run(
            [*base, "--no-create", "-T", str(seconds), "--warmup", "0"],
            capture_output=True,
            text=True,
            check=True,
        )
        subprocess.run([*control[:1], "-d", *control[1:]], capture_output=True, check=True)
        subprocess.run([*control[:1], "-i", "off", *control[1:]], capture_output=True, check=True)
        result = json.loads([line for line in run.stdout.splitlines() if line.startswith("{")][-1])
        requests = result.get("requests") or round(result["rps"] * seconds)
        instructions = 0
        for dump in Path(data).glob("callgrind.out*"):
            for line in dump.read_text(errors="replace").splitlines():
                if line.startswith(("summary:", "totals:")):
                    instructions += int(line.split()[1])
                    break
        return instructions, requests
    finally:
        common.stop_process(proc, 60)
        shutil.rmtree(data, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    here = Path(__file__).resolve().parents[1]
    trees = [("base", Path(args.base).resolve())] if args.base else []
    trees.append(("new", here))
    rows = [r.strip() for r in args.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        raise SystemExit(f"unknown rows {unknown}; known: {', '.join(ROWS)}")
    print("| row | tree | requests | instructions per request |")
    print("|---|---|---|---|")
    per: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        workload, flags = ROWS[row]
        for _ in range(args.repeats):
            for name, tree in trees:
                ir, n = count(tree, workload, flags, args.seconds)
                per.setdefault((row, name), []).append(ir / n)
                print(f"| {row} | {name} | {n:,} | {ir / n:,.0f} |", flush=True)
    if args.base:
        for row in rows:
            b, n = per[(row, "base")], per[(row, "new")]
            print(f"{row}: new / base = {min(n) / min(b):.4f} (fewest instructions per request of each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
