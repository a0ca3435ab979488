"""The kcoord PySpark source's Kafka side against the shared broker, without starting Spark.

Spark calls the reader methods from Python worker processes; these tests call them the same way
(and in the same orders) directly, which is fast and covers what differs between pyspark
releases: ``latestOffset()`` (4.0/4.1) and ``latestOffset(start, limit)`` (4.2+), offsets that
round-trip through JSON, readers pickled to a fresh process before ``read()``.
"""

from __future__ import annotations

import itertools
import json
import pickle
import time
from typing import Any

import pytest
from kafka import KafkaProducer

from kcoord.spark import client
from kcoord.spark.options import OptionError, parse_sink_options, parse_source_options
from tests.harness import BrokerProcess


def produce(broker: BrokerProcess, topic: str, n: int, partitions: int, prefix: str = "v") -> list[int]:
    """n records round-robin over the partitions; returns the producer timestamps."""
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    stamps = []
    try:
        for i in range(n):
            ts = int(time.time() * 1000)
            stamps.append(ts)
            p.send(topic, value=f"{prefix}{i}".encode(), key=str(i).encode(), partition=i % partitions,
                   headers=[("i", str(i).encode())], timestamp_ms=ts)  # fmt: skip
        p.flush()
    finally:
        p.close()
    return stamps


def opts(broker: BrokerProcess, streaming: bool = False, **more: str):  # type: ignore[no-untyped-def]
    return parse_source_options({"kafka.bootstrap.servers": broker.bootstrap, **more}, streaming=streaming)


def test_offset_reader_and_read_range(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic, partitions=3)
    produce(broker, unique_topic, 90, 3)
    o = opts(broker, subscribe=unique_topic, includeHeaders="true")
    reader = client.OffsetReader(o)
    try:
        tps = reader.partitions()
        assert tps == [(unique_topic, p) for p in range(3)]
        start = reader.resolve(o.starting, tps, starting=True)
        end = reader.resolve(o.ending, tps, starting=False)
        assert start == dict.fromkeys(tps, 0) and end == dict.fromkeys(tps, 30)
        rows = list(client.read_range(o, unique_topic, 1, 5, 12))
        assert [r[4] for r in rows] == list(range(5, 12))
        key, value, topic, partition, offset, ts, ts_type, headers = rows[0]
        assert (topic, partition, offset, ts_type) == (unique_topic, 1, 5, 0)
        i = int(value.decode()[1:])
        assert key == str(i).encode() and headers == [("i", str(i).encode())] and i % 3 == 1
        assert ts.tzinfo is not None
        assert list(client.read_range(o, unique_topic, 1, 30, 30)) == []
        # Offsets asked for that are not there any more: failOnDataLoss decides.
        with pytest.raises(client.DataLossError):
            list(client.read_range(o, unique_topic, 0, 100, 110))
        # A missing topic has no partitions (a stream may start before its topic exists).
        assert client.OffsetReader(opts(broker, subscribe=unique_topic + "-nope")).partitions() == []
        pattern = client.OffsetReader(opts(broker, subscribePattern=unique_topic.replace("-", ".")))
        assert pattern.partitions() == tps
        pattern.close()
    finally:
        reader.close()


def test_offsets_by_timestamp(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic, partitions=1)
    stamps = produce(broker, unique_topic, 20, 1)
    o = opts(broker, subscribe=unique_topic, startingTimestamp=str(stamps[10]))
    reader = client.OffsetReader(o)
    try:
        tps = reader.partitions()
        first = min(i for i, ts in enumerate(stamps) if ts >= stamps[10])
        assert reader.resolve(o.starting, tps, starting=True) == {(unique_topic, 0): first}
        future = opts(broker, subscribe=unique_topic, startingTimestamp=str(stamps[-1] + 60_000))
        with pytest.raises(OptionError, match="no offset matched"):
            client.OffsetReader(future).resolve(future.starting, tps, starting=True)
        lenient = opts(
            broker,
            subscribe=unique_topic,
            startingOffsetsByTimestamp=json.dumps({unique_topic: {"0": stamps[-1] + 60_000}}),
            startingOffsetsByTimestampStrategy="latest",
        )
        assert client.OffsetReader(lenient).resolve(lenient.starting, tps, starting=True) == {
            (unique_topic, 0): 20
        }
        # Ending by timestamp with no match: the latest offset.
        assert reader.resolve(future.starting, tps, starting=False) == {(unique_topic, 0): 20}
        partial = opts(broker, subscribe=unique_topic, startingOffsets=json.dumps({"other": {"0": 1}}))
        with pytest.raises(OptionError, match="every partition"):
            reader.resolve(partial.starting, tps, starting=True)
    finally:
        reader.close()


