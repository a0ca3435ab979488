"""Transactions benchmark: a consume-transform-produce loop, and read_committed Fetch's overhead.

    python -m bench.transactions                    # kcoord (always, os), Tansu, librdkafka mock; 3 repeats
    python -m bench.transactions --repeats 1 --duration 3 --peers kcoord
    python -m bench --workloads transactions        # the same rows inside the suite's table

The client is confluent-kafka (librdkafka, C), so that the client's CPU does not dominate. Every
repeat starts every peer fresh (kcoord on a new temp log dir), then runs each row against each
peer in turn (peer order rotated per repeat), so ratios compare peers under the same machine
conditions; figures are medians over repeats, ratios medians of same-repeat ratios.

1. **Consume-transform-produce** (rows ``ctp p1`` and ``ctp p8``): --producers N (1 and 8) worker
   processes, each with its own transactional producer, its own partition of an input topic of N
   partitions pre-filled with --input-records plain 100-byte records per partition, and a
   consumer assigned to that partition (group ``kbench-txn-g``, no subscription: generation -1,
   as a simple consumer group). A transaction: take the next 10 input records (the consumer
   fetches ahead; at the end of the input the worker seeks back to offset 0), begin, produce 10
   records to the worker's partition of the output topic, send_offsets_to_transaction (one
   offset) and commit_transaction. After --warmup seconds the window of --duration seconds
   starts; a transaction counts when its commit returns inside the window. Reported: txn/s,
   p50/p99 of commit_transaction()'s latency (it includes flushing the 10 records and EndTxn),
   the broker's CPU seconds (``/proc/PID/stat``, all threads) in the window / transactions, and
   the workers' own CPU per transaction.
2. **read_committed vs read_uncommitted** (row ``fetch``): a topic of --fetch-partitions
   partitions filled with --fetch-txns transactions of 100 records of 1 KiB (each on one
   partition, round robin; every fifth aborted, the records flushed before the abort, so they
   are in the log) and, while each transaction is open, 20 plain 1 KiB records on the same
   partition from a non-transactional producer. Then one consumer per isolation level reads
   every partition from offset 0 to its end (enable.partition.eof); the clock runs from the first
   record to the last partition's end. Reported: MB/s and records/s of what is delivered, and
   read_committed / read_uncommitted of the time to read the topic (the overhead: > 1 is slower)
   and of records/s. Each read is checked: read_committed must deliver exactly the committed and
   plain records, read_uncommitted every record; a peer that does not is marked.

Peers: ``kcoord`` (durable default, log.flush.policy=always), ``kcoord-os``
(log.flush.policy=os), ``tansu`` (Tansu 0.6, memory engine, found as bench/common.py finds it)
and ``mock`` (librdkafka's mock cluster: kload's ``mockpeer``, built into bench/kload/build from
bench/kload/src/mockpeer.c against the librdkafka of the installed confluent-kafka wheel). Both
peers answer every transactional API, but neither isolates: at read_committed Tansu 0.6 and the
mock return the aborted records too (Tansu writes markers and commits transactional offsets; the
mock writes markers but never makes a TxnOffsetCommit visible to OffsetFetch). Their
``fetch`` read_committed figure therefore does none of the work it stands for: the table marks
it and gives no read_committed ratio against them. A benchmark prints; it asserts nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as ``python bench/transactions.py``
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common

PEERS = ("kcoord", "kcoord-os", "tansu", "mock")
KCOORD_PEERS = ("kcoord", "kcoord-os")
GROUP = "kbench-txn-g"
RECORDS_PER_TXN = 10
INPUT_VALUE = b"i" * 100
OUTPUT_VALUE = b"o" * 100
FETCH_TOPIC = "kbench-txn-rc"
FETCH_RECORD = 1024
FETCH_TXN_RECORDS = 100
FETCH_PLAIN_PER_TXN = 20
FETCH_ABORT_EVERY = 5  # every fifth transaction aborted: 80% committed
LOG_MARKERS = ("[error", "[critical", "Traceback", '"level": "error"')
TXN_TIMEOUT_S = 30.0


def in_topic(n: int) -> str:
    return f"kbench-txn-in-p{n}"


def out_topic(n: int) -> str:
    return f"kbench-txn-out-p{n}"


def cpu_s(pid: int) -> float:
    """CPU seconds (utime + stime, all threads) of a process so far, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- peers ------------------------------------------------------------------------------------------
