"""The flusher's group commit: appends deferred to the round, callbacks after the sync."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from kcoord.protocol.records import build_batch, read_header
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig


def test_deferred_appends_are_synced_in_the_round_that_runs_them(tmp_path: Path) -> None:
    async def main() -> list[str]:
        flusher = Flusher("always", directory=tmp_path)
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)
        events: list[str] = []
        synced: list[int] = []
        real_sync = flusher._sync

        def spy_sync(segments: list) -> None:
            synced.append(log_.log_end_offset)
            real_sync(segments)

        flusher._sync = spy_sync  # type: ignore[method-assign]
        flusher.start()

        def append() -> None:
            events.append("append")
            data = build_batch([(b"k", b"v")], 1)
            log_.append(data, [read_header(data)], 1)
            flusher.when_durable(log_, lambda error: events.append(f"durable {error}"))

        flusher.before_next_round(append)
        assert events == []  # nothing is written before the round
        for _ in range(200):
            await asyncio.sleep(0.005)
            if len(events) == 2:
                break
        assert synced == [1]  # the record appended at the start of the round was in its sync
        assert log_.high_watermark == 1
        await flusher.stop()
        log_.close()
        return events

    assert asyncio.run(main()) == ["append", "durable None"]


def test_a_failed_sync_reaches_the_callbacks(tmp_path: Path) -> None:
    boom = OSError(5, "EIO")

    async def main() -> list[object]:
        flusher = Flusher("always", directory=tmp_path)
        log_ = Log.open(tmp_path / "p-0", LogConfig(retention_ms=-1), flusher)

        def failing_sync(segments: list) -> None:
            raise boom

        flusher._sync = failing_sync  # type: ignore[method-assign]
        got: list[object] = []
        data = build_batch([(b"k", b"v")], 1)
        log_.append(data, [read_header(data)], 1)
        flusher.when_durable(log_, got.append)
        with contextlib.suppress(OSError):
            await flusher._round()
        log_.close()
        flusher.close()
        return got

    got = asyncio.run(main())
    assert len(got) == 1 and got[0] is boom
