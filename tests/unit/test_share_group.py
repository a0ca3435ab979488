"""Share group membership (ShareGroupHeartbeat rules) and the simple assignor, on a manual clock."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kcoord.classic.group import GroupConfig
from kcoord.protocol.errors import ErrorCode as E
from kcoord.server.coordinators import group_records
from kcoord.share.assignor import assign
from kcoord.share.group import ShareGroup
from kcoord.share.store import ShareGroups
from tests.unit.grouputil import new_store

T1, T2 = uuid.uuid4(), uuid.uuid4()
TOPICS = {"t1": (T1, 6), "t2": (T2, 2)}


def lookup(name: str) -> tuple[uuid.UUID, int] | None:
    return TOPICS.get(name)


def hb(
    g: ShareGroup, member: str, epoch: int, topics: list[str] | None = None, now: int = 0, max_size: int = 200
) -> tuple:
    return g.heartbeat(
        member, epoch, None, topics, "client", "/127.0.0.1", 45_000, 5_000, max_size, lookup, now
    )


# --- the simple assignor ------------------------------------------------------------------------
def test_fewer_members_than_partitions_get_disjoint_balanced_shares() -> None:
    target = assign({"a": {T1}, "b": {T1}}, {T1: 6}, {})
    assert sorted(len(target[m][T1]) for m in "ab") == [3, 3]
    assert target["a"][T1].isdisjoint(target["b"][T1])


def test_more_members_than_partitions_share_partitions() -> None:
    members = {m: {T2} for m in "abcde"}
    target = assign(members, {T2: 2}, {})
    counts = sorted(len(target[m].get(T2, ())) for m in members)
    assert counts == [1, 1, 1, 1, 2]  # ceil(5/2) = 3 sharers per partition, 6 slots
    for p in (0, 1):
        assert sum(1 for m in members if p in target[m].get(T2, ())) == 3


def test_assignment_is_sticky() -> None:
    first = assign({"a": {T1}, "b": {T1}}, {T1: 6}, {})
    second = assign({"a": {T1}, "b": {T1}, "c": {T1}}, {T1: 6}, first)
    for m in "ab":
        assert second[m][T1] <= first[m][T1]  # members only give partitions away
    assert sorted(len(second[m][T1]) for m in "abc") == [2, 2, 2]


def test_only_subscribed_topics_are_assigned() -> None:
    target = assign({"a": {T1}, "b": {T2}}, {T1: 6, T2: 2}, {})
    assert set(target["a"]) == {T1} and set(target["b"]) == {T2}


# --- heartbeats -------------------------------------------------------------------------------------
def test_join_gets_epoch_and_full_assignment() -> None:
    g = ShareGroup("g")
    result, out = hb(g, "m1", 0, ["t1"])
    assert result.error == 0 and result.member_epoch == 1 and g.group_epoch == 1
    assert result.assignment == {T1: frozenset(range(6))}
    assert out.records == [g.epoch_record()]
    again, out2 = hb(g, "m1", 1)
    assert again.assignment is None and out2.records == []  # nothing changed: no assignment sent


def test_second_member_bumps_epoch_and_rebalances() -> None:
    g = ShareGroup("g")
    hb(g, "m1", 0, ["t1"])
    second, _ = hb(g, "m2", 0, ["t1"])
    assert second.member_epoch == 2 and g.group_epoch == 2
    first, _ = hb(g, "m1", 1)
    assert first.member_epoch == 2
    assert first.assignment is not None and len(first.assignment[T1]) == 3  # changed: sent


def test_heartbeat_errors() -> None:
    g = ShareGroup("g")
    hb(g, "m1", 0, ["t1"])
    assert hb(g, "ghost", 3)[0].error == E.UNKNOWN_MEMBER_ID
    hb(g, "m2", 0, ["t1"])
    hb(g, "m1", 1)  # m1 moves to epoch 2; epoch 1 is still its previous epoch
    assert hb(g, "m1", 1)[0].error == 0
    assert hb(g, "m1", 7)[0].error == E.FENCED_MEMBER_EPOCH
    assert hb(g, "m1", 0, ["t1"])[0].error == 0  # epoch 0: (re)join is always allowed
    assert hb(g, "m3", 0, ["t1"], max_size=2)[0].error == E.GROUP_MAX_SIZE_REACHED


def test_leave_and_session_expiry_release_and_rebalance() -> None:
    g = ShareGroup("g")
    hb(g, "m1", 0, ["t1"], now=0)
    hb(g, "m2", 0, ["t1"], now=0)
    left, _ = hb(g, "m2", -1)
    assert left.member_epoch == -1 and "m2" not in g.members and g.group_epoch == 3
    assert g.next_deadline() == 45_000
    g.on_timer(45_000, lookup)
    assert g.members == {} and g.state == "Empty" and g.group_epoch == 4


def test_subscription_change_and_topic_changes_bump_epoch() -> None:
    g = ShareGroup("g")
    hb(g, "m1", 0, ["t1"])
    changed, _ = hb(g, "m1", 1, ["t1", "t2"])
    assert g.group_epoch == 2 and changed.assignment == {T1: frozenset(range(6)), T2: frozenset({0, 1})}
    TOPICS["t2"] = (T2, 3)  # partitions added
    try:
        grown, _ = hb(g, "m1", 2)
        assert g.group_epoch == 3 and grown.assignment is not None and grown.assignment[T2] == {0, 1, 2}
    finally:
        TOPICS["t2"] = (T2, 2)


def test_epoch_and_configs_survive_a_replay(tmp_path: Path) -> None:
    store = new_store(GroupConfig(), lookup)
    g = store.kind(ShareGroups).get_or_create("g")
    assert g is not None
    _, out = hb(g, "m1", 0, ["t1"])
    _, out2 = hb(g, "m2", 0, ["t1"])
    g.configs = {"share.auto.offset.reset": "earliest"}
    records = out.records + out2.records + [g.config_record()]
    registry = group_records()
    encoded = [registry.encode(k, v) for k, v in records]
    for k, v in records:
        store.replay(k, v, 0)
    replayed = new_store(GroupConfig(), lookup)
    for k, v in encoded:
        replayed.replay(*registry.decode(k, v), 0)
    r = replayed.kind(ShareGroups).get("g")
    assert r is not None and r.group_epoch == 2 and r.members == {}  # members rejoin after a restart
    assert replayed.group_configs == {"g": {"share.auto.offset.reset": "earliest"}}
    assert replayed.snapshot() == store.snapshot()


@pytest.mark.parametrize("value", ["earliest", "latest", "by_duration:PT1H", "by_duration:P2DT3H4M5.5S"])
def test_auto_offset_reset_values(value: str) -> None:
    from kcoord.config import BrokerConfig
    from kcoord.share.config import validate_group_configs

    validate_group_configs({"share.auto.offset.reset": value}, BrokerConfig())


@pytest.mark.parametrize(
    "configs",
    [
        {"share.auto.offset.reset": "sometimes"},
        {"share.record.lock.duration.ms": "100"},
        {"share.session.timeout.ms": "50000", "share.heartbeat.interval.ms": "60000"},
        {"consumer.session.timeout.ms": "1"},
    ],
)
def test_invalid_group_configs(configs: dict[str, str]) -> None:
    from kcoord.config import BrokerConfig
    from kcoord.share.config import InvalidGroupConfig, validate_group_configs

    with pytest.raises(InvalidGroupConfig):
        validate_group_configs(configs, BrokerConfig())