class Peer:
    """One broker process on a free port: kcoord (a fresh temp log dir per start), Tansu or the mock."""

    def __init__(
        self, name: str, logdir: Path, tansu: str | None, mockpeer: str | None, kcoord_args: list[str]
    ):
        self.name = name
        self.logdir = logdir
        self.tansu = tansu
        self.mockpeer = mockpeer
        self.kcoord_args = kcoord_args
        self.proc: subprocess.Popen[bytes] | None = None
        self.data: str | None = None
        self.log_path: Path | None = None
        self.port = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def creates_topics(self) -> bool:
        return self.name != "mock"  # the mock has no CreateTopics: mockpeer creates them at start

    def cmd(self, topics: dict[str, int]) -> list[str]:
        if self.name in KCOORD_PEERS:
            self.data = tempfile.mkdtemp(prefix="kcoord-txn-data-")
            policy = ["--log-flush-policy", "os"] if self.name == "kcoord-os" else []
            return common.kcoord_cmd(self.port, self.data, common.KCOORD_ARGS + policy + self.kcoord_args)
        if self.name == "tansu":
            assert self.tansu is not None
            url = f"tcp://127.0.0.1:{self.port}"
            return [
                self.tansu,
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ]
        assert self.mockpeer is not None
        cmd = [self.mockpeer, "--port", str(self.port), "--rebalance-delay-ms", "0"]
        for t, n in topics.items():
            cmd += ["--topic", f"{t}:{n}"]
        return cmd

    def start(self, tag: str, topics: dict[str, int]) -> None:
        self.port = common.free_port()
        self.log_path = self.logdir / f"txn-{self.name}-{tag}.log"
        log = open(self.log_path, "w")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(self.cmd(topics), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 60
        while not common.port_open(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} did not start; see {self.log_path}")
            time.sleep(0.05)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            common.stop_process(self.proc)
        self.proc = None
        if self.data:
            shutil.rmtree(self.data, ignore_errors=True)
            self.data = None

    def problems(self) -> list[str]:
        if self.name not in KCOORD_PEERS or self.log_path is None or not self.log_path.exists():
            return []
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [f"{self.log_path.name}: {x.strip()[:300]}" for x in lines if any(m in x for m in LOG_MARKERS)]


# --- client helpers (confluent-kafka; imported lazily so that --help works without it) -----------
def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()], request_timeout=30)
    for f in futures.values():
        f.result(timeout=60)


