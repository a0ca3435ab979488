"""KIP-848 consumer group heartbeats against Kafka's GroupMetadataManager, on cases real clients
hit: ConsumerGroup's heartbeat is driven directly and its records replayed as the runtime does.

- a static member's new instance takes over the assignment of the instance it replaces (Kafka's
  getOrMaybeSubscribeStaticConsumerGroupMember and ConsumerGroup.targetAssignment(memberId,
  instanceId));
- a new group moves away from epoch 0 on its first join, even with an empty subscription (a Java
  consumer subscribed by a java.util.regex.Pattern that matches nothing yet), so the member is
  never answered with the joining epoch 0;
- a regular-expression subscription is assigned the matching topics in the answer to the join
  that resolved it;
- an offset commit with an older member epoch is valid for partitions held since (KIP-1251).
"""

from __future__ import annotations

import uuid
from typing import Any

from kcoord.consumer.group import ConsumerGroupConfig, HeartbeatRequest, HeartbeatResult
from kcoord.consumer.member import LEAVE_GROUP_STATIC_MEMBER_EPOCH
from kcoord.consumer.store import ConsumerGroups
from kcoord.protocol.errors import ErrorCode

T_ID, U_ID = uuid.UUID(int=7), uuid.UUID(int=8)
CONFIG = ConsumerGroupConfig()
STALE = ErrorCode.STALE_MEMBER_EPOCH


class Topics:
    version = 1
    topics = {"t": (T_ID, 4), "u-1": (U_ID, 2)}

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        return self.topics.get(name)

    def names(self) -> list[str]:
        return list(self.topics)


class NoOtherGroups:
    def group_type(self, group_id: str) -> str | None:
        return None


def new_groups() -> ConsumerGroups:
    return ConsumerGroups(NoOtherGroups(), CONFIG, Topics())  # type: ignore[arg-type]


def heartbeat(
    groups: ConsumerGroups,
    member_id: str,
    epoch: int,
    owned: Any,
    now: int,
    instance_id: str | None = None,
    names: tuple[str, ...] | None = ("t",),
    regex: str | None = None,
) -> HeartbeatResult:
    group = groups.get_or_create("g")
    assert group is not None
    joining = epoch == 0
    req = HeartbeatRequest(
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rack_id=None,
        rebalance_timeout_ms=30_000 if joining else -1,
        subscribed_topic_names=names if joining else None,
        subscribed_topic_regex=regex if joining else None,
        server_assignor=None,
        owned=owned,
        client_id="c",
        client_host="/127.0.0.1",
    )
    result, records, _leaving = group.heartbeat(req, CONFIG, Topics(), now)
    for key, value in records:
        groups.replay(key, value, now)
    return result


def test_static_member_rejoin_keeps_the_assignment() -> None:
    groups = new_groups()
    first = heartbeat(groups, "m1", 0, {}, now=0, instance_id="i")
    assert (first.error, first.member_epoch, first.assignment) == (0, 1, {T_ID: frozenset(range(4))})
    left = heartbeat(groups, "m1", LEAVE_GROUP_STATIC_MEMBER_EPOCH, None, now=10, instance_id="i")
    assert (left.error, left.member_epoch) == (0, LEAVE_GROUP_STATIC_MEMBER_EPOCH)

    # The next instance (a new member id) joins with epoch 0: same partitions, same epoch, no bump.
    second = heartbeat(groups, "m2", 0, {}, now=20, instance_id="i")
    assert (second.error, second.member_epoch, second.assignment) == (0, 1, {T_ID: frozenset(range(4))})
    group = groups.groups["g"]
    assert list(group.members) == ["m2"]
    assert group.members["m2"].assigned_partitions() == {T_ID: frozenset(range(4))}
    assert group.target == {"m2": {T_ID: frozenset(range(4))}}
    assert (group.group_epoch, group.assignment_epoch, group.state.value) == (1, 1, "Stable")


def test_first_member_with_empty_subscription_leaves_epoch_0() -> None:
    groups = new_groups()
    joined = heartbeat(groups, "m1", 0, {}, now=0, names=())
    assert (joined.error, joined.member_epoch, joined.assignment) == (0, 1, {})
    # Its next heartbeat (epoch 1, nothing but what changed) is an ordinary one; then it
    # subscribes to a topic (the client's regex now matches it) and gets its partitions.
    again = heartbeat(groups, "m1", 1, None, now=10)
    assert (again.error, again.member_epoch) == (0, 1)
    group = groups.groups["g"]
    req = HeartbeatRequest("m1", 1, None, None, -1, ("t",), None, None, {}, "c", "/127.0.0.1")
    result, records, _leaving = group.heartbeat(req, CONFIG, Topics(), 20)
    for key, value in records:
        groups.replay(key, value, 20)
    assert (result.error, result.member_epoch, result.assignment) == (0, 2, {T_ID: frozenset(range(4))})


def test_regex_subscription_is_assigned_when_resolved() -> None:
    groups = new_groups()
    joined = heartbeat(groups, "m1", 0, {}, now=0, names=(), regex="u-.*")
    assert (joined.error, joined.member_epoch, joined.assignment) == (0, 1, {U_ID: frozenset(range(2))})
    group = groups.groups["g"]
    assert group.regexes["u-.*"].topics == ("u-1",)
    assert group.target == {"m1": {U_ID: frozenset(range(2))}}


def test_commit_with_an_older_epoch_for_partitions_held_since() -> None:
    """KIP-1251: a commit sent just before a heartbeat moved the member's epoch on is valid for
    the partitions the member has held since an epoch no later than the commit's."""
    groups = new_groups()
    assert heartbeat(groups, "m1", 0, {}, now=0).member_epoch == 1  # all of t, at epoch 1
    joined = heartbeat(groups, "m2", 0, {}, now=10)  # takes two partitions once m1 revokes them
    assert (joined.member_epoch, joined.assignment) == (2, {})
    revoking = heartbeat(groups, "m1", 1, {T_ID: [0, 1, 2, 3]}, now=20)
    assert revoking.member_epoch == 1  # still epoch 1 while it revokes
    kept = sorted(groups.groups["g"].members["m1"].assigned[T_ID])
    gone = sorted({0, 1, 2, 3} - set(kept))
    assert heartbeat(groups, "m1", 1, {T_ID: kept}, now=30).member_epoch == 2
    m2 = heartbeat(groups, "m2", 2, {}, now=40)
    assert (m2.member_epoch, m2.assignment) == (2, {T_ID: frozenset(gone)})

    group = groups.groups["g"]
    # m1 now at epoch 2; its commit with epoch 1 for partitions it kept is still valid...
    assert group.validate_offset_commit("m1", 1, 9, [(T_ID, p) for p in kept]) == 0
    assert group.validate_offset_commit("m1", 2, 9, [(T_ID, p) for p in kept]) == 0
    # ...not for one it gave away, nor with an epoch older than the partition's assignment.
    assert group.validate_offset_commit("m1", 1, 9, [(T_ID, kept[0]), (T_ID, gone[0])]) == STALE
    assert group.validate_offset_commit("m1", 3, 9, [(T_ID, kept[0])]) == STALE
    assert group.validate_offset_commit("m2", 1, 9, [(T_ID, gone[0])]) == STALE
    assert group.validate_offset_commit("m2", 2, 9, [(T_ID, gone[0])]) == 0
