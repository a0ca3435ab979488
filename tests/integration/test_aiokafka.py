"""aiokafka 0.14 against the broker: produce (plain and idempotent) and consume with assign/seek."""

from __future__ import annotations

import asyncio
import time

import pytest

aiokafka = pytest.importorskip("aiokafka")
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition  # noqa: E402

from tests.harness import BrokerProcess  # noqa: E402

N = 400


async def consume(broker: BrokerProcess, tps: list[TopicPartition], expected: int) -> list:
    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None)
    await consumer.start()
    try:
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        got: list = []
        deadline = time.monotonic() + 30
        while len(got) < expected and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for recs in batches.values():
                got.extend(recs)
        assert await consumer.end_offsets(tps) == {tp: expected // len(tps) for tp in tps}
        return got
    finally:
        await consumer.stop()


@pytest.mark.parametrize("idempotent", [False, True])
async def test_produce_and_consume(broker: BrokerProcess, unique_topic: str, idempotent: bool) -> None:
    broker.create_topic(unique_topic, partitions=2)
    producer = AIOKafkaProducer(
        bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=idempotent, linger_ms=10
    )
    await producer.start()
    now = int(time.time() * 1000)
    try:
        futures = []
        for i in range(N):
            futures.append(
                await producer.send(
                    unique_topic,
                    value=f"v{i}".encode(),
                    key=f"k{i}".encode(),
                    partition=i % 2,
                    timestamp_ms=now - N + i,
                    headers=[("i", str(i).encode())],
                )
            )
        metas = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    for part in (0, 1):
        assert [m.offset for m in metas if m.partition == part] == list(range(N // 2))

    tps = [TopicPartition(unique_topic, 0), TopicPartition(unique_topic, 1)]
    got = await consume(broker, tps, N)
    assert len(got) == N
    for part in (0, 1):
        recs = [r for r in got if r.partition == part]
        assert [r.offset for r in recs] == list(range(N // 2))
        for r in recs:
            i = int(r.value[1:])
            assert i % 2 == part
            assert (r.key, r.timestamp, list(r.headers)) == (
                f"k{i}".encode(),
                now - N + i,
                [("i", str(i).encode())],
            )