def fill_input(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    """Plain (non-transactional) 100-byte records, ``per_partition`` in each partition."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
    for part in range(partitions):
        for i in range(per_partition):
            while True:
                try:
                    p.produce(topic, INPUT_VALUE, key=b"%d" % i, partition=part)
                    break
                except BufferError:
                    p.poll(0.05)
    left = p.flush(120)
    if left:
        raise RuntimeError(f"{left} input records not delivered")


# --- 1. consume-transform-produce workers -----------------------------------------------------------
class Start(ctypes.Structure):
    """Shared with the workers: the window's start (monotonic; 0.0 until set) and its length."""

    _fields_ = [("value", ctypes.c_double), ("window", ctypes.c_double)]


def ctp_worker(
    idx: int,
    bootstrap: str,
    extra: dict[str, str],
    n: int,
    per_partition: int,
    tid: str,
    ready: Any,
    start_at: Any,
    results: Any,
) -> None:
    """One transactional producer + its input partition's consumer; runs until start_at.value + window."""
    try:
        from confluent_kafka import Consumer, Producer, TopicPartition

        producer = Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, "acks": "all", **extra}
        )
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        itopic, otopic = in_topic(n), out_topic(n)
        consumer.assign([TopicPartition(itopic, idx, 0)])
        producer.init_transactions(TXN_TIMEOUT_S)
        meta = consumer.consumer_group_metadata()
        wraps = 0

        def take() -> int:
            """The next 10 input records; the offset to commit after them."""
            nonlocal wraps
            got, nxt = 0, 0
            while got < RECORDS_PER_TXN:
                msgs = consumer.consume(RECORDS_PER_TXN - got, 10.0)
                if not msgs:
                    raise RuntimeError(f"worker {idx}: no input record in 10 s")
                for m in msgs:
                    if m.error():
                        raise RuntimeError(f"worker {idx}: consume: {m.error()}")
                    got += 1
                    nxt = m.offset() + 1
                if nxt >= per_partition:  # the input's end: start over (the offsets go back too)
                    consumer.seek(TopicPartition(itopic, idx, 0))
                    wraps += 1
            return nxt

        def one() -> tuple[float, float]:
            nxt = take()
            producer.begin_transaction()
            for _ in range(RECORDS_PER_TXN):
                producer.produce(otopic, OUTPUT_VALUE, partition=idx)
            producer.send_offsets_to_transaction([TopicPartition(itopic, idx, nxt)], meta, TXN_TIMEOUT_S)
            t0 = time.monotonic()
            producer.commit_transaction(TXN_TIMEOUT_S)
            t1 = time.monotonic()
            return t1, t1 - t0

        one()  # outside the window: the first transaction finds the coordinators
        ready.put(idx)
        while start_at.value == 0.0:
            time.sleep(0.001)
        w0, w1 = start_at.value, start_at.value + start_at.window
        lat: list[float] = []
        cpu0 = cpu1 = None
        while True:
            now = time.monotonic()
            if cpu0 is None and now >= w0:
                cpu0 = time.process_time()
            end, took = one()
            if end >= w1:
                cpu1 = time.process_time()
                break
            if end >= w0:
                lat.append(took)
        producer.flush(10)
        consumer.close()
        results.put({"idx": idx, "lat": lat, "client_cpu_s": (cpu1 or 0) - (cpu0 or 0), "wraps": wraps})
    except BaseException as e:  # reported to the parent, which marks the run invalid
        ready.put(idx)
        results.put({"idx": idx, "error": f"{type(e).__name__}: {e}", "tb": traceback.format_exc()[-2000:]})


