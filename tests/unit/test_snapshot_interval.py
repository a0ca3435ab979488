"""When a coordinator partition takes a periodic snapshot: every
``coordinator.snapshot.interval.records`` records appended, and at least
``SNAPSHOT_RECORDS_PER_KEY`` per key it holds, since a snapshot costs as much as its keys."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kcoord.clock import ManualClock
from kcoord.config import build_config
from kcoord.protocol import records
from kcoord.runtime.runtime import SNAPSHOT_RECORDS_PER_KEY, CoordinatorRuntime
from kcoord.runtime.shard import CoordinatorShard
from kcoord.server.coordinators import group_runtime
from kcoord.storage.flush import Flusher
from tests.unit.grouputil import FakeTopics


def one_partition_runtime(tmp_path: Path, snapshot_interval_records: int) -> CoordinatorRuntime[Any]:
    """A group coordinator runtime of one partition, opened on ``tmp_path``."""
    config = build_config(
        {},
        {
            "log_dirs": str(tmp_path),
            "offsets_topic_num_partitions": 1,
            "coordinator_snapshot_interval_records": snapshot_interval_records,
        },
    )
    runtime = group_runtime(config, Flusher("os"), ManualClock(), FakeTopics(), lambda _gid: None)
    runtime.open(unclean=False)
    return runtime


def append(shard: CoordinatorShard[Any], upto: int) -> None:
    """Records appended straight to the shard's log until it ends at ``upto``."""
    data = records.build_batch([(b"\x00\x01k", b"v")] * (upto - shard.log.log_end_offset), 1)
    shard.log.append(data, [records.read_header(data)], 1)


def snapshot_offsets(runtime: CoordinatorRuntime[Any], ends: list[int]) -> list[int]:
    """The shard's snapshot offset after its log reached each of ``ends`` and a snapshot was due."""
    shard = runtime.shards[0]

    async def main() -> list[int]:
        seen = []
        for upto in ends:
            append(shard, upto)
            runtime._snapshot_if_due(shard)
            await asyncio.gather(*runtime._snapshotting.values())
            seen.append(shard.snapshot_offset)
        return seen

    return asyncio.run(main())


def test_a_partition_holding_many_keys_snapshots_less_often(tmp_path: Path) -> None:
    runtime = one_partition_runtime(tmp_path, 10)
    shard = runtime.shards[0]
    keys = 4
    for i in range(keys):  # what the shard holds: the latest record of each of these keys
        shard.latest.plain(i, f"key-{i}".encode(), b"v")
    due_at = SNAPSHOT_RECORDS_PER_KEY * keys
    try:  # the interval alone, one record short, due
        assert snapshot_offsets(runtime, [10, due_at - 1, due_at]) == [-1, -1, due_at]
    finally:
        runtime.close()


def test_a_partition_holding_few_keys_snapshots_at_the_interval(tmp_path: Path) -> None:
    runtime = one_partition_runtime(tmp_path, 1000)
    runtime.shards[0].latest.plain(0, b"key", b"v")  # 50 records a key would be due long before
    try:
        assert snapshot_offsets(runtime, [999, 1000]) == [-1, 1000]
    finally:
        runtime.close()
