"""Offset history (kcoord/groups/history.py) read from a real coordinator log written by the
production shard: plain and transactional commits, deletions, who committed, and compaction with
offsets.history.retention.ms leaving replayed live state as it was."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kcoord.classic.history import ClassicMembership
from kcoord.groups.consumer_protocol import encode_assignment
from kcoord.groups.history import OffsetChange, offsets_at, read_changes, scan
from kcoord.groups.offsets import commit_records
from kcoord.groups.records import OffsetCommitKey
from kcoord.runtime.outcome import Outcome, TransactionMarker
from kcoord.runtime.shard import Write
from tests.unit.grouputil import Harness

WEEK = 7 * 86_400_000


def offsets(changes: list[OffsetChange], partition: int = 0) -> list[int | None]:
    return [c.value.offset if c.value else None for c in changes if c.partition == partition]


def history(h: Harness, group: str = "g") -> list[OffsetChange]:
    return scan(h.log.batches(), group, ClassicMembership())


def txn_commit(h: Harness, pid: int, group: str, offset: int, partition: int = 0) -> None:
    now = h.clock.now_ms()
    records = commit_records(group, [("t", partition, offset, -1, "")], now, -1)
    h.shard.run(lambda _s, _n: Outcome(records=records, producer=(pid, 0)), now)
    h.shard.append_writes([Write(records, producer=(pid, 0))], now)


def marker(h: Harness, pid: int, commit: bool) -> None:
    now = h.clock.now_ms()
    m = TransactionMarker(pid, 0, commit)
    h.shard.run(lambda _s, _n: Outcome(marker=m), now)
    h.shard.append_writes([Write([], marker=m)], now)


def test_every_commit_is_a_change_in_log_order_with_its_time(tmp_path: Path) -> None:
    h = Harness(tmp_path / "log")
    for offset in (1, 2, 3):
        h.commit("g", {("t", 0): offset}, metadata=f"m{offset}")
        h.commit("other", {("t", 0): offset * 100})
        h.clock.advance(1000)
    changes = history(h)
    assert offsets(changes) == [1, 2, 3]
    assert [c.value.metadata for c in changes if c.value] == ["m1", "m2", "m3"]
    times = [c.effective_at for c in changes]
    assert times == sorted(times) and times[1] - times[0] == 1000
    at = offsets_at(changes, times[1])
    assert {tp: c.value.offset for tp, c in at.items() if c.value} == {("t", 0): 2}
    assert offsets_at(changes, times[0] - 1) == {}  # not committed yet then: absent


def test_a_deleted_offset_is_absent_from_then_on(tmp_path: Path) -> None:
    h = Harness(tmp_path / "log")
    h.commit("g", {("t", 0): 5})
    h.clock.advance(1000)
    h.run_op(lambda _s, _n: Outcome(records=[(OffsetCommitKey("g", "t", 0), None)]))
    changes = history(h)
    assert offsets(changes) == [5, None]
    assert offsets_at(changes, changes[0].effective_at)[("t", 0)].value is not None
    assert offsets_at(changes, changes[1].effective_at) == {}


def test_transactional_commits_count_once_committed_and_aborted_ones_never(tmp_path: Path) -> None:
    h = Harness(tmp_path / "log")
    h.commit("g", {("t", 0): 1})
    txn_commit(h, pid=7, group="g", offset=10)
    txn_commit(h, pid=8, group="g", offset=20, partition=1)
    assert offsets(history(h)) == [1]  # both pending: invisible
    marker(h, 8, commit=False)
    h.clock.advance(500)
    marker(h, 7, commit=True)
    changes = history(h)
    assert offsets(changes) == [1, 10] and offsets(changes, 1) == []
    assert changes[-1].effective_at == h.clock.now_ms()  # took effect at its COMMIT marker
    # The offset written later in the log wins, whatever the order of the markers (Kafka's rule).
    txn_commit(h, pid=9, group="g", offset=30)
    h.commit("g", {("t", 0): 40})
    marker(h, 9, commit=True)
    assert offsets(history(h)) == [1, 10, 40]
    assert {k: v.offset for k, v in h.state.offsets.of("g")["t"].items()} == {0: 40}


def test_the_committer_is_the_member_the_partition_was_assigned_to(tmp_path: Path) -> None:
    h = Harness(tmp_path / "log")
    h.commit("g", {("t", 0): 1})  # before the group had members: unknown
    member, joined = h.join_fully("g", topics=("t",))
    h.tick(3000)  # the initial rebalance delay
    generation = joined.last.generation
    h.sync("g", member, generation, {member: encode_assignment({"t": [0, 1]}, 0)})
    h.commit("g", {("t", 0): 2, ("t", 1): 3}, member_id=member, generation=generation)
    changes = history(h)
    assert [(c.member_id, c.client_id) for c in changes] == [
        (None, None),
        (member, "client"),
        (member, "client"),
    ]


def test_history_retention_survives_compaction_and_leaves_replay_as_it_was(tmp_path: Path) -> None:
    h = Harness(tmp_path / "log", segment_bytes=1024)
    for offset in range(1, 6):
        h.commit("g", {("t", 0): offset, ("t", 1): offset * 10})
        h.clock.advance(1000)
    h.run_op(lambda _s, _n: Outcome(records=[(OffsetCommitKey("g", "t", 1), None)]))  # deleted
    h.clock.advance(10_000)  # the tombstone is older than delete.retention.ms below
    h.compact(delete_retention_ms=5_000, history_ms=WEEK)
    changes = history(h)
    assert offsets(changes) == [1, 2, 3, 4, 5]
    # The deleted partition's history went with its tombstone: replay cannot bring it back.
    assert offsets(changes, 1) == []
    live = h.state.snapshot()
    assert h.replay().snapshot() == live and h.committed("g") == {("t", 0): 5}
    # Past the history retention the superseded commits go at the next cleaning.
    h.clock.advance(WEEK)
    h.commit("other", {("t", 0): 1})
    h.compact(delete_retention_ms=5_000, history_ms=WEEK)
    assert offsets(history(h)) == [5]
    assert h.replay().snapshot() == h.state.snapshot()


def test_read_changes_reads_every_segment_in_a_worker_thread(tmp_path: Path) -> None:
    h = Harness(tmp_path / "log", segment_bytes=512)
    for offset in range(1, 30):
        h.commit("g", {("t", 0): offset})
    changes = asyncio.run(read_changes(h.log, "g", ClassicMembership()))
    assert offsets(changes) == list(range(1, 30))
    assert len(h.log.segments) > 2
    assert all(s._pins == 0 for s in h.log.segments)  # unpinned again