def run_ctp(peer: Peer, n: int, args: argparse.Namespace, tag: str) -> dict[str, Any]:
    """One ctp row on one peer: n worker processes, warm-up, window; txn/s, latencies, CPU."""
    ctx = mp.get_context("spawn")  # no fork of a process with librdkafka threads
    ready, results = ctx.Queue(), ctx.Queue()

    start_at = ctx.Value(Start, lock=False)
    procs = [
        ctx.Process(
            target=ctp_worker,
            args=(
                i,
                peer.bootstrap,
                args.producer_config,
                n,
                args.input_records,
                f"kbench-txn-{tag}-{i}",
                ready,
                start_at,
                results,
            ),
            daemon=True,
        )
        for i in range(n)
    ]
    for p in procs:
        p.start()
    try:
        for _ in range(n):
            ready.get(timeout=120)
        t0 = time.monotonic() + args.warmup
        start_at.window = args.duration
        start_at.value = t0
        time.sleep(max(0.0, t0 - time.monotonic()))
        c0 = cpu_s(peer.pid)
        time.sleep(args.duration)
        c1 = cpu_s(peer.pid)
        outs = [results.get(timeout=TXN_TIMEOUT_S + 60) for _ in range(n)]
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    errors = [o["error"] for o in outs if "error" in o]
    if errors:
        return {"error": "; ".join(errors[:3]), "tb": next(o["tb"] for o in outs if "tb" in o)}
    lat = sorted(x for o in outs for x in o["lat"])
    txns = len(lat)
    if not txns:
        return {"error": "no transaction committed in the window"}
    broker = c1 - c0
    client = sum(o["client_cpu_s"] for o in outs)
    return {
        "txns": txns,
        "txn_per_s": txns / args.duration,
        "p50_ms": lat[len(lat) // 2] * 1e3,
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3,
        "broker_cpu_s": broker,
        "broker_cpu_us_per_txn": broker / txns * 1e6,
        "broker_cores": broker / args.duration,
        "client_cpu_us_per_txn": client / txns * 1e6,
        "wraps": sum(o["wraps"] for o in outs),
        "rss_mb": common.rss_mb(peer.pid),
    }


# --- 2. read_committed vs read_uncommitted ----------------------------------------------------------
def fill_fetch(bootstrap: str, partitions: int, txns: int, tag: str) -> dict[str, int]:
    """Transactions of 100 records (every fifth aborted) with 20 plain records inside each; counts."""
    from confluent_kafka import Producer

    body = b"x" * (FETCH_RECORD - 1)  # after a first byte that says what the record is: C, A or P
    tp = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"kbench-txn-fill-{tag}",
            "linger.ms": 5,
            "batch.size": 1_000_000,
        }
    )
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    tp.init_transactions(TXN_TIMEOUT_S)
    counts = {"committed": 0, "aborted": 0, "plain": 0}
    for t in range(txns):
        part = t % partitions
        abort = t % FETCH_ABORT_EVERY == FETCH_ABORT_EVERY - 1
        tp.begin_transaction()
        tag_byte = b"A" if abort else b"C"
        for _ in range(FETCH_TXN_RECORDS):
            tp.produce(FETCH_TOPIC, tag_byte + body, partition=part)
        tp.flush(TXN_TIMEOUT_S)  # the transaction's records are in the log, its end is not
        for _ in range(FETCH_PLAIN_PER_TXN):
            plain.produce(FETCH_TOPIC, b"P" + body, partition=part)
        if plain.flush(TXN_TIMEOUT_S):
            raise RuntimeError("plain records not delivered")
        if abort:
            tp.abort_transaction(TXN_TIMEOUT_S)
            counts["aborted"] += FETCH_TXN_RECORDS
        else:
            tp.commit_transaction(TXN_TIMEOUT_S)
            counts["committed"] += FETCH_TXN_RECORDS
        counts["plain"] += FETCH_PLAIN_PER_TXN
    return counts


