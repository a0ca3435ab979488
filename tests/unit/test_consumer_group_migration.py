"""KIP-848 online migration through the production shard and the classic APIs' routing
(kcoord/apis/groups.py's operations): a classic group upgraded by a consumer-protocol member's
join, classic members living in a consumer group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup),
and the group downgraded when its last consumer-protocol member leaves."""

from __future__ import annotations

import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from kcoord.classic.group import GroupConfig, GroupState
from kcoord.consumer.member import MemberState
from kcoord.consumer.store import ConsumerGroups
from kcoord.groups.classic_protocol import JoinResult, SyncResult
from kcoord.groups.consumer_protocol import decode_assignment, encode_assignment
from kcoord.protocol.errors import ErrorCode
from tests.unit.grouputil import FakeTopics, Harness, new_store
from tests.unit.test_consumer_group import Consumer, heartbeat

T = uuid.uuid5(uuid.NAMESPACE_OID, "t")
SESSION_MS = 10_000
REBALANCE_MS = 60_000


def subscription(*topics: str, owned: dict[str, list[int]] | None = None, version: int = 1) -> bytes:
    tps = [
        ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in (owned or {}).items()
    ]
    sub = ConsumerProtocolSubscription(
        topics=list(topics), user_data=None, owned_partitions=tps, generation_id=-1
    )
    return bytes(sub.encode(version=version))


class ClassicConsumer:
    """A classic-protocol client: JoinGroup (for a member id, then with it), SyncGroup (the leader
    of a classic group assigns range-wise), Heartbeat, LeaveGroup; it owns what SyncGroup gave it."""

    def __init__(self, h: Harness, group_id: str, instance: str | None = None) -> None:
        self.h, self.group_id, self.instance = h, group_id, instance
        self.member_id = ""
        self.generation = -1
        self.owned: dict[str, tuple[int, ...]] = {}
        self.protocol_name: str | None = None

    def join(self, cooperative: bool = True) -> JoinResult | None:
        owned = {t: list(ps) for t, ps in self.owned.items()} if cooperative else None
        if not cooperative:
            self.owned = {}  # an eager client gives everything up before joining
        kw: dict[str, Any] = {
            "member_id": self.member_id,
            "instance": self.instance,
            "protocols": [("range", subscription("t", owned=owned))],
            "session_ms": SESSION_MS,
            "rebalance_ms": REBALANCE_MS,
        }
        inbox = self.h.join(self.group_id, **kw)
        result: JoinResult | None = inbox.last
        if result is not None and result.error == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = result.member_id
            kw["member_id"] = self.member_id
            inbox = self.h.join(self.group_id, **kw)
            result = inbox.last
        self.inbox = inbox
        if result is not None:
            self.joined(result)
        return result

    def joined(self, result: JoinResult) -> None:
        if result.error == 0:
            self.member_id, self.generation = result.member_id, result.generation
            self.protocol_name = result.protocol_name
            self.members = result.members

    def sync(self, assignments: dict[str, bytes] | None = None) -> SyncResult | None:
        inbox = self.h.sync(self.group_id, self.member_id, self.generation, assignments, self.instance)
        result: SyncResult | None = inbox.last
        if result is not None and result.error == 0:
            self.owned = decode_assignment(result.assignment)
        self.sync_inbox = inbox
        return result

    def beat(self) -> int:
        code: int = self.h.heartbeat(self.group_id, self.member_id, self.generation, self.instance)
        return code

    def leave(self) -> list[int]:
        errors: list[int] = self.h.leave(self.group_id, (self.member_id, self.instance))
        return errors


def classic_group(h: Harness, partitions: int = 4) -> tuple[ClassicConsumer, ClassicConsumer]:
    """Two classic consumers in a Stable classic group, the partitions split range-wise."""
    a, b = ClassicConsumer(h, "g"), ClassicConsumer(h, "g")
    a.join()
    b.join()
    while a.inbox.last is None or b.inbox.last is None:
        h.tick(3_000)  # the initial rebalance delay, stretched while members come
    for c in (a, b):
        c.joined(c.inbox.last)
    leader, other = (a, b) if a.members else (b, a)
    half = partitions // 2
    plan = {
        leader.member_id: encode_assignment({"t": range(half)}, 1),
        other.member_id: encode_assignment({"t": range(half, partitions)}, 1),
    }
    other.sync()
    leader.sync(plan)
    other.owned = decode_assignment(other.sync_inbox.last.assignment)
    assert h.store.get("g").is_in(GroupState.STABLE)  # type: ignore[union-attr]
    return a, b


