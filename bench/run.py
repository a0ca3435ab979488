"""kcoord's benchmark suite: kcoord against librdkafka's mock cluster, Tansu (memory engine) and
kload's limit-server.

    python -m bench                     # full matrix, 3 repeats, + restart and share (~22 min)
    python -m bench --quick             # smoke: small matrix, 1 repeat, 2 s runs (~1.5 min)
    python -m bench --workloads commit,fetch-offsets --repeats 5 --duration 10

Builds kload, limit-server and mockpeer (bench/kload, copied from the shared kload tool; mockpeer
links the librdkafka of the installed confluent-kafka wheel) into bench/kload/build, starts every
peer on a free port, and runs kload's matrix interleaved: each repeat starts every peer fresh,
then for each matrix row runs kload against each peer in turn (peer order rotated per repeat), so
that ratios compare peers under the same machine conditions. The running, peer handling and
matrix are kload's bench.py (imported, not copied); this script
adds free ports, a fresh kcoord log dir per repeat, crash detection, a wait before each run for
the other peers to be idle (``Peers.quiet_others``), and the summary (bench/summary.py):
medians, p99, kcoord / mock, kcoord / Tansu and kcoord / limit ratios from the same run, kcoord's
and the mock's CPU per request, kcoord's RSS, and issue 15's targets marked met or not met (each
part a row misses named with its figure). Then the restart benchmark (bench/restart.py) and the
share workload (bench/share.py), each on a fresh kcoord.

kcoord runs with its durable defaults (log.flush.policy=always, group commit) plus
group.initial.rebalance.delay.ms=0, so the rebalance rows measure rebalance work only (the other
workloads never send JoinGroup). Tansu is found through KCOORD_TANSU (its binary, or the shared
``tools/tansu`` script that prints the binary's path) or ../shared/tools/tansu beside the repo;
without it the Tansu columns are empty. Results, raw kload JSON lines and every log go to --out
(default /tmp/kcoord-bench/run-<time>). Benchmarks print; they never fail the test suite.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

if __package__ in (None, ""):  # run as ``python bench/run.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, durability
from bench.summary import PEERS, report

WORKLOADS = ("commit", "fetch-offsets", "rebalance", "produce", "fetch", "restart", "memory", "share")
# Only when named in --workloads: not part of the default run.
OPTIONAL_WORKLOADS = ("consumer-groups", "transactions")
# Before each kload run the other peers must be idle: Tansu goes on burning 1.6 cores for its
# members' sessions after kload's m1000 rebalance run has ended, and the rows that followed it
# measured kcoord's m1000 at 41-45 ms beside it (23.7 ms in the repeat that ran before it).
IDLE_CORES = 0.05  # a peer using more CPU than this between runs is still working
IDLE_WAIT_S = 5.0  # how long such a peer may go on before it is restarted
# The Python floor (bench/python_floor.py) answers only what kload's commit workload sends.
PYFLOOR_WORKLOADS = ("commit",)


def load_kload_bench(tansu: str | None) -> ModuleType:
    """Import kload's bench.py from bench/kload (unchanged); its binaries live in the build dir."""
    saved = os.environ.get("TANSU_BIN")
    os.environ["TANSU_BIN"] = tansu or "/nonexistent/tansu"  # bench.py resolves Tansu at import
    try:
        spec = importlib.util.spec_from_file_location("kload_bench", common.KLOAD_DIR / "bench.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if saved is None:
            os.environ.pop("TANSU_BIN", None)
        else:
            os.environ["TANSU_BIN"] = saved
    mod.HERE = str(common.BUILD_DIR)  # run_kload runs HERE/kload; peers run with cwd HERE
    return mod


# --- peers ---------------------------------------------------------------------------------------
class Peers:
    def __init__(
        self,
        kb: ModuleType,
        names: list[str],
        tansu: str | None,
        mockpeer: str | None,
        out: Path,
        kcoord_args: list[str],
    ):
        self.kb = kb
        self.names = names
        self.kcoord_args = kcoord_args
        self.kcoord_dir: str | None = None
        logdir = str(out / "logs")
        cmds: dict[str, tuple[str, dict[str, Any]]] = {
            "limit": (f"{common.BUILD_DIR}/limit-server --port {{port}}", {}),
            "kcoord": ("", {}),  # set per start: fresh log dir
        }
        if tansu:
            cmds["tansu"] = (kb.BUILTIN_PEERS["tansu"][0], {})
        # canned answers from Python on uvloop, this checkout's (peers run with cwd bench/kload/build)
        cmds["pyfloor"] = (
            f"env PYTHONPATH={common.REPO} {sys.executable} -m bench.python_floor --serve {{port}}",
            {},
        )
        if mockpeer:
            # kload's own mock settings (its topics, Kafka's rebalance delay, the leader's SyncGroup
            # delay its coordinator needs), with the binary built here
            cmd, extra = kb.BUILTIN_PEERS["mock"]
            cmds["mock"] = (f"{mockpeer} {cmd.split(' ', 1)[1]}", extra)
        self.peers = {n: kb.Peer(n, cmds[n][0], common.free_port(), cmds[n][1], logdir) for n in names}

    def start(self, name: str, tag: str) -> None:
        peer = self.peers[name]
        if name == "kcoord":
            self._drop_kcoord_dir()
            self.kcoord_dir = tempfile.mkdtemp(prefix="kcoord-bench-data-")
            cmd = common.kcoord_cmd("{port}", self.kcoord_dir, common.KCOORD_ARGS + self.kcoord_args)
            # this checkout's kcoord, whatever is installed (peers run with cwd bench/kload/build)
            peer.cmd = f"env PYTHONPATH={common.REPO} " + common.shell_join(cmd)
        peer.port = common.free_port() if common.port_open(peer.port) else peer.port
        peer.start(tag)

    def start_all(self, tag: str) -> None:
        for n in self.names:
            self.start(n, tag)

    def stop_all(self) -> None:
        for p in self.peers.values():
            p.stop()
        self._drop_kcoord_dir()

    def quiet_others(self, name: str, tag: str) -> list[str]:
        """Wait until every peer but ``name`` is idle; restart those still busy after
        ``IDLE_WAIT_S``, so that no peer's left-over work runs beside another's measured run.
        Returns what was restarted, for the summary."""
        others = [p for n, p in self.peers.items() if n != name and p.proc is not None]
        start = time.monotonic()
        waited_for: set[str] = set()
        while True:
            busy = _busy_peers(others)
            if not busy or time.monotonic() > start + IDLE_WAIT_S:
                break
            waited_for.update(p.name for p, _cores in busy)
        if waited_for:
            common.log(
                f"  waited {time.monotonic() - start:.1f} s for {', '.join(sorted(waited_for))} to go idle"
            )
        restarted = []
        for p, cores in busy:
            restarted.append(f"{p.name} still used {cores:.2f} cores {IDLE_WAIT_S:.0f} s before {tag}")
            common.log("  " + restarted[-1])
            p.stop()
            self.start(p.name, "".join(c if c.isalnum() else "_" for c in tag) + "-idle")
        return restarted

    def _drop_kcoord_dir(self) -> None:
        if self.kcoord_dir:
            shutil.rmtree(self.kcoord_dir, ignore_errors=True)
            self.kcoord_dir = None


def _busy_peers(peers: list[Any], window_s: float = 0.2) -> list[tuple[Any, float]]:
    """The peers that used more than IDLE_CORES of CPU over ``window_s``, with their cores."""
    before = {p.name: _cpu_s(p.proc.pid) for p in peers}
    time.sleep(window_s)
    busy = []
    for p in peers:
        start, end = before[p.name], _cpu_s(p.proc.pid)
        if start is not None and end is not None and (end - start) / window_s > IDLE_CORES:
            busy.append((p, (end - start) / window_s))
    return busy


def _cpu_s(pid: int) -> float | None:
    """A process's user + system CPU seconds (/proc/PID/stat), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- main ----------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="smoke: small matrix, 1 repeat, 2 s runs")
    ap.add_argument("--repeats", type=int, default=None, help="repeats of the matrix (default 3; quick 1)")
    ap.add_argument(
        "--duration", type=float, default=None, help="measured seconds per run (default 5; quick 2)"
    )
    ap.add_argument(
        "--warmup", type=float, default=None, help="warm-up seconds per run (default 1; quick 0.5)"
    )
    ap.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help=f"comma list of {', '.join(WORKLOADS)} (the default), and {', '.join(OPTIONAL_WORKLOADS)}",
    )
    ap.add_argument(
        "--rows", default="", help="comma list of matrix row ids to keep, e.g. 'commit c8 d16 p1'"
    )
    ap.add_argument(
        "--peers",
        default="kcoord,mock,tansu,limit,pyfloor",
        help="comma list of kcoord, mock, tansu, limit, pyfloor (the Python floor; commit rows only)",
    )
    ap.add_argument(
        "--kcoord-args", default="", help="extra `kcoord serve` flags (e.g. '--log-flush-policy os')"
    )
    ap.add_argument("--session-ms", type=int, default=45000, help="rebalance: JoinGroup session timeout")
    ap.add_argument("--rb-timeout", type=float, default=150, help="rebalance: seconds before giving up")
    ap.add_argument(
        "--restart-records", type=int, default=None, help="restart: records (default 1M; quick 100k)"
    )
    ap.add_argument(
        "--share-records", type=int, default=None, help="share: records to consume (default 1M; quick 200k)"
    )
    ap.add_argument(
        "--restart-runs", type=int, default=None, help="restart: timed starts (default 3; quick 1)"
    )
    ap.add_argument("--out", default="", help="results directory (default /tmp/kcoord-bench/run-<time>)")
    ap.add_argument("--summarise", default="", metavar="DIR", help="only re-print an earlier run's table")
    args = ap.parse_args(argv)
    q = args.quick
    args.repeats = args.repeats or (1 if q else 3)
    args.duration = args.duration or (2.0 if q else 5.0)
    args.warmup = args.warmup if args.warmup is not None else (0.5 if q else 1.0)
    args.restart_records = args.restart_records or (100_000 if q else 1_000_000)
    args.restart_runs = args.restart_runs or (1 if q else 3)
    args.share_records = args.share_records or (200_000 if q else 1_000_000)
    args.workloads = [w for w in args.workloads.split(",") if w]
    unknown = set(args.workloads) - set(WORKLOADS) - set(OPTIONAL_WORKLOADS)
    if unknown:
        ap.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    args.peers = [p for p in args.peers.split(",") if p]
    if "kcoord" not in args.peers:
        ap.error("--peers must include kcoord")
    return args


def git_state() -> str:
    """The commit under test, and whether the work tree differs from it (read-only git calls)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(common.REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(common.REPO), "status", "--porcelain", "--untracked-files=no", "kcoord"],
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return f"{head}{' + uncommitted changes in kcoord/' if dirty else ''}" if head else "unknown"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.summarise:
        return resummarise(Path(args.summarise))
    common.raise_fd_limit()
    out = Path(args.out or f"/tmp/kcoord-bench/run-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    (out / "logs").mkdir(parents=True, exist_ok=True)
    common.log(f"results -> {out}")
    common.build_kload()

    tansu, how = (None, "not requested")
    if "tansu" in args.peers:
        tansu, how = common.find_tansu()
        common.log(f"Tansu: {how}" if tansu else f"Tansu SKIPPED: {how}")
        if not tansu:
            args.peers.remove("tansu")
    mockpeer = None
    if "mock" in args.peers:
        mockpeer, how_mock = common.build_mockpeer()
        common.log(f"librdkafka mock: {how_mock}" if mockpeer else f"librdkafka mock SKIPPED: {how_mock}")
        if not mockpeer:
            args.peers.remove("mock")
    kb = load_kload_bench(tansu)
    matrix = [m for m in (kb.MATRIX_QUICK if args.quick else kb.MATRIX_FULL) if m[1] in args.workloads]
    if args.rows:
        keep = {r.strip() for r in args.rows.split(",")}
        matrix = [m for m in matrix if m[0] in keep]

    names = [n for n in PEERS if n in args.peers]
    peers = Peers(kb, names, tansu, mockpeer, out, args.kcoord_args.split())
    meta = {
        "started": datetime.datetime.now().isoformat(),
        "argv": sys.argv,
        "tansu": how,
        "nproc": os.cpu_count(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "kcoord_git": git_state(),
        "loadavg_start": Path("/proc/loadavg").read_text().strip(),
        "matrix": matrix,
        "kcoord_args": common.KCOORD_ARGS + args.kcoord_args.split(),
        "duration": args.duration,
        "warmup": args.warmup,
        "repeats": args.repeats,
    }
    if {"commit", "produce"} & {m[1] for m in matrix}:
        # Where the peers' log dirs go (mkdtemp's default), before any peer loads the machine.
        meta["durability"] = durability.measure(bandwidth="produce" in {m[1] for m in matrix})
        common.log(durability.describe(meta["durability"]))
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    crashes: list[str] = []
    restarted: list[str] = []
    try:
        for rep in range(args.repeats if matrix else 0):
            common.log(
                f"== repeat {rep + 1}/{args.repeats}  load {Path('/proc/loadavg').read_text().strip()}"
            )
            peers.start_all(f"r{rep}")
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for cid, wl, kargs in matrix:
                for n in order:
                    if n == "pyfloor" and wl not in PYFLOOR_WORKLOADS:
                        continue
                    peer = peers.peers[n]
                    restarted += peers.quiet_others(n, f"r{rep} '{cid}' on {n}")
                    kb.run_kload(args, peer, wl, kargs, rep, cid, str(out))
                    if peer.proc.poll() is not None:
                        msg = (
                            f"{n} exited (rc {peer.proc.returncode}) during r{rep} '{cid}'; "
                            f"log {out}/logs/peer-{n}-r{rep}*.log; restarted"
                        )
                        common.log("  " + msg)
                        crashes.append(msg)
                        peer.proc = None
                        peers.start(n, f"r{rep}-after-{cid.replace(' ', '_')}")
            peers.stop_all()
    finally:
        peers.stop_all()

    restart_result = None
    if "restart" in args.workloads:
        from bench import restart

        restart_result = restart.run(records=args.restart_records, runs=args.restart_runs, out=out)
    memory_result = None
    if "memory" in args.workloads:
        from bench import memory

        memory_result = memory.run(out=out / "logs")
        common.log(memory.describe(memory_result))
    share_result = None
    if "share" in args.workloads:
        from bench import share

        share_result = share.run(records=args.share_records, out=out, kcoord_args=args.kcoord_args.split())
        common.log(share.describe(share_result))
    cg_result = None
    if "consumer-groups" in args.workloads:
        from bench import consumer_groups

        # the classic row beside it is the matrix's 'rebalance m1000' (full matrix)
        steady_s = "5" if args.quick else "20"
        cg_args = consumer_groups.parse_args(
            ["--repeats", str(args.repeats), "--steady-s", steady_s, "--no-classic"]
        )
        cg_args.kcoord_args = args.kcoord_args
        cg = consumer_groups.run(cg_args, out, classic=False)
        cg_result = {"figures": consumer_groups.figures(cg["consumer"]), "problems": cg["problems"]}
        common.log(cg["table"])
    txn_result = None
    if "transactions" in args.workloads:
        from bench import transactions

        txn_args = transactions.parse_args(
            ["--repeats", str(args.repeats), "--duration", str(args.duration), "--warmup", str(args.warmup)]
        )
        txn_args.kcoord_args = args.kcoord_args
        txn = transactions.run(txn_args, out)
        txn_result = {"rows": txn["rows"], "problems": txn["problems"], "records": txn["records"]}
        common.log(txn["table"])
    text = report(
        out,
        matrix,
        args.repeats,
        restart_result,
        share_result,
        crashes,
        cg_result,
        txn_result,
        memory_result,
        restarted,
    )
    meta["finished"] = datetime.datetime.now().isoformat()
    meta["loadavg_end"] = Path("/proc/loadavg").read_text().strip()
    (out / "meta.json").write_text(json.dumps(meta, indent=1))
    print(text)
    print(f"(results, raw kload JSON and logs in {out})")
    return 0


def resummarise(out: Path) -> int:
    """Re-render an earlier run's table from its files (--summarise DIR)."""
    meta = json.loads((out / "meta.json").read_text())
    prev = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    matrix = [tuple(m) for m in meta["matrix"]]
    text = report(
        out,
        matrix,
        meta["repeats"],
        prev.get("restart"),
        prev.get("share"),
        prev.get("crashes", []),
        prev.get("consumer_groups"),
        prev.get("transactions"),
        memory=prev.get("memory"),
        restarted=prev.get("restarted", []),
    )
    print(text)
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    rc = main()
    common.log(f"done in {time.monotonic() - t0:.0f} s")
    sys.exit(rc)
