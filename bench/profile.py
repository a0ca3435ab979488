"""Profile kcoord under one kload workload with py-spy and list its hottest functions.

    pip install py-spy
    python -m bench.profile                                   # commit, 8 connections x 16 in flight
    python -m bench.profile -w fetch-offsets --kload-args '-c 8 -d 16 -P 10'
    python -m bench.profile --kcoord-args '--log-flush-policy os' --seconds 30 --top 25

Starts kcoord as the benchmark does (temp log dir, durable defaults, rebalance delay 0), runs
kload against it, and after the warm-up samples the broker with ``py-spy record --format raw``
(non-blocking, per thread, no line numbers). Prints kload's result and, per thread, the top
functions by self time (samples where the function is the innermost frame) and by total time
(samples with the function anywhere on the stack). py-spy leaves out idle samples, so a thread
blocked in a syscall that releases the GIL (fdatasync in the flusher thread, epoll in the event
loop) shows little; the event loop thread's share of wall time is printed too. The collapsed
stacks are kept (``--out``, default /tmp/kcoord-prof) for flamegraph.pl or speedscope.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as ``python bench/profile.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common

# frames under which everything runs (entry point, click, the loop runner, thread start)
TRUNK = (
    "(<frozen runpy>)",
    "(click/core.py)",
    "(kcoord/cli.py)",
    "(kcoord/server/app.py)",
    "(uvloop/__init__.py)",
    "(threading.py)",
    "_worker (concurrent/futures/thread.py)",
)


def aggregate(raw: Path) -> dict[str, tuple[int, collections.Counter[str], collections.Counter[str]]]:
    """{thread: (samples, self counts, total counts)} from py-spy's collapsed stacks."""
    out: dict[str, tuple[int, collections.Counter[str], collections.Counter[str]]] = {}
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = stack.split(";")
        thread = "all"
        if frames and frames[0].startswith("process "):
            frames = frames[1:]
        if frames and frames[0].startswith("thread "):
            thread, frames = frames[0], frames[1:]
        if not frames:
            continue
        count = int(n)
        total, selfc, tc = out.get(thread, (0, collections.Counter(), collections.Counter()))
        selfc[frames[-1]] += count
        for f in set(frames):
            tc[f] += count
        out[thread] = (total + count, selfc, tc)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.profile",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("-w", "--workload", default="commit", help="kload workload (commit, fetch-offsets, ...)")
    ap.add_argument("--kload-args", default="-c 8 -d 16 -P 1", help="kload flags besides -w/-T")
    ap.add_argument("--seconds", type=float, default=20, help="sampling time")
    ap.add_argument("--warmup", type=float, default=3, help="seconds of load before sampling starts")
    ap.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--kcoord-args", default="", help="extra `kcoord serve` flags")
    ap.add_argument("--out", default="/tmp/kcoord-prof", help="where the collapsed stacks and logs go")
    args = ap.parse_args(argv)
    if shutil.which("py-spy") is None:
        raise SystemExit("py-spy not found: pip install py-spy")
    common.raise_fd_limit()
    build = common.build_kload()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = f"{args.workload}-{'_'.join(args.kload_args.split()).replace('-', '')}"
    data = tempfile.mkdtemp(prefix="kcoord-prof-data-")
    port = common.free_port()
    broker_log = open(out / f"kcoord-{tag}.log", "w")  # noqa: SIM115 - lives as long as the broker
    broker = subprocess.Popen(
        common.kcoord_cmd(port, data, common.KCOORD_ARGS + args.kcoord_args.split()),
        stdout=broker_log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not common.port_open(port):
            if broker.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"kcoord did not start; see {broker_log.name}")
            time.sleep(0.05)
        kload_cmd = [
            str(build / "kload"),
            "--port",
            str(port),
            "-w",
            args.workload,
            "--server-pid",
            str(broker.pid),
            "-T",
            str(args.seconds + 2),
            "--warmup",
            str(args.warmup),
            *shlex.split(args.kload_args),
        ]
        kload = subprocess.Popen(kload_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(args.warmup + 0.5)
        raw = out / f"pyspy-{tag}.txt"
        cpu0 = broker_cpu(broker.pid)
        t0 = time.monotonic()
        spy = subprocess.run(
            [
                "py-spy",
                "record",
                "--pid",
                str(broker.pid),
                "--duration",
                str(int(args.seconds)),
                "--rate",
                str(args.rate),
                "--format",
                "raw",
                "--nolineno",
                "--threads",
                "--nonblocking",
                "--output",
                str(raw),
            ],
            capture_output=True,
            text=True,
        )
        cpu = (broker_cpu(broker.pid) - cpu0) / (time.monotonic() - t0)
        stdout, stderr = kload.communicate(timeout=args.seconds + args.warmup + 120)
        if spy.returncode != 0:
            raise SystemExit(f"py-spy failed: {spy.stderr.strip()}")
    finally:
        common.stop_process(broker)
        broker_log.close()
        shutil.rmtree(data, ignore_errors=True)
    result = next((json.loads(x) for x in stdout.splitlines() if x.startswith("{")), {})
    (out / f"kload-{tag}.log").write_text(common.shell_join(kload_cmd) + "\n" + stdout + stderr)
    print(f"kload {common.shell_join(kload_cmd[1:])}")
    print(
        f"  {result.get('rps', 0):,.0f} req/s, {result.get('partitions_per_s', 0):,.0f} partitions/s, "
        f"p99 {result.get('lat_us', {}).get('p99', 0) / 1000:.2f} ms, errors {result.get('errors')} "
        f"{result.get('errcodes')}, valid {result.get('valid')}; kcoord CPU {cpu:.2f} cores while sampled"
    )
    for thread, (total, selfc, tc) in sorted(aggregate(raw).items(), key=lambda kv: -kv[1][0]):
        wall = args.seconds * args.rate
        print(f"\n{thread}: {total} active samples (~{100 * total / wall:.0f}% of the sampled wall time)")
        print(f"  top {args.top} by self time:")
        for fn, n in selfc.most_common(args.top):
            print(f"    {100 * n / total:5.1f}%  {fn}")
        print(f"  top {args.top} by total time (without the start-up frames every stack shares):")
        inner = [(fn, n) for fn, n in tc.most_common() if not fn.endswith(TRUNK)]
        for fn, n in inner[: args.top]:
            print(f"    {100 * n / total:5.1f}%  {fn}")
    print(f"\ncollapsed stacks: {raw}")
    return 0


def broker_cpu(pid: int) -> float:
    """CPU seconds (user + system) of the process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    sys.exit(main())
