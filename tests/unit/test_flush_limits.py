"""A topic's flush.messages and flush.ms below log.flush.policy=os/interval: Kafka's per-log
limits on unsynced data. Observed through the rounds the flusher syncs, not through timing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kcoord.protocol.records import build_batch, read_header
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig


def _append(log_: Log, n: int = 1) -> None:
    for _ in range(n):
        data = build_batch([(b"k", b"v")], 1)
        log_.append(data, [read_header(data)], 1)
        log_.flusher.mark_dirty(log_)  # as Produce does after every append


async def _until(cond: object, seconds: float = 10.0) -> bool:
    for _ in range(int(seconds / 0.01)):
        if callable(cond) and cond():
            return True
        await asyncio.sleep(0.01)
    return False


def _spy(flusher: Flusher) -> list[int]:
    rounds: list[int] = []
    real = flusher._sync

    def spy(segments: list) -> None:  # type: ignore[type-arg]
        rounds.append(len(segments))
        real(segments)

    flusher._sync = spy  # type: ignore[method-assign]
    return rounds


@pytest.mark.parametrize("policy", ["os", "interval"])
def test_flush_messages_syncs_once_that_many_are_unsynced(tmp_path: Path, policy: str) -> None:
    async def main() -> None:
        # interval: a period far longer than the test, so only flush.messages can sync.
        flusher = Flusher(policy, interval_ms=3_600_000, directory=tmp_path)
        rounds = _spy(flusher)
        flusher.start()
        log_ = Log.open(tmp_path / "p-0", LogConfig(flush_messages=3), flusher)
        _append(log_, 2)
        for _ in range(5):
            await asyncio.sleep(0)
        assert rounds == [] and log_.flushed_offset == 0
        _append(log_)
        assert await _until(lambda: log_.flushed_offset == 3)
        assert len(rounds) == 1
        _append(log_, 2)  # counted from the last synced offset again
        for _ in range(5):
            await asyncio.sleep(0)
        assert log_.flushed_offset == 3
        _append(log_)
        assert await _until(lambda: log_.flushed_offset == 6)
        await flusher.stop()
        log_.close()

    asyncio.run(main())


def test_flush_ms_syncs_at_the_latest_that_long_after_an_append(tmp_path: Path) -> None:
    async def main() -> None:
        flusher = Flusher("os", directory=tmp_path)
        _spy(flusher)
        flusher.start()
        log_ = Log.open(tmp_path / "p-0", LogConfig(flush_ms=50), flusher)
        _append(log_, 4)
        assert await _until(lambda: log_.flushed_offset == 4)
        _append(log_)
        assert await _until(lambda: log_.flushed_offset == 5)  # a new deadline after the sync
        await flusher.stop()
        log_.close()

    asyncio.run(main())


def test_without_limits_os_never_syncs_before_a_roll(tmp_path: Path) -> None:
    """The control: the same appends under the defaults stay unsynced (so the tests above see
    the limits' rounds, not the policy's)."""

    async def main() -> None:
        flusher = Flusher("os", directory=tmp_path)
        rounds = _spy(flusher)
        flusher.start()
        log_ = Log.open(tmp_path / "p-0", LogConfig(), flusher)
        _append(log_, 10)
        await asyncio.sleep(0.3)
        assert rounds == [] and log_.flushed_offset == 0
        await flusher.stop()
        assert log_.flushed_offset == 10  # a clean stop syncs
        log_.close()

    asyncio.run(main())


def test_topic_configs_reach_the_log(tmp_path: Path) -> None:
    """flush.messages, flush.ms and segment.jitter.ms from the topic's configs to its logs."""
    from kcoord.clock import ManualClock
    from kcoord.config import BrokerConfig
    from kcoord.dataplane.partitions import PartitionManager
    from kcoord.protocol.errors import ErrorCode, KafkaError

    pm = PartitionManager(BrokerConfig(log_dirs=str(tmp_path)), Flusher("os"), ManualClock(0))
    pm.open()
    try:
        topic = pm.create_topic("t", 1, {"flush.messages": "2", "segment.jitter.ms": "5000"})
        log_ = topic.partitions[0].log
        assert (log_.config.flush_messages, log_.config.flush_ms) == (2, 9223372036854775807)
        assert log_.config.roll_jitter_ms == 5000 and 0 <= log_.active_roll_jitter_ms < 5000
        pm.alter_topic_configs(topic, pm.validate_configs({"flush.ms": "100"}))
        assert (log_.config.flush_messages, log_.config.flush_ms) == (9223372036854775807, 100)
        for bad, message in [
            (
                {"flush.messages": "0"},
                "Invalid value 0 for configuration flush.messages: Value must be at least 1",
            ),
            ({"flush.ms": "-1"}, "Invalid value -1 for configuration flush.ms: Value must be at least 0"),
            (
                {"segment.jitter.ms": "-1"},
                "Invalid value -1 for configuration segment.jitter.ms: Value must be at least 0",
            ),
        ]:
            with pytest.raises(KafkaError) as e:
                pm.validate_configs(bad)  # type: ignore[arg-type]
            assert (e.value.code, e.value.message) == (ErrorCode.INVALID_CONFIG, message)
    finally:
        pm.close()
