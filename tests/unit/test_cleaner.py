"""Log compaction (storage/cleaner.py) and the crash safety of its segment swap."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from kcoord.protocol import records
from kcoord.storage.cleaner import LogCleaner, TxnScan, clean, write_cleaned
from kcoord.storage.compaction_rules import CoordinatorRules
from kcoord.storage.flush import Flusher
from kcoord.storage.log import CLEANING_FILE, Log, LogConfig

DAY = 86_400_000


def open_log(d: Path, segment_bytes: int = 400) -> Log:
    return Log.open(d, LogConfig(segment_bytes=segment_bytes, retention_ms=-1), Flusher("os"))


def put(lg: Log, entries: list[tuple[bytes, bytes | None]], ts: int) -> None:
    data = records.build_batch(entries, ts)
    lg.append(data, [records.read_header(data)], ts)


def contents(lg: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for h, data in lg.batches():
        out += [(o, k, v) for o, _t, k, v in records.iter_records(data, h)]
    return out


def latest_view(rows: list[tuple[int, bytes | None, bytes | None]]) -> dict[bytes, bytes | None]:
    view: dict[bytes, bytes | None] = {}
    for _o, k, v in rows:
        assert k is not None
        view[k] = v
    return view


def fill(lg: Log, now: int) -> None:
    for i in range(40):
        put(lg, [(b"k%d" % (i % 5), b"v%d" % i)], now - DAY * 2)
    put(lg, [(b"k0", None)], now - DAY * 2)  # an old tombstone
    put(lg, [(b"k1", None)], now)  # a recent tombstone
    put(lg, [(b"k9", b"last")], now)


def test_clean_keeps_latest_value_offsets_and_recent_tombstones(tmp_path: Path) -> None:
    now = 10 * DAY
    lg = open_log(tmp_path / "p")
    fill(lg, now)
    before = contents(lg)
    lg.roll()
    stats = asyncio.run(clean(lg, now, DAY))
    assert stats is not None and stats.records_out < stats.records_in
    after = contents(lg)
    # Every surviving record keeps its offset, and the log ends where it ended.
    assert {o for o, _, _ in after} <= {o for o, _, _ in before}
    assert lg.log_end_offset == before[-1][0] + 1
    view = latest_view(after)
    assert b"k0" not in view  # tombstone older than delete.retention.ms: gone with its key
    assert view[b"k1"] is None  # recent tombstone kept so readers still see the deletion
    assert view == {k: v for k, v in latest_view(before).items() if k != b"k0"}
    assert len([1 for _o, k, _ in after if k == b"k2"]) == 1


def test_cleaned_log_survives_reopen(tmp_path: Path) -> None:
    now = 10 * DAY
    lg = open_log(tmp_path / "p")
    fill(lg, now)
    lg.roll()
    asyncio.run(clean(lg, now, DAY))
    expected = contents(lg)
    lg.close()
    assert contents(open_log(tmp_path / "p")) == expected


def _interrupted_swap(tmp_path: Path, stage: str) -> tuple[Path, list, list]:
    """Run a cleaning by hand up to ``stage`` and stop, as a crash would."""
    now = 10 * DAY
    d = tmp_path / "p"
    lg = open_log(d)
    fill(lg, now)
    lg.roll()
    original = contents(lg)
    dirty = list(lg.segments[:-1])
    latest: dict[bytes, int] = {}
    for o, k, _v in original:
        latest[k] = o  # type: ignore[index]
    outputs, _ = write_cleaned(d, dirty, latest, TxnScan(), CoordinatorRules(DAY), now, 400)
    if stage == "cleaned":
        pass
    else:
        swaps = []
        for p in outputs:
            swap = p.with_name(p.name.removesuffix(".cleaned") + ".swap")
            os.rename(p, swap)
            swaps.append(swap.name)
        (d / CLEANING_FILE).write_text(
            json.dumps({"delete": [s.base_offset for s in dirty], "install": swaps})
        )
        if stage in ("half-deleted", "all-deleted", "half-installed"):
            doomed = dirty if stage != "half-deleted" else dirty[: len(dirty) // 2]
            for seg in doomed:
                for suffix in (".log", ".index", ".timeindex"):
                    (d / (f"{seg.base_offset:020d}" + suffix)).unlink(missing_ok=True)
        if stage == "half-installed":
            for name in swaps[: max(1, len(swaps) // 2)]:
                os.rename(d / name, d / name.removesuffix(".swap"))
    for seg in lg.segments:
        seg.close()
    compacted = [r for r in original if latest[r[1]] == r[0] and not (r[2] is None and r[1] == b"k0")]  # type: ignore[index]
    return d, original, compacted


@pytest.mark.parametrize("stage", ["cleaned", "planned", "half-deleted", "all-deleted", "half-installed"])
def test_interrupted_swap_is_finished_or_discarded(tmp_path: Path, stage: str) -> None:
    d, original, compacted = _interrupted_swap(tmp_path, stage)
    got = contents(open_log(d))
    if stage == "cleaned":
        assert got == original  # the cleaner's output was never claimed: discarded
    else:
        assert got == compacted  # the swap was planned: completed on open
    assert not list(d.glob("*.swap")) and not list(d.glob("*.cleaned")) and not (d / CLEANING_FILE).exists()


def test_cleaner_waits_for_enough_dirty_data(tmp_path: Path) -> None:
    now = 10 * DAY

    class Clock:
        def now_ms(self) -> int:
            return now

    lg = open_log(tmp_path / "p")
    cleaner = LogCleaner(Clock(), DAY, 15000, 0.5)
    cleaner.register(lg)
    assert asyncio.run(cleaner.clean_if_needed(lg)) is None  # nothing closed yet
    fill(lg, now)
    lg.roll()
    assert asyncio.run(cleaner.clean_if_needed(lg)) is not None
    assert asyncio.run(cleaner.clean_if_needed(lg)) is None  # all clean now
