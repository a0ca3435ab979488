"""Connections benchmark: what idle connections and a client that never reads cost the broker.

    python -m bench.connections                       # 5,000 idle connections
    python -m bench.connections --idle 10000 --greedy-fetches 600

Starts ``kcoord serve`` (no flush, so nothing but the connections is measured) and prints the
broker's RSS: at start; with --idle connections open, each of which sent one ApiVersions and then
nothing; and with, in addition, one client that pipelines --greedy-fetches Fetch requests of a
20 MB partition and never reads an answer. Meanwhile a normal client's ApiVersions round trips
are timed (p50/p99 of 200), to show the others are still served. Memory and latency are printed,
never asserted; tests/integration/test_connection_limits.py holds the broker to a bound.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import (
    free_port,
    kcoord_cmd,
    log,
    port_open,
    raise_fd_limit,
    roundtrip,
    rss_mb,
    stop_process,
)


def latencies(port: int, n: int = 200) -> tuple[float, float]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        out = []
        for i in range(n):
            t = time.perf_counter()
            roundtrip(s, 18, 0, b"", corr=i)
            out.append((time.perf_counter() - t) * 1000)
    out.sort()
    return statistics.median(out), out[int(len(out) * 0.99) - 1]


def fill(port: int, mb: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", linger_ms=20, batch_size=1 << 20)
    value = os.urandom(1000)
    for _ in range(mb * 1000):
        producer.send("big", value)
    producer.flush()
    producer.close()


def greedy_fetcher(port: int, requests: int) -> tuple[socket.socket, int]:
    """A client that pipelines Fetches of everything and reads nothing."""
    from kcoord.protocol.messages import ApiKey, request_class

    req = request_class(ApiKey.Fetch)
    topic = req.FetchTopic(
        topic="big",
        partitions=[
            req.FetchTopic.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=50 << 20,
            )
        ],
    )  # fmt: skip
    body = req(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[topic], forgotten_topics_data=[], rack_id="",
    ).encode(version=11)  # fmt: skip
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.setblocking(False)
    sent = 0
    for i in range(requests):
        head = struct.pack(">hhih", 1, 11, i, 5) + b"bench"
        frame = head + body
        try:
            s.send(struct.pack(">i", len(frame)) + frame)
        except BlockingIOError:
            break
        sent += 1
    return s, sent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle", type=int, default=5000)
    ap.add_argument("--greedy-fetches", type=int, default=600)
    ap.add_argument("--fill-mb", type=int, default=20)
    args = ap.parse_args()
    raise_fd_limit()
    work = Path(tempfile.mkdtemp(prefix="kcoord-bench-conn-"))
    port = free_port()
    with (work / "kcoord.log").open("ab") as f:
        proc = subprocess.Popen(
            kcoord_cmd(port, work / "data", ["--log-flush-policy", "os"]), stdout=f, stderr=subprocess.STDOUT
        )
    try:
        while not port_open(port):
            time.sleep(0.05)
        fill(port, args.fill_mb)
        start = rss_mb(proc.pid)
        p50, p99 = latencies(port)
        lines = [f"start: RSS {start:.0f} MB; ApiVersions p50 {p50:.2f} ms p99 {p99:.2f} ms"]
        idle = []
        for i in range(args.idle):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            roundtrip(s, 18, 0, b"", corr=i)
            idle.append(s)
        time.sleep(1)
        with_idle = rss_mb(proc.pid)
        p50, p99 = latencies(port)
        lines.append(
            f"{len(idle)} idle connections: RSS {with_idle:.0f} MB (+{with_idle - start:.0f} MB, "
            f"{(with_idle - start) * 1024 / max(1, len(idle)):.1f} KB each); ApiVersions p50 {p50:.2f} ms "
            f"p99 {p99:.2f} ms"
        )
        greedy, sent = greedy_fetcher(port, args.greedy_fetches)
        time.sleep(3)
        with_greedy = rss_mb(proc.pid)
        p50, p99 = latencies(port)
        lines.append(
            f"+ one client with {sent} unread Fetches of a {args.fill_mb} MB partition: "
            f"RSS {with_greedy:.0f} MB (+{with_greedy - with_idle:.0f} MB); "
            f"ApiVersions p50 {p50:.2f} ms p99 {p99:.2f} ms"
        )
        greedy.close()
        for s in idle:
            s.close()
        print("\n".join(lines))
    finally:
        stop_process(proc)
        log(f"broker log: {work / 'kcoord.log'}")


if __name__ == "__main__":
    main()
