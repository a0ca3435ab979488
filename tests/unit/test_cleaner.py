"""Log compaction (storage/cleaner.py) and the crash safety of its segment swap."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from kcoord.protocol import records
from kcoord.storage.cleaner import HistoryRetention, TxnScan, clean, write_cleaned
from kcoord.storage.compaction_rules import CoordinatorRules
from kcoord.storage.flush import Flusher
from kcoord.storage.log import CLEANING_FILE, Log, LogConfig
from kcoord.storage.log_cleaner import LogCleaner

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


# --- from the transaction durability work: transactions through the cleaner ----------------------
def put_txn(lg: Log, pid: int, entries: list[tuple[bytes, bytes | None]], ts: int) -> None:
    data = records.build_batch(
        entries, ts, producer_id=pid, producer_epoch=0, attributes=records.ATTR_TRANSACTIONAL
    )
    lg.append(data, [records.read_header(data)], ts)


def put_marker(lg: Log, pid: int, commit: bool, ts: int) -> None:
    data = records.build_marker_batch(pid, 0, commit, 0, ts)
    lg.append(data, [records.read_header(data)], ts)


def batches_of(lg: Log) -> list[tuple[int, int, bool, bool, list[tuple[int, bytes | None, bytes | None]]]]:
    """(producer id, base offset, transactional, control, records) of every batch."""
    return [
        (
            h.producer_id,
            h.base_offset,
            h.is_transactional,
            h.is_control,
            [(o, k, v) for o, _t, k, v in records.iter_records(data, h)],
        )
        for h, data in lg.batches()
    ]


def test_clean_keeps_transactions_apart(tmp_path: Path) -> None:
    """An aborted transaction's records are dropped and never replace an older record; a
    committed one's keep their producer and transactional flag; markers stay; nothing from the
    first unstable offset on is cleaned, so a transaction that may still abort keeps what it
    would replace."""
    now = 10 * DAY
    lg = open_log(tmp_path / "p", segment_bytes=150)
    put(lg, [(b"a", b"plain-a"), (b"b", b"plain-b"), (b"c", b"plain-c")], now)  # 0-2
    put_txn(lg, 7, [(b"a", b"aborted-a"), (b"x", b"aborted-x")], now)  # 3-4
    put_marker(lg, 7, False, now)  # 5
    put_txn(lg, 8, [(b"b", b"committed-b"), (b"y", b"committed-y")], now)  # 6-7
    put_marker(lg, 8, True, now)  # 8
    put(lg, [(b"y", b"plain-y")], now)  # 9: replaces the committed y
    put_txn(lg, 9, [(b"c", b"open-c")], now)  # 10: no marker yet
    put(lg, [(b"c", b"plain-c2"), (b"a", b"plain-a2")], now)  # 11-12
    lg.roll()
    assert len(lg.segments) > 4
    asyncio.run(clean(lg, now, DAY))
    after = batches_of(lg)
    kept = {o: (k, v) for *_, rows in after for o, k, v in rows}
    assert kept[0] == (b"a", b"plain-a")  # the aborted a at 3 replaced nothing
    assert 1 not in kept  # b: the committed transaction's b replaced it
    assert 3 not in kept and 4 not in kept  # the aborted transaction is gone
    assert 5 in kept and 8 in kept  # both markers stay
    assert kept[6] == (b"b", b"committed-b") and 7 not in kept
    (txn_batch,) = [b for b in after if b[1] == 6]
    assert txn_batch[0] == 8 and txn_batch[2] and not txn_batch[3]
    # From the open transaction at 10 on nothing is cleaned, nor replaced by what follows it.
    assert kept[2] == (b"c", b"plain-c") and kept[10] == (b"c", b"open-c") and 11 in kept and 12 in kept


# --- history retention (offsets.history.retention.ms) --------------------------------------------
HISTORY = HistoryRetention((b"h",), 3 * DAY)  # keys starting with b"h" are "offset commits" here


def test_history_keeps_superseded_records_of_its_types_within_retention(tmp_path: Path) -> None:
    now = 10 * DAY
    lg = open_log(tmp_path / "p")
    put(lg, [(b"h1", b"old")], now - 5 * DAY)  # older than the history retention
    put(lg, [(b"h1", b"recent")], now - DAY)
    put(lg, [(b"k1", b"other type")], now - DAY)
    put(lg, [(b"h1", b"latest"), (b"k1", b"latest")], now)
    before = contents(lg)
    lg.roll()
    asyncio.run(clean(lg, now, DAY, HISTORY))
    after = contents(lg)
    assert [(k, v) for _o, k, v in after] == [(b"h1", b"recent"), (b"h1", b"latest"), (b"k1", b"latest")]
    assert latest_view(after) == latest_view(before)  # replay takes the same last record per key
    # Later, the kept history ages past its retention and goes at the next cleaning.
    put(lg, [(b"k2", b"x")], now)
    lg.roll()
    asyncio.run(clean(lg, now + 3 * DAY, DAY, HISTORY))
    assert [(k, v) for _o, k, v in contents(lg)] == [(b"h1", b"latest"), (b"k1", b"latest"), (b"k2", b"x")]


def test_history_goes_with_a_dropped_tombstone_so_replay_never_resurrects_a_deleted_key(
    tmp_path: Path,
) -> None:
    now = 10 * DAY
    lg = open_log(tmp_path / "p")
    put(lg, [(b"h1", b"v1"), (b"h2", b"v1")], now - 2 * DAY)
    put(lg, [(b"h1", None)], now - 2 * DAY)  # older than delete.retention.ms: dropped
    put(lg, [(b"h2", None)], now)  # recent: kept, and h2's history with it
    lg.roll()
    asyncio.run(clean(lg, now, DAY, HISTORY))
    after = contents(lg)
    assert [(k, v) for _o, k, v in after] == [(b"h2", b"v1"), (b"h2", None)]
    assert latest_view(after) == {b"h2": None}


def test_history_leaves_transactional_batches_to_compaction(tmp_path: Path) -> None:
    now = 10 * DAY
    lg = open_log(tmp_path / "p")
    data = records.build_batch(
        [(b"h1", b"in a transaction")], now, producer_id=7, producer_epoch=0,
        attributes=records.ATTR_TRANSACTIONAL,
    )  # fmt: skip
    lg.append(data, [records.read_header(data)], now)
    marker = records.build_marker_batch(7, 0, True, 0, now)  # committed: below the first unstable offset
    lg.append(marker, [records.read_header(marker)], now)
    put(lg, [(b"h1", b"plain")], now)
    put(lg, [(b"h1", b"latest")], now)
    lg.roll()
    asyncio.run(clean(lg, now, DAY, HISTORY))
    assert [v for _o, k, v in contents(lg) if k == b"h1"] == [b"plain", b"latest"]


def test_no_history_is_todays_compaction(tmp_path: Path) -> None:
    now = 10 * DAY
    a, b = open_log(tmp_path / "a"), open_log(tmp_path / "b")
    for lg in (a, b):
        fill(lg, now)
        lg.roll()
    asyncio.run(clean(a, now, DAY))
    asyncio.run(clean(b, now, DAY, HistoryRetention((b"k",), 0)))  # fill writes k keys
    assert contents(a) == contents(b)


# --- passes that would remove nothing (stop 28) ----------------------------------------------------
class _Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now


def _segment_files(lg: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(lg.directory.iterdir()) if p.suffix != ".index"}


def _history_log(tmp_path: Path, now: int) -> tuple[Log, LogCleaner, _Clock, list]:
    """A log of history records only, after a first pass that was skipped: it would have removed
    nothing (log, cleaner, clock, the first pass's stats)."""
    clock = _Clock(now)
    lg = open_log(tmp_path / "p")
    cleaner = LogCleaner(clock, DAY, 15000, 0.5, history=HISTORY)
    cleaner.register(lg)
    for i in range(30):
        put(lg, [(b"h%d" % (i % 3), b"v%d" % i)], now)
    lg.roll()
    before, rows = _segment_files(lg), contents(lg)
    first = asyncio.run(cleaner.clean_if_needed(lg))
    assert first is not None and first.skipped
    assert first.records_in == first.records_out == 30  # every record is history within retention
    assert _segment_files(lg) == before and contents(lg) == rows  # not rewritten
    return lg, cleaner, clock, [first]


def test_a_pass_is_skipped_while_only_unaged_history_came_since_one_that_removed_nothing(
    tmp_path: Path,
) -> None:
    now = 10 * DAY
    lg, cleaner, clock, _ = _history_log(tmp_path, now)
    for i in range(30):
        put(lg, [(b"h%d" % (i % 3), b"w%d" % i)], now + 1000)
    lg.roll()
    before, rows = _segment_files(lg), contents(lg)
    skipped = asyncio.run(cleaner.clean_if_needed(lg))
    assert skipped is not None and skipped.skipped and skipped.records_in == 30
    assert _segment_files(lg) == before and contents(lg) == rows  # not rewritten
    assert asyncio.run(cleaner.clean_if_needed(lg)) is None  # and not dirty any more
    # Once the records could have aged (delete.retention.ms, shorter than the history's), a pass
    # runs again, and takes what aged: nothing yet here, all of it within the history's 3 days.
    clock.now = now + DAY
    for i in range(60):
        put(lg, [(b"h%d" % (i % 3), b"x%d" % i)], clock.now)
    lg.roll()
    ran = asyncio.run(cleaner.clean_if_needed(lg))
    assert ran is not None and not ran.skipped and ran.records_in == 120
    # Three days on, the history has aged: the pass after a skip-free stretch removes it.
    clock.now = now + 4 * DAY
    for i in range(150):
        put(lg, [(b"h%d" % (i % 3), b"y%d" % i)], clock.now)
    lg.roll()
    aged = asyncio.run(cleaner.clean_if_needed(lg))
    assert aged is not None and not aged.skipped and aged.records_out < aged.records_in
    assert latest_view(contents(lg)) == {b"h0": b"y147", b"h1": b"y148", b"h2": b"y149"}


@pytest.mark.parametrize("since", ["other type", "transaction"])
def test_a_pass_runs_when_more_than_history_came_since_one_that_removed_nothing(
    tmp_path: Path, since: str
) -> None:
    now = 10 * DAY
    lg, cleaner, _clock, _ = _history_log(tmp_path, now)
    for i in range(34):
        put(lg, [(b"h%d" % (i % 3), b"w%d" % i)], now)
    if since == "other type":
        put(lg, [(b"k1", b"replaced")], now)
        put(lg, [(b"k1", b"latest")], now)  # replaces a record history does not keep
        lg.roll()
    else:
        put_txn(lg, 7, [(b"h1", b"in a transaction")], now)
        lg.roll()
        put_marker(lg, 7, False, now)  # aborted, in the active segment: its record goes
    ran = asyncio.run(cleaner.clean_if_needed(lg))
    assert ran is not None and not ran.skipped and ran.records_out < ran.records_in
    kept = contents(lg)
    if since == "other type":
        assert [v for _o, k, v in kept if k == b"k1"] == [b"latest"]
    else:
        assert b"in a transaction" not in [v for _o, _k, v in kept]


def test_a_pass_runs_after_one_that_kept_a_transactional_record_history_replaces(tmp_path: Path) -> None:
    # A committed transactional commit is never kept as history once replaced: the plain commit
    # that replaces it makes the next pass worth running, though it is a history record itself.
    now = 10 * DAY
    clock = _Clock(now)
    lg = open_log(tmp_path / "p")
    cleaner = LogCleaner(clock, DAY, 15000, 0.5, history=HISTORY)
    cleaner.register(lg)
    put_txn(lg, 7, [(b"h1", b"in a transaction")], now)
    put_marker(lg, 7, True, now)
    for i in range(30):
        put(lg, [(b"h%d" % (2 + i % 3), b"v%d" % i)], now)
    lg.roll()
    first = asyncio.run(cleaner.clean_if_needed(lg))
    assert first is not None and first.records_in == first.records_out  # all kept
    for i in range(40):
        put(lg, [(b"h1", b"w%d" % i)], now)
    lg.roll()
    ran = asyncio.run(cleaner.clean_if_needed(lg))
    assert ran is not None and not ran.skipped
    assert b"in a transaction" not in [v for _o, _k, v in contents(lg)]


@pytest.mark.parametrize("aged", ["first batch", "a later batch", "no timestamp"])
def test_a_first_pass_runs_when_a_record_of_the_log_may_have_aged(tmp_path: Path, aged: str) -> None:
    """With no pass before it, a pass is skipped only if the whole log is unaged history: a
    record older than delete.retention.ms (a day here) may go, wherever it is in the log (the
    first batch's timestamp rules a skip out without reading keys; a later one is found by the
    read)."""
    now = 10 * DAY
    lg = open_log(tmp_path / "p")
    cleaner = LogCleaner(_Clock(now), DAY, 15000, 0.5, history=HISTORY)
    cleaner.register(lg)
    for i in range(30):
        old = (i == 0) if aged == "first batch" else (i == 20)
        ts = (-1 if aged == "no timestamp" else now - 2 * DAY) if old else now
        put(lg, [(b"h%d" % (i % 3), b"v%d" % i)], ts)
    lg.roll()
    ran = asyncio.run(cleaner.clean_if_needed(lg))
    assert ran is not None and not ran.skipped and ran.records_in == 30


def test_a_first_pass_runs_when_a_record_history_does_not_keep_was_replaced(tmp_path: Path) -> None:
    now = 10 * DAY
    lg = open_log(tmp_path / "p")
    cleaner = LogCleaner(_Clock(now), DAY, 15000, 0.5, history=HISTORY)
    cleaner.register(lg)
    for i in range(30):
        put(lg, [(b"h%d" % (i % 3), b"v%d" % i)], now)
    put(lg, [(b"k1", b"replaced")], now)
    put(lg, [(b"k1", b"latest")], now)
    lg.roll()
    ran = asyncio.run(cleaner.clean_if_needed(lg))
    assert ran is not None and not ran.skipped and ran.records_out == ran.records_in - 1
    assert [v for _o, k, v in contents(lg) if k == b"k1"] == [b"latest"]


def test_a_key_cut_short_by_its_batch_is_corrupt_not_history() -> None:
    from kcoord.storage import record_filter

    data = records.build_batch([(b"h-a-key-of-some-length", b"v")], 0)
    h = records.read_header(data)
    body = record_filter.records_body(data, h)
    assert record_filter.keys_start_with(body, h, (b"h",))
    with pytest.raises(records.InvalidBatch):
        record_filter.keys_start_with(body[:-6], h, (b"h",))  # the record ends inside its key


# --- a log a pass fails on (stop 40) ---------------------------------------------------------------
def _malformed_batch(ts: int) -> bytes:
    """A CRC-valid batch whose one record has a key length of six varint bytes, which Kafka's
    DefaultRecord.readFrom refuses (the parsers did not, before stop 40)."""
    import struct

    import crc32c

    data = bytearray(
        records.build_batch([(b"k", b"v")], ts)[:61] + bytes.fromhex("1a00000082808080800061026200")
    )
    struct.pack_into(">i", data, 8, len(data) - 12)
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    return bytes(data)


def test_a_log_a_pass_fails_on_is_uncleanable_and_the_others_are_cleaned(tmp_path: Path, monkeypatch) -> None:
    """As Kafka's LogCleaner marks a partition uncleanable: a log whose records a pass cannot read is
    not tried again (every pass failed and logged the same error, forever), while the other logs
    are cleaned; a failing disk (OSError) is tried again at the next look."""
    from kcoord.storage import log_cleaner

    now = 10 * DAY
    bad, good, full = (open_log(tmp_path / name) for name in ("bad", "good", "full"))
    cleaner = LogCleaner(_Clock(now), DAY, 15000, 0.5)
    for lg in (bad, good, full):
        cleaner.register(lg)
        for i in range(20):
            put(lg, [(b"k%d" % (i % 2), b"v%d" % i)], now)
    data = _malformed_batch(now)
    bad.append(data, [records.read_header(data)], now)
    for lg in (bad, good, full):
        lg.roll()
    passes: list[str] = []
    compact = log_cleaner.compact

    async def counting(lg: Log, *args: object) -> object:
        passes.append(lg.directory.name)
        if lg is full:
            raise OSError(28, "No space left on device")
        return await compact(lg, *args)

    monkeypatch.setattr(log_cleaner, "compact", counting)
    asyncio.run(cleaner.run_once())
    assert sorted(passes) == ["bad", "full", "good"]
    assert cleaner.uncleanable == [bad]
    assert [v for _o, k, v in contents(good) if k == b"k0"] == [b"v18"]  # cleaned

    passes.clear()
    asyncio.run(cleaner.run_once())
    assert passes == ["full"]  # the disk is asked again; the unreadable log is not
    assert cleaner.uncleanable == [bad]