@pytest.fixture
def topics() -> FakeTopics:
    return FakeTopics({"t": (T, 4)})


@pytest.fixture
def h(tmp_path: Path, topics: FakeTopics) -> Harness:
    config = GroupConfig(initial_rebalance_delay_ms=3000)
    return Harness(tmp_path, config, new_state=lambda: new_store(config, topics))


def consumer_group(h: Harness) -> Any:
    return h.state.kind(ConsumerGroups).get("g")


def assert_replays(h: Harness) -> None:
    assert h.replay().snapshot() == h.state.snapshot()


def owned_by(*clients: Any) -> list[tuple[str, int]]:
    out = []
    for c in clients:
        if isinstance(c, Consumer):
            out += [("t", p) for ps in c.owned.values() for p in ps]
        else:
            out += [(t, p) for t, ps in c.owned.items() for p in ps]
    return sorted(out)


# --- upgrade -----------------------------------------------------------------------------------------
def test_a_consumer_protocol_join_upgrades_the_classic_group(h: Harness) -> None:
    a, b = classic_group(h)
    h.commit("g", {("t", 0): 42}, a.member_id, a.generation)
    c = Consumer(h, "g", "c")
    result = c.join("t")
    assert result.error == 0
    assert h.store.get("g") is None and h.state.group_type("g") == "consumer"
    g = consumer_group(h)
    assert set(g.members) == {a.member_id, b.member_id, "c"}
    assert all(g.members[m.member_id].uses_classic_protocol for m in (a, b))
    # The classic members came over Stable at the generation, with what they had.
    assert g.members[a.member_id].member_epoch == a.generation
    assert g.members[a.member_id].assigned == {T: dict.fromkeys(a.owned["t"], a.generation)}
    assert h.committed("g") == {("t", 0): 42}
    assert_replays(h)


def test_classic_members_rejoin_and_everyone_converges(h: Harness) -> None:
    a, b = classic_group(h)
    c = Consumer(h, "g", "c")
    c.join("t")
    # The group epoch moved: the classic members are told to join again.
    assert a.beat() == ErrorCode.REBALANCE_IN_PROGRESS
    assert b.beat() == ErrorCode.REBALANCE_IN_PROGRESS
    for _ in range(4):
        for x in (a, b):
            result = x.join()
            assert result is not None and result.error == 0, result
            assert x.sync().error == 0  # type: ignore[union-attr]
            assert owned_by(a, b, c) == sorted(set(owned_by(a, b, c)))  # never two owners
        c.beat()
    assert owned_by(a, b, c) == [("t", p) for p in range(4)]
    g = consumer_group(h)
    assert g.state.name == "STABLE", {m: (x.state, x.member_epoch) for m, x in g.members.items()}
    assert a.beat() == b.beat() == 0
    assert_replays(h)


def test_a_parked_join_is_told_to_join_again_when_the_group_upgrades(h: Harness) -> None:
    a, _b = classic_group(h)
    a.join()  # the leader rejoins: the group prepares a rebalance and parks it
    assert a.inbox.last is None
    Consumer(h, "g", "c").join("t")
    assert a.inbox.last.error == ErrorCode.REBALANCE_IN_PROGRESS


def test_a_classic_group_larger_than_a_consumer_group_may_be_is_not_upgraded(
    tmp_path: Path, topics: FakeTopics
) -> None:
    config = GroupConfig(initial_rebalance_delay_ms=3000)
    h = Harness(tmp_path, config, new_state=lambda: new_store(config, topics, group_consumer_max_size=1))
    classic_group(h)
    result = Consumer(h, "g", "c").join("t")
    assert (result.error, result.message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Cannot upgrade classic group g to consumer group because the group size exceeds the consumer "
        "group maximum size.",
    )
    assert h.state.group_type("g") == "classic"


@pytest.mark.parametrize("part", ["subscription", "assignment"])
def test_a_classic_group_whose_consumer_protocol_does_not_parse_is_not_upgraded(
    h: Harness, part: str
) -> None:
    """Kafka's convertToConsumerGroup: a SchemaException from a member's subscription or
    assignment leaves the group classic."""
    if part == "subscription":
        h.join_fully("g", protocols=[("range", b"\x00\x01garbage")])
        h.tick(3_000)
    else:
        a, _b = classic_group(h)
        h.store.get("g").members[a.member_id].assignment = b"\x00\x01garbage"  # type: ignore[union-attr]
    result = Consumer(h, "g", "c").join("t")
    assert (result.error, result.message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Cannot upgrade classic group g to consumer group because the embedded consumer protocol is "
        "malformed.",
    )
    assert h.state.group_type("g") == "classic"


