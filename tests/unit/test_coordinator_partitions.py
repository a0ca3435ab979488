"""Which coordinator partition a key lives in, as the runtime answers it from its cache."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.clock import ManualClock
from kcoord.config import build_config
from kcoord.server.coordinators import group_runtime
from kcoord.storage.flush import Flusher
from tests.coordinator_log import offsets_partition
from tests.unit.grouputil import FakeTopics


def _runtime(directory: Path, partitions: int):  # type: ignore[no-untyped-def]
    config = build_config({}, {"log_dirs": str(directory), "offsets_topic_num_partitions": partitions})
    return group_runtime(config, Flusher("os"), ManualClock(), FakeTopics(), lambda _gid: None)


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.text(max_size=40), min_size=1, max_size=20))
def test_the_remembered_partition_is_kafkas_partition_for(keys: list[str]) -> None:
    # Asked twice, the second answer comes from the cache: both must be Kafka's partitionFor,
    # or a group's offsets would be looked for where Kafka's tools do not put them.
    runtime = _runtime(Path("/nonexistent-kcoord-dir"), 50)
    for _ in range(2):
        assert [runtime.partition_for(k) for k in keys] == [offsets_partition(k, 50) for k in keys]


def test_an_existing_topics_partition_count_replaces_the_remembered_partitions(tmp_path: Path) -> None:
    # The configured count is asked before start-up; an offsets topic already on disk with another
    # count wins at open(), and no key may keep the partition the configured count gave it.
    for i in range(3):
        (tmp_path / f"__consumer_offsets-{i}").mkdir()
    runtime = _runtime(tmp_path, 50)
    keys = [f"group-{i}" for i in range(100)]
    assert [runtime.partition_for(k) for k in keys] == [offsets_partition(k, 50) for k in keys]
    runtime.open(unclean=False)
    try:
        assert runtime.num_partitions == 3
        assert [runtime.partition_for(k) for k in keys] == [offsets_partition(k, 3) for k in keys]
        shards = runtime.shards
        assert [runtime.state_for(k) for k in keys] == [shards[offsets_partition(k, 3)].state for k in keys]
    finally:
        runtime.close()
