"""KIP-848 consumer groups through the production shard: heartbeats as the handler runs them, the
records they write, and the log replayed as on start (tests/unit/grouputil.py)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from pathlib import Path

import pytest

from kcoord.classic.group import GroupConfig
from kcoord.consumer.group import (
    ConsumerGroup,
    ConsumerGroupState,
    HeartbeatRequest,
    HeartbeatResult,
)
from kcoord.consumer.member import MemberState
from kcoord.consumer.records import ConsumerGroupMetadataKey, ConsumerGroupRegularExpressionKey
from kcoord.consumer.store import ConsumerGroups
from kcoord.consumer.subscriptions import subscription_hash
from kcoord.protocol.errors import ErrorCode
from tests.unit.grouputil import FakeTopics, Harness, new_store

SESSION_MS = 45_000
REBALANCE_MS = 30_000


def heartbeat(
    member_id: str,
    epoch: int,
    *,
    topics: Collection[str] | None = None,
    regex: str | None = None,
    owned: Mapping[uuid.UUID, Collection[int]] | None = None,
    instance: str | None = None,
    rebalance_timeout_ms: int = -1,
    assignor: str | None = None,
) -> HeartbeatRequest:
    return HeartbeatRequest(
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance,
        rack_id=None,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=tuple(topics) if topics is not None else None,
        subscribed_topic_regex=regex,
        server_assignor=assignor,
        owned=owned,
        client_id="client",
        client_host="/127.0.0.1",
    )


class Consumer:
    """A client that follows the protocol: it sends what it owns, and takes on (revokes and
    acquires) each assignment the coordinator sends at once."""

    def __init__(self, h: Harness, group_id: str, member_id: str, instance: str | None = None) -> None:
        self.h = h
        self.group_id = group_id
        self.member_id = member_id
        self.instance = instance
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.last: HeartbeatResult | None = None

    def send(self, req: HeartbeatRequest) -> HeartbeatResult:
        result = self.h.consumer_heartbeat(self.group_id, req)
        self.last = result
        if result.error == 0:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = {t: frozenset(ps) for t, ps in result.assignment.items() if ps}
        return result

    def join(self, *topics: str, regex: str | None = None) -> HeartbeatResult:
        return self.send(
            heartbeat(
                self.member_id,
                0,
                topics=topics if topics or regex is None else (),
                regex=regex,
                owned={},
                instance=self.instance,
                rebalance_timeout_ms=REBALANCE_MS,
            )
        )

    def beat(self) -> HeartbeatResult:
        return self.send(heartbeat(self.member_id, self.epoch, owned=self.owned, instance=self.instance))

    def leave(self, epoch: int = -1) -> HeartbeatResult:
        result = self.send(heartbeat(self.member_id, epoch, instance=self.instance))
        self.owned = {}
        return result

    def partitions(self, ids: Mapping[uuid.UUID, str]) -> set[tuple[str, int]]:
        return {(ids[t], p) for t, ps in self.owned.items() for p in ps}


T1 = uuid.uuid5(uuid.NAMESPACE_OID, "t1")
T2 = uuid.uuid5(uuid.NAMESPACE_OID, "t2")
NAMES = {T1: "t1", T2: "t2"}


@pytest.fixture
def topics() -> FakeTopics:
    return FakeTopics({"t1": (T1, 4)})


@pytest.fixture
def h(tmp_path: Path, topics: FakeTopics) -> Harness:
    return Harness(tmp_path, new_state=lambda: new_store(GroupConfig(), topics))


def group(h: Harness, group_id: str = "g") -> ConsumerGroup:
    found = h.state.kind(ConsumerGroups).get(group_id)
    assert found is not None
    return found


def assert_replays(h: Harness) -> None:
    assert h.replay().kind(ConsumerGroups).snapshot() == h.state.kind(ConsumerGroups).snapshot()


def assert_no_partition_owned_twice(*consumers: Consumer) -> None:
    seen: set[tuple[uuid.UUID, int]] = set()
    for c in consumers:
        mine = {(t, p) for t, ps in c.owned.items() for p in ps}
        assert not mine & seen, f"{c.member_id} owns partitions another consumer owns"
        seen |= mine


# --- joining and rebalancing ----------------------------------------------------------------------
def test_first_member_gets_every_partition_of_its_topics(h: Harness) -> None:
    a = Consumer(h, "g", "a")
    result = a.join("t1")
    assert (result.error, result.member_epoch, result.heartbeat_interval_ms) == (0, 1, 5_000)
    assert a.partitions(NAMES) == {("t1", p) for p in range(4)}
    g = group(h)
    assert (g.group_epoch, g.assignment_epoch, g.state) == (1, 1, ConsumerGroupState.STABLE)
    # Steady heartbeats write nothing and send no assignment.
    written = h.records_written
    assert a.beat().assignment is None
    assert h.records_written == written
    assert_replays(h)


def test_second_member_waits_for_partitions_the_first_revokes(h: Harness) -> None:
    a, b = Consumer(h, "g", "a"), Consumer(h, "g", "b")
    a.join("t1")
    b.join("t1")
    # b is at the new epoch but its partitions are still a's: it gets nothing yet.
    assert (b.epoch, b.owned) == (2, {})
    assert group(h).members["b"].state is MemberState.UNRELEASED_PARTITIONS
    assert group(h).state is ConsumerGroupState.RECONCILING
    # a is told to give up half; it stays at epoch 1 until it reports them gone.
    result = a.beat()
    assert result.member_epoch == 1 and len(a.owned[T1]) == 2
    assert group(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    assert_no_partition_owned_twice(a, b)
    a.beat()  # owns only what it kept
    assert (a.epoch, group(h).members["a"].state) == (2, MemberState.STABLE)
    b.beat()
    assert_no_partition_owned_twice(a, b)
    assert a.partitions(NAMES) | b.partitions(NAMES) == {("t1", p) for p in range(4)}
    assert group(h).state is ConsumerGroupState.STABLE
    assert_replays(h)


def test_leaving_member_gives_its_partitions_back(h: Harness) -> None:
    a, b = Consumer(h, "g", "a"), Consumer(h, "g", "b")
    a.join("t1")
    b.join("t1")
    a.beat(), a.beat(), b.beat()
    result = b.leave()
    assert (result.error, result.member_epoch) == (0, -1)
    assert "b" not in group(h).members
    a.beat()
    assert a.partitions(NAMES) == {("t1", p) for p in range(4)}
    assert group(h).group_epoch == 3
    assert_replays(h)


def test_last_member_leaving_empties_the_group_and_keeps_it(h: Harness) -> None:
    a = Consumer(h, "g", "a")
    a.join("t1")
    a.leave()
    g = group(h)
    assert (g.state, g.members) == (ConsumerGroupState.EMPTY, {})
    assert_replays(h)


def test_subscribing_to_a_new_topic_rebalances(h: Harness, topics: FakeTopics) -> None:
    topics.put("t2", 2)
    a = Consumer(h, "g", "a")
    a.join("t1")
    a.send(heartbeat("a", a.epoch, topics=("t1", "t2"), owned=a.owned))
    assert a.epoch == 2
    assert a.partitions(NAMES) == {("t1", p) for p in range(4)} | {("t2", 0), ("t2", 1)}
    assert_replays(h)


def test_partitions_added_to_a_topic_are_assigned(h: Harness, topics: FakeTopics) -> None:
    a = Consumer(h, "g", "a")
    a.join("t1")
    topics.put("t1", 6)
    a.beat()
    assert a.partitions(NAMES) == {("t1", p) for p in range(6)}
    assert group(h).group_epoch == 2


def test_unsubscribed_topic_is_revoked_at_once(h: Harness, topics: FakeTopics) -> None:
    topics.put("t2", 2)
    a = Consumer(h, "g", "a")
    a.join("t1", "t2")
    a.send(heartbeat("a", a.epoch, topics=("t1",), owned=a.owned))
    a.beat()
    assert a.partitions(NAMES) == {("t1", p) for p in range(4)}


# --- regular expressions ----------------------------------------------------------------------------
def test_regex_subscription_picks_up_a_created_topic(h: Harness, topics: FakeTopics) -> None:
    a = Consumer(h, "g", "a")
    a.join(regex="t.*")
    assert a.partitions(NAMES) == {("t1", p) for p in range(4)}
    assert group(h).regexes["t.*"].topics == ("t1",)
    topics.put("t2", 2)
    a.beat()
    assert a.partitions(NAMES) == {("t1", p) for p in range(4)} | {("t2", 0), ("t2", 1)}
    assert group(h).regexes["t.*"].topics == ("t1", "t2")
    topics.delete("t2")
    a.beat()
    assert a.partitions(NAMES) == {("t1", p) for p in range(4)}
    assert_replays(h)


def test_regex_nobody_subscribes_to_is_tombstoned(h: Harness) -> None:
    a = Consumer(h, "g", "a")
    a.join(regex="t.*")
    a.send(heartbeat("a", a.epoch, topics=("t1",), regex="", owned=a.owned))
    assert group(h).regexes == {}
    tombstones = [
        k for _, k, v in h.records() if isinstance(k, ConsumerGroupRegularExpressionKey) and v is None
    ]
    assert [k.regular_expression for k in tombstones] == ["t.*"]
    assert_replays(h)


def test_invalid_regex_is_refused_with_re2j_words(h: Harness) -> None:
    result = Consumer(h, "g", "a").join(regex="[")
    assert (result.error, result.message) == (
        ErrorCode.INVALID_REGULAR_EXPRESSION,
        "SubscribedTopicRegex `[` is not a valid regular expression: missing closing ].",
    )
    assert h.state.kind(ConsumerGroups).get("g") is None  # nothing was written
    assert h.records_written == 0


def test_invalid_regex_is_checked_after_the_member(tmp_path: Path, topics: FakeTopics) -> None:
    """As Kafka's GroupMetadataManager: the group and the member first, then the regex (compiled
    when the member subscribes to one the group does not have)."""
    h = Harness(tmp_path, new_state=lambda: new_store(GroupConfig(), topics, group_consumer_max_size=2))
    a = Consumer(h, "g", "a")
    a.join("t1")
    assert h.consumer_heartbeat("g", heartbeat("zz", 3, regex="(")).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.consumer_heartbeat("g", heartbeat("a", 9, regex="(")).error == ErrorCode.FENCED_MEMBER_EPOCH
    Consumer(h, "g", "b").join("t1")
    full = Consumer(h, "g", "c").join(regex="(")
    assert full.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    own = a.send(heartbeat("a", a.epoch, regex="(", owned=a.owned))
    assert (own.error, own.message) == (
        ErrorCode.INVALID_REGULAR_EXPRESSION,
        "SubscribedTopicRegex `(` is not a valid regular expression: missing closing ).",
    )
    assert group(h).members["a"].subscribed_topic_regex is None


# --- epochs ------------------------------------------------------------------------------------------
def test_epoch_ahead_of_the_coordinator_is_fenced(h: Harness) -> None:
    a = Consumer(h, "g", "a")
    a.join("t1")
    result = h.consumer_heartbeat("g", heartbeat("a", 7, owned=a.owned))
    assert result.error == ErrorCode.FENCED_MEMBER_EPOCH


def test_previous_epoch_is_accepted_with_a_subset_of_its_partitions(h: Harness, topics: FakeTopics) -> None:
    a = Consumer(h, "g", "a")
    a.join("t1")
    topics.put("t1", 6)
    a.beat()  # epoch 2, 6 partitions; suppose the answer was lost
    lagging = h.consumer_heartbeat("g", heartbeat("a", 1, owned={T1: [0, 1, 2, 3]}))
    assert (lagging.error, lagging.member_epoch) == (0, 2)
    # Partitions it was never given: it must rejoin.
    stale = h.consumer_heartbeat("g", heartbeat("a", 1, owned={T2: [0]}))
    assert stale.error == ErrorCode.FENCED_MEMBER_EPOCH


def test_epoch_older_than_the_previous_one_is_fenced(h: Harness, topics: FakeTopics) -> None:
    a = Consumer(h, "g", "a")
    a.join("t1")
    topics.put("t1", 5)
    a.beat()
    topics.put("t1", 6)
    a.beat()
    assert a.epoch == 3
    assert h.consumer_heartbeat("g", heartbeat("a", 1, owned={})).error == ErrorCode.FENCED_MEMBER_EPOCH


def test_fenced_member_rejoins_with_epoch_zero_and_keeps_its_assignment(
    h: Harness, topics: FakeTopics
) -> None:
    """KAFKA-19233 (Kafka 4.3): a member fenced by its epoch rejoins with epoch 0 and its member
    id; it gets its epoch and assignment back, without a rebalance."""
    a = Consumer(h, "g", "a")
    a.join("t1")
    topics.put("t1", 5)
    a.beat()
    topics.put("t1", 6)
    a.beat()
    assert (a.epoch, group(h).members["a"].previous_member_epoch) == (3, 2)
    assert a.beat().error == 0
    assert h.consumer_heartbeat("g", heartbeat("a", 1, owned={})).error == ErrorCode.FENCED_MEMBER_EPOCH
    written = h.records_written
    rejoined = a.join("t1")
    assert (rejoined.error, rejoined.member_epoch) == (0, 3)
    assert rejoined.assignment == {T1: frozenset(range(6))}
    assert h.records_written == written  # nothing changed: nothing to write, as Kafka
    assert (group(h).group_epoch, group(h).state) == (3, ConsumerGroupState.STABLE)
    assert_replays(h)


def test_member_rejoining_while_it_revokes_moves_on_to_its_target(h: Harness) -> None:
    """A member that rejoins owns nothing: what it was revoking is released, and it moves to the
    target epoch with the partitions it keeps."""
    a, b = Consumer(h, "g", "a"), Consumer(h, "g", "b")
    a.join("t1")
    b.join("t1")
    a.send(heartbeat("a", a.epoch, owned=a.owned))
    assert group(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    kept = group(h).target["a"]
    rejoined = a.join("t1")
    assert (rejoined.error, rejoined.member_epoch) == (0, 2)
    assert a.owned == kept
    b.beat()
    assert_no_partition_owned_twice(a, b)
    assert a.partitions(NAMES) | b.partitions(NAMES) == {("t1", p) for p in range(4)}
    assert group(h).state is ConsumerGroupState.STABLE
    assert_replays(h)


def test_unknown_member_and_unknown_group(h: Harness) -> None:
    Consumer(h, "g", "a").join("t1")
    assert h.consumer_heartbeat("g", heartbeat("zz", 1, owned={})).error == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.consumer_heartbeat("g", heartbeat("zz", -1)).error == ErrorCode.UNKNOWN_MEMBER_ID
    missing = h.consumer_heartbeat("nope", heartbeat("zz", 1, owned={}))
    assert (missing.error, missing.message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert h.state.kind(ConsumerGroups).get("nope") is None


def test_classic_group_of_another_protocol_type_is_not_a_consumer_group(h: Harness) -> None:
    h.join_fully("connect", protocol_type="connect")
    result = Consumer(h, "connect", "a").join("t1")
    assert (result.error, result.message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Cannot upgrade classic group connect to consumer group because the group does not use the "
        "consumer embedded protocol.",
    )


def test_no_upgrade_when_the_migration_policy_forbids_it(tmp_path: Path, topics: FakeTopics) -> None:
    h = Harness(
        tmp_path,
        new_state=lambda: new_store(GroupConfig(), topics, group_consumer_migration_policy="downgrade"),
    )
    h.join_fully("classic")
    result = Consumer(h, "classic", "a").join("t1")
    assert (result.error, result.message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Cannot upgrade classic group classic to consumer group because online upgrade is disabled.",
    )


def test_group_max_size(tmp_path: Path, topics: FakeTopics) -> None:
    h = Harness(tmp_path, new_state=lambda: new_store(GroupConfig(), topics, group_consumer_max_size=2))
    Consumer(h, "g", "a").join("t1")
    Consumer(h, "g", "b").join("t1")
    result = Consumer(h, "g", "c").join("t1")
    assert result.error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert set(group(h).members) == {"a", "b"}


def test_a_failed_join_leaves_no_group_behind(tmp_path: Path, topics: FakeTopics) -> None:
    h = Harness(tmp_path, new_state=lambda: new_store(GroupConfig(), topics, group_consumer_max_size=0))
    assert Consumer(h, "g", "a").join("t1").error == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert h.state.kind(ConsumerGroups).get("g") is None
    assert h.records_written == 0


# --- timeouts ---------------------------------------------------------------------------------------
def test_session_timeout_fences_a_silent_member(h: Harness) -> None:
    a, b = Consumer(h, "g", "a"), Consumer(h, "g", "b")
    a.join("t1")
    b.join("t1")
    a.beat(), a.beat(), b.beat()
    for _ in range(10):
        h.tick(SESSION_MS // 10)
        a.beat()
    assert set(group(h).members) == {"a"}
    assert a.partitions(NAMES) == {("t1", p) for p in range(4)}
    assert b.beat().error == ErrorCode.UNKNOWN_MEMBER_ID
    assert_replays(h)


def test_rebalance_timeout_fences_a_member_that_does_not_revoke(h: Harness) -> None:
    a, b = Consumer(h, "g", "a"), Consumer(h, "g", "b")
    a.join("t1")
    b.join("t1")
    a.beat()  # told to revoke two partitions
    assert group(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    keeps_all = {T1: frozenset(range(4))}
    for _ in range(4):
        h.tick(REBALANCE_MS // 4)
        h.consumer_heartbeat("g", heartbeat("a", 1, owned=keeps_all))  # never lets go
        b.beat()
    assert "a" not in group(h).members
    b.beat()
    assert b.partitions(NAMES) == {("t1", p) for p in range(4)}


def test_timers_restart_after_a_restart(h: Harness) -> None:
    Consumer(h, "g", "a").join("t1")
    h.restart()
    assert group(h).next_deadline() == h.clock.now_ms() + SESSION_MS
    h.tick(SESSION_MS)
    assert group(h).members == {}


# --- static membership -----------------------------------------------------------------------------
def test_static_member_rejoins_with_its_assignment_and_no_rebalance(h: Harness) -> None:
    a, b = Consumer(h, "g", "a", instance="i-a"), Consumer(h, "g", "b", instance="i-b")
    a.join("t1")
    b.join("t1")
    a.beat(), a.beat(), b.beat()
    before = b.partitions(NAMES)
    epoch = group(h).group_epoch
    assert b.leave(epoch=-2).member_epoch == -2
    assert group(h).members["b"].member_epoch == -2  # kept for its next instance
    b2 = Consumer(h, "g", "b2", instance="i-b")
    b2.join("t1")
    assert b2.partitions(NAMES) == before
    assert "b" not in group(h).members and group(h).static_members["i-b"] == "b2"
    assert group(h).group_epoch == epoch
    assert_replays(h)


def test_instance_id_in_use_is_unreleased(h: Harness) -> None:
    Consumer(h, "g", "a", instance="i").join("t1")
    result = Consumer(h, "g", "other", instance="i").join("t1")
    assert (result.error, result.message) == (
        ErrorCode.UNRELEASED_INSTANCE_ID,
        "Static member other with instance id i cannot join the group because the instance id is owned "
        "by a member.",
    )


def test_replaced_static_member_is_fenced(h: Harness) -> None:
    a = Consumer(h, "g", "a", instance="i")
    a.join("t1")
    a.leave(epoch=-2)
    Consumer(h, "g", "a2", instance="i").join("t1")
    result = h.consumer_heartbeat("g", heartbeat("a", 1, owned={}, instance="i"))
    assert result.error == ErrorCode.FENCED_INSTANCE_ID


def test_static_member_leaving_for_good_is_removed(h: Harness) -> None:
    a = Consumer(h, "g", "a", instance="i")
    a.join("t1")
    a.leave()
    assert group(h).members == {} and group(h).static_members == {}


# --- records and restart -----------------------------------------------------------------------------
def test_group_epoch_record_carries_the_metadata_hash(h: Harness, topics: FakeTopics) -> None:
    a = Consumer(h, "g", "a")
    a.join("t1")
    hashes = [v.metadata_hash for _, k, v in h.records() if isinstance(k, ConsumerGroupMetadataKey)]
    topics.put("t1", 6)
    a.beat()
    after = [v.metadata_hash for _, k, v in h.records() if isinstance(k, ConsumerGroupMetadataKey)]
    assert len(after) == len(hashes) + 1 and after[-1] != hashes[-1] != 0


def test_restarted_coordinator_continues_the_group(h: Harness) -> None:
    a, b = Consumer(h, "g", "a"), Consumer(h, "g", "b")
    a.join("t1")
    b.join("t1")
    a.beat()
    h.restart()
    a.beat()
    b.beat()
    assert_no_partition_owned_twice(a, b)
    assert a.partitions(NAMES) | b.partitions(NAMES) == {("t1", p) for p in range(4)}
    assert group(h).state is ConsumerGroupState.STABLE


# --- what a review found (each failed before its fix) ---------------------------------------------
def test_rebalance_timeout_starts_again_when_the_member_makes_progress(
    h: Harness, topics: FakeTopics
) -> None:
    topics.put("t1", 6)
    a, b = Consumer(h, "g", "a"), Consumer(h, "g", "b")
    a.join("t1")
    b.join("t1")
    slow = dict(a.owned)
    h.consumer_heartbeat("g", heartbeat("a", a.epoch, owned=slow))  # told to revoke; does not yet
    for _ in range(5):  # 25 s of its 30 s rebalance timeout
        h.tick(5_000)
        h.consumer_heartbeat("g", heartbeat("a", a.epoch, owned=slow))
        b.beat()
    Consumer(h, "g", "c").join("t1")  # the target moves on
    kept = {T1: frozenset(group(h).members["a"].assigned[T1])}
    h.consumer_heartbeat("g", heartbeat("a", a.epoch, owned=kept))  # a revokes what it was asked to
    assert group(h).members["a"].state is MemberState.UNREVOKED_PARTITIONS
    h.tick(5_000)
    h.consumer_heartbeat("g", heartbeat("a", a.epoch, owned=kept))
    assert "a" in group(h).members  # progress gave it a new rebalance timeout


def test_regexes_are_resolved_again_after_a_restart(h: Harness, topics: FakeTopics) -> None:
    a = Consumer(h, "g", "a")
    a.join(regex="t.*")
    version = topics.version
    h.restart()
    # The data plane's version counts topic changes since it started: after a restart the same
    # number may stand for other topics.
    topics.put("t2", 2)
    topics.version = version
    a.beat()
    assert a.partitions(NAMES) == {("t1", p) for p in range(4)} | {("t2", 0), ("t2", 1)}


def test_a_replaced_static_member_leaves_the_subscription_counts(h: Harness, topics: FakeTopics) -> None:
    topics.put("t2", 2)
    other = Consumer(h, "g", "o")
    other.join("t2")
    a = Consumer(h, "g", "a1", instance="i")
    a.join("t1")
    a.beat(), other.beat()
    a.leave(epoch=-2)
    Consumer(h, "g", "a2", instance="i").join("t2")
    g = group(h)
    assert +g.subscribed_names == {"t2": 2}
    assert g.metadata_hash == subscription_hash({"t2"}, {}, topics)
    epoch = g.group_epoch
    topics.put("unrelated", 1)
    other.beat()
    assert group(h).group_epoch == epoch  # no topic of the group changed
    assert_replays(h)


def test_a_member_named_twice_in_one_leave_is_fenced_once(h: Harness) -> None:
    a, b = Consumer(h, "g", "a"), Consumer(h, "g", "b")
    a.join("t1")
    b.join("t1")
    records = group(h).fence(["a", "a"], h.state.kind(ConsumerGroups).topics)
    assert len(records) == 4  # a's three tombstones and one epoch bump
    assert records[-1][1].metadata_hash != 0  # b still subscribes
