"""A KIP-848 static member's new instance takes over the assignment of the instance it replaces
(Kafka's getOrMaybeSubscribeStaticConsumerGroupMember and ConsumerGroup.targetAssignment(memberId,
instanceId)), driving ConsumerGroup's heartbeat and replaying its records as the runtime does."""

from __future__ import annotations

import uuid
from typing import Any

from kcoord.consumer.group import ConsumerGroupConfig, HeartbeatRequest, HeartbeatResult
from kcoord.consumer.member import LEAVE_GROUP_STATIC_MEMBER_EPOCH
from kcoord.consumer.store import ConsumerGroups

TOPIC_ID = uuid.UUID(int=7)
CONFIG = ConsumerGroupConfig()


class Topics:
    version = 1

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        return (TOPIC_ID, 4) if name == "t" else None

    def names(self) -> list[str]:
        return ["t"]


def heartbeat(groups: ConsumerGroups, member_id: str, epoch: int, owned: Any, now: int) -> HeartbeatResult:
    group = groups.get_or_create("g")
    assert group is not None
    req = HeartbeatRequest(
        member_id=member_id,
        member_epoch=epoch,
        instance_id="instance-1",
        rack_id=None,
        rebalance_timeout_ms=30_000 if epoch == 0 else -1,
        subscribed_topic_names=("t",) if epoch == 0 else None,
        subscribed_topic_regex=None,
        server_assignor=None,
        owned=owned,
        client_id="c",
        client_host="/127.0.0.1",
    )
    result, records = group.heartbeat(req, CONFIG, Topics(), now)
    for key, value in records:
        groups.replay(key, value, now)
    return result


class NoOtherGroups:
    def group_type(self, group_id: str) -> str | None:
        return None


def test_static_member_rejoin_keeps_the_assignment() -> None:
    groups = ConsumerGroups(NoOtherGroups(), CONFIG, Topics())  # type: ignore[arg-type]
    first = heartbeat(groups, "m1", 0, {}, now=0)
    assert (first.error, first.member_epoch, first.assignment) == (0, 1, {TOPIC_ID: frozenset(range(4))})
    left = heartbeat(groups, "m1", LEAVE_GROUP_STATIC_MEMBER_EPOCH, None, now=10)
    assert (left.error, left.member_epoch) == (0, LEAVE_GROUP_STATIC_MEMBER_EPOCH)

    # The next instance (a new member id) joins with epoch 0: same partitions, same epoch, no bump.
    second = heartbeat(groups, "m2", 0, {}, now=20)
    assert (second.error, second.member_epoch, second.assignment) == (0, 1, {TOPIC_ID: frozenset(range(4))})
    group = groups.groups["g"]
    assert list(group.members) == ["m2"]
    assert group.members["m2"].assigned_partitions() == {TOPIC_ID: frozenset(range(4))}
    assert group.target == {"m2": {TOPIC_ID: frozenset(range(4))}}
    assert (group.group_epoch, group.assignment_epoch, group.state.value) == (1, 1, "Stable")
