"""Compaction benchmark: how fast the log cleaner cleans, and what it costs concurrent producers.

    python -m bench.compaction                     # 300 k records per codec, 2 x 8 s produce runs
    python -m bench.compaction --records 100000 --duration 4 --repeats 1

1. Throughput, in-process: a data-topic log of --records keyed records (1000 keys, 100-byte
   values, batches of 50) written with kcoord's storage classes, uncompressed and lz4; one
   cleaning pass (``storage.cleaner.compact`` with the data-topic rules) timed by wall clock
   and by process CPU time: MB of log cleaned per second and per CPU-second (per core).
2. Produce p99 with and without cleaning, same run: a broker process with a prefilled compacted
   topic (--prefill-mb) restarts on a fresh copy of that directory either with the cleaner idle
   (log.cleaner.backoff.ms one hour) or cleaning the whole topic at once (backoff 100 ms: after
   a restart every segment is dirty), while one kafka-python producer sends acks=1 records one
   at a time to another topic for --duration seconds; runs alternate, --repeats each. The
   cleaning run's p99 counts only the sends that started while a pass ran (the broker logs each
   pass's end and duration). No peer compacts (Tansu does not; limit-server has no log), so the
   numbers are kcoord's own: absolute throughput, and the p99 ratio cleaning / idle.

Benchmarks print; they never fail the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import free_port, kcoord_cmd, log, port_open, stop_process
from kcoord.storage.cleaner import compact
from kcoord.storage.compaction_rules import DataTopicRules
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig

T0 = 1_700_000_000_000


def _build_log(directory: Path, n: int, codec: int) -> Log:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    lg = Log.open(directory, LogConfig(segment_bytes=8 << 20, retention_ms=-1), Flusher("os"))
    from kcoord.protocol import records

    i = 0
    while i < n:
        b = DefaultRecordBatchBuilder(2, codec, 0, -1, -1, -1, batch_size=1 << 30)
        for j in range(50):
            b.append(
                j, timestamp=T0 + i, key=b"key-%d" % ((i * 7919) % 1000), value=b"v%07d" % i * 12, headers=[]
            )
            i += 1
        data = bytearray(b.build())
        lg.append(data, [records.read_header(data)], T0 + i)
    lg.roll()
    return lg


def throughput(records: int) -> list[str]:
    lines = []
    for name, codec in (("none", 0), ("lz4", 3)):
        d = Path(tempfile.mkdtemp(prefix="kcoord-bench-compact-"))
        try:
            lg = _build_log(d / "t-0", records, codec)
            size = lg.size_bytes
            wall, cpu = time.perf_counter(), time.process_time()
            stats = asyncio.run(compact(lg, DataTopicRules(86_400_000, 0.5), T0 + records))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            assert stats is not None
            mb = size / 1e6
            lines.append(
                f"clean {name:5s}: {mb:6.1f} MB in {wall:5.2f} s ({mb / wall:5.1f} MB/s wall, "
                f"{mb / cpu:5.1f} MB/s per core), {stats.records_in} -> {stats.records_out} records, "
                f"{stats.bytes_out / 1e6:.2f} MB out"
            )
            lg.close()
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return lines


def _start(log_dir: Path, backoff_ms: int, out: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    extra = ["--log-cleaner-backoff-ms", str(backoff_ms), "--log-flush-policy", "os"]
    with out.open("ab") as f:
        proc = subprocess.Popen(kcoord_cmd(port, log_dir, extra), stdout=f, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not port_open(port):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"kcoord did not start; see {out}")
        time.sleep(0.05)
    return proc, port


def _prefill(log_dir: Path, mb: int, out: Path) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    proc, port = _start(log_dir, 3_600_000, out)
    try:
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
        admin.create_topics(
            [
                NewTopic(
                    "big", 1, 1, topic_configs={"cleanup.policy": "compact", "segment.bytes": "1048576"}
                ),
                NewTopic("hot", 1, 1),
            ]
        )
        admin.close()
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", linger_ms=20, batch_size=256 << 10)
        value = b"x" * 1000
        for i in range(mb * 1000):
            producer.send("big", key=b"key-%d" % (i % 5000), value=value)
        producer.flush()
        producer.close()
    finally:
        stop_process(proc)


def _produce_latencies(port: int, duration: float) -> list[tuple[float, float]]:
    """(wall-clock start of the send, its latency in ms) of every send."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", acks=1, linger_ms=0)
    producer.send("hot", b"warm").get(10)
    out = []
    end = time.monotonic() + duration
    while time.monotonic() < end:
        at, t = time.time(), time.perf_counter()
        producer.send("hot", key=b"k", value=b"v" * 100).get(10)
        out.append((at, (time.perf_counter() - t) * 1000))
    producer.close()
    return out


