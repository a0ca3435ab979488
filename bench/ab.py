"""A/B: kcoord from two source trees on the same kload rows, alternated in one run.

    git worktree add /tmp/kcoord-base <commit>
    python -m bench.ab --base /tmp/kcoord-base                     # commit, fetch-offsets, rebalance rows
    python -m bench.ab --base /tmp/kcoord-base --rows 'commit c8 d16 p1' --repeats 6

"base" runs with PYTHONPATH pointing at the other tree, "new" is this checkout; both with the
bench's kcoord flags (bench/common.py KCOORD_ARGS), each started fresh on a new log dir every
repeat, the order of the two swapped every repeat so that neither always runs first. Prints per
row the median throughput (rebalance: ms from the first JoinGroup answer to Stable, lower is
better), p99 and CPU µs per request of each tree, and the median of the same-repeat ratios
new / base. Results and logs go to --out like ``python -m bench``.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import common
from bench.run import load_kload_bench
from bench.summary import primary

DEFAULT_WORKLOADS = ("commit", "fetch-offsets", "rebalance")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the other kcoord source tree (a git worktree)")
    ap.add_argument(
        "--rows", default="", help="comma list of matrix rows (default: commit, fetch-offsets, rebalance)"
    )
    ap.add_argument("--repeats", type=int, default=4)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--warmup", type=float, default=1)
    ap.add_argument("--session-ms", type=int, default=30000)
    ap.add_argument("--rb-timeout", type=int, default=120)
    ap.add_argument("--kcoord-args", default="", help="extra flags for both trees")
    ap.add_argument("--out", default=None)
    return ap.parse_args(argv)


class Tree:
    """One kcoord source tree run as a kload peer."""

    def __init__(self, kb: Any, name: str, source: Path, out: Path, flags: list[str]) -> None:
        self.name, self.source, self.flags = name, source, flags
        self.peer = kb.Peer(name, "", common.free_port(), {}, str(out / "logs"))
        self.data: str | None = None

    def start(self, tag: str) -> None:
        self.data = tempfile.mkdtemp(prefix=f"kcoord-ab-{self.name}-")
        cmd = common.kcoord_cmd(
            "{port}",
            self.data,
            common.KCOORD_ARGS + self.flags,
            http_setting=(self.source / "kcoord" / "http").is_dir(),
        )
        self.peer.cmd = f"env PYTHONPATH={self.source} " + common.shell_join(cmd)
        self.peer.port = common.free_port()
        self.peer.start(tag)

    def stop(self) -> None:
        self.peer.stop()
        if self.data:
            shutil.rmtree(self.data, ignore_errors=True)
            self.data = None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base = Path(args.base).resolve()
    if not (base / "kcoord" / "__init__.py").exists():
        raise SystemExit(f"{base} is not a kcoord source tree")
    here = Path(__file__).resolve().parents[1]
    out = Path(args.out or f"/tmp/kcoord-bench/ab-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    (out / "logs").mkdir(parents=True, exist_ok=True)
    common.log(f"results -> {out}")
    common.raise_fd_limit()
    common.build_kload()
    kb = load_kload_bench(None)
    matrix = [m for m in kb.MATRIX_FULL if m[1] in DEFAULT_WORKLOADS]
    if args.rows:
        keep = {r.strip() for r in args.rows.split(",")}
        matrix = [m for m in kb.MATRIX_FULL if m[0] in keep]
    flags = args.kcoord_args.split()
    trees = [Tree(kb, "base", base, out, flags), Tree(kb, "new", here, out, flags)]
    recs: list[dict[str, Any]] = []
    try:
        for rep in range(args.repeats):
            order = trees if rep % 2 == 0 else trees[::-1]
            for t in order:
                t.start(f"r{rep}")
            for cid, wl, kargs in matrix:
                for t in order:
                    recs.append(kb.run_kload(args, t.peer, wl, kargs, rep, cid, str(out)))
            for t in trees:
                t.stop()
    finally:
        for t in trees:
            t.stop()
    report = render(matrix, recs, args.repeats, base)
    (out / "summary.md").write_text(report + "\n")
    print(report)
    return 0


def render(matrix: list[tuple[str, str, str]], recs: list[dict[str, Any]], repeats: int, base: Path) -> str:
    lines = [
        f"## A/B (median of {repeats} repeats; base = {base}, new = this checkout)",
        "",
        "| row | base | base p99 ms | base CPU us/req | new | new p99 ms | new CPU us/req | new / base |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for cid, wl, _ in matrix:
        by: dict[str, dict[int, dict[str, Any]]] = {"base": {}, "new": {}}
        for r in recs:
            if r.get("config") == cid and r.get("valid"):
                by[r["peer"]][r["repeat"]] = r
        cells = [cid]
        for name in ("base", "new"):
            rs = list(by[name].values())
            cells.append(_fmt(_med([primary(wl, r) for r in rs])))
            cells.append(_fmt(_med([r.get("lat_us", {}).get("p99") for r in rs]), scale=1000, nd=2))
            cells.append(_fmt(_med([_cpu_us(r) for r in rs]), nd=1))
        ratios = [
            primary(wl, by["new"][rep]) / primary(wl, by["base"][rep])
            for rep in by["new"]
            if rep in by["base"] and primary(wl, by["base"][rep]) and primary(wl, by["new"][rep]) is not None
        ]
        cells.append(f"{statistics.median(ratios):.3f}" if ratios else "-")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Rebalance rows: ms (lower is better), so new / base < 1 is faster."]
    return "\n".join(lines)


def _cpu_us(r: dict[str, Any]) -> float | None:
    cores, rps = r.get("server_cpu_cores"), r.get("rps")
    return cores / rps * 1e6 if cores is not None and rps else None


def _med(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None]
    return statistics.median(ys) if ys else None


def _fmt(x: float | None, scale: float = 1, nd: int = 0) -> str:
    if x is None:
        return "-"
    x /= scale
    return f"{x:,.{nd}f}"


if __name__ == "__main__":
    sys.exit(main())
