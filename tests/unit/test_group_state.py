"""The classic group state machine, driven by a manual clock (no sockets, no sleeps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcoord.classic.group import GroupConfig, GroupState
from kcoord.classic.records import GroupMetadataKey
from kcoord.protocol.errors import ErrorCode as E
from tests.unit.grouputil import Harness, subscription

G = "g"


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path / "log", GroupConfig(initial_rebalance_delay_ms=3000))


def settle(h: Harness, inbox: object) -> None:
    """Let the (possibly extended) initial rebalance delay run out."""
    for _ in range(30):
        if inbox.last is not None:  # type: ignore[attr-defined]
            return
        h.tick(3000)
    raise AssertionError("the join phase never completed")


def stable_group(h: Harness, n: int = 1) -> list[str]:
    """n members joined and synced; returns their member ids (leader first)."""
    inboxes = [h.join_fully(G) for _ in range(n)]
    settle(h, inboxes[0][1])
    results = [inbox.last for _, inbox in inboxes]
    assert all(r.error == 0 for r in results)
    gen = results[0].generation
    leader = results[0].leader
    ids = [mid for mid, _ in inboxes]
    h.sync(G, leader, gen, {m: f"assign-{m}".encode() for m in ids})
    for m in ids:
        if m != leader:
            h.sync(G, m, gen)
    assert h.group(G).state is GroupState.STABLE
    return [leader] + [m for m in ids if m != leader]


def test_member_id_required_only_from_v4(h: Harness) -> None:
    assert h.join(G, version=4).last.error == E.MEMBER_ID_REQUIRED
    old = h.join("old", version=3)
    assert old.last is None  # parked in the join phase: no MEMBER_ID_REQUIRED before v4
    assert h.group("old").members  # the v3 member was added straight away
    h.tick(3000)
    assert old.last.error == 0 and old.last.generation == 1


def test_first_join_waits_for_initial_delay_then_completes(h: Harness) -> None:
    member, inbox = h.join_fully(G)
    assert inbox.last is None  # parked during group.initial.rebalance.delay.ms
    assert h.group(G).state is GroupState.PREPARING_REBALANCE
    h.tick(2999)
    assert inbox.last is None
    h.tick(1)
    r = inbox.last
    assert (r.error, r.generation, r.leader, r.member_id) == (0, 1, member, member)
    assert [m for m, _, _ in r.members] == [member]
    assert h.group(G).state is GroupState.COMPLETING_REBALANCE


def test_initial_delay_extends_while_members_keep_joining(h: Harness) -> None:
    h.join_fully(G, rebalance_ms=10_000)
    h.tick(2000)
    _, second = h.join_fully(G, rebalance_ms=10_000)  # a new member within the delay extends it
    h.tick(1000)  # first delay ends: extended by another 3000 (remaining 7000)
    assert second.last is None
    h.tick(3000)
    assert second.last.error == 0 and second.last.generation == 1


def test_leader_sync_persists_assignment_and_stabilises(h: Harness) -> None:
    leader, follower = stable_group(h, 2)
    g = h.group(G)
    assert g.members[follower].assignment == f"assign-{follower}".encode()
    rec = g.persisted
    assert rec is not None and rec.generation == g.generation and rec.leader == leader
    assert {m.member_id: m.assignment for m in rec.members} == {
        m: f"assign-{m}".encode() for m in (leader, follower)
    }


def test_follower_sync_before_leader_waits_for_assignment(h: Harness) -> None:
    a, ia = h.join_fully(G)
    b, _ib = h.join_fully(G)
    settle(h, ia)
    leader = ia.last.leader
    follower = b if leader == a else a
    wait = h.sync(G, follower, 1)
    assert wait.last is None
    h.sync(G, leader, 1, {follower: b"F", leader: b"L"})
    assert wait.last.error == 0 and wait.last.assignment == b"F"


def test_heartbeat_errors(h: Harness) -> None:
    (m,) = stable_group(h)
    assert h.heartbeat(G, m, 1) == 0
    assert h.heartbeat(G, m, 7) == E.ILLEGAL_GENERATION
    assert h.heartbeat(G, "nobody", 1) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("no-such-group", m, 1) == E.UNKNOWN_MEMBER_ID


def test_new_member_triggers_rebalance_in_progress(h: Harness) -> None:
    (m,) = stable_group(h)
    _, newcomer = h.join_fully(G)
    assert h.group(G).state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(G, m, 1) == E.REBALANCE_IN_PROGRESS
    assert h.sync(G, m, 1).last.error == E.REBALANCE_IN_PROGRESS
    rejoin = h.join(G, member_id=m)
    assert rejoin.last.generation == 2 and newcomer.last.generation == 2
    assert h.group(G).state is GroupState.COMPLETING_REBALANCE


def test_rebalance_timeout_removes_members_that_do_not_rejoin(h: Harness) -> None:
    a, b = stable_group(h, 2)
    rejoin = h.join(G, member_id=a)  # the leader rejoins: rebalance
    for _ in range(60):  # the group's rebalance timeout: the largest of its members' (60 s)
        assert rejoin.last is None
        h.tick(1000)
        h.heartbeat(G, b, 1)  # keeps its session but never rejoins
    r = rejoin.last
    assert r.error == 0 and r.generation == 2 and [m for m, _, _ in r.members] == [a]
    assert b not in h.group(G).members


def test_session_expiry_evicts_and_rebalances(h: Harness) -> None:
    a, b = stable_group(h, 2)
    for _ in range(11):
        h.tick(1000)
        h.heartbeat(G, a, 1)
    g = h.group(G)
    assert b not in g.members
    assert g.state is GroupState.PREPARING_REBALANCE


def test_last_member_leaving_makes_group_empty_with_timestamp(h: Harness) -> None:
    (m,) = stable_group(h)
    h.clock.advance(500)
    left_at = h.clock.now_ms()
    assert h.leave(G, (m, None)) == [0]
    g = h.group(G)
    assert g.state is GroupState.EMPTY and g.generation == 2
    assert g.persisted is not None and g.persisted.members == ()
    assert g.persisted.current_state_timestamp == left_at
    assert g.protocol_type == "consumer"  # KIP-211: an Empty group keeps its protocol type


def test_leave_errors_and_batch(h: Harness) -> None:
    a, b = stable_group(h, 2)
    assert h.leave(G, ("nobody", None), (a, None)) == [E.UNKNOWN_MEMBER_ID, 0]
    assert h.leave("missing", (b, None)) == [E.UNKNOWN_MEMBER_ID]


def test_inconsistent_protocols(h: Harness) -> None:
    stable_group(h)
    other_type = h.join(G, protocol_type="connect").last
    assert other_type.error == E.INCONSISTENT_GROUP_PROTOCOL
    no_common = h.join(G, protocols=[("roundrobin", b"")]).last
    assert no_common.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_invalid_session_timeout(h: Harness) -> None:
    assert h.join(G, session_ms=10).last.error == E.INVALID_SESSION_TIMEOUT
    assert h.join(G, session_ms=10**8).last.error == E.INVALID_SESSION_TIMEOUT


def test_protocol_chosen_by_vote(h: Harness) -> None:
    sub = subscription("t")
    _, first = h.join_fully(G, protocols=[("range", sub), ("sticky", sub)])
    h.join_fully(G, protocols=[("sticky", sub), ("range", sub)])
    h.join_fully(G, protocols=[("sticky", sub)])
    settle(h, first)
    assert h.group(G).protocol_name == "sticky"


def test_pending_sync_expiry_removes_silent_members(h: Harness) -> None:
    a, ia = h.join_fully(G, rebalance_ms=5000)
    b, _ = h.join_fully(G, rebalance_ms=5000)
    settle(h, ia)
    leader = ia.last.leader
    other = b if leader == a else a
    h.sync(G, leader, 1, {leader: b"x", other: b"y"})  # the other member never syncs
    h.tick(5000)
    g = h.group(G)
    assert other not in g.members
    assert g.state is GroupState.PREPARING_REBALANCE


def test_static_member_rejoin_keeps_assignment_without_rebalance(h: Harness) -> None:
    first, _inbox = h.join_fully(G, instance="i-1")
    h.tick(3000)
    h.sync(G, first, 1, {first: b"mine"}, instance="i-1")
    again = h.join(G, member_id="", instance="i-1").last
    assert again.error == 0 and again.generation == 1 and again.member_id != first
    assert again.skip_assignment  # the static leader keeps the assignment it computed
    g = h.group(G)
    assert g.state is GroupState.STABLE and g.members[again.member_id].assignment == b"mine"
    assert h.heartbeat(G, first, 1, instance="i-1") == E.FENCED_INSTANCE_ID
    assert g.persisted is not None and g.persisted.members[0].member_id == again.member_id


def test_static_member_survives_rebalance_timeout_without_rejoining(h: Harness) -> None:
    s, first = h.join_fully(G, instance="i-1", session_ms=30_000, rebalance_ms=5000)
    d, _ = h.join_fully(G, rebalance_ms=5000, session_ms=30_000)
    settle(h, first)
    leader = first.last.leader
    h.sync(G, leader, 1, {s: b"s", d: b"d"}, instance="i-1" if leader == s else None)
    other = d if leader == s else s
    h.sync(G, other, 1, instance="i-1" if other == s else None)
    assert h.group(G).state is GroupState.STABLE
    h.join(G, member_id=d, rebalance_ms=5000, session_ms=30_000, topics=("t", "u"))  # changed: rebalance
    h.tick(5000)  # the static member never rejoins within the rebalance timeout
    g = h.group(G)
    assert s in g.members and d in g.members  # static members are kept (they may come back)
    assert g.generation == 2


def test_group_max_size(tmp_path: Path) -> None:
    h = Harness(tmp_path / "log", GroupConfig(initial_rebalance_delay_ms=0, max_size=1))
    stable_group(h)
    assert h.join_fully(G)[1].last.error == E.GROUP_MAX_SIZE_REACHED


def test_delete_group_requires_empty(h: Harness) -> None:
    (m,) = stable_group(h)
    h.commit(G, {("t", 0): 5}, member_id=m, generation=1)
    assert h.delete_group(G) == E.NON_EMPTY_GROUP
    h.leave(G, (m, None))
    assert h.delete_group(G) == 0
    assert h.store.get(G) is None
    assert h.delete_group(G) == E.GROUP_ID_NOT_FOUND


def test_join_of_unknown_group_with_member_id(h: Harness) -> None:
    assert h.join("nope", member_id="m-1").last.error == E.UNKNOWN_MEMBER_ID


def test_records_written_match_kafka_points(h: Harness) -> None:
    """Group metadata records: at SyncGroup completion and when the group becomes Empty."""
    (m,) = stable_group(h)
    h.leave(G, (m, None))
    kinds = []
    for hdr, data in h.log.batches():
        from kcoord.classic.records import decode_record
        from kcoord.protocol.records import iter_records

        for _o, _t, k, v in iter_records(data, hdr):
            key, value = decode_record(k, v)
            if isinstance(key, GroupMetadataKey):
                kinds.append((value.generation, len(value.members)))
    assert kinds == [(1, 1), (2, 0)]
