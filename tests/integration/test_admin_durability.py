"""DeleteRecords survives kill -9: an acknowledged deletion is never undone, under produce load,
across repeated crashes (Kafka checkpoints the log start offset once a minute and may lose the
last minute's deletions; kcoord writes it before answering)."""

from __future__ import annotations

import random
import threading
import time

import pytest

from kcoord.protocol.errors import ErrorCode
from tests.conformance.test_admin_wire import delete_records
from tests.harness import BrokerProcess
from tests.unit.logutil import decode
from tests.wire import Conn, build_batch

pytestmark = pytest.mark.slow

PARTITIONS = 2
T0 = 1_700_000_000_000


class Load:
    """Producers (acks=-1) on every partition and a deleter following them; both remember what
    the broker acknowledged, until the broker dies."""

    def __init__(self, broker: BrokerProcess, topic: str, seed: int) -> None:
        self.broker = broker
        self.topic = topic
        self.rng = random.Random(seed)
        self.acked: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}  # acknowledged base offsets
        self.deleted: dict[int, int] = {p: 0 for p in range(PARTITIONS)}  # highest acknowledged low watermark
        self.stop = threading.Event()

    def produce(self) -> None:
        try:
            with Conn(self.broker.host, self.broker.port) as c:
                i = 0
                while not self.stop.is_set():
                    p = i % PARTITIONS
                    r = c.produce(self.topic, p, build_batch(count=3, timestamp=T0 + i))
                    assert r.error_code == 0, r
                    self.acked[p].append(r.base_offset)
                    i += 1
        except (OSError, ConnectionError):
            pass

    def delete(self) -> None:
        try:
            with Conn(self.broker.host, self.broker.port) as c:
                while not self.stop.is_set():
                    p = self.rng.randrange(PARTITIONS)
                    if not self.acked[p]:
                        continue
                    # Somewhere in what was acknowledged, often inside a batch.
                    target = self.acked[p][-1] + self.rng.randrange(3)
                    got = delete_records(c, 2, {self.topic: [(p, target)]})[(self.topic, p)]
                    assert got.error_code == 0, got
                    assert got.low_watermark >= target
                    self.deleted[p] = max(self.deleted[p], got.low_watermark)
                    time.sleep(self.rng.random() * 0.01)
        except (OSError, ConnectionError):
            pass


@pytest.mark.timeout(300)
def test_delete_records_survives_kill_9(broker_factory) -> None:  # type: ignore[no-untyped-def]
    broker: BrokerProcess = broker_factory(["--log-retention-check-interval-ms", "300"])
    topic = "crash-dr"
    with broker.connect() as c:
        c.create_topic(topic, partitions=PARTITIONS, configs={"segment.ms": "5", "retention.ms": "-1"})
    deleted_before = {p: 0 for p in range(PARTITIONS)}
    for round_ in range(4):
        load = Load(broker, topic, seed=round_)
        threads = [threading.Thread(target=load.produce), threading.Thread(target=load.delete)]
        for t in threads:
            t.start()
        time.sleep(1.0 + random.random())
        broker.kill()
        load.stop.set()
        for t in threads:
            t.join(10)
        assert all(load.deleted[p] > 0 for p in range(PARTITIONS)), "the deleter never got an answer"
        broker.start()
        with broker.connect() as c:
            for p in range(PARTITIONS):
                earliest = c.list_offsets(topic, p, -2).offset
                latest = c.list_offsets(topic, p, -1).offset
                acknowledged = max(load.deleted[p], deleted_before[p])
                assert earliest >= acknowledged, (
                    f"partition {p}: deletion to {acknowledged} undone ({earliest})"
                )
                assert earliest <= latest
                # Every acknowledged record at or above it is still there, and nothing below it.
                present: set[int] = set()
                offset = earliest
                while offset < latest:
                    f = c.fetch(topic, p, offset, max_bytes=1 << 20)
                    assert f.error_code == 0, (p, offset, f.error_code)
                    got = [r[0] for r in decode(f.records) if r[0] >= offset]
                    assert got, f"no progress at {offset}"
                    present.update(got)
                    offset = got[-1] + 1
                wanted = {o for base in load.acked[p] for o in range(base, base + 3) if o >= earliest}
                assert wanted <= present, f"partition {p}: acknowledged records lost"
                if earliest > 0:
                    assert c.fetch(topic, p, earliest - 1).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
                deleted_before[p] = earliest
    # Retention removed the segments wholly below the start offsets on the way.
    for p in range(PARTITIONS):
        first_base = min(int(f.stem) for f in (broker.data_dir / f"{topic}-{p}").glob("*.log"))
        assert first_base > 0
