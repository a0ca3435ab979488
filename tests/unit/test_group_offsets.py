"""Offset commit rules and KIP-211 expiration (seeds 000/003), with a manual clock."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcoord.classic import offsets as rules
from kcoord.classic.group import GroupConfig, GroupState
from kcoord.protocol.errors import ErrorCode as E
from tests.unit.grouputil import Harness, classic
from tests.unit.test_group_state import settle

G = "g"
RETENTION = 7 * 24 * 3_600_000  # offsets.retention.minutes default (7 days)


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    # Sessions long enough to outlive the days these tests move the clock by.
    return Harness(
        tmp_path / "log", GroupConfig(initial_rebalance_delay_ms=0, max_session_timeout_ms=2_000_000_000)
    )


def stable(h: Harness, topics: tuple[str, ...] = ("t",)) -> str:
    m, inbox = h.join_fully(G, topics=topics, session_ms=2_000_000_000, rebalance_ms=60_000)
    settle(h, inbox)
    h.sync(G, m, inbox.last.generation, {m: b"a"})
    assert h.group(G).state is GroupState.STABLE
    return m


# --- commit validation (ClassicGroup.validateOffsetCommit) ---------------------------------------
def test_simple_commit_creates_a_standalone_group(h: Harness) -> None:
    assert h.commit(G, {("t", 0): 10}) == 0
    g = h.group(G)
    assert g.protocol_type is None and g.state is GroupState.EMPTY
    assert h.committed(G) == {("t", 0): 10}


def test_commit_with_generation_to_unknown_group(h: Harness) -> None:
    assert h.commit("missing", {("t", 0): 1}, member_id="m", generation=3) == E.ILLEGAL_GENERATION


def test_member_commit_checks(h: Harness) -> None:
    m = stable(h)
    assert h.commit(G, {("t", 0): 1}, member_id=m, generation=1) == 0
    assert h.commit(G, {("t", 0): 1}, member_id=m, generation=2) == E.ILLEGAL_GENERATION
    assert h.commit(G, {("t", 0): 1}, member_id="other", generation=1) == E.UNKNOWN_MEMBER_ID
    # generation -1 and no member id against a group with members: refused
    assert h.commit(G, {("t", 0): 1}) == E.UNKNOWN_MEMBER_ID


def test_commit_while_preparing_is_accepted(h: Harness) -> None:
    a = stable(h)
    h.join_fully(G)  # a newcomer: PreparingRebalance until a rejoins
    assert h.group(G).state is GroupState.PREPARING_REBALANCE
    # Kafka accepts it: consumers commit in onPartitionsRevoked, before rejoining.
    assert h.commit(G, {("t", 0): 2}, member_id=a, generation=1) == 0


def test_commit_while_completing_is_rebalance_in_progress(h: Harness) -> None:
    a = stable(h)
    h.join(G, member_id=a, topics=("t", "u"))  # changed metadata; the only member: join completes
    g = h.group(G)
    assert g.state is GroupState.COMPLETING_REBALANCE
    assert h.commit(G, {("t", 0): 2}, member_id=a, generation=g.generation) == E.REBALANCE_IN_PROGRESS


def test_retention_time_writes_value_v1_with_expiry(h: Harness) -> None:
    h.commit(G, {("t", 0): 5}, retention_ms=60_000)
    v = h.state.offsets.of(G)["t"][0]
    assert v.expire_timestamp == v.commit_timestamp + 60_000


# --- KIP-211 expiration table ------------------------------------------------------------------
def test_empty_group_expires_all_offsets_after_retention_since_empty(h: Harness) -> None:
    """Group state = Empty (protocolType != None): remove all offsets, transition to Dead."""
    m = stable(h)
    h.commit(G, {("t", 0): 1, ("t", 1): 2}, member_id=m, generation=1)
    h.clock.advance(RETENTION * 2)  # old commits: irrelevant while the group is alive
    h.expire(RETENTION)
    assert h.committed(G) == {("t", 0): 1, ("t", 1): 2}
    h.leave(G, (m, None))
    empty_at = h.clock.now_ms()
    h.clock.advance(RETENTION - 1)
    h.expire(RETENTION)
    assert h.committed(G) != {}
    h.clock.advance(1)
    h.expire(RETENTION)
    assert h.store.get(G) is None  # offsets gone, group tombstoned (Dead)
    assert empty_at + RETENTION == h.clock.now_ms()


def test_stable_consumer_group_expires_only_unsubscribed_topics(h: Harness) -> None:
    """Group state = Stable: non-subscribed partitions expire from their commit timestamp."""
    m = stable(h, topics=("t",))
    h.commit(G, {("t", 0): 1, ("old", 0): 7}, member_id=m, generation=1)
    h.clock.advance(RETENTION)
    h.expire(RETENTION)
    assert h.committed(G) == {("t", 0): 1}
    assert h.store.get(G) is not None


def test_standalone_group_expires_each_partition_from_its_commit(h: Harness) -> None:
    """protocolType = None: each partition expires retention after its own last commit."""
    h.commit(G, {("t", 0): 1})
    h.clock.advance(RETENTION // 2)
    h.commit(G, {("t", 1): 2})
    h.clock.advance(RETENTION // 2)
    h.expire(RETENTION)
    assert h.committed(G) == {("t", 1): 2}
    h.clock.advance(RETENTION // 2)
    h.expire(RETENTION)
    assert h.store.get(G) is None  # nothing left: the standalone group goes too


def test_explicit_expire_timestamp_wins(h: Harness) -> None:
    h.commit(G, {("t", 0): 1}, retention_ms=1000)
    h.clock.advance(999)
    h.expire(RETENTION)
    assert h.committed(G) == {("t", 0): 1}
    h.clock.advance(1)
    h.expire(RETENTION)
    assert h.committed(G) == {}


def test_rebalancing_group_expires_nothing(h: Harness) -> None:
    m = stable(h)
    h.commit(G, {("t", 0): 1, ("other", 0): 1}, member_id=m, generation=1, retention_ms=1)
    h.join(G, member_id=m, topics=("t", "x"))  # rebalance in progress
    h.clock.advance(RETENTION * 3)
    h.expire(RETENTION)
    assert len(h.committed(G)) == 2


def test_empty_group_without_offsets_is_deleted_at_next_cleanup(h: Harness) -> None:
    """Spark's throwaway groups (spark-kafka-source-*) do not pile up."""
    m = stable(h)
    h.leave(G, (m, None))
    h.expire(RETENTION)
    assert h.store.get(G) is None


