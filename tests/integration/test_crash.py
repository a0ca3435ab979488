"""Crash and recovery with the real broker process: kill -9 under acks=-1 load, damaged segment
tails repaired on start. Each test has brokers of its own (``broker_factory``)."""

from __future__ import annotations

import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kcoord.protocol.errors import ErrorCode
from kcoord.storage.segment import segment_name
from tests.harness import BrokerProcess
from tests.unit.logutil import decode, written_headers
from tests.wire import ApiKey, Conn, build_batch, fetch_request

pytestmark = pytest.mark.slow

PARTITIONS = 3


@dataclass
class Acked:
    partition: int
    base_offset: int
    values: list[bytes]


@dataclass
class ProducerThread:
    """Sends batches with acks=-1 until the connection dies; remembers what was acknowledged."""

    broker: BrokerProcess
    topic: str
    ident: int
    idempotent: bool
    acked: list[Acked] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    pid: int = -1
    seq: int = 0
    last_batch: bytes = b""

    def run(self, stop: threading.Event) -> None:
        rng = random.Random(self.ident)
        try:
            conn = Conn(self.broker.host, self.broker.port)
            if self.idempotent:
                resp = conn.request(
                    ApiKey.InitProducerId,
                    4,
                    transactional_id=None,
                    transaction_timeout_ms=60_000,
                    producer_id=-1,
                    producer_epoch=-1,
                )
                self.pid = resp.producer_id
            n = 0
            partition = self.ident % PARTITIONS
            while not stop.is_set():
                count = rng.randint(1, 20)
                values = [
                    f"p{self.ident}-b{n}-r{i}-".encode() + os.urandom(rng.randint(0, 300))
                    for i in range(count)
                ]
                recs = [(f"k{i}".encode(), v, int(time.time() * 1000)) for i, v in enumerate(values)]
                if self.idempotent:
                    batch = build_batch(recs, producer_id=self.pid, producer_epoch=0, base_sequence=self.seq)
                else:
                    batch = build_batch(recs)
                resp = conn.produce(self.topic, partition, batch, acks=-1)
                if resp.error_code:
                    self.errors.append(f"batch {n}: error {resp.error_code}")
                    return
                self.acked.append(Acked(partition, resp.base_offset, values))
                self.seq += count
                self.last_batch = batch
                n += 1
        except (OSError, ConnectionError, AssertionError, ValueError):
            return  # the broker died under us: whatever was not acknowledged may be lost


def read_partition(conn: Conn, topic: str, partition: int, end: int) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    offset = 0
    while offset < end:
        p = conn.fetch(topic, partition, offset, max_bytes=1 << 20)
        assert p.error_code == 0, p
        got = [(o, v) for o, _ts, _k, v in decode(p.records) if o >= offset]
        assert got, f"no progress at {offset}"
        out.extend(got)
        offset = got[-1][0] + 1
    return out


def check_log(broker: BrokerProcess, topic: str, acked: list[Acked]) -> dict[int, int]:
    """Every acknowledged record is where its ack said, offsets are contiguous; returns the ends."""
    ends = {}
    with broker.connect() as c:
        for p in range(PARTITIONS):
            hw = c.list_offsets(topic, p, -1).offset
            assert c.list_offsets(topic, p, -2).offset == 0
            stored = read_partition(c, topic, p, hw)
            assert [o for o, _ in stored] == list(range(hw)), f"partition {p}: offsets not contiguous"
            by_offset = dict(stored)
            for a in (a for a in acked if a.partition == p):
                for i, v in enumerate(a.values):
                    assert by_offset.get(a.base_offset + i) == v, (
                        f"acked record lost at {p}/{a.base_offset + i}"
                    )
            ends[p] = hw
    return ends


def produce_under_kill(broker: BrokerProcess, topic: str, acked_before_kill: int, idempotent: bool) -> list:
    stop = threading.Event()
    producers = [ProducerThread(broker, topic, i, idempotent) for i in range(6)]
    threads = [threading.Thread(target=pr.run, args=(stop,), daemon=True) for pr in producers]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while sum(len(pr.acked) for pr in producers) < acked_before_kill and time.monotonic() < deadline:
        time.sleep(0.01)
    broker.kill()  # SIGKILL while every producer has a request in flight
    stop.set()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    for pr in producers:
        assert pr.errors == [], pr.errors
    assert sum(len(pr.acked) for pr in producers) >= acked_before_kill
    return producers


