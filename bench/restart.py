"""Restart benchmark: time from starting ``kcoord serve`` on a coordinator log of N offset-commit
records (default 1 M) to the first successful OffsetFetch answer.

    python -m bench.restart                        # 1 M records written offline, median of 3 starts
    python -m bench.restart --records 200000 --runs 5
    python -m bench.restart --via-kload            # the records are real OffsetCommits through kcoord

How the log is made (default, ``offline``): the records are written straight into
``<dir>/__consumer_offsets-<n>`` with kcoord's own storage classes, exactly as the coordinator
appends them: ``kcoord.groups.records`` (offset commit key, value v3),
``kcoord.protocol.records.build_batch`` (one uncompressed v2 batch per simulated OffsetCommit
request of --per-batch partitions of one group) and ``kcoord.storage.log.Log`` (segments and
indexes), each group in the coordinator partition ``partition_for`` gives it. The key space is
issue 15's 10 k keys in kload's names: groups kbench-g00000.. (--groups, 1000), topic kbench,
partitions 0..9 (--partitions, 10), so most records are overwritten commits, as in a
long-running cluster (stops 19 and 20 measured 64 k keys: --partitions 64). About 1 M records/10 s.
``--via-kload`` instead drives kload's commit workload (8 connections x 16 in flight, 10
partitions per request) through a running kcoord until the coordinator logs hold N records
(counted from the segment files after a clean shutdown): slower, but every byte is the broker's.

A restart is a start after a clean shutdown: the first start on the prepared directory replays
the whole log (the offline writer leaves no coordinator snapshot; its time is printed as the
full-replay figure) and its clean shutdown writes the snapshots (docs/coordinator-records.md).
Each timed start then works on a fresh copy of that directory (page cache warm: this measures
replay, not the disk), starts ``kcoord serve`` with its defaults (its modules byte-compiled first,
as an installed kcoord's are: a checkout under PYTHONDONTWRITEBYTECODE would compile them at every
start), and polls OffsetFetch v2 of a
group in the last coordinator partition (replayed last) every 2 ms until it answers without error
with the expected offset. kcoord's own "loaded coordinator partitions" log line gives the replay
share and how many records came from the log rather than a snapshot. Prints one line per start
and the median; benchmarks print, they never fail the test suite.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python bench/restart.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common

TOPIC = "kbench"
TOPIC_PARTITIONS = 10  # per group: 1000 groups x 10 = the 10 k keys of issue 15
GROUP_PREFIX = "kbench-g"
TARGET_S = 0.5  # issue 15: first OffsetFetch after a restart with 1 M records


def build_offline(
    data_dir: Path,
    records: int,
    groups: int,
    per_batch: int,
    seed: int = 1,
    partitions: int = TOPIC_PARTITIONS,
) -> tuple[str, int, int]:
    """Write ``records`` offset commits; return (probe group, probe partition, its last offset)."""
    from kcoord.config import BrokerConfig
    from kcoord.groups import OFFSETS_TOPIC
    from kcoord.groups.records import (
        OffsetCommitKey,
        OffsetCommitValue,
        encode_offset_key,
        encode_offset_value,
    )
    from kcoord.protocol.records import build_batch, read_header
    from kcoord.runtime.partitioning import partition_for
    from kcoord.storage.flush import Flusher
    from kcoord.storage.log import Log, LogConfig

    cfg = BrokerConfig()
    nparts = cfg.offsets_topic_num_partitions
    log_config = LogConfig(
        segment_bytes=cfg.offsets_topic_segment_bytes,
        retention_ms=-1,
        retention_bytes=-1,
        index_interval_bytes=cfg.log_index_interval_bytes,
    )
    flusher = Flusher("os")
    logs = [Log.open(data_dir / f"{OFFSETS_TOPIC}-{i}", log_config, flusher) for i in range(nparts)]
    names = [f"{GROUP_PREFIX}{g:05d}" for g in range(groups)]
    shard = [partition_for(name, nparts) for name in names]
    keys = [[encode_offset_key(OffsetCommitKey(name, TOPIC, p)) for p in range(partitions)] for name in names]
    rng = random.Random(seed)
    now = int(time.time() * 1000)
    last: dict[tuple[int, int], int] = {}
    written = 0
    rr = 0
    while written < records:
        g = rng.randrange(groups)
        n = min(per_batch, records - written)
        entries = []
        for i in range(n):
            p = (rr + i) % partitions
            offset = written + i
            entries.append((keys[g][p], encode_offset_value(OffsetCommitValue(offset, -1, "", now))))
            last[(g, p)] = offset
        rr += n
        data = build_batch(entries, now)
        logs[shard[g]].append(data, [read_header(data)], now)
        written += n
    for lg in logs:
        lg.sync()
        lg.close()
    # probe a group of the coordinator partition replayed last
    last_shard = max(shard[g] for g, _ in last)
    in_last = [(g, p) for (g, p) in last if shard[g] == last_shard]
    g, p = max(in_last)
    return names[g], p, last[(g, p)]


def count_records(data_dir: Path) -> int:
    """Records in the coordinator logs, read from the segment files (read-only)."""
    from kcoord.protocol.records import iter_headers

    total = 0
    for seg in data_dir.glob("__consumer_offsets-*/*.log"):
        for h in iter_headers(seg.read_bytes(), partial_ok=True):
            if not h.is_control:
                total += h.records_count
    return total


def build_via_kload(data_dir: Path, records: int, logdir: Path) -> tuple[str, int, int]:
    """Commit through a running kcoord with kload until the logs hold ``records`` records."""
    common.build_kload()
    total = 0
    chunk = 0
    rate = 25_000.0  # records/s, a first guess; measured after each chunk
    while total < records:
        proc, port = common.start_kcoord(data_dir, logdir / f"restart-fill-{chunk}.log")
        try:
            seconds = max(1.0, min(120.0, 1.1 * (records - total) / rate))
            k = subprocess.run(
                [
                    str(common.BUILD_DIR / "kload"),
                    "--port",
                    str(port),
                    "-w",
                    "commit",
                    "-c",
                    "8",
                    "-d",
                    "16",
                    "-P",
                    "10",
                    "-T",
                    f"{seconds:.1f}",
                    "--warmup",
                    "0",
                    "--seed",
                    str(chunk + 1),
                ],
                capture_output=True,
                text=True,
            )
            (logdir / f"restart-fill-kload-{chunk}.log").write_text(k.stdout + k.stderr)
            if k.returncode != 0:
                common.log(f"  kload commit rc {k.returncode}: see {logdir}/restart-fill-kload-{chunk}.log")
        finally:
            common.stop_process(proc, 60)
        before, total = total, count_records(data_dir)
        rate = max(1000.0, (total - before) / seconds)
        common.log(f"  filled {total:,} records")
        chunk += 1
    return f"{GROUP_PREFIX}00000", 0, -1  # offset not known in advance: any committed value


def time_start(
    prepared: Path, group: str, partition: int, expect: int, logdir: Path, tag: str, in_place: bool = False
) -> dict[str, Any]:
    """One timed start on a copy of ``prepared`` (``in_place``: on ``prepared`` itself, which then
    keeps what the clean shutdown wrote, its coordinator snapshots)."""
    work = Path(tempfile.mkdtemp(prefix="kcoord-restart-"))
    try:
        data = prepared if in_place else work / "data"
        if not in_place:
            shutil.copytree(prepared, data)
        port = common.free_port()
        logpath = logdir / f"restart-{tag}.log"
        with open(logpath, "w") as out:
            t0 = time.monotonic()
            proc = subprocess.Popen(common.kcoord_cmd(port, data), stdout=out, stderr=subprocess.STDOUT)
        try:
            t1, offset = common.wait_offset_fetch(port, group, TOPIC, partition, time.monotonic() + 300, proc)
            rss = common.rss_mb(proc.pid)
        finally:
            common.stop_process(proc, 60)
        text = logpath.read_text(errors="replace")
        m = re.search(r"loaded coordinator partitions.*?\brecords=(\d+).*?seconds=([\d.]+)", text)
        replay_s = float(m.group(2)) if m else None
        loaded = int(m.group(1)) if m else None
        m = re.search(r"loaded coordinator partitions.*?log_records=(\d+)", text)
        from_log = int(m.group(1)) if m else loaded
        ok = (expect < 0 and offset >= 0) or offset == expect
        return {
            "seconds": t1 - t0,
            "replay_s": replay_s,
            "records_loaded": loaded,
            "records_from_log": from_log,
            "offset": offset,
            "expected": expect,
            "correct": ok,
            "rss_mb": rss,
            "log": str(logpath),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(
    records: int = 1_000_000,
    runs: int = 3,
    out: Path | None = None,
    groups: int = 1000,
    per_batch: int = 10,
    via_kload: bool = False,
    partitions: int = TOPIC_PARTITIONS,
) -> dict[str, Any]:
    common.compile_kcoord()  # the bytecode an installed kcoord starts from
    out = out or Path(tempfile.mkdtemp(prefix="kcoord-restart-bench-"))
    logdir = out / "logs"
    logdir.mkdir(parents=True, exist_ok=True)
    prepared = Path(tempfile.mkdtemp(prefix="kcoord-restart-prepared-"))
    try:
        t = time.monotonic()
        how = "via kload commit through kcoord" if via_kload else "offline with kcoord's storage classes"
        common.log(f"restart: writing {records:,} offset-commit records {how} ...")
        if via_kload:
            group, partition, expect = build_via_kload(prepared, records, logdir)
        else:
            group, partition, expect = build_offline(
                prepared, records, groups, per_batch, partitions=partitions
            )
        total = count_records(prepared)
        size = sum(f.stat().st_size for f in prepared.rglob("*.log"))
        common.log(
            f"restart: {total:,} records, {size / 1e6:.0f} MB of segments in {time.monotonic() - t:.1f} s"
        )
        # startup cost without a log, to tell process start + imports from replay
        empty = Path(tempfile.mkdtemp(prefix="kcoord-restart-empty-"))
        try:
            base = time_start(empty, group, partition, -2, logdir, "empty")
        finally:
            shutil.rmtree(empty, ignore_errors=True)
        common.log(f"restart: empty log dir, first OffsetFetch after {base['seconds']:.2f} s")
        # Offline, the first start has the log alone: a full replay. Its clean shutdown writes the
        # snapshots the timed restarts load (--via-kload: the broker that wrote the log did).
        first = time_start(prepared, group, partition, expect, logdir, "first", in_place=True)
        common.log(
            f"restart: first start on the prepared directory: first OffsetFetch after "
            f"{first['seconds']:.2f} s (kcoord replay {first['replay_s']} s, {first['records_from_log']} "
            f"records from the log, {first['records_loaded']} in all)"
        )
        results = []
        for i in range(runs):
            r = time_start(prepared, group, partition, expect, logdir, f"run{i}")
            results.append(r)
            replay = f"{r['replay_s']:.2f}" if r["replay_s"] is not None else "?"
            common.log(
                f"restart: run {i + 1}/{runs}: first OffsetFetch after {r['seconds']:.2f} s "
                f"(kcoord replay {replay} s, {r['records_loaded']} records, {r['records_from_log']} of them "
                f"from the log; offset {r['offset']}"
                f"{'' if r['correct'] else f' WRONG, expected {expect}'}; RSS {r['rss_mb']:.0f} MB)"
            )
        return {
            "records": total,
            "segment_mb": size / 1e6,
            "mode": "kload" if via_kload else "offline",
            "keys": None if via_kload else groups * partitions,
            "runs": results,
            "median_s": statistics.median(r["seconds"] for r in results) if results else None,
            "median_replay_s": statistics.median(r["replay_s"] for r in results if r["replay_s"] is not None)
            if any(r["replay_s"] is not None for r in results)
            else None,
            "empty_start_s": base["seconds"],
            "full_replay_start_s": first["seconds"],
            "full_replay_s": first["replay_s"],
            "all_correct": all(r["correct"] for r in results),
            "rss_mb": statistics.median(r["rss_mb"] for r in results if r["rss_mb"]) if results else None,
        }
    finally:
        shutil.rmtree(prepared, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.restart",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3, help="timed starts (median reported)")
    ap.add_argument("--groups", type=int, default=1000, help="offline: groups the commits spread over")
    ap.add_argument(
        "--partitions", type=int, default=TOPIC_PARTITIONS, help="offline: partitions committed per group"
    )
    ap.add_argument("--per-batch", type=int, default=10, help="offline: records per batch (one request)")
    ap.add_argument("--via-kload", action="store_true", help="commit through kcoord with kload instead")
    ap.add_argument("--out", default="", help="logs directory (default: a temp dir)")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else None
    r = run(args.records, args.runs, out, args.groups, args.per_batch, args.via_kload, args.partitions)
    verdict = "met" if r["median_s"] <= TARGET_S else "NOT MET"
    if r["records"] < 1_000_000:
        verdict = "n/a (fewer records)"
    print(
        f"restart with {r['records']:,} offset-commit records over {r['keys'] or '?'} keys "
        f"({r['mode']}, {r['segment_mb']:.0f} MB): "
        f"first OffsetFetch after {r['median_s']:.2f} s median of {len(r['runs'])} "
        f"(kcoord replay {r['median_replay_s']} s; empty-dir start {r['empty_start_s']:.2f} s; "
        f"first start on the prepared dir {r['full_replay_start_s']:.2f} s, replay {r['full_replay_s']} s; "
        f"RSS {r['rss_mb']:.0f} MB; answers {'correct' if r['all_correct'] else 'WRONG'}); "
        f"target <= {TARGET_S} s with 1 M records (issue 15): {verdict}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