def read_all(bootstrap: str, partitions: int, isolation: str, passes: int) -> dict[str, Any]:
    """Read every partition from 0 to its end, ``passes`` times with one consumer.

    A pass's time runs from its first record to its last; the end of each partition is known
    from its PARTITION_EOF, which comes only with a Fetch answered empty (after fetch.wait.max.ms),
    so that wait is outside the time."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kbench-txn-read-{isolation}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 50,  # the empty Fetch that tells a partition's end
        }
    )
    # a log that no longer starts at 0 (the mock keeps ~5 MB per partition) cannot be read whole
    low = [c.get_watermark_offsets(TopicPartition(FETCH_TOPIC, p), 30)[0] for p in range(partitions)]
    seen = {ord("C"): 0, ord("A"): 0, ord("P"): 0}
    nbytes = 0
    secs = client_cpu = 0.0
    deadline = time.monotonic() + 120 + 30 * passes
    try:
        for _ in range(passes):
            c.assign([TopicPartition(FETCH_TOPIC, p, 0) for p in range(partitions)])
            ended: set[int] = set()
            first = last = None
            cpu0 = cpu1 = 0.0
            while len(ended) < partitions:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{isolation}: partitions {sorted(set(range(partitions)) - ended)} never ended"
                    )
                for m in c.consume(1000, 0.005):  # returns after 5 ms without a record
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            ended.add(m.partition())
                            continue
                        raise RuntimeError(f"{isolation}: {err}")
                    if first is None:
                        first, cpu0 = time.monotonic(), time.process_time()
                    v = m.value()
                    seen[v[0]] += 1
                    nbytes += len(v)
                    last = m
                if last is not None:
                    last_t, cpu1 = time.monotonic(), time.process_time()
            if first is not None:
                secs += last_t - first
                client_cpu += cpu1 - cpu0
    finally:
        c.close()
    n = sum(seen.values())
    return {
        "records": n // passes,
        "committed": seen[ord("C")] // passes,
        "aborted": seen[ord("A")] // passes,
        "plain": seen[ord("P")] // passes,
        "passes": passes,
        "truncated": any(low),
        "mb": nbytes / 1e6,
        "client_cpu_s": client_cpu,
        "seconds": secs,
        "records_per_s": n / secs if secs else None,
        "mb_per_s": nbytes / secs / 1e6 if secs else None,
    }


def run_fetch(peer: Peer, args: argparse.Namespace, tag: str, order: int) -> dict[str, Any]:
    counts = fill_fetch(peer.bootstrap, args.fetch_partitions, args.fetch_txns, tag)
    out: dict[str, Any] = {"counts": counts}
    levels = ["read_committed", "read_uncommitted"]
    if order % 2:
        levels.reverse()
    for iso in levels:
        c0 = cpu_s(peer.pid)
        r = read_all(peer.bootstrap, args.fetch_partitions, iso, args.fetch_passes)
        r["broker_cpu_s"] = cpu_s(peer.pid) - c0
        if r["truncated"]:
            r["correct"] = False
        elif iso == "read_committed":
            r["correct"] = (
                r["aborted"] == 0 and r["committed"] == counts["committed"] and r["plain"] == counts["plain"]
            )
        else:
            r["correct"] = r["records"] == sum(counts.values())
        out[iso] = r
    rc, ru = out["read_committed"], out["read_uncommitted"]
    out["time_ratio"] = rc["seconds"] / ru["seconds"] if ru["seconds"] else None
    out["rps_ratio"] = (
        rc["records_per_s"] / ru["records_per_s"] if rc["records_per_s"] and ru["records_per_s"] else None
    )
    return out


# --- the run ----------------------------------------------------------------------------------------
def topics_for(args: argparse.Namespace) -> dict[str, int]:
    t: dict[str, int] = {}
    for n in args.producers:
        t[in_topic(n)] = n
        t[out_topic(n)] = n
    if args.fetch_txns:
        t[FETCH_TOPIC] = args.fetch_partitions
    return t


def rows_of(args: argparse.Namespace) -> list[str]:
    return [f"ctp p{n}" for n in args.producers] + (["fetch"] if args.fetch_txns else [])


def run(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Every repeat: start every peer fresh, then each row against each peer in turn."""
    logdir = out / "logs"
    logdir.mkdir(parents=True, exist_ok=True)
    skipped: dict[str, str] = {}
    tansu = mockpeer = None
    if "tansu" in args.peers:
        tansu, how = common.find_tansu()
        if tansu is None:
            skipped["tansu"] = how
    if "mock" in args.peers:
        mockpeer, how = common.build_mockpeer()
        if mockpeer is None:
            skipped["mock"] = how
    for name, why in skipped.items():
        common.log(f"{name} SKIPPED: {why}")
    names = [p for p in PEERS if p in args.peers and p not in skipped]
    peers = {n: Peer(n, logdir, tansu, mockpeer, args.kcoord_args.split()) for n in names}
    topics = topics_for(args)
    recs: list[dict[str, Any]] = []
    problems: list[str] = []
    loads: list[str] = []
    for rep in range(args.repeats):
        load = Path("/proc/loadavg").read_text().strip()
        loads.append(load)
        common.log(f"== repeat {rep + 1}/{args.repeats}  load {load}")
        try:
            for p in peers.values():
                p.start(f"r{rep}", topics)
                if p.creates_topics:
                    create_topics(p.bootstrap, topics)
                for n in args.producers:
                    fill_input(p.bootstrap, in_topic(n), n, args.input_records)
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for row in rows_of(args):
                for name in order:
                    p = peers[name]
                    rec: dict[str, Any] = {"row": row, "peer": name, "repeat": rep}
                    try:
                        if not p.alive():
                            raise RuntimeError(f"{name} is not running (rc {p.proc and p.proc.returncode})")
                        if row == "fetch":
                            rec.update(run_fetch(p, args, f"r{rep}", rep))
                        else:
                            rec.update(run_ctp(p, int(row.removeprefix("ctp p")), args, f"r{rep}-{row[5:]}"))
                    except Exception as e:  # a peer that fails a row: recorded, the run goes on
                        rec["error"] = f"{type(e).__name__}: {e}"
                    recs.append(rec)
                    common.log("  " + describe_rec(rec))
        finally:
            for p in peers.values():
                problems += p.problems()
                p.stop()
    result = {
        "args": {k: v for k, v in vars(args).items()},
        "skipped": skipped,
        "peers": names,
        "records": recs,
        "problems": problems,
        "loadavg": loads,
    }
    result["rows"] = summarise(recs, args)
    result["table"] = render(result, args)
    (out / "transactions.json").write_text(json.dumps(result, indent=1, default=str))
    return result


