"""The coordinator snapshot file: what a restart takes from it, and when it refuses it.

A usable snapshot means the restart replays only the log after it; a corrupt, truncated,
foreign, wrong-version or stale one (covering offsets past the log's end, as after recovery cut
the log) is ignored with a warning, deleted, and the log replayed in full, to the same state.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import crc32c
import pytest
from structlog.testing import capture_logs

from kcoord.classic.group import GroupConfig
from kcoord.runtime.shard import CoordinatorShard
from kcoord.runtime.snapshot import (
    MAGIC,
    NO_PRODUCER,
    LatestRecords,
    SnapshotError,
    decode_snapshot,
    encode_snapshot,
    snapshot_files,
)
from kcoord.storage.log import Log
from tests.unit.grouputil import Harness
from tests.unit.test_coordinator_snapshot_replay import SnapshotReplay

NAME = "__consumer_offsets-0"


def harness(tmp_path: Path) -> Harness:
    h = Harness(tmp_path / NAME, GroupConfig())
    for i in range(20):
        h.commit(f"g{i % 3}", {("t", i % 4): i})
    return h


def restart(h: Harness) -> CoordinatorShard:
    config = h.log.config
    h.log.close()
    log = Log.open(h.directory, config, h.flusher)
    shard = CoordinatorShard(0, log, h.new_state(), h.registry)
    shard.load(h.clock.now_ms())
    h.shard = shard
    return shard


def test_restart_replays_only_the_log_after_the_snapshot(tmp_path: Path) -> None:
    h = harness(tmp_path)
    live = h.state.snapshot()
    h.shard.write_snapshot(h.shard.capture())
    h.commit("g0", {("t", 0): 100})
    h.commit("g1", {("t", 9): 101})
    live = h.state.snapshot()
    shard = restart(h)
    assert shard.snapshot_records == 12  # 3 groups x 4 partitions, the latest commit of each
    assert shard.replayed == 2
    assert shard.state.snapshot() == live


def test_the_file_round_trips() -> None:
    entries = [(7, 100, 2, b"\x00\x01k2", b"v2"), (3, NO_PRODUCER, 0, b"\x00\x01k", None)]
    end, decoded = decode_snapshot(encode_snapshot(NAME, 9, list(entries)), NAME)
    assert end == 9
    assert decoded == sorted(entries)


def test_the_file_has_the_documented_layout() -> None:
    """docs/coordinator-records.md's layout field by field: a broker of another version reads
    these files (and refuses another layout only by its version)."""
    entries = [
        (7, 100, 2, b"\x00\x01k2", b"v2"),
        (3, NO_PRODUCER, 0, b"\x00\x01k", None),
        (5, NO_PRODUCER, 0, b"\x00\x01k3", b""),
    ]
    body = struct.pack(">qih", 9, 3, len(NAME)) + NAME.encode()
    for offset, pid, epoch, key, value in sorted(entries):
        body += struct.pack(">q", offset) + struct.pack(">q", pid) + struct.pack(">h", epoch)
        body += struct.pack(">i", len(key)) + key
        body += struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
    expected = b"KCSNAP\r\n" + struct.pack(">h", 1) + struct.pack(">I", crc32c.crc32c(body)) + body
    assert bytes(encode_snapshot(NAME, 9, list(entries))) == expected


def flip_byte(data: bytes) -> bytes:
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1 :]


def wrong_version(data: bytes) -> bytes:
    return data[:8] + struct.pack(">h", 2) + data[10:]


def first_key_length(length: int) -> Callable[[bytes], bytes]:
    """A snapshot whose checksum holds but whose first entry's key length lies: only a kcoord bug
    could write one, and the load must find out before it applies any entry."""

    def mangle(data: bytes) -> bytes:
        at = 14 + 14 + len(NAME) + 18  # prefix, fixed header, log name; the entry's key length
        body = data[14:at] + struct.pack(">i", length) + data[at + 4 :]
        return data[:10] + struct.pack(">I", crc32c.crc32c(body)) + body

    return mangle


BAD: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "corrupt byte": (flip_byte, "CRC mismatch"),
    "truncated": (lambda d: d[: len(d) - 5], "CRC mismatch"),
    "header only": (lambda d: d[:10], "shorter than a snapshot header"),
    "wrong version": (wrong_version, "version 2"),
    "not a snapshot": (lambda d: b"GARBAGE!" + d[8:], "bad magic"),
    "key length past the end": (first_key_length(2**30), "ends early"),
    "negative key length": (first_key_length(-5), "key length -5"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_an_unusable_snapshot_is_ignored_and_the_log_replayed_in_full(tmp_path: Path, case: str) -> None:
    mangle, reason = BAD[case]
    h = harness(tmp_path)
    path = h.shard.write_snapshot(h.shard.capture())
    assert path is not None
    live = h.state.snapshot()
    path.write_bytes(mangle(path.read_bytes()))
    with capture_logs() as logs:
        shard = restart(h)
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1 and reason in warnings[0]["reason"], warnings
    assert shard.snapshot_records == 0 and shard.replayed == 20
    assert shard.state.snapshot() == live
    assert snapshot_files(h.directory) == []  # never applied to what is appended next


def test_a_snapshot_past_the_log_end_is_refused(tmp_path: Path) -> None:
    """Recovery after a crash cut the log below the snapshot: what it covers may be appended again
    with other records, so it must not be used (and must go before anything is appended)."""
    h = harness(tmp_path)
    live = h.state.snapshot()
    end = h.log.log_end_offset
    h.shard.write_snapshot(h.shard.capture())
    snap = snapshot_files(h.directory)[0]
    # The snapshot of a longer log, as if the tail it covered had been lost.
    _, entries = decode_snapshot(snap.read_bytes(), NAME)
    snap.unlink()
    stale = h.directory / f"{end + 5:020d}.coordinator-snapshot"
    stale.write_bytes(encode_snapshot(NAME, end + 5, entries))
    with capture_logs() as logs:
        shard = restart(h)
    assert any("the log ends at" in e.get("reason", "") for e in logs)
    assert shard.snapshot_records == 0 and shard.state.snapshot() == live
    assert snapshot_files(h.directory) == []


def test_a_snapshot_of_another_log_is_refused(tmp_path: Path) -> None:
    h = harness(tmp_path)
    live = h.state.snapshot()
    path = h.shard.write_snapshot(h.shard.capture())
    assert path is not None
    _, entries = decode_snapshot(path.read_bytes(), NAME)
    path.write_bytes(encode_snapshot("__consumer_offsets-7", h.log.log_end_offset, entries))
    with capture_logs() as logs:
        shard = restart(h)
    assert any("not of __consumer_offsets-0" in e.get("reason", "") for e in logs)
    assert shard.snapshot_records == 0 and shard.state.snapshot() == live


def test_decode_refuses_trailing_bytes() -> None:
    data = encode_snapshot(NAME, 1, [(0, NO_PRODUCER, 0, b"\x00\x01k", b"v")])
    with pytest.raises(SnapshotError):
        decode_snapshot(data + b"\x00", NAME)
    assert data.startswith(MAGIC)


def test_a_cleaning_past_the_snapshot_removes_it() -> None:
    """The cleaner drops a tombstone the snapshot's tail held: the snapshot, which still has the
    key's earlier commit, would bring the deleted offset back."""
    m = SnapshotReplay()
    try:
        m.plain_commit([("g1", "t", 0)], "g1")
        m.snapshot()
        m.tombstone(("g1", "t", 0))
        m.advance(1000)
        m.compact(0)
        assert snapshot_files(m.h.directory) == []
        m.snapshot_and_tail_equal_full_replay()
        assert m.h.state.offsets.committed == {}
    finally:
        m.teardown()