@pytest.mark.parametrize("idempotent", [False, True])
def test_kill_9_under_acks_all_load_loses_no_acknowledged_record(broker_factory, idempotent: bool) -> None:  # type: ignore[no-untyped-def]
    # Small segments so that segments roll during the run and recovery crosses segment boundaries.
    broker = broker_factory(["--log-segment-bytes", "65536"])
    topic = f"crash-{'idem' if idempotent else 'plain'}"
    broker.create_topic(topic, partitions=PARTITIONS)
    all_acked: list[Acked] = []
    for round_ in range(3):
        producers = produce_under_kill(broker, topic, 150, idempotent)
        all_acked.extend(a for pr in producers for a in pr.acked)
        broker.start()
        ends = check_log(broker, topic, all_acked)
        assert sum(ends.values()) >= sum(len(a.values) for a in all_acked)
        assert "previous shutdown was not clean" in broker.log_text()
        if idempotent:
            # Producer state is rebuilt from the log: a retry of the last acknowledged batch is
            # recognised as a duplicate and answered with its original offset.
            with broker.connect() as c:
                for pr in producers:
                    if not pr.acked:
                        continue
                    original = pr.acked[-1]
                    resp = c.produce(topic, original.partition, pr.last_batch)
                    assert (resp.error_code, resp.base_offset) == (0, original.base_offset), round_
        # Appends continue right after the recovered end.
        with broker.connect() as c:
            for p in range(PARTITIONS):
                end = c.list_offsets(topic, p, -1).offset
                r = c.produce(topic, p, build_batch(count=1))
                assert (r.error_code, r.base_offset) == (0, end)
                all_acked.append(Acked(p, end, [b"v0"]))
    segments = sorted((broker.data_dir / f"{topic}-0").glob("*.log"))
    assert len(segments) > 1, "the run was meant to roll segments"


# --- damaged tails ---------------------------------------------------------------------------------
def _fill(broker: BrokerProcess, topic: str) -> list[int]:
    """Five batches of 3, 4, 5, 6, 7 records; returns each batch's end position in the segment."""
    with broker.connect() as c:
        c.create_topic(topic)
        for n in range(3, 8):
            c.produce(topic, 0, build_batch(count=n))
    path = broker.data_dir / f"{topic}-0" / (segment_name(0) + ".log")
    data = path.read_bytes()
    return [h.position + h.size for h in written_headers(data)]


def _segment(broker: BrokerProcess, topic: str) -> Path:
    return broker.data_dir / f"{topic}-0" / (segment_name(0) + ".log")


@pytest.mark.parametrize("how", ["sigterm", "kill-9"])
@pytest.mark.parametrize("damage", ["truncated", "garbage", "flipped-byte", "zeros"])
def test_damaged_tail_is_repaired_on_start(broker_factory, how: str, damage: str) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory()
    topic = "damaged"
    ends = _fill(broker, topic)
    assert len(ends) == 5
    if how == "sigterm":
        assert broker.stop() == 0
    else:
        broker.kill()
    path = _segment(broker, topic)
    raw = bytearray(path.read_bytes()[: ends[4]])  # after kill -9, without its preallocated zeros
    if damage == "truncated":
        raw = raw[: ends[4] - 17]
        expect_end, expect_size = 18, ends[3]
    elif damage == "garbage":
        raw += os.urandom(123)
        expect_end, expect_size = 25, ends[4]
    elif damage == "flipped-byte":
        raw[ends[4] - 5] ^= 0x10  # inside the last batch's records: CRC mismatch
        expect_end, expect_size = 18, ends[3]
    else:  # a preallocated or half-written tail: zeros after the last batch
        raw += bytes(4096)
        expect_end, expect_size = 25, ends[4]
    path.write_bytes(bytes(raw))

    broker.start()
    assert path.stat().st_size == expect_size
    with broker.connect() as c:
        assert c.list_offsets(topic, 0, -1).offset == expect_end
        stored = read_partition(c, topic, 0, expect_end)
        assert [o for o, _ in stored] == list(range(expect_end))
        r = c.produce(topic, 0, build_batch(count=2))
        assert (r.error_code, r.base_offset) == (0, expect_end)
        assert c.fetch(topic, 0, expect_end + 2).error_code == 0
        assert c.fetch(topic, 0, expect_end + 3).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    if damage == "zeros":  # as a preallocated file that a crash left untrimmed
        assert "trimming preallocated space" in broker.log_text()
    elif expect_size != len(raw):
        assert "truncating torn log tail" in broker.log_text()
    # And the repaired log survives a clean restart unchanged.
    broker.restart()
    with broker.connect() as c:
        assert c.list_offsets(topic, 0, -1).offset == expect_end + 2