def describe_rec(r: dict[str, Any]) -> str:
    head = f"{r['row']:<8} {r['peer']:<10}"
    if "error" in r:
        return f"{head} ERROR {r['error']}"
    if r["row"] == "fetch":
        rc, ru = r["read_committed"], r["read_uncommitted"]
        return (
            f"{head} read_committed {_fmt(rc['mb_per_s'], 1)} MB/s {rc['records']} rec"
            f"{'' if rc['correct'] else ' (' + not_correct(rc) + ')'}, read_uncommitted "
            f"{_fmt(ru['mb_per_s'], 1)} MB/s {ru['records']} rec"
            f"{'' if ru['correct'] else ' (' + not_correct(ru) + ')'}; time rc/ru {_fmt(r['time_ratio'], 2)}"
        )
    return (
        f"{head} {r['txn_per_s']:.0f} txn/s, commit p50 {r['p50_ms']:.2f} ms p99 {r['p99_ms']:.2f} ms, "
        f"broker {r['broker_cpu_us_per_txn']:.0f} us CPU/txn ({r['broker_cores']:.2f} cores), "
        f"client {r['client_cpu_us_per_txn']:.0f} us/txn, input wraps {r['wraps']}"
    )


def not_correct(r: dict[str, Any]) -> str:
    return "LOG TRUNCATED" if r.get("truncated") else "NOT ISOLATED" if r["aborted"] else "WRONG COUNT"


def _med(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None]
    return statistics.median(ys) if ys else None


def _fmt(x: float | None, nd: int = 0) -> str:
    return "-" if x is None else f"{x:,.{nd}f}"


