"""The groups Spark jobs leave behind, under KIP-211 expiry, with a manual clock.

- Spark's Kafka source with ``useDeprecatedOffsetFetching=true`` runs a throwaway consumer group
  ``spark-kafka-source-<uuid>-<hash>-driver-<n>`` per query (and a new ``-driver-<n+1>`` whenever
  it resets its consumer): JoinGroup, SyncGroup, Heartbeat, OffsetFetch (nothing committed),
  LeaveGroup. It never commits, so the Empty group has no offsets and the next offsets cleanup
  removes it: such groups must not pile up, across restarts either.
- kcoord's own PySpark source (kcoord.spark) commits a stream's progress as a standalone group
  (generation -1, no members): each partition expires ``offsets.retention.minutes`` after its
  last commit, so a running stream keeps its offsets and a stopped one's group goes away.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kcoord.classic.group import GroupConfig, GroupState
from tests.unit.grouputil import Harness, classic

RETENTION = 7 * 24 * 3_600_000  # offsets.retention.minutes default
CHECK_INTERVAL = 600_000  # offsets.retention.check.interval.ms default


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path / "log", GroupConfig(initial_rebalance_delay_ms=3000))


def spark_driver_group(n: int = 0) -> str:
    return f"spark-kafka-source-{uuid.uuid4()}-{hash('/checkpoint') & 0x7FFFFFFF}-driver-{n}"


def run_throwaway_group(h: Harness, group: str, topics: tuple[str, ...] = ("events",)) -> None:
    """KafkaOffsetReaderConsumer: subscribe, poll(0) until assigned, offset lookups, close()."""
    member, inbox = h.join_fully(group, topics=topics, session_ms=45_000, rebalance_ms=300_000)
    for _ in range(5):  # group.initial.rebalance.delay.ms
        if inbox.last is not None:
            break
        h.tick(3000)
    joined = inbox.last
    assert joined is not None and joined.error == 0
    synced = h.sync(group, member, joined.generation, {member: b"assignment"})
    assert synced.last.error == 0
    assert h.group(group).state is GroupState.STABLE
    # position() and committed(): OffsetFetch finds nothing, the consumer resets to earliest.
    fetched = h.state.offsets.fetch(group, [(t, [0, 1, 2]) for t in topics])
    assert all(v is None for _, parts in fetched for _, v in parts)
    for _ in range(3):  # between triggers the background thread heartbeats
        h.clock.advance(3000)
        assert h.heartbeat(group, member, joined.generation) == 0
    assert h.leave(group, (member, None)) == [0]
    g = h.group(group)
    assert g.state is GroupState.EMPTY and g.protocol_type == "consumer" and not h.state.offsets.of(group)


def cleanup(h: Harness) -> None:
    """The coordinator's periodic offsets cleanup, one check interval later."""
    h.tick(CHECK_INTERVAL)
    h.expire(RETENTION)


def test_spark_throwaway_group_is_removed_at_the_next_cleanup(h: Harness) -> None:
    group = spark_driver_group()
    run_throwaway_group(h, group)
    written = h.records_written
    cleanup(h)
    assert h.store.get(group) is None
    assert h.records_written == written + 1, "one group tombstone, nothing else"
    # ... and it stays gone when the coordinator reloads its log.
    assert classic(h.replay()).get(group) is None


def test_spark_throwaway_groups_do_not_pile_up(h: Harness) -> None:
    """Many queries, each restarting its driver consumer once (-driver-0, -driver-1)."""
    groups = []
    for _ in range(10):
        base = spark_driver_group()[: -len("-driver-0")]
        for n in range(2):
            groups.append(f"{base}-driver-{n}")
            run_throwaway_group(h, groups[-1], topics=("a", "b"))
    assert len(h.store.groups) == 20
    cleanup(h)
    assert h.store.groups == {}
    assert classic(h.replay()).groups == {}


def test_active_spark_driver_group_is_kept(h: Harness) -> None:
    """A driver group whose member is still there is not touched by the cleanup."""
    group = spark_driver_group()
    member, inbox = h.join_fully(group, topics=("events",), session_ms=45_000)
    for _ in range(5):
        if inbox.last is not None:
            break
        h.tick(3000)
    h.sync(group, member, inbox.last.generation, {member: b"a"})
    h.clock.advance(CHECK_INTERVAL)
    h.heartbeat(group, member, inbox.last.generation)
    h.expire(RETENTION)
    assert h.group(group).state is GroupState.STABLE


def test_spark_throwaway_group_that_timed_out_is_removed_too(h: Harness) -> None:
    """A driver that died without LeaveGroup: the session expires, then the cleanup removes it."""
    group = spark_driver_group()
    member, inbox = h.join_fully(group, topics=("events",), session_ms=45_000)
    for _ in range(5):
        if inbox.last is not None:
            break
        h.tick(3000)
    h.sync(group, member, inbox.last.generation, {member: b"a"})
    h.tick(45_000)  # no heartbeat: the member is removed, the group becomes Empty
    assert h.group(group).state is GroupState.EMPTY
    cleanup(h)
    assert h.store.get(group) is None


def test_standalone_stream_progress_group_expires_after_retention(h: Harness) -> None:
    """kcoord.spark's commit(): standalone commits per micro-batch; expiry after the last one."""
    group = "kcoord-spark-events"
    offsets = {("events", 0): 0, ("events", 1): 0}
    for _ in range(20):  # a running stream commits each trigger: nothing expires
        offsets = {tp: o + 10 for tp, o in offsets.items()}
        assert h.commit(group, offsets) == 0
        last_commit = h.clock.now_ms()
        cleanup(h)
        assert h.committed(group) == offsets
    g = h.group(group)
    assert g.protocol_type is None and g.state is GroupState.EMPTY
    # The query stops. offsets.retention.minutes after the last commit the offsets expire...
    h.clock.advance(RETENTION - 2 * CHECK_INTERVAL - 1)
    cleanup(h)
    assert h.clock.now_ms() == last_commit + RETENTION - 1
    assert h.committed(group) == offsets
    h.clock.advance(1)
    h.expire(RETENTION)
    # ... and the group with them.
    assert h.store.get(group) is None
    assert classic(h.replay()).get(group) is None


def test_standalone_partition_committed_later_lives_longer(h: Harness) -> None:
    """Per partition: a partition that got new data (and a new commit) later expires later."""
    group = "kcoord-spark-events"
    h.commit(group, {("events", 0): 5, ("events", 1): 5})
    h.clock.advance(RETENTION // 2)
    h.commit(group, {("events", 1): 9})
    h.clock.advance(RETENTION // 2)
    h.expire(RETENTION)
    assert h.committed(group) == {("events", 1): 9}
    h.clock.advance(RETENTION // 2)
    h.expire(RETENTION)
    assert h.store.get(group) is None
