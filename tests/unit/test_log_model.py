"""Random append/read/roll/reopen/retention sequences against a list-of-records model of the log."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kcoord.protocol import records
from kcoord.storage.log import Log
from tests.unit.logutil import T0, append, decode, open_log, read_all

Record = tuple[int, int, bytes | None, bytes | None]  # offset, timestamp, key, value


class LogModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kcoord-logmodel-"))
        self.cfg = {"segment_bytes": 600, "index_interval_bytes": 150, "retention_ms": -1}
        self.log: Log = open_log(self.dir, **self.cfg)
        self.records: list[Record] = []
        self.batch_bases: list[int] = []
        self.next_offset = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- operations -----------------------------------------------------------------------------
    @rule(
        timestamps=st.lists(st.integers(0, 50), min_size=1, max_size=6),
        value_size=st.sampled_from([0, 5, 40, 130]),
    )
    def append_batch(self, timestamps: list[int], value_size: int) -> None:
        ts = [T0 + t for t in timestamps]
        info = append(self.log, ts, value_size=value_size)
        assert info.first_offset == self.next_offset
        assert info.last_offset == self.next_offset + len(ts) - 1
        self.batch_bases.append(self.next_offset)
        for i, t in enumerate(ts):
            self.records.append((self.next_offset + i, t, f"k{i}".encode(), bytes([i % 251]) * value_size))
        self.next_offset += len(ts)

    @precondition(lambda self: self.next_offset > 0)
    @rule(data=st.data(), max_bytes=st.integers(0, 1500), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool) -> None:
        start = self.log.log_start_offset
        offset = data.draw(st.integers(start, self.next_offset))
        got = self.log.read(offset, max_bytes, min_one=min_one)
        if offset == self.next_offset:
            assert got == b""
            return
        headers = list(records.iter_headers(got))
        if not headers:
            assert not min_one
            return
        # Whole batches, starting with the one that holds the offset, within one segment.
        first_base = max(b for b in self.batch_bases if b <= offset)
        assert headers[0].base_offset == first_base
        assert len(got) <= max_bytes or (min_one and len(headers) == 1)
        expected = [r for r in self.records if first_base <= r[0] < first_base + len(decode(got))]
        assert decode(got) == expected

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(unclean=st.booleans())
    def reopen(self, unclean: bool) -> None:
        self.log.close()
        self.log = open_log(self.dir, unclean=unclean, **self.cfg)

    @precondition(lambda self: self.next_offset > 0)
    @rule(keep=st.integers(0, 3000))
    def retention_by_size(self, keep: int) -> None:
        self.log.config.retention_bytes = keep
        self.log.enforce_retention(T0)
        self.log.config.retention_bytes = -1
        start = self.log.log_start_offset
        assert start == self.next_offset or start in self.batch_bases
        assert self.log.size_bytes >= min(keep, self.log.size_bytes)
        self.records = [r for r in self.records if r[0] >= start]
        self.batch_bases = [b for b in self.batch_bases if b >= start]

    # --- invariants -------------------------------------------------------------------------------
    @invariant()
    def offsets(self) -> None:
        assert self.log.log_end_offset == self.log.high_watermark == self.next_offset

    @invariant()
    def contents(self) -> None:
        assert read_all(self.log) == self.records

    @invariant()
    def timestamp_lookups(self) -> None:
        hw = self.log.high_watermark
        for t in (0, 10, 25, 49, 50, 51):
            target = T0 + t
            want = next(((r[0], r[1]) for r in self.records if r[1] >= target), None)
            assert self.log.offset_for_timestamp(target, hw) == want, target
        if self.records:
            top = max(r[1] for r in self.records)
            want_max = next((r[0], r[1]) for r in self.records if r[1] == top)
            assert self.log.offset_of_max_timestamp(hw) == want_max


LogModel.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLogModel = LogModel.TestCase
