"""read_committed over the wire, with transaction markers written in-process (the transaction
coordinator's part, Partition.write_txn_marker) on a broker running in this process's thread.

- Fetch v4/v11/v12 with kafka-python's protocol classes: records up to the LSO, the aborted
  transactions overlapping the returned batches, null at read_uncommitted; a long poll at
  read_committed is woken by a COMMIT marker; ListOffsets latest at read_committed is the LSO;
- kafka-python's KafkaConsumer (isolation_level='read_committed') and confluent-kafka's Consumer
  (librdkafka reads committed by default) see exactly the committed records;
- DescribeProducers v0 with kafka-python's protocol classes;
- a share group with share.isolation.level=read_committed (confluent-kafka ShareConsumer)
  receives exactly the committed and plain records.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from kcoord.config import BrokerConfig
from kcoord.dataplane.partition import Partition
from kcoord.protocol import records
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, request_class
from kcoord.server.app import Broker
from tests.wire import Conn, build_batch, fetch_request

T = TypeVar("T")
T0 = int(time.time() * 1000)
TOPIC = "txn"


class InProcessBroker:
    """A broker on an event loop in a thread of this process, so tests can reach its partitions."""

    def __init__(self, data_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        config = BrokerConfig(log_dirs=str(data_dir), listeners="PLAINTEXT://127.0.0.1:0")

        async def make() -> Broker:
            b = Broker(config)
            await b.start()
            return b

        self.broker = asyncio.run_coroutine_threadsafe(make(), self.loop).result(30)
        ep = self.broker.advertised("PLAINTEXT")
        self.host, self.port = ep.host, ep.port

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def call(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def partition(self, topic: str, index: int = 0) -> Partition:
        p = self.broker.partitions.partition(topic, index)
        assert p is not None
        return p

    def marker(self, topic: str, pid: int, epoch: int, commit: bool, index: int = 0) -> int:
        part = self.partition(topic, index)

        def write() -> int:
            offset = part.write_txn_marker(pid, epoch, 0, commit, int(time.time() * 1000))
            self.broker.flusher.mark_dirty(part.log)
            return offset

        return self.call(write)

    def append_transactional(self, topic: str, batch: bytes, index: int = 0) -> int:
        """Append a transactional batch straight into the data plane: this module tests what the
        partition does with transactions, with no transaction coordinator in the way (the
        Produce path verifies partitions with it; tests/integration/test_transactions*.py)."""
        part = self.partition(topic, index)

        def append() -> int:
            data = bytearray(batch)
            first, _append_time, _appended = part.append_from_client(
                data, list(records.iter_headers(data)), int(time.time() * 1000), False
            )
            self.broker.flusher.mark_dirty(part.log)
            return first

        return self.call(append)

    def connect(self) -> Conn:
        return Conn(self.host, self.port)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.broker.stop(), self.loop).result(60)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessBroker]:
    b = InProcessBroker(tmp_path_factory.mktemp("txn-broker"))
    try:
        yield b
    finally:
        b.stop()


def txn_batch(pid: int, seq: int, values: list[str]) -> bytes:
    recs = [(None, v.encode(), T0) for v in values]
    return build_batch(recs, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)


def plain_batch(values: list[str]) -> bytes:
    return build_batch([(None, v.encode(), T0) for v in values])


def populate(b: InProcessBroker, topic: str) -> list[str]:
    """Interleaved transactions, committed and aborted, and plain records; one transaction left
    open at the end. Returns the values a read_committed reader must see, in order."""
    with b.connect() as c:
        c.create_topic(topic)

        def send(batch: bytes) -> int:
            r = c.produce(topic, 0, batch)
            assert r.error_code == 0, r
            return int(r.base_offset)

        send(plain_batch(["p0"]))  # 0
        b.append_transactional(topic, txn_batch(100, 0, ["a0", "a1"]))  # 1-2 (aborted)
        b.append_transactional(topic, txn_batch(200, 0, ["c0"]))  # 3 (committed)
        send(plain_batch(["p1"]))  # 4
        b.append_transactional(topic, txn_batch(100, 2, ["a2"]))  # 5 (aborted)
    assert b.marker(topic, 100, 0, commit=False) == 6
    assert b.marker(topic, 200, 0, commit=True) == 7
    with b.connect() as c:
        send(plain_batch(["p2"]))  # 8
        b.append_transactional(topic, txn_batch(300, 0, ["o0"]))  # 9 (open)
        send(plain_batch(["p3"]))  # 10
    return ["p0", "c0", "p1", "p2"]


@pytest.fixture(scope="module")
def topic(broker: InProcessBroker) -> str:
    populate(broker, TOPIC)
    return TOPIC


def fetch(c: Conn, topic: str, offset: int, isolation: int, version: int, **kw: Any) -> Any:
    fields = fetch_request(topic, [(0, offset)], isolation=isolation, **kw)
    return c.request(ApiKey.Fetch, version, **fields).responses[0].partitions[0]


def offsets_of(records: bytes) -> list[int]:
    from kafka.record.default_records import DefaultRecordBatch

    from kcoord.protocol import records as rec

    out = []
    for h in rec.iter_headers(records):
        out.extend(r.offset for r in DefaultRecordBatch(bytes(records[h.position : h.position + h.size])))
    return out


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_read_committed(broker: InProcessBroker, topic: str, version: int) -> None:
    with broker.connect() as c:
        p = fetch(c, topic, 0, isolation=1, version=version)
        assert (p.error_code, p.high_watermark, p.last_stable_offset) == (0, 11, 9)
        assert offsets_of(p.records) == list(range(9))  # up to the LSO, markers included
        assert sorted((a.producer_id, a.first_offset) for a in p.aborted_transactions) == [(100, 1)]
        # From after the aborted transaction's marker: nothing aborted overlaps.
        p = fetch(c, topic, 7, isolation=1, version=version)
        assert (offsets_of(p.records), list(p.aborted_transactions)) == ([7, 8], [])
        # At the LSO: no data, an empty list.
        p = fetch(c, topic, 9, isolation=1, version=version)
        assert (p.records or b"", list(p.aborted_transactions)) == (b"", [])
        # read_uncommitted: everything, and null.
        p = fetch(c, topic, 0, isolation=0, version=version)
        assert offsets_of(p.records) == list(range(11)) and p.aborted_transactions is None
        assert p.last_stable_offset == 9


def test_list_offsets_latest_read_committed_is_the_lso(broker: InProcessBroker, topic: str) -> None:
    with broker.connect() as c:
        assert c.list_offsets(topic, 0, -1, isolation=1).offset == 9
        assert c.list_offsets(topic, 0, -1, isolation=0).offset == 11


def test_read_committed_long_poll_wakes_on_the_marker(broker: InProcessBroker) -> None:
    topic = "txn-poll"
    with broker.connect() as c:
        c.create_topic(topic)
        broker.append_transactional(topic, txn_batch(400, 0, ["x"]))
        corr = c.send(ApiKey.Fetch, 12, **fetch_request(topic, [(0, 0)], isolation=1, max_wait_ms=20_000))
        time.sleep(0.3)  # the poll is waiting: the LSO is 0
        started = time.monotonic()
        broker.marker(topic, 400, 0, commit=True)
        p = c.recv(ApiKey.Fetch, 12, corr).responses[0].partitions[0]
        assert time.monotonic() - started < 5
        assert p.last_stable_offset == 2 and offsets_of(p.records) == [0, 1]


def test_describe_producers(broker: InProcessBroker, topic: str) -> None:
    req = request_class(ApiKey.DescribeProducers)
    with broker.connect() as c:
        resp = c.request(
            ApiKey.DescribeProducers,
            0,
            topics=[
                req.TopicRequest(name=topic, partition_indexes=[0, 5]),
                req.TopicRequest(name="no-such-topic", partition_indexes=[0]),
                req.TopicRequest(name="bad/name", partition_indexes=[0]),
            ],
        )
    t, missing, bad = resp.topics
    p0, p5 = t.partitions
    assert p0.error_code == 0
    got = {s.producer_id: s for s in p0.active_producers}
    assert set(got) == {100, 200, 300}
    assert (got[300].current_txn_start_offset, got[300].last_sequence, got[300].coordinator_epoch) == (
        9,
        0,
        -1,
    )
    assert (got[100].current_txn_start_offset, got[100].last_sequence, got[100].coordinator_epoch) == (
        -1,
        2,
        0,
    )
    assert got[200].producer_epoch == 0 and got[200].last_timestamp > 0
    assert p5.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert missing.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert bad.partitions[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_kafka_python_consumer_read_committed(broker: InProcessBroker, topic: str) -> None:
    from kafka import KafkaConsumer, TopicPartition

    expected = ["p0", "c0", "p1", "p2"]
    consumer = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got = [m.value.decode() for m in consumer]
    finally:
        consumer.close()
    assert got == expected


def test_confluent_consumer_read_committed(broker: InProcessBroker, topic: str) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "rc-confluent", "auto.offset.reset": "earliest"}
    )
    got: list[str] = []
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(got) < 4:
            m = consumer.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value().decode())
        # Nothing beyond the LSO arrives.
        m = consumer.poll(1.0)
        assert m is None or m.error() is not None
    finally:
        consumer.close()
    assert got == ["p0", "c0", "p1", "p2"]


def test_share_group_read_committed(broker: InProcessBroker) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    topic, group = "txn-share", "txn-share-g"
    expected = populate(broker, topic)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entries = [
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("share.isolation.level", "read_committed", incremental_operation=AlterConfigOpType.SET),
    ]
    for fut in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)]
    ).values():
        fut.result(timeout=30)
    from tests.integration.test_share_confluent import spawn_worker

    proc = spawn_worker(broker.bootstrap, group, topic, len(expected), "implicit")
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    recs = [json.loads(x)["rec"] for x in proc.stdout.splitlines() if x.startswith('{"rec"')]
    assert sorted(r[3] for r in recs) == sorted(expected)
    assert sorted(r[1] for r in recs) == [0, 3, 4, 8]
    del confluent_kafka
