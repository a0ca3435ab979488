"""The segmented log: appends, reads, rolling, retention, recovery, indexes, timestamp lookups."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from kcoord.protocol import records
from kcoord.storage.log import OffsetOutOfRange
from kcoord.storage.segment import segment_name
from tests.unit.logutil import T0, append, batch_bases, build_batch, decode, open_log, read_all


def seg_files(d: Path, suffix: str = ".log") -> list[str]:
    return sorted(p.name for p in d.glob("*" + suffix))


# --- append and read ------------------------------------------------------------------------
def test_append_assigns_contiguous_offsets(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (0, 0, 0)
    info = append(log, [T0, T0 + 1, T0 + 2])
    assert (info.first_offset, info.last_offset, info.log_append_time, info.log_start_offset) == (0, 2, -1, 0)
    info = append(log, [T0 + 3])
    assert (info.first_offset, info.last_offset) == (3, 3)
    assert log.log_end_offset == log.high_watermark == 4
    got = read_all(log)
    assert [r[0] for r in got] == [0, 1, 2, 3]
    assert [r[1] for r in got] == [T0, T0 + 1, T0 + 2, T0 + 3]
    assert [r[2] for r in got] == [b"k0", b"k1", b"k2", b"k0"]


def test_read_from_the_middle_of_a_batch_returns_the_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, [T0] * 3)  # offsets 0-2
    append(log, [T0] * 4)  # offsets 3-6
    append(log, [T0] * 2)  # offsets 7-8
    data = log.read(5, 1 << 20)
    assert batch_bases(data) == [3, 7]
    assert [r[0] for r in decode(data)] == [3, 4, 5, 6, 7, 8]
    assert batch_bases(log.read(6, 1 << 20)) == [3, 7]
    assert batch_bases(log.read(7, 1 << 20)) == [7]


def test_read_limits_and_the_kip74_first_batch_rule(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for _ in range(3):
        append(log, [T0] * 5, value_size=100)
    sizes = [h.size for h in records.iter_headers(log.read(0, 1 << 20))]
    assert len(sizes) == 3
    # Only whole batches fit: exactly two, or just under two.
    assert batch_bases(log.read(0, sizes[0] + sizes[1])) == [0, 5]
    assert batch_bases(log.read(0, sizes[0] + sizes[1] - 1)) == [0]
    # KIP-74: a first batch larger than the limit comes whole, but only when min_one.
    data = log.read(0, 10)
    assert batch_bases(data) == [0] and len(data) == sizes[0]
    assert log.read(0, 10, min_one=False) == b""
    assert log.read(0, 0, min_one=False) == b""
    # max_offset (the high watermark for consumers) bounds what is returned.
    assert batch_bases(log.read(0, 1 << 20, max_offset=10)) == [0, 5]
    assert batch_bases(log.read(0, 10, max_offset=5)) == [0]
    assert log.read(10, 1 << 20, max_offset=10) == b""
    assert log.read(15, 1 << 20) == b""  # at the log end: nothing yet, no error
    with pytest.raises(OffsetOutOfRange):
        log.read(16, 1 << 20)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 1 << 20)


def test_log_append_time_stamps_the_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    now = T0 + 999_000
    info = append(log, [T0, T0 + 5], now_ms=now, log_append_time=True)
    assert info.log_append_time == now
    data = log.read(0, 1 << 20)
    (h,) = records.iter_headers(data)
    records.validate_batch(data, h)  # CRC recomputed
    assert h.attributes & records.ATTR_TIMESTAMP_TYPE
    assert h.max_timestamp == now
    assert [r[1] for r in decode(data)] == [now, now]
    assert log.offset_for_timestamp(now, log.high_watermark) == (0, now)
    assert log.offset_for_timestamp(now + 1, log.high_watermark) is None


# --- rolling ----------------------------------------------------------------------------------
def test_roll_by_size(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=1000)
    for i in range(10):
        append(log, [T0 + i] * 3, value_size=100)  # ~450 bytes a batch: two per segment
    assert len(log.segments) == 5
    assert [s.base_offset for s in log.segments] == [0, 6, 12, 18, 24]
    assert seg_files(tmp_path) == [segment_name(b) + ".log" for b in (0, 6, 12, 18, 24)]
    assert all(s.size <= 1000 for s in log.segments)
    assert [r[0] for r in read_all(log)] == list(range(30))
    # A read stays within one segment.
    assert batch_bases(log.read(4, 1 << 20)) == [3]


def test_a_batch_larger_than_segment_bytes_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=200)
    append(log, [T0] * 5, value_size=100)
    append(log, [T0] * 5, value_size=100)
    assert [s.base_offset for s in log.segments] == [0, 5]


def test_roll_before_an_offset_the_index_cannot_hold(tmp_path: Path) -> None:
    """The offset index keeps offsets relative to the segment's base in 32 bits: a batch reaching
    past that (a compressed batch of tiny records can claim 2^31 of them in few bytes) goes to a
    new segment, as Kafka rolls, however small the segment still is."""
    log = open_log(tmp_path)
    append(log, [T0])
    recs = [(b"k", b"v", T0)]
    data = bytearray(build_batch(recs))
    struct.pack_into(">i", data, 23, 0x7FFFFFFF)  # lastOffsetDelta: 2^31 offsets in one batch
    struct.pack_into(">I", data, 17, records.crc_of(data, 0, len(data)))
    log.append(data, list(records.iter_headers(data)), T0)
    assert [s.base_offset for s in log.segments] == [0, 1]
    assert log.log_end_offset == 1 + 0x80000000
    log.close()
    reopened = open_log(tmp_path, unclean=True)
    assert reopened.log_end_offset == 1 + 0x80000000


def test_roll_by_time_uses_the_first_batch_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, roll_ms=1000)
    append(log, [T0])
    append(log, [T0 + 1000])  # waited exactly roll_ms: not more
    assert len(log.segments) == 1
    append(log, [T0 + 1001])
    assert [s.base_offset for s in log.segments] == [0, 2]
    append(log, [T0 + 1500])
    assert len(log.segments) == 2


def test_segment_jitter_rolls_each_segment_a_random_while_earlier(tmp_path: Path) -> None:
    """segment.jitter.ms: each segment draws its jitter in [0, min(jitter, roll_ms)) when it is
    created, and rolls once it waited longer than roll_ms less that jitter (Kafka)."""
    log = open_log(tmp_path, roll_ms=1000, roll_jitter_ms=800)
    jitters = []
    ts = T0
    for _ in range(40):
        jitter = log.active_roll_jitter_ms
        jitters.append(jitter)
        assert 0 <= jitter < 800
        first = ts
        append(log, [first])
        segments = len(log.segments)
        append(log, [first + 1000 - jitter])  # waited exactly roll_ms - jitter: not more
        assert len(log.segments) == segments
        ts = first + 1001 - jitter
        append(log, [ts])
        assert len(log.segments) == segments + 1
    assert len(set(jitters)) > 1  # drawn per segment, not once per log
    # The jitter is bounded by roll_ms too.
    capped = open_log(tmp_path / "capped", roll_ms=10, roll_jitter_ms=1_000_000)
    for _ in range(50):
        assert 0 <= capped.active_roll_jitter_ms < 10
        append(capped, [T0])
        capped.roll()
    no_jitter = open_log(tmp_path / "none", roll_ms=1000)
    assert no_jitter.active_roll_jitter_ms == 0


def test_empty_active_segment_is_not_rolled(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    assert log.roll() is log.active
    append(log, [T0])
    log.roll()
    log.roll()
    assert [s.base_offset for s in log.segments] == [0, 1]


# --- retention --------------------------------------------------------------------------------
def test_retention_by_time_deletes_whole_expired_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500, retention_ms=10_000)
    for i in range(6):
        append(log, [T0 + i * 1000] * 3, value_size=100)  # one batch per segment
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9, 12, 15]
    # At T0+12_500 the segments whose newest record is older than T0+2_500 are due.
    assert log.enforce_retention(T0 + 12_500) == 3
    assert log.log_start_offset == 9
    assert [s.base_offset for s in log.segments] == [9, 12, 15]
    assert seg_files(tmp_path) == [segment_name(b) + ".log" for b in (9, 12, 15)]
    assert [r[0] for r in read_all(log)] == list(range(9, 18))
    with pytest.raises(OffsetOutOfRange):
        log.read(8, 1 << 20)
    assert log.enforce_retention(T0 + 12_500) == 0
    # Everything expired: the log rolls and keeps an empty active segment at the log end.
    assert log.enforce_retention(T0 + 100_000) == 3
    assert log.log_start_offset == log.log_end_offset == 18
    append(log, [T0 + 100_000])
    assert [r[0] for r in read_all(log)] == [18]


def test_retention_by_size_keeps_the_newest_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500, retention_ms=-1)
    for i in range(5):
        append(log, [T0 + i] * 3, value_size=100)
    seg_size = log.segments[0].size
    assert all(s.size == seg_size for s in log.segments)
    # Kafka deletes a segment only if the log stays at least retention.bytes without it.
    log.config.retention_bytes = 2 * seg_size + 1
    assert log.enforce_retention(T0) == 2
    assert [s.base_offset for s in log.segments] == [6, 9, 12]
    log.config.retention_bytes = 2 * seg_size
    assert log.enforce_retention(T0) == 1
    assert [s.base_offset for s in log.segments] == [9, 12]
    assert log.log_start_offset == 9
    assert log.enforce_retention(T0) == 0
    log.config.retention_bytes = -1
    assert log.enforce_retention(T0 + 10**12) == 0  # retention.ms -1: forever


def test_retention_survives_reopen(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500, retention_ms=10_000)
    for i in range(4):
        append(log, [T0 + i * 10_000] * 3, value_size=100)
    log.enforce_retention(T0 + 25_000)
    start = log.log_start_offset
    assert start == 6
    log.close()
    log = open_log(tmp_path, segment_bytes=500, retention_ms=10_000)
    assert (log.log_start_offset, log.log_end_offset) == (start, 12)


# --- the log start offset (DeleteRecords) ------------------------------------------------------
def test_advance_start_offset_inside_a_segment_and_its_reads(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500, retention_ms=-1)
    for i in range(4):
        append(log, [T0 + 10 * (3 * i + j) for j in range(3)], value_size=100)  # 0-2, 3-5, 6-8, 9-11
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    assert log.advance_start_offset(4) is True
    assert log.log_start_offset == 4
    with pytest.raises(OffsetOutOfRange):
        log.read(3, 1 << 20)
    assert batch_bases(log.read(4, 1 << 20)) == [3]  # the whole batch holding it
    assert [r[0] for r in read_all(log)] == list(range(4, 12))
    # Timestamp lookups skip the records below it, within its batch too.
    assert log.offset_for_timestamp(0, log.high_watermark) == (4, T0 + 40)
    assert log.offset_for_timestamp(T0 + 35, log.high_watermark) == (4, T0 + 40)
    assert log.offset_for_timestamp(T0 + 41, log.high_watermark) == (5, T0 + 50)
    assert log.advance_start_offset(2) is False  # never backwards
    assert log.advance_start_offset(4) is False
    with pytest.raises(OffsetOutOfRange):
        log.advance_start_offset(13)  # above the high watermark
    # Only the segments whose every record is below it go, at the next retention run.
    assert log.delete_segments_below_start() == 1
    assert [s.base_offset for s in log.segments] == [3, 6, 9]
    assert log.advance_start_offset(12) is True
    assert log.delete_segments_below_start() == 2  # never the active segment
    assert [s.base_offset for s in log.segments] == [9]
    assert log.offset_for_timestamp(0, log.high_watermark) is None
    append(log, [T0 + 200])
    assert [r[0] for r in read_all(log)] == [12]


def test_start_offset_survives_reopen_and_retention_keeps_the_larger(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500, retention_ms=10_000)
    for i in range(3):
        append(log, [T0 + i * 10_000] * 3, value_size=100)
    log.advance_start_offset(4)
    log.close()
    log = open_log(tmp_path, segment_bytes=500, retention_ms=10_000)
    assert (log.log_start_offset, log.log_end_offset) == (4, 9)
    assert log.enforce_retention(T0 + 15_000) == 1  # segment 0-2 expired: the start stays at 4
    assert log.log_start_offset == 4
    assert log.enforce_retention(T0 + 25_000) == 1  # segment 3-5 too: now at 6
    assert log.log_start_offset == 6
    log.close()
    assert open_log(tmp_path, segment_bytes=500, retention_ms=10_000).log_start_offset == 6


def test_start_offset_beyond_what_survived_a_crash_starts_the_log_over(tmp_path: Path) -> None:
    """Records DeleteRecords deleted up to were lost (flush policy os): as Kafka's LogLoader, every
    segment goes and the log starts empty at the checkpoint, so no offset is reused."""
    log = open_log(tmp_path)
    append(log, [T0] * 5)
    append(log, [T0] * 5)
    log.advance_start_offset(8)
    size_of_first = log.segments[0].size // 2
    log.close()
    os.truncate(tmp_path / (segment_name(0) + ".log"), size_of_first)  # the second batch is lost
    log = open_log(tmp_path, unclean=True)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (8, 8, 8)
    assert seg_files(tmp_path) == [segment_name(8) + ".log"]
    assert append(log, [T0]).first_offset == 8
    assert [r[0] for r in read_all(log)] == [8]


# --- recovery ---------------------------------------------------------------------------------
def _three_batches(d: Path) -> list[int]:
    log = open_log(d)
    for i in range(3):
        append(log, [T0 + i] * 4, value_size=50)
    sizes = [s.size for s in log.segments]
    ends = [h.position + h.size for h in records.iter_headers(log.read(0, 1 << 20))]
    log.close()
    assert ends[-1] == sizes[0]
    return ends


@pytest.mark.parametrize("cut", [1, 13, 60, 61, 100])
def test_truncated_tail_is_cut_back_to_the_last_whole_batch(tmp_path: Path, cut: int) -> None:
    ends = _three_batches(tmp_path)
    path = tmp_path / (segment_name(0) + ".log")
    os.truncate(path, ends[2] - cut)
    log = open_log(tmp_path)
    assert log.log_end_offset == 8
    assert path.stat().st_size == ends[1]
    assert [r[0] for r in read_all(log)] == list(range(8))
    assert append(log, [T0 + 9]).first_offset == 8  # appends continue without a hole
    assert [r[0] for r in read_all(log)] == list(range(9))


@pytest.mark.parametrize(
    "garbage",
    [b"\x00", b"\x00" * 200, os.urandom(37), b"\xff" * 70],
    # Named, not shown: pytest-xdist's workers must collect the same ids, and the random bytes
    # differ in each.
    ids=["zero", "zeros", "random", "ones"],
)
def test_garbage_after_the_last_batch_is_dropped(tmp_path: Path, garbage: bytes) -> None:
    ends = _three_batches(tmp_path)
    path = tmp_path / (segment_name(0) + ".log")
    with open(path, "ab") as f:
        f.write(garbage)
    log = open_log(tmp_path)
    assert log.log_end_offset == 12
    assert path.stat().st_size == ends[2]
    assert append(log, [T0]).first_offset == 12


@pytest.mark.parametrize("where", ["records", "attributes", "crc", "producer_id"])
def test_flipped_byte_in_last_batch_drops_that_batch(tmp_path: Path, where: str) -> None:
    ends = _three_batches(tmp_path)
    path = tmp_path / (segment_name(0) + ".log")
    at = {
        "records": ends[2] - 3,
        "attributes": ends[1] + 22,
        "crc": ends[1] + 18,
        "producer_id": ends[1] + 45,
    }
    raw = bytearray(path.read_bytes())
    raw[at[where]] ^= 0x40
    path.write_bytes(bytes(raw))
    log = open_log(tmp_path)
    assert log.log_end_offset == 8
    assert path.stat().st_size == ends[1]
    assert [r[0] for r in read_all(log)] == list(range(8))


def test_corrupt_batch_in_the_middle_drops_everything_after_it(tmp_path: Path) -> None:
    ends = _three_batches(tmp_path)
    path = tmp_path / (segment_name(0) + ".log")
    raw = bytearray(path.read_bytes())
    raw[ends[0] + 70] ^= 0x01  # inside the second batch's records
    path.write_bytes(bytes(raw))
    log = open_log(tmp_path)
    assert log.log_end_offset == 4
    assert path.stat().st_size == ends[0]


def test_unclean_open_checks_the_segment_before_the_active_one(tmp_path: Path) -> None:
    """A segment may have rolled just before a crash: its tail is verified too, and the
    segments after a truncation point are dropped so that offsets stay contiguous (Kafka's
    LogLoader deletes the segments after a truncated one)."""
    log = open_log(tmp_path, segment_bytes=700)
    for i in range(4):
        append(log, [T0 + i] * 3, value_size=100)
    assert [s.base_offset for s in log.segments] == [0, 3, 6, 9]
    log.close()
    second_last = tmp_path / (segment_name(6) + ".log")
    os.truncate(second_last, second_last.stat().st_size - 5)
    log = open_log(tmp_path, segment_bytes=700, unclean=True)
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert log.log_end_offset == 6
    assert [r[0] for r in read_all(log)] == list(range(6))
    assert append(log, [T0 + 100]).first_offset == 6
    assert seg_files(tmp_path) == [segment_name(b) + ".log" for b in (0, 3, 6)]
    log.close()
    log = open_log(tmp_path, segment_bytes=700)
    assert log.log_end_offset == 7
    assert log.offset_for_timestamp(T0 + 100, log.high_watermark) == (6, T0 + 100)


@pytest.mark.parametrize("delta", [1, 4, 5, 10, 13, 22, 40])
def test_index_entry_pointing_into_a_batch_does_not_prevent_opening(tmp_path: Path, delta: int) -> None:
    before = _indexed_log(tmp_path)
    index = tmp_path / (segment_name(0) + ".index")
    good = index.read_bytes()
    index.write_bytes(good[:-4] + (int.from_bytes(good[-4:], "big") + delta).to_bytes(4, "big"))
    _check_reads(tmp_path, before)
    assert index.read_bytes() == good


def test_clean_reopen_keeps_everything(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=700)
    for i in range(5):
        append(log, [T0 + i] * 3, value_size=100)
    before = read_all(log)
    log.close()
    log = open_log(tmp_path, segment_bytes=700)
    assert read_all(log) == before
    assert log.log_end_offset == 15
    assert append(log, [T0]).first_offset == 15


# --- indexes ----------------------------------------------------------------------------------
def _indexed_log(d: Path) -> list:
    log = open_log(d, segment_bytes=2000, index_interval_bytes=300)
    for i in range(20):
        append(log, [T0 + i * 10, T0 + i * 10 + 5], value_size=100)
    assert len(log.segments) >= 3
    before = read_all(log)
    log.close()
    return before


def _check_reads(d: Path, before: list) -> None:
    log = open_log(d, segment_bytes=2000, index_interval_bytes=300)
    assert read_all(log) == before
    for off in range(0, 40, 3):
        assert decode(log.read(off, 1))[0][0] in (off, off - 1)
    assert log.offset_for_timestamp(T0 + 123, log.high_watermark) == (25, T0 + 125)
    assert log.offset_for_timestamp(T0 + 126, log.high_watermark) == (26, T0 + 130)
    log.close()


@pytest.mark.parametrize("damage", ["deleted", "odd-length", "zeros", "random", "past-end"])
def test_offset_index_is_rebuilt_when_missing_or_corrupt(tmp_path: Path, damage: str) -> None:
    before = _indexed_log(tmp_path)
    index = tmp_path / (segment_name(0) + ".index")
    good = index.read_bytes()
    assert len(good) >= 16
    if damage == "deleted":
        index.unlink()
    elif damage == "odd-length":
        index.write_bytes(good + b"\x01\x02\x03")
    elif damage == "zeros":
        index.write_bytes(b"\x00" * len(good))  # a preallocated, never written index
    elif damage == "random":
        index.write_bytes(os.urandom(len(good)))
    elif damage == "past-end":
        index.write_bytes(good[:-4] + (10**6).to_bytes(4, "big"))
    _check_reads(tmp_path, before)
    assert index.read_bytes() == good


@pytest.mark.parametrize("damage", ["deleted", "odd-length", "random"])
def test_time_index_is_rebuilt_when_missing_or_corrupt(tmp_path: Path, damage: str) -> None:
    before = _indexed_log(tmp_path)
    tindex = tmp_path / (segment_name(0) + ".timeindex")
    good = tindex.read_bytes()
    if damage == "deleted":
        tindex.unlink()
    elif damage == "odd-length":
        tindex.write_bytes(good[:-5])
    else:
        tindex.write_bytes(os.urandom(len(good)))
    _check_reads(tmp_path, before)
    assert tindex.read_bytes() == good


def test_index_files_are_written_when_a_segment_stops_being_active(tmp_path: Path) -> None:
    # The active segment's entries stay in memory (its indexes are rebuilt on every start), so
    # appends do not dirty index files; a roll or a clean close writes them out whole.
    log = open_log(tmp_path, segment_bytes=2000, index_interval_bytes=300)
    for i in range(20):
        append(log, [T0 + i * 10, T0 + i * 10 + 5], value_size=100)
    active = log.segments[-1]
    assert active.index.offsets and active.time_index.timestamps
    assert active.index.path.read_bytes() == b""
    assert active.time_index.path.read_bytes() == b""
    rolled = log.segments[:-1]
    for seg in rolled:
        assert len(seg.index.path.read_bytes()) == 8 * len(seg.index.offsets)
        assert len(seg.time_index.path.read_bytes()) == 12 * len(seg.time_index.timestamps)
    expected = {
        seg.base_offset: (list(seg.index.offsets), list(seg.time_index.timestamps)) for seg in log.segments
    }
    log.close()
    log = open_log(tmp_path, segment_bytes=2000, index_interval_bytes=300)
    for seg in log.segments:
        # What a clean close left on disk is what the segments load (and would rebuild).
        assert seg.index.load(seg.size) and seg.time_index.load(seg.next_offset)
        assert (seg.index.offsets, seg.time_index.timestamps) == expected[seg.base_offset]
    log.close()


# --- timestamp lookups ------------------------------------------------------------------------
def test_offset_for_timestamp_finds_the_first_record_not_the_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, [T0, T0 + 10, T0 + 20, T0 + 30])  # 0-3
    append(log, [T0 + 40, T0 + 50])  # 4-5
    hw = log.high_watermark
    assert log.offset_for_timestamp(0, hw) == (0, T0)
    assert log.offset_for_timestamp(T0, hw) == (0, T0)
    assert log.offset_for_timestamp(T0 + 1, hw) == (1, T0 + 10)
    assert log.offset_for_timestamp(T0 + 25, hw) == (3, T0 + 30)
    assert log.offset_for_timestamp(T0 + 30, hw) == (3, T0 + 30)
    assert log.offset_for_timestamp(T0 + 31, hw) == (4, T0 + 40)
    assert log.offset_for_timestamp(T0 + 45, hw) == (5, T0 + 50)
    assert log.offset_for_timestamp(T0 + 51, hw) is None
    # Below max_offset only.
    assert log.offset_for_timestamp(T0 + 31, 4) is None
    assert log.offset_for_timestamp(T0 + 25, 4) == (3, T0 + 30)


def test_offset_for_timestamp_with_out_of_order_timestamps(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=150)
    append(log, [T0 + 50, T0 + 10])  # 0-1
    append(log, [T0 + 20, T0 + 60])  # 2-3
    append(log, [T0 + 5, T0 + 55])  # 4-5
    assert len(log.segments) > 1
    hw = log.high_watermark
    assert log.offset_for_timestamp(T0 + 15, hw) == (0, T0 + 50)
    assert log.offset_for_timestamp(T0 + 51, hw) == (3, T0 + 60)
    assert log.offset_for_timestamp(T0 + 61, hw) is None


def test_offset_of_max_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=150)
    assert log.offset_of_max_timestamp(log.high_watermark) is None
    append(log, [T0 + 50, T0 + 10])  # 0-1
    append(log, [T0 + 20, T0 + 90, T0 + 90])  # 2-4
    append(log, [T0 + 5, T0 + 90])  # 5-6: ties go to the first record
    append(log, [T0 + 7])  # 7
    assert log.offset_of_max_timestamp(log.high_watermark) == (3, T0 + 90)
    assert log.offset_of_max_timestamp(2) == (0, T0 + 50)


@pytest.mark.parametrize("window", [64, 300, 1000, 1 << 20])
def test_batches_reads_in_windows_and_yields_every_batch_once(
    tmp_path: Path, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Windows smaller than a batch, cutting batches anywhere, and larger than a segment: batches()
    # yields each batch once, whole, with its position in the segment, from start_offset up to
    # max_offset.
    lg = open_log(tmp_path, segment_bytes=2000)
    for i in range(40):
        append(lg, [T0 + i] * (1 + i % 4), value_size=1 + (i * 37) % 200)
    expected = []
    for seg in lg.segments:
        data = seg.read(0, seg.size)
        expected += [(h, data[h.position : h.position + h.size]) for h in records.iter_headers(data)]
    assert len(lg.segments) > 3 and any(h.size > 300 for h, _ in expected)
    monkeypatch.setattr("kcoord.storage.log.READ_WINDOW_BYTES", window)
    assert list(lg.batches()) == expected
    start, stop = expected[5][0].base_offset + 1, expected[30][0].base_offset
    assert list(lg.batches(start, stop)) == [(h, d) for h, d in expected if h.last_offset >= start][: 30 - 5]


@pytest.mark.parametrize("log_append_time", [False, True], ids=["create-time", "log-append-time"])
def test_read_only_batches_are_stored_as_batches_stamped_in_place(
    tmp_path: Path, log_append_time: bool
) -> None:
    """A Produce request served from the bytes it was read in hands the log read-only records: the
    log writes each batch's stamped start ahead of the rest (Segment.append_pieces), and the
    segment must hold exactly what stamping a writable copy in place writes."""
    batches = [
        build_batch([(b"k%d" % i, bytes([i]) * (100 * i + 1), T0 + i) for i in range(n)]) for n in (1, 3, 7)
    ]
    logs = {"writable": open_log(tmp_path / "w"), "read-only": open_log(tmp_path / "r")}
    for log in logs.values():
        append(log, [T0])  # so that the stamped offsets are not zero
    for batch in [*batches, b"".join(batches)]:  # one batch a call, then three in one
        for kind, log in logs.items():
            data = bytearray(batch) if kind == "writable" else memoryview(batch)
            info = log.append(
                data, list(records.iter_headers(data)), T0 + 99, log_append_time=log_append_time
            )
            assert info.log_append_time == (T0 + 99 if log_append_time else -1)
    w, r = logs["writable"], logs["read-only"]
    assert r.log_end_offset == w.log_end_offset == 1 + 2 * (1 + 3 + 7)
    assert r.active.size == w.active.size
    assert r.active.path.read_bytes()[: r.active.size] == w.active.path.read_bytes()[: w.active.size]
    assert read_all(r) == read_all(w)
    for log in logs.values():
        log.close()


def test_pieces_beyond_one_pwritev_are_written_whole(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    pieces: list[bytes | memoryview] = [bytes([i % 256]) * 3 for i in range(3000)]  # > IOV_MAX
    assert log.active.append_pieces(pieces, 9000, []) == 0
    assert log.active.size == 9000
    assert log.active.path.read_bytes()[:9000] == b"".join(pieces)
    log.close()