def test_write_rows(broker: BrokerProcess, unique_topic: str) -> None:
    broker.create_topic(unique_topic, partitions=2)
    s = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap, "topic": unique_topic})
    rows = [
        {"key": "k0", "value": "v0", "partition": 1, "headers": [("h", b"x"), ("n", None)]},
        {"key": None, "value": bytearray(b"v1"), "partition": 0, "headers": None},
        {"key": b"k2", "value": None, "partition": 1, "headers": []},  # a tombstone
    ]
    assert client.write_rows(s, rows, ["key", "value", "partition", "headers"]) == 3
    o = opts(broker, subscribe=unique_topic, includeHeaders="true")
    got0 = [r[:2] + r[7:] for r in client.read_range(o, unique_topic, 0, 0, 1)]
    got1 = [r[:2] + r[7:] for r in client.read_range(o, unique_topic, 1, 0, 2)]
    assert got0 == [(None, b"v1", [])]
    assert got1 == [(b"k0", b"v0", [("h", b"x"), ("n", b"")]), (b"k2", None, [])]
    with pytest.raises(TypeError, match="string or binary"):
        client.write_rows(s, [{"value": 5}], ["value"])
    no_topic = parse_sink_options({"kafka.bootstrap.servers": broker.bootstrap})
    with pytest.raises(OptionError, match="no topic"):
        client.write_rows(no_topic, [{"value": "x", "topic": None}], ["value", "topic"])


# --- the pyspark reader classes, called as Spark's workers call them ------------------------------
@pytest.fixture
def source():  # type: ignore[no-untyped-def]
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    from kcoord.spark import source

    return source


def as_json(value: object) -> dict:  # type: ignore[type-arg]
    """Spark keeps offsets as JSON between calls."""
    return json.loads(json.dumps(value))


def test_stream_reader_pyspark_4_0_call_sequence(source, broker: BrokerProcess, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    """4.0/4.1: latestOffset() without arguments; maxOffsetsPerTrigger from the options."""
    broker.create_topic(unique_topic, partitions=2)
    group = unique_topic + "-group"
    options = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "subscribe": unique_topic,
        "maxoffsetspertrigger": "10",  # keys arrive lower-cased
        "kafka.group.id": group,
    }
    reader = source.KcoordStreamReader(options, source.kafka_schema())
    start = as_json(reader.initialOffset())
    assert start == {unique_topic: {"0": 0, "1": 0}}
    assert as_json(reader.latestOffset()) == start
    produce(broker, unique_topic, 30, 2)
    seen: list[bytes] = []
    batches = 0
    while True:
        end = as_json(reader.latestOffset())
        if end == start:
            break
        parts = reader.partitions(start, end)
        assert sum(p.end - p.start for p in parts) <= 10
        for p in parts:  # executors: a pickled copy, without the driver's admin client
            worker = pickle.loads(pickle.dumps(reader))
            assert worker._offsets is None
            seen += [row[1] for row in worker.read(p)]
        reader.commit(end)
        start, batches = end, batches + 1
    assert batches >= 3
    assert sorted(seen) == sorted(f"v{i}".encode() for i in range(30))
    admin = client.new_admin(broker.bootstrap, {})
    try:
        committed = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    assert {(tp.topic, tp.partition): om.offset for tp, om in committed.items()} == {
        (unique_topic, 0): 15,
        (unique_topic, 1): 15,
    }
    reader.stop()


