"""The GIL is handed back to the event loop often while Python work runs on a worker thread: a
cleaning pass or a coordinator snapshot (kcoord/storage/switch_interval.py)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from kcoord.storage.switch_interval import (
    BACKGROUND_SWITCH_INTERVAL_S,
    background_work_ended,
    background_work_started,
    handing_back_the_gil_often,
)
from tests.unit.test_snapshot_interval import append, one_partition_runtime


def test_overlapping_work_keeps_the_short_interval_until_the_last_one_ends() -> None:
    python_default = sys.getswitchinterval()
    background_work_started()
    with handing_back_the_gil_often():
        assert sys.getswitchinterval() == BACKGROUND_SWITCH_INTERVAL_S
    assert sys.getswitchinterval() == BACKGROUND_SWITCH_INTERVAL_S  # the first is still running
    background_work_ended()
    assert sys.getswitchinterval() == python_default


def test_a_periodic_coordinator_snapshot_hands_the_gil_back_often_while_it_is_written(tmp_path: Path) -> None:
    """Encoding a snapshot is Python on a worker thread: at the bench's commit rate a snapshot of
    10 k keys was written three times a second, and with Python's 5 ms switch interval 1-2 % of
    the commits waited ~10 ms more."""
    runtime = one_partition_runtime(tmp_path, 1)
    python_default = sys.getswitchinterval()

    async def main() -> list[float]:
        shard = runtime.shards[0]
        append(shard, 1)
        seen = []
        runtime._snapshot_if_due(shard)
        seen.append(sys.getswitchinterval())
        await asyncio.gather(*runtime._snapshotting.values())
        await asyncio.sleep(0)  # the future's done callbacks run
        seen.append(sys.getswitchinterval())
        return seen

    try:
        assert asyncio.run(main()) == [BACKGROUND_SWITCH_INTERVAL_S, python_default]
        assert runtime.shards[0].snapshot_offset == 1  # and the snapshot was written
    finally:
        runtime.close()