_CLEANED = re.compile(r"^(\S+)Z \[info\s*\] cleaned log .*?\bseconds=([0-9.]+)", re.M)


def _passes(broker_log: str) -> list[tuple[float, float]]:
    """The (start, end) wall-clock times of the cleaning passes a broker's log reports."""
    out = []
    for stamp, seconds in _CLEANED.findall(broker_log):
        end = datetime.datetime.fromisoformat(stamp).replace(tzinfo=datetime.UTC).timestamp()
        out.append((end - float(seconds), end))
    return out


def _p99(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def produce_p99(prefill_mb: int, duration: float, repeats: int) -> list[str]:
    """p99 of the sends of a whole idle run, and of the sends that started while a cleaning pass
    ran (the pass is about a second of the run: measured over the whole run, its effect would
    drown in the idle time around it)."""
    work = Path(tempfile.mkdtemp(prefix="kcoord-bench-compact-"))
    try:
        _prefill(work / "prefill", prefill_mb, work / "prefill.log")
        results: dict[str, list[float]] = {"idle": [], "cleaning": []}
        during: list[int] = []
        for r in range(repeats):
            for mode in ("idle", "cleaning") if r % 2 == 0 else ("cleaning", "idle"):
                d = work / f"run-{r}-{mode}"
                out = work / f"run-{r}-{mode}.log"
                shutil.copytree(work / "prefill", d)
                proc, port = _start(d, 100 if mode == "cleaning" else 3_600_000, out)
                try:
                    sends = _produce_latencies(port, duration)
                finally:
                    stop_process(proc)
                lat = [ms for _at, ms in sends]
                if mode == "cleaning":
                    windows = _passes(out.read_text())
                    lat = [ms for at, ms in sends if any(a <= at <= b for a, b in windows)]
                    during.append(len(lat))
                    passes = ", ".join(f"{b - a:.2f} s" for a, b in windows)
                    log(f"cleaning passes: {passes or 'none'}; {len(lat)} sends during them")
                if not lat:
                    log(f"{mode}: no sends to measure")
                    continue
                results[mode].append(_p99(lat))
                p50, p99 = statistics.median(lat), results[mode][-1]
                log(f"{mode}: {len(lat)} sends, p50 {p50:.2f} ms p99 {p99:.2f} ms")
                shutil.rmtree(d, ignore_errors=True)
        if not results["idle"] or not results["cleaning"]:
            return ["produce p99: not measured (no cleaning pass overlapped the produce runs)"]
        idle, busy = statistics.median(results["idle"]), statistics.median(results["cleaning"])
        return [
            f"produce p99 (acks=1, one record at a time, {prefill_mb} MB compacted topic being cleaned):",
            f"  idle cleaner {idle:.2f} ms, during cleaning passes {busy:.2f} ms, ratio {busy / idle:.2f} "
            f"(sends measured during the passes: {during})",
        ]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--prefill-mb", type=int, default=40)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    lines = throughput(args.records)
    lines += produce_p99(args.prefill_mb, args.duration, args.repeats)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