@pytest.mark.parametrize(("user_data", "upgraded"), [(b"assignor state", False), (b"", True)])
def test_a_classic_group_assigned_with_user_data_is_not_upgraded(
    h: Harness, user_data: bytes, upgraded: bool
) -> None:
    """Kafka's ConsumerGroup.fromClassicGroup: user data in a member's assignment (a custom
    assignor's) would be lost in a consumer group, so the group stays classic."""
    a, _b = classic_group(h)
    with_data = ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic="t", partitions=[0, 1])],
        user_data=user_data,
    )
    h.store.get("g").members[a.member_id].assignment = bytes(with_data.encode(version=1))  # type: ignore[union-attr]
    result = Consumer(h, "g", "c").join("t")
    if upgraded:
        assert result.error == 0
        assert h.state.group_type("g") == "consumer"
        return
    assert (result.error, result.message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Cannot upgrade classic group g to consumer group because an unsupported custom assignor is in "
        "use. Please refer to the documentation or switch to a default assignor before re-attempting "
        "the upgrade.",
    )
    assert h.state.group_type("g") == "classic"


def test_a_full_classic_group_is_not_upgraded(tmp_path: Path, topics: FakeTopics) -> None:
    config = GroupConfig(initial_rebalance_delay_ms=3000)
    h = Harness(tmp_path, config, new_state=lambda: new_store(config, topics, group_consumer_max_size=2))
    classic_group(h)
    result = Consumer(h, "g", "c").join("t")
    assert result.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert h.state.group_type("g") == "classic"


