"""Share workload: records/s through ShareFetch + acknowledge with 4 share consumers (KIP-932).

    python -m bench.share                           # 1 M records of 1 KiB, 4 consumers
    python -m bench.share --records 500000 --consumers 8

kload speaks no share protocol, so the consumers are the official Java client (kafka-clients 4.3
``KafkaShareConsumer``) through the repo's own probe: ``tests/java/ShareProbe.java bench``
(explicit acknowledgement, every record ACCEPTed, acknowledgements riding on the next
ShareFetch), with the jars from ``tests/java/client-jars.sh``; needs java/javac, else skipped.
Steps: a fresh kcoord (durable defaults, as the suite runs it); kload produces 1 KiB records in
batches of 100 into topic ``kbench-share`` (--partitions, 8); the group's
share.auto.offset.reset is set to earliest (Admin incrementalAlterConfigs); then the consumers
run until --records records were delivered; throughput is counted from the first delivery. Tansu
0.6 has no share groups, so there is no ratio. The Java client's own cost is part of the
number: kcoord's CPU during the run shows whether the broker was the limit.
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
from typing import Any

if __package__ in (None, ""):  # run as ``python bench/share.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common

JAVA_DIR = common.REPO / "tests" / "java"
SHARE_APIS = {76: "ShareGroupHeartbeat", 78: "ShareFetch", 79: "ShareAcknowledge"}
TOPIC = "kbench-share"
GROUP = "kbench-share-g"


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def build_probe(logdir: Path) -> tuple[str | None, str]:
    """(classpath with ShareProbe compiled, or None; why not)."""
    if shutil.which("java") is None or shutil.which("javac") is None:
        return None, "java/javac not installed"
    jars = subprocess.run(
        ["bash", str(JAVA_DIR / "client-jars.sh"), "4.3.0"], capture_output=True, text=True, timeout=900
    )
    if jars.returncode != 0 or not jars.stdout.strip():
        return None, f"kafka-clients 4.3 jars unavailable: {jars.stderr.strip()[-300:]}"
    cp = jars.stdout.strip()
    classes = common.BUILD_DIR / "java"
    classes.mkdir(parents=True, exist_ok=True)
    javac = subprocess.run(
        ["javac", "-d", str(classes), "-cp", cp, str(JAVA_DIR / "ShareProbe.java")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if javac.returncode != 0:
        (logdir / "share-javac.log").write_text(javac.stdout + javac.stderr)
        return None, f"javac ShareProbe.java failed; see {logdir}/share-javac.log"
    return f"{cp}:{classes}", ""


def run(
    records: int = 1_000_000,
    consumers: int = 4,
    partitions: int = 8,
    out: Path | None = None,
    kcoord_args: list[str] | None = None,
) -> dict[str, Any]:
    """Returns {"skipped": reason} or the measurement."""
    out = out or Path(tempfile.mkdtemp(prefix="kcoord-share-bench-"))
    logdir = out / "logs"
    logdir.mkdir(parents=True, exist_ok=True)
    cp, why = build_probe(logdir)
    if cp is None:
        return {"skipped": why}
    common.build_kload()
    data = tempfile.mkdtemp(prefix="kcoord-share-data-")
    port = common.free_port()
    broker_log = open(logdir / "share-kcoord.log", "w")  # noqa: SIM115 - lives as long as the broker
    broker = subprocess.Popen(
        common.kcoord_cmd(port, data, common.KCOORD_ARGS + (kcoord_args or [])),
        stdout=broker_log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not common.port_open(port):
            if broker.poll() is not None or time.monotonic() > deadline:
                return {"skipped": f"kcoord did not start; see {broker_log.name}"}
            time.sleep(0.05)
        missing = [n for k, n in SHARE_APIS.items() if k not in common.api_versions(port)]
        if missing:
            return {"skipped": f"kcoord does not advertise {', '.join(missing)}"}
        # records to share: 1 KiB records in batches of 100, a little more than will be consumed
        produced = 0
        while produced < records:
            k = subprocess.run(
                [
                    str(common.BUILD_DIR / "kload"),
                    "--port",
                    str(port),
                    "-w",
                    "produce",
                    "--topic",
                    TOPIC,
                    "--topic-partitions",
                    str(partitions),
                    "-c",
                    "1",
                    "-d",
                    "16",
                    "-T",
                    "2",
                    "--warmup",
                    "0",
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            with open(logdir / "share-produce.log", "a") as f:
                f.write(k.stdout + k.stderr)
            res = next((json.loads(x) for x in k.stdout.splitlines() if x.startswith("{")), None)
            if k.returncode != 0 or res is None:
                return {"skipped": f"producing records failed (kload rc {k.returncode}); see {logdir}"}
            produced += int(res["requests"]) * 100
        bootstrap = f"127.0.0.1:{port}"
        java = ["java", "-XX:+UseSerialGC", "-cp", cp, "ShareProbe"]
        admin = subprocess.run(
            [*java, "admin", bootstrap],
            input=f"set-config {GROUP} share.auto.offset.reset=earliest\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        (logdir / "share-admin.log").write_text(admin.stdout + admin.stderr)
        if "@@ ERR" in admin.stdout:
            return {"skipped": f"setting share.auto.offset.reset failed: {admin.stdout.strip()[-300:]}"}
        cpu0, t0 = _cpu_s(broker.pid), time.monotonic()
        probe = subprocess.run(
            [*java, "bench", bootstrap, GROUP, TOPIC, str(records), str(consumers)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        cpu_s, wall = _cpu_s(broker.pid) - cpu0, time.monotonic() - t0
        rss = common.rss_mb(broker.pid)
        (logdir / "share-consumers.log").write_text(probe.stdout + probe.stderr)
        line = next((x for x in probe.stdout.splitlines() if x.startswith("@@ BENCH ")), None)
        if probe.returncode != 0 or line is None:
            err = next((x for x in probe.stdout.splitlines() if x.startswith("@@ ERROR")), "")
            where = logdir / "share-consumers.log"
            return {"error": f"share consumers failed (rc {probe.returncode}) {err}; see {where}"}
        _, _, n, seconds, rate = line.split()
        return {
            "records": int(n),
            "seconds": float(seconds),
            "records_per_s": float(rate),
            "mb_per_s": float(rate) * 1024 / 1e6,
            "consumers": consumers,
            "partitions": partitions,
            # over the consumers' whole run (JVM start, joining, and the final commit included)
            "kcoord_cpu_s": cpu_s,
            "kcoord_cpu_cores": cpu_s / wall,
            "kcoord_cpu_us_per_record": cpu_s / int(n) * 1e6,
            "rss_mb": rss,
        }
    finally:
        common.stop_process(broker)
        broker_log.close()
        shutil.rmtree(data, ignore_errors=True)


def describe(r: dict[str, Any]) -> str:
    if "skipped" in r:
        return f"share: skipped: {r['skipped']}"
    if "error" in r:
        return f"share: ERROR: {r['error']}"
    return (
        f"share: {r['records']:,} records of 1 KiB through ShareFetch + acknowledge, {r['consumers']} "
        f"consumers, {r['partitions']} partitions: {r['records_per_s']:,.0f} records/s "
        f"({r['mb_per_s']:.1f} MB/s) over {r['seconds']:.2f} s; "
        f"kcoord CPU {r['kcoord_cpu_s']:.2f} s ({r['kcoord_cpu_us_per_record']:.1f} us/record, whole run), "
        f"RSS {r['rss_mb']:.0f} MB"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.share",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--kcoord-args", default="", help="extra `kcoord serve` flags")
    ap.add_argument("--out", default="", help="logs directory (default: a temp dir)")
    args = ap.parse_args(argv)
    common.raise_fd_limit()
    r = run(
        args.records,
        args.consumers,
        args.partitions,
        Path(args.out) if args.out else None,
        args.kcoord_args.split(),
    )
    print(describe(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