def test_records_after_a_pending_write_stay_until_its_transaction_ends() -> None:
    """Found by the property test: a pending transactional commit, then the offset's tombstone
    (which discards the pending write in replay), then a plain commit. Keeping only the latest
    record of the key would lose the tombstone and leave the write pending after a restart."""
    m = SnapshotReplay()
    try:
        m.txn_commit((100, 0), [("g1", "t", 0)], "g2")
        m.tombstone(("g2", "t", 0))
        m.plain_commit([("g1", "t", 0)], "g2")
        m.snapshot()
        m.snapshot_and_tail_equal_full_replay()
        assert m.h.state.offsets.pending.snapshot() == {}
    finally:
        m.teardown()


def test_latest_records_holds_what_follows_a_pending_write_only_while_it_is_pending() -> None:
    latest = LatestRecords()
    latest.plain(0, b"k", b"v0")
    latest.transactional(1, 100, 0, b"k", b"v1")
    latest.plain(2, b"k", None)  # replay drops the pending write on this tombstone
    latest.plain(3, b"k", b"v3")
    assert latest.latest[b"k"] == (3, b"v3")
    assert sorted(latest.entries()) == [
        (1, 100, 0, b"k", b"v1"),
        (2, NO_PRODUCER, 0, b"k", None),
        (3, NO_PRODUCER, 0, b"k", b"v3"),
    ]
    latest.end_transaction(100, commit=True)  # written before the plain commit: it loses
    assert latest.entries() == [(3, NO_PRODUCER, 0, b"k", b"v3")]
    latest.transactional(4, 100, 0, b"k", b"v4")
    latest.plain(5, b"k", None)
    latest.end_transaction(100, commit=True)
    assert latest.entries() == []  # the tombstone, kept for the transaction, goes with it
    latest.transactional(6, 100, 0, b"k", b"v6")
    latest.end_transaction(100, commit=True)
    assert latest.latest[b"k"] == (6, b"v6")
    latest.transactional(7, 100, 0, b"k", b"v7")
    latest.end_transaction(100, commit=False)
    assert latest.entries() == [(6, NO_PRODUCER, 0, b"k", b"v6")]