# --- classic members in a consumer group ----------------------------------------------------------
def test_classic_member_errors(h: Harness) -> None:
    a, _b = classic_group(h)
    c = Consumer(h, "g", "c")
    c.join("t")
    assert h.heartbeat("g", a.member_id, a.generation + 5) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("g", "nobody", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    # A consumer-protocol member is no classic member.
    assert h.heartbeat("g", "c", c.epoch) == ErrorCode.UNKNOWN_MEMBER_ID
    other = h.join("g", protocol_type="connect", member_id="x").last
    assert other.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g", member_id="y", session_ms=1).last.error == ErrorCode.INVALID_SESSION_TIMEOUT
    a.join()
    inbox = h.sync("g", a.member_id, a.generation)
    assert inbox.last.error == 0
    bad = h.leave("g", ("nobody", None))
    assert bad == [ErrorCode.UNKNOWN_MEMBER_ID]


def test_classic_member_session_timeout_is_its_own(h: Harness) -> None:
    a, b = classic_group(h)
    c = Consumer(h, "g", "c")
    c.join("t")
    for _ in range(SESSION_MS // 2_000 + 1):
        h.tick(2_000)
        c.beat()
        b.beat()
    assert a.member_id not in consumer_group(h).members
    assert b.member_id in consumer_group(h).members


def test_classic_member_that_does_not_rejoin_in_time_is_fenced(h: Harness) -> None:
    a, b = classic_group(h)
    c = Consumer(h, "g", "c")
    c.join("t")
    assert a.beat() == ErrorCode.REBALANCE_IN_PROGRESS  # the join timer starts
    for _ in range(REBALANCE_MS // 5_000 + 1):
        h.tick(5_000)
        c.beat()
        a.beat()  # heartbeats do not stand in for the join
        b.join(), b.sync()
    assert a.member_id not in consumer_group(h).members


def test_classic_member_that_does_not_sync_in_time_is_fenced(h: Harness) -> None:
    a, b = classic_group(h)
    c = Consumer(h, "g", "c")
    c.join("t")
    a.join()
    for _ in range(REBALANCE_MS // 5_000 + 1):
        h.tick(5_000)
        a.beat()  # heartbeats do not stand in for the sync
        c.beat()
        if b.beat() == ErrorCode.REBALANCE_IN_PROGRESS:
            b.join(), b.sync()
    assert a.member_id not in consumer_group(h).members
    assert {b.member_id, "c"} <= set(consumer_group(h).members)


def test_classic_leave_from_a_consumer_group(h: Harness) -> None:
    a, _b = classic_group(h)
    c = Consumer(h, "g", "c")
    c.join("t")
    epoch = consumer_group(h).group_epoch
    assert a.leave() == [0]
    assert a.member_id not in consumer_group(h).members
    assert consumer_group(h).group_epoch == epoch + 1
    assert_replays(h)


# --- downgrade -------------------------------------------------------------------------------------------
def test_the_last_consumer_protocol_member_leaving_downgrades_the_group(h: Harness) -> None:
    a, b = classic_group(h)
    h.commit("g", {("t", 1): 7}, a.member_id, a.generation)
    c = Consumer(h, "g", "c")
    c.join("t")
    for _ in range(3):  # told to, they join again on the consumer group, until reconciled
        for x in (a, b):
            if x.beat() == ErrorCode.REBALANCE_IN_PROGRESS:
                x.join(), x.sync()
        c.beat()
    epoch = consumer_group(h).group_epoch
    assert a.generation == b.generation == epoch
    c.leave()
    assert h.state.group_type("g") == "classic"
    g = h.store.get("g")
    assert g is not None and g.is_in(GroupState.PREPARING_REBALANCE)
    assert g.generation == epoch and set(g.members) == {a.member_id, b.member_id}
    assert h.committed("g") == {("t", 1): 7}
    assert_replays(h)
    # The classic members go on as a classic group: heartbeats say rebalance, they join again.
    assert a.beat() == ErrorCode.REBALANCE_IN_PROGRESS
    a.join(), b.join()
    for x in (a, b):
        x.joined(x.inbox.last)
    assert a.generation == b.generation == epoch + 1


def test_a_silent_consumer_protocol_member_downgrades_the_group_too(h: Harness) -> None:
    a, b = classic_group(h)
    c = Consumer(h, "g", "c")
    c.join("t")
    for x in (a, b):
        x.join()
        x.sync()
    for _ in range(10):
        h.tick(5_000)
        for x in (a, b):
            if x.beat() == ErrorCode.REBALANCE_IN_PROGRESS:
                x.join(), x.sync()
    assert h.state.group_type("g") == "classic"
    assert_replays(h)


def test_no_downgrade_when_the_policy_forbids_it(tmp_path: Path, topics: FakeTopics) -> None:
    config = GroupConfig(initial_rebalance_delay_ms=3000)
    h = Harness(
        tmp_path,
        config,
        new_state=lambda: new_store(config, topics, group_consumer_migration_policy="upgrade"),
    )
    a, b = classic_group(h)
    c = Consumer(h, "g", "c")
    c.join("t")
    c.leave()
    assert h.state.group_type("g") == "consumer"
    assert set(consumer_group(h).members) == {a.member_id, b.member_id}


def test_a_static_member_back_on_the_classic_protocol_downgrades_the_group(h: Harness) -> None:
    a, b = classic_group(h)
    c = Consumer(h, "g", "c", instance="i-c")
    c.join("t")
    c.leave(epoch=-2)
    back = ClassicConsumer(h, "g", instance="i-c")
    result = back.join()
    assert result is not None and result.error == 0
    assert h.state.group_type("g") == "classic"
    g = h.store.get("g")
    assert g is not None and set(g.members) == {a.member_id, b.member_id, back.member_id}
    # The same subscription as the instance it replaces: no rebalance, as Kafka.
    assert g.is_in(GroupState.STABLE)
    assert_replays(h)


def test_a_static_member_back_with_another_subscription_downgrades_and_rebalances(
    h: Harness, topics: FakeTopics
) -> None:
    topics.put("u", 2)
    classic_group(h)
    c = Consumer(h, "g", "c", instance="i-c")
    c.join("t")
    c.leave(epoch=-2)
    result = h.join("g", instance="i-c", protocols=[("range", subscription("t", "u"))]).last
    assert result is not None and result.error == 0
    g = h.store.get("g")
    assert g is not None and g.is_in(GroupState.PREPARING_REBALANCE)
    assert_replays(h)


# --- an empty group changes type freely ---------------------------------------------------------------------
def test_join_group_turns_an_empty_consumer_group_into_a_classic_group(h: Harness) -> None:
    c = Consumer(h, "g", "c")
    c.join("t")
    c.leave()
    assert consumer_group(h).members == {}
    x = ClassicConsumer(h, "g")
    x.join()
    assert h.state.group_type("g") == "classic"
    assert_replays(h)


def test_member_states_of_converted_members_are_stable(h: Harness) -> None:
    classic_group(h)
    Consumer(h, "g", "c").join("t")
    g = consumer_group(h)
    assert {m.state for mid, m in g.members.items() if mid != "c"} == {MemberState.STABLE}


# --- what a review found (each failed before its fix) ---------------------------------------------
def null_owned_subscription() -> bytes:
    topic = struct.pack(">h", 1) + b"t"
    return struct.pack(">h", 1) + struct.pack(">i", 1) + topic + struct.pack(">i", -1) * 2


def test_a_subscription_with_a_null_owned_array_is_refused_not_raised(h: Harness) -> None:
    classic_group(h)
    Consumer(h, "g", "c").join("t")
    result = h.join("g", member_id="x", protocols=[("range", null_owned_subscription())]).last
    assert result.error == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_an_assignment_with_a_null_array_keeps_the_group_classic(h: Harness) -> None:
    a, b = ClassicConsumer(h, "g"), ClassicConsumer(h, "g")
    a.join()
    b.join()
    while a.inbox.last is None or b.inbox.last is None:
        h.tick(3_000)
    for c in (a, b):
        c.joined(c.inbox.last)
    leader, other = (a, b) if a.members else (b, a)
    null_partitions = (
        struct.pack(">h", 0) + struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1)
    )
    other.sync()
    # The classic group stores what the leader sends without reading it.
    bad = null_partitions + struct.pack(">i", -1)
    h.sync("g", leader.member_id, leader.generation, {leader.member_id: bad, other.member_id: b""})
    result = Consumer(h, "g", "c").join("t")
    assert result.error == ErrorCode.GROUP_ID_NOT_FOUND
    assert h.state.group_type("g") == "classic"


def test_a_sync_whose_first_protocol_does_not_parse_is_an_error_not_a_crash(h: Harness) -> None:
    sub = subscription("t")
    a_id, a_in = h.join_fully("g", protocols=[("x", b"\x01"), ("range", sub)])
    b_id, b_in = h.join_fully("g", protocols=[("range", sub)])
    while a_in.last is None or b_in.last is None:
        h.tick(3_000)
    generation = a_in.last.generation
    leader = a_id if a_in.last.members else b_id
    plan = {a_id: encode_assignment({"t": [0, 1]}, 1), b_id: encode_assignment({"t": [2, 3]}, 1)}
    h.sync("g", b_id if leader == a_id else a_id, generation)
    h.sync("g", leader, generation, plan)
    # A consumer-protocol member subscribed to nothing yet: the epoch does not move, A may sync.
    Consumer(h, "g", "c").send(heartbeat("c", 0, topics=(), owned={}, rebalance_timeout_ms=REBALANCE_MS))
    assert h.state.group_type("g") == "consumer"
    assert h.sync("g", a_id, generation).last.error == ErrorCode.UNKNOWN_SERVER_ERROR


def test_a_join_that_fails_does_not_upgrade_the_group(h: Harness) -> None:
    a, _b = classic_group(h)
    result = Consumer(h, "g", "c").send(
        heartbeat("c", 0, regex="(", owned={}, rebalance_timeout_ms=REBALANCE_MS)
    )
    assert result.error == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert h.state.group_type("g") == "classic"
    assert a.beat() == 0


def test_a_join_that_fails_does_not_delete_an_empty_consumer_group(h: Harness) -> None:
    c = Consumer(h, "g", "c")
    c.join("t")
    c.leave()
    assert h.join("g", session_ms=1).last.error == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join("g", member_id="x").last.error == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.state.group_type("g") == "consumer"


def test_members_expiring_together_still_downgrade_the_group(tmp_path: Path, topics: FakeTopics) -> None:
    config = GroupConfig(initial_rebalance_delay_ms=3000)
    h = Harness(
        tmp_path,
        config,
        new_state=lambda: new_store(config, topics, group_consumer_session_timeout_ms=SESSION_MS),
    )
    a, b = classic_group(h)
    Consumer(h, "g", "c").join("t")
    for x in (a, b):
        x.join(), x.sync()
    h.restart()  # every session starts again at once: a and c expire together
    for _ in range(6):
        h.tick(2_000)
        b.beat()
    assert h.state.group_type("g") == "classic"
    g = h.store.get("g")
    assert g is not None and set(g.members) == {b.member_id}
    assert_replays(h)