def test_sigterm_is_a_clean_shutdown(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker = broker_factory()
    _fill(broker, "clean")
    assert broker.stop() == 0
    assert (broker.data_dir / ".kcoord_cleanshutdown").exists()
    broker.start()
    assert "previous shutdown was not clean" not in broker.log_text()
    with broker.connect() as c:
        assert c.list_offsets("clean", 0, -1).offset == 25


def test_sigterm_answers_pending_long_polls(broker_factory) -> None:  # type: ignore[no-untyped-def]
    """A consumer waiting in a long poll (fetch.max.wait.ms) gets its answer when the broker
    stops, instead of holding the shutdown up and then losing the connection unanswered."""
    broker = broker_factory()
    broker.create_topic("idle")
    conns = [broker.connect() for _ in range(3)]
    corrs = [c.send(ApiKey.Fetch, 12, **fetch_request("idle", [(0, 0)], max_wait_ms=60_000)) for c in conns]
    with broker.connect() as probe:  # the long polls are parked once a later request is answered
        assert probe.api_versions().error_code == 0
    assert broker.stop() == 0
    for c, corr in zip(conns, corrs, strict=True):
        resp = c.recv(ApiKey.Fetch, 12, corr)
        part = resp.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark, part.records or b"") == (0, 0, b"")
        c.close()


class _KafkaPython:
    def __init__(self, bootstrap: str, acked: dict, failed: list) -> None:
        from kafka import KafkaProducer

        self.acked, self.failed = acked, failed
        self.p = KafkaProducer(
            bootstrap_servers=bootstrap,
            enable_idempotence=True,
            acks="all",
            linger_ms=2,
            retries=2**31 - 1,
            retry_backoff_ms=50,
            reconnect_backoff_ms=50,
            reconnect_backoff_max_ms=200,
            request_timeout_ms=15_000,
            delivery_timeout_ms=120_000,
        )

    def send(self, topic: str, value: bytes, partition: int) -> None:
        fut = self.p.send(topic, value=value, partition=partition)
        fut.add_callback(lambda md: self.acked.__setitem__(value, (md.partition, md.offset)))
        fut.add_errback(self.failed.append)

    def flush(self) -> None:
        self.p.flush(timeout=120)

    def close(self) -> None:
        self.p.close(timeout=30)


class _Confluent:
    def __init__(self, bootstrap: str, acked: dict, failed: list) -> None:
        from confluent_kafka import Producer

        self.acked, self.failed = acked, failed
        self.p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "message.timeout.ms": 120_000,
                "reconnect.backoff.ms": 50,
                "reconnect.backoff.max.ms": 200,
                "retry.backoff.ms": 50,
                "log_level": 0,
            }
        )

    def _done(self, err: object, msg: object) -> None:
        if err is not None:
            self.failed.append(err)
        else:
            self.acked[msg.value()] = (msg.partition(), msg.offset())  # type: ignore[attr-defined]

    def send(self, topic: str, value: bytes, partition: int) -> None:
        while True:
            try:
                self.p.produce(topic, value=value, partition=partition, on_delivery=self._done)
                break
            except BufferError:
                self.p.poll(0.1)
        self.p.poll(0)

    def flush(self) -> None:
        assert self.p.flush(120) == 0

    def close(self) -> None:
        self.flush()


@pytest.mark.parametrize("client", [_KafkaPython, _Confluent], ids=["kafka-python", "confluent-kafka"])
def test_idempotent_producer_rides_through_a_kill_9(broker_factory, client: type) -> None:  # type: ignore[no-untyped-def]
    """A real idempotent producer keeps sending while the broker is killed and restarted: every
    acknowledged record is stored exactly once (the broker rebuilt the producer's sequence
    state from the log, so retries of batches written before the kill are duplicates)."""
    broker = broker_factory()
    topic = "ride-through"
    broker.create_topic(topic, partitions=2)
    acked: dict[bytes, tuple[int, int]] = {}
    failed: list[object] = []
    producer = client(broker.bootstrap, acked, failed)
    for i in range(3000):
        producer.send(topic, f"r{i}".encode(), i % 2)
        if i == 1000:
            producer.flush()
        if i == 1500:
            broker.kill()
        if i == 2000:
            broker.start()
    producer.flush()
    producer.close()
    assert failed == []
    assert len(acked) == 3000
    with broker.connect() as c:
        for p in (0, 1):
            hw = c.list_offsets(topic, p, -1).offset
            stored = read_partition(c, topic, p, hw)
            values = [v for _, v in stored]
            assert len(values) == len(set(values)), f"partition {p}: a record was stored twice"
            for v, (part, off) in acked.items():
                if part == p:
                    assert stored[off] == (off, v)
            assert hw == 1500