def test_expiry_survives_restart(h: Harness) -> None:
    """current_state_timestamp is persisted when the group becomes Empty."""
    m = stable(h)
    h.commit(G, {("t", 0): 1}, member_id=m, generation=1)
    h.leave(G, (m, None))
    h.clock.advance(RETENTION - 10)
    store = h.replay()
    g = classic(store).get(G)
    assert g is not None and g.state is GroupState.EMPTY
    assert rules.expire(g, store.offsets, h.clock.now_ms(), RETENTION).records == []
    tombstones = rules.expire(g, store.offsets, h.clock.now_ms() + 10, RETENTION).records
    assert [k.__class__.__name__ for k, v in tombstones] == ["OffsetCommitKey", "GroupMetadataKey"]
    assert all(v is None for _, v in tombstones)


def test_offset_delete_rules(h: Harness) -> None:
    m = stable(h, topics=("t",))
    h.commit(G, {("t", 0): 1, ("u", 0): 2}, member_id=m, generation=1)
    g = h.group(G)
    assert rules.validate_offset_delete(g) == 0
    out, per = h.state.offsets.delete(G, g, [("t", [0]), ("u", [0])])
    assert dict(per) == {"t": [(0, E.GROUP_SUBSCRIBED_TO_TOPIC)], "u": [(0, 0)]}
    assert [(k.topic, v) for k, v in out.records] == [("u", None)]