def test_stream_reader_pyspark_4_2_call_sequence(source, broker: BrokerProcess, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    """4.2+: latestOffset(start, limit) with the limit from getDefaultReadLimit (or ReadAllAvailable)."""
    datasource = pytest.importorskip("pyspark.sql.streaming.datasource", reason="pyspark < 4.2")
    import inspect

    broker.create_topic(unique_topic, partitions=2)
    produce(broker, unique_topic, 20, 2)
    options = {
        "kafka.bootstrap.servers": broker.bootstrap,
        "subscribe": unique_topic,
        "startingoffsets": "earliest",
        "maxoffsetspertrigger": "6",
        "commitoffsets": "false",
    }
    reader = source.KcoordStreamReader(options, source.kafka_schema())
    assert len(inspect.signature(reader.latestOffset).parameters) == 2  # admission control on 4.2+
    limit = reader.getDefaultReadLimit()
    assert isinstance(limit, datasource.ReadMaxRows) and limit.max_rows == 6
    start = as_json(reader.initialOffset())
    end = as_json(reader.latestOffset(start, limit))
    assert end == {unique_topic: {"0": 3, "1": 3}}
    everything = as_json(reader.latestOffset(end, datasource.ReadAllAvailable()))
    assert everything == {unique_topic: {"0": 10, "1": 10}}
    assert [(p.topic, p.partition, p.start, p.end) for p in reader.partitions(end, everything)] == [
        (unique_topic, 0, 3, 10),
        (unique_topic, 1, 3, 10),
    ]
    # No new data: the same end, so Spark runs no batch.
    assert as_json(reader.latestOffset(everything, limit)) == everything
    # Trigger.AvailableNow: batches stop at what was there when the query started.
    assert isinstance(reader, datasource.SupportsTriggerAvailableNow)
    reader.prepareForTriggerAvailableNow()
    produce(broker, unique_topic, 20, 2)
    assert as_json(reader.latestOffset(everything, limit)) == everything
    no_limit = source.KcoordStreamReader({**options, "maxoffsetspertrigger": "1000"}, source.kafka_schema())
    assert isinstance(no_limit.getDefaultReadLimit(), datasource.ReadMaxRows)
    unlimited = {k: v for k, v in options.items() if k != "maxoffsetspertrigger"}
    assert isinstance(
        source.KcoordStreamReader(unlimited, source.kafka_schema()).getDefaultReadLimit(),
        datasource.ReadAllAvailable,
    )
    reader.stop()


def test_batch_reader_partitions_and_pickling(source, broker: BrokerProcess, unique_topic: str) -> None:  # type: ignore[no-untyped-def]
    broker.create_topic(unique_topic, partitions=4)
    produce(broker, unique_topic, 8, 2)  # partitions 2 and 3 stay empty
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": unique_topic}
    reader = source.KcoordBatchReader(options, source.kafka_schema())
    parts = reader.partitions()
    assert [(p.partition, p.start, p.end) for p in parts] == [(0, 0, 4), (1, 0, 4), (2, 0, 0), (3, 0, 0)]
    worker = pickle.loads(pickle.dumps(reader))
    assert sum(1 for p in parts for _ in worker.read(pickle.loads(pickle.dumps(p)))) == 8
    with pytest.raises(OptionError, match="fixed schema"):
        source.KcoordBatchReader(options, source.kafka_schema(include_headers=True))


def write_transactions(
    broker: BrokerProcess, topic: str
) -> tuple[Any, dict[str, list[int]], list[str], list[str]]:
    """On partition 0: a committed transaction, plain rows, an aborted transaction, another
    committed one ending the stable part with an aborted transaction, then one left open and plain
    rows after it. Returns the producer (its transaction still open), the open transaction's first
    offset under "open", the values read_committed sees below it, and every value."""
    txn = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"{topic}-txn")
    plain = KafkaProducer(bootstrap_servers=broker.bootstrap)
    committed: list[str] = []
    every: list[str] = []
    offsets: dict[str, list[int]] = {}

    def send(p: Any, prefix: str, n: int, visible: bool) -> None:
        for i in range(n):
            v = f"{prefix}{i}"
            offsets.setdefault(prefix, []).append(p.send(topic, value=v.encode(), partition=0).get(10).offset)
            every.append(v)
            if visible:
                committed.append(v)

    txn.init_transactions()
    for prefix, n, commit in (
        ("c", 3, True),
        (None, 2, True),
        ("a", 3, False),
        ("d", 2, True),
        ("b", 2, False),
    ):
        if prefix is None:
            send(plain, "p", n, True)
            continue
        txn.begin_transaction()
        send(txn, prefix, n, commit)
        txn.commit_transaction() if commit else txn.abort_transaction()
    txn.begin_transaction()
    send(txn, "o", 2, False)
    send(plain, "q", 2, False)
    plain.close()
    return txn, offsets, committed, every


def test_read_committed_over_transactions(broker: BrokerProcess, unique_topic: str) -> None:
    """kafka.isolation.level=read_committed: latest is the last stable offset (the open
    transaction's first offset), read_range skips markers and aborted rows (offset gaps) and ends
    there without waiting; read_uncommitted reads every row; once the transaction commits, the
    next range holds it and the rows after it."""
    broker.create_topic(unique_topic, partitions=1)
    txn, offsets, committed, every = write_transactions(broker, unique_topic)
    try:
        rc = opts(broker, subscribe=unique_topic, **{"kafka.isolation.level": "read_committed"})
        ru = opts(broker, subscribe=unique_topic)
        tp = (unique_topic, 0)
        lso = client.OffsetReader(rc).latest([tp])[tp]
        hw = client.OffsetReader(ru).latest([tp])[tp]
        assert lso == offsets["o"][0] < hw
        rows = list(client.read_range(rc, unique_topic, 0, 0, lso))
        assert [r[1].decode() for r in rows] == committed
        assert all(a[4] < b[4] for a, b in itertools.pairwise(rows))
        assert [r[1].decode() for r in client.read_range(ru, unique_topic, 0, 0, hw)] == every
        # A range that ends on the aborted transaction's marker: nothing to read, no stall.
        after_d = offsets["d"][-1] + 1
        assert [r[1].decode() for r in client.read_range(rc, unique_topic, 0, after_d, lso)] == []
        txn.commit_transaction()
        # The markers follow EndTxn's answer: the next triggers see latest move to the end.
        deadline = time.monotonic() + 10
        while (end := client.OffsetReader(rc).latest([tp])[tp]) != client.OffsetReader(ru).latest([tp])[tp]:
            assert time.monotonic() < deadline, (end, hw)
            time.sleep(0.05)
        assert end > hw
        assert [r[1].decode() for r in client.read_range(rc, unique_topic, 0, lso, end)] == [
            "o0",
            "o1",
            "q0",
            "q1",
        ]
    finally:
        txn.close()