def summarise(recs: list[dict[str, Any]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per row and peer the medians over repeats; ratios kcoord* / peer as medians of same-repeat ratios."""
    by: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for r in recs:
        by.setdefault((r["row"], r["peer"]), {})[r["repeat"]] = r
    rows = []
    for row in rows_of(args):
        peers_here = sorted({p for (rw, p) in by if rw == row}, key=PEERS.index)
        for peer in peers_here:
            rs = by[(row, peer)]
            ok = {k: v for k, v in rs.items() if "error" not in v}
            e: dict[str, Any] = {"row": row, "peer": peer, "runs": len(rs), "ok": len(ok)}
            if row == "fetch":
                for iso in ("read_committed", "read_uncommitted"):
                    e[iso] = {
                        f: _med([v[iso][f] for v in ok.values()])
                        for f in ("mb_per_s", "records_per_s", "seconds", "broker_cpu_s")
                    }
                    wrong = [not_correct(v[iso]) for v in ok.values() if not v[iso]["correct"]]
                    e[iso]["correct"] = not wrong
                    e[iso]["why"] = wrong[0] if wrong else ""
                e["time_ratio"] = _med([v["time_ratio"] for v in ok.values()])
                e["rps_ratio"] = _med([v["rps_ratio"] for v in ok.values()])
            else:
                for f in (
                    "txn_per_s",
                    "p50_ms",
                    "p99_ms",
                    "broker_cpu_us_per_txn",
                    "client_cpu_us_per_txn",
                    "rss_mb",
                ):
                    e[f] = _med([v[f] for v in ok.values()])
            # kcoord (each flush policy) over this peer, same repeat
            for k in KCOORD_PEERS:
                if k == peer or (row, k) not in by:
                    continue
                kr = {i: v for i, v in by[(row, k)].items() if "error" not in v}
                ratios = []
                for i, v in ok.items():
                    if i not in kr:
                        continue
                    if row == "fetch":
                        a, b = kr[i]["read_uncommitted"]["mb_per_s"], v["read_uncommitted"]["mb_per_s"]
                        ra, rb = kr[i]["read_committed"]["mb_per_s"], v["read_committed"]["mb_per_s"]
                        ratios.append((a / b if a and b else None, ra / rb if ra and rb else None))
                    else:
                        a, b = kr[i]["txn_per_s"], v["txn_per_s"]
                        ratios.append((a / b if b else None, None))
                e[f"{k}_over"] = _med([x for x, _ in ratios])
                if row == "fetch":
                    e[f"{k}_over_rc"] = _med([y for _, y in ratios])
            rows.append(e)
    return rows


def render(result: dict[str, Any], args: argparse.Namespace) -> str:
    rows = result["rows"]
    lines = [
        f"## Transactions (median of {args.repeats} repeat(s); ratios are medians of same-repeat ratios)",
        "",
        "| row | peer | txn/s | commit p50 ms | commit p99 ms | broker CPU us/txn | client CPU us/txn "
        "| kcoord / peer | kcoord-os / peer |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in rows:
        if e["row"] == "fetch":
            continue
        bad = "" if e["ok"] == e["runs"] else f" ({e['ok']}/{e['runs']} ok)"
        lines.append(
            f"| {e['row']} | {e['peer']}{bad} | {_fmt(e.get('txn_per_s'))} | {_fmt(e.get('p50_ms'), 2)} | "
            f"{_fmt(e.get('p99_ms'), 2)} | {_fmt(e.get('broker_cpu_us_per_txn'))} | "
            f"{_fmt(e.get('client_cpu_us_per_txn'))} | {_fmt(e.get('kcoord_over'), 2)} | "
            f"{_fmt(e.get('kcoord-os_over'), 2)} |"
        )
    fetch = [e for e in rows if e["row"] == "fetch"]
    if fetch:
        lines += [
            "",
            f"read_committed vs read_uncommitted: {args.fetch_txns} transactions x {FETCH_TXN_RECORDS} "
            f"records of 1 KiB ({100 // FETCH_ABORT_EVERY}% aborted) + {FETCH_PLAIN_PER_TXN} plain records "
            f"inside each, {args.fetch_partitions} partitions",
            "",
            "| peer | read_committed MB/s | records/s | read_uncommitted MB/s | records/s | rc/ru time "
            "| rc/ru records/s | broker CPU s rc / ru | kcoord / peer (ru, rc) | kcoord-os / peer (ru, rc) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for e in fetch:
            rc, ru = e["read_committed"], e["read_uncommitted"]
            bad = "" if e["ok"] == e["runs"] else f" ({e['ok']}/{e['runs']} ok)"
            iso = "" if rc["correct"] else f" {rc['why']}"
            iso_ru = "" if ru["correct"] else f" {ru['why']}"
            ratios = []
            for k in KCOORD_PEERS:
                a, b = e.get(f"{k}_over"), e.get(f"{k}_over_rc")
                b_txt = _fmt(b, 2) if rc["correct"] else "n/a"
                ratios.append("-" if a is None else f"{_fmt(a, 2)}, {b_txt}")
            lines.append(
                f"| {e['peer']}{bad} | {_fmt(rc['mb_per_s'], 1)}{iso} | {_fmt(rc['records_per_s'])} | "
                f"{_fmt(ru['mb_per_s'], 1)}{iso_ru} | {_fmt(ru['records_per_s'])} | "
                f"{_fmt(e['time_ratio'], 2)} | {_fmt(e['rps_ratio'], 2)} | "
                f"{_fmt(rc['broker_cpu_s'], 2)} / {_fmt(ru['broker_cpu_s'], 2)} | "
                f"{ratios[0]} | {ratios[1]} |"
            )
    lines += [
        "",
        "txn/s: transactions whose commit returned in the window, all producers together; commit latency:",
        "commit_transaction() (flush of the 10 records + EndTxn); broker CPU: the broker process's CPU",
        "seconds in the window / transactions; client CPU: the worker processes' own. NOT ISOLATED: the",
        "peer's read_committed delivered aborted records (it does no read_committed work; no rc ratio).",
        f"load average per repeat: {'; '.join(result['loadavg'])}",
    ]
    if result["skipped"]:
        lines.append("skipped peers: " + "; ".join(f"{k}: {v}" for k, v in result["skipped"].items()))
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench.transactions",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0, help="ctp: measured seconds per run")
    ap.add_argument("--warmup", type=float, default=1.0, help="ctp: warm-up seconds per run")
    ap.add_argument("--producers", default="1,8", help="ctp: comma list of transactional producer counts")
    ap.add_argument(
        "--input-records", type=int, default=20_000, help="ctp: input records per partition (wrapped around)"
    )
    ap.add_argument(
        "--producer-config",
        default="",
        help="ctp: extra librdkafka settings of the transactional producers, e.g. 'retry.backoff.ms=1'",
    )
    ap.add_argument(
        "--fetch-txns",
        type=int,
        default=288,
        help="fetch: transactions (0: no fetch row); the default keeps each partition under the 5 MB "
        "the mock retains",
    )
    ap.add_argument("--fetch-partitions", type=int, default=8)
    ap.add_argument("--fetch-passes", type=int, default=10, help="fetch: reads of the whole topic per level")
    ap.add_argument("--peers", default=",".join(PEERS), help=f"comma list of {', '.join(PEERS)}")
    ap.add_argument("--kcoord-args", default="", help="extra `kcoord serve` flags (both kcoord peers)")
    ap.add_argument("--out", default="", help="results directory (default /tmp/kcoord-bench/txn-<time>)")
    args = ap.parse_args(argv)
    args.producers = [int(x) for x in args.producers.split(",") if x]
    try:
        args.producer_config = dict(kv.split("=", 1) for kv in args.producer_config.split(",") if kv)
    except ValueError:
        ap.error("--producer-config takes key=value[,key=value...]")
    args.peers = [p for p in args.peers.split(",") if p]
    unknown = set(args.peers) - set(PEERS)
    if unknown:
        ap.error(f"unknown peers: {', '.join(sorted(unknown))}")
    if not args.peers:
        ap.error("no peer")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out or f"/tmp/kcoord-bench/txn-{time.strftime('%Y%m%d-%H%M%S')}")
    common.log(f"results -> {out}")
    res = run(args, out)
    print(res["table"])
    print("\n## Problems seen")
    lines = [f"- {r['row']} {r['peer']} r{r['repeat']}: {r['error']}" for r in res["records"] if "error" in r]
    lines += [f"- kcoord log: {x}" for x in res["problems"][:20]]
    print("\n".join(lines) if lines else "- none (every run finished, no error line in kcoord's logs)")
    print(f"\n(records and logs in {out})")
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    rc = main()
    common.log(f"done in {time.monotonic() - t0:.0f} s")
    sys.exit(rc)
