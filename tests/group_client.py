"""Raw group-coordinator clients for tests, over tests/wire.py: offsets (OffsetCommit,
OffsetFetch) and a KIP-848 consumer (ConsumerGroupHeartbeat, ConsumerGroupDescribe).

:class:`Consumer` follows the consumer protocol as a client does: it reports the partitions it
owns on every heartbeat and takes on each assignment the coordinator sends at once (it revokes
what the assignment leaves out, acquires what it adds). Nothing here checks an answer unless its
name says so: tests assert error codes themselves.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from kafka.protocol.consumer.group import OffsetCommitRequest, OffsetFetchRequest

from tests.wire import ApiKey, Conn, api

CONSUMER_GROUP_HEARTBEAT = 68
CONSUMER_GROUP_DESCRIBE = 69
JOIN, LEAVE, STATIC_LEAVE = 0, -1, -2

CTopic = OffsetCommitRequest.OffsetCommitRequestTopic
CPart = CTopic.OffsetCommitRequestPartition
FGroup = OffsetFetchRequest.OffsetFetchRequestGroup

T = TypeVar("T")
TopicPartition = tuple[uuid.UUID, int]


def wait_until(probe: Callable[[], T], what: str, timeout: float = 20.0, interval: float = 0.05) -> T:
    """``probe()`` until it returns something true; that value. Fails after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# --- offsets -------------------------------------------------------------------------------------
def commit_offsets(
    c: Conn,
    group: str,
    offsets: Mapping[tuple[str, int], int],
    *,
    version: int = 8,
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
) -> dict[tuple[str, int], int]:
    """OffsetCommit of ``{(topic, partition): offset}``; the error code of each partition.
    ``generation`` is the member epoch from v9 on (KIP-848)."""
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            CPart(
                partition_index=p, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""
            )
        )
    resp = c.request(
        ApiKey.OffsetCommit,
        version,
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member,
        group_instance_id=instance,
        retention_time_ms=-1,
        topics=[CTopic(name=t, partitions=parts) for t, parts in by_topic.items()],
    )
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def commit(
    c: Conn, group: str, topic: str, partitions: int, offset: int, generation: int = -1, member: str = ""
) -> None:
    """OffsetCommit v8 of ``offset`` to partitions 0..partitions-1 of ``topic``; asserts success."""
    offsets = {(topic, p): offset for p in range(partitions)}
    codes = commit_offsets(c, group, offsets, generation=generation, member=member)
    assert codes == dict.fromkeys(offsets, 0), codes


def fetch_groups(
    c: Conn,
    groups: Iterable[str],
    *,
    version: int = 8,
    member_id: str | None = None,
    member_epoch: int = -1,
    require_stable: bool = True,
) -> dict[str, tuple[int, dict[tuple[str, int], int]]]:
    """OffsetFetch v8+ with topics = null: (group error, every committed offset) of each group.
    ``member_id`` and ``member_epoch`` (v9+, KIP-848) are sent for every group; with
    ``require_stable`` an offset a transaction has pending reads -1 (UNSTABLE_OFFSET_COMMIT)."""
    resp = c.request(
        ApiKey.OffsetFetch,
        version,
        groups=[
            FGroup(group_id=g, member_id=member_id, member_epoch=member_epoch, topics=None) for g in groups
        ],
        require_stable=require_stable,
    )
    return {
        g.group_id: (
            g.error_code,
            {(t.name, p.partition_index): p.committed_offset for t in g.topics for p in t.partitions},
        )
        for g in resp.groups
    }


def fetch_all(
    c: Conn, groups: list[str], require_stable: bool = True
) -> dict[str, dict[tuple[str, int], int]]:
    """OffsetFetch v8, topics = null: every committed offset of each group; asserts no error."""
    out = {}
    for g, (error, offsets) in fetch_groups(c, groups, require_stable=require_stable).items():
        assert error == 0, (g, error)
        out[g] = offsets
    return out


# --- topics --------------------------------------------------------------------------------------
def topic_ids(c: Conn, names: Iterable[str]) -> dict[str, uuid.UUID]:
    """The topic id of each topic, from Metadata v12."""
    req = api(ApiKey.Metadata, "Metadata")
    resp = c.request(
        ApiKey.Metadata,
        12,
        topics=[req.MetadataRequestTopic(name=n, topic_id=None) for n in names],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    out = {}
    for t in resp.topics:
        assert t.error_code == 0, t
        out[t.name] = t.topic_id
    return out


# --- KIP-848 consumer groups -----------------------------------------------------------------------
def heartbeat(c: Conn, version: int, client_id: str = "kcoord-tests", **fields: Any) -> Any:
    """ConsumerGroupHeartbeat with ``fields``; absent fields take the schema's "unchanged" value
    (null, or -1 for RebalanceTimeoutMs). SubscribedTopicRegex is not on the wire before v1."""
    req = api(CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat")
    owned = fields.pop("topic_partitions", None)
    values: dict[str, Any] = {
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": -1,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": None if owned is None else owned_partitions(req, owned),
    }
    values.update(fields)
    return c.request(CONSUMER_GROUP_HEARTBEAT, version, client_id=client_id, **values)


def owned_partitions(req: Any, owned: Mapping[uuid.UUID, Iterable[int]]) -> list[Any]:
    return [
        req.TopicPartitions(topic_id=t, partitions=sorted(ps))
        for t, ps in sorted(owned.items(), key=lambda kv: str(kv[0]))
    ]


def assignment_of(resp: Any) -> dict[uuid.UUID, frozenset[int]] | None:
    """A heartbeat answer's assignment (None: not sent, unchanged)."""
    if resp.assignment is None:
        return None
    return {t.topic_id: frozenset(t.partitions) for t in resp.assignment.topic_partitions if t.partitions}


def describe(
    c: Conn, groups: list[str], version: int = 1, include_authorized_operations: bool = False
) -> list[Any]:
    """ConsumerGroupDescribe: the described groups, in request order."""
    api(CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe")
    resp = c.request(
        CONSUMER_GROUP_DESCRIBE,
        version,
        group_ids=groups,
        include_authorized_operations=include_authorized_operations,
    )
    return list(resp.groups)


def described_assignment(assignment: Any) -> dict[uuid.UUID, frozenset[int]]:
    return {t.topic_id: frozenset(t.partitions) for t in assignment.topic_partitions if t.partitions}


class Consumer:
    """One KIP-848 member on one connection (see the module docstring)."""

    def __init__(
        self,
        c: Conn,
        group: str,
        *,
        topics: list[str] | None = None,
        regex: str | None = None,
        member_id: str | None = None,
        instance_id: str | None = None,
        version: int = 1,
        rebalance_timeout_ms: int = 30_000,
        client_id: str = "kcoord-tests",
    ) -> None:
        self.c, self.group, self.version = c, group, version
        self.topics, self.regex = topics, regex
        self.member_id = member_id if member_id is not None else str(uuid.uuid4())
        self.instance_id = instance_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.client_id = client_id
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.last: Any = None

    def send(self, **fields: Any) -> Any:
        """One heartbeat with ``fields``; on success, takes the epoch and any assignment sent."""
        fields.setdefault("group_id", self.group)
        fields.setdefault("member_id", self.member_id)
        fields.setdefault("instance_id", self.instance_id)
        resp = heartbeat(self.c, self.version, client_id=self.client_id, **fields)
        self.last = resp
        if resp.error_code == 0 and fields["member_epoch"] >= 0:
            self.member_id = resp.member_id  # v0: the coordinator may have made it
            self.epoch = resp.member_epoch
            sent = assignment_of(resp)
            if sent is not None:
                self.owned = sent
        return resp

    def join(self, **fields: Any) -> Any:
        """Joins (epoch 0) with its subscription and owning nothing."""
        self.owned = {}
        fields.setdefault("member_epoch", JOIN)
        fields.setdefault("rebalance_timeout_ms", self.rebalance_timeout_ms)
        fields.setdefault("subscribed_topic_names", self.topics)
        fields.setdefault("subscribed_topic_regex", self.regex)
        fields.setdefault("topic_partitions", {})
        return self.send(**fields)

    def beat(self, **fields: Any) -> Any:
        """A heartbeat at its epoch, reporting what it owns."""
        fields.setdefault("member_epoch", self.epoch)
        fields.setdefault("topic_partitions", self.owned)
        return self.send(**fields)

    def leave(self, epoch: int = LEAVE) -> Any:
        resp = self.send(member_epoch=epoch)
        self.owned = {}
        return resp

    def partitions(self) -> set[TopicPartition]:
        return {(t, p) for t, ps in self.owned.items() for p in ps}


def reconcile(
    consumers: list[Consumer], partitions: set[TopicPartition], timeout: float = 20.0
) -> dict[str, set[TopicPartition]]:
    """Heartbeat every consumer in turn until the group is Stable, every member at the group
    epoch, and the members own ``partitions`` between them, each exactly once (asserting no
    partition is ever owned twice on the way). What each member owns, by member id."""
    c = consumers[0].c
    group = consumers[0].group

    def settled() -> dict[str, set[TopicPartition]] | None:
        for consumer in consumers:
            resp = consumer.beat()
            assert resp.error_code == 0, (consumer.member_id, resp)
        owned = [consumer.partitions() for consumer in consumers]
        assert sum(len(o) for o in owned) == len(set().union(*owned)), f"a partition owned twice: {owned}"
        (d,) = describe(c, [group])
        stable = d.group_state == "Stable" and all(
            m.member_epoch == d.group_epoch == d.assignment_epoch for m in d.members
        )
        if stable and set().union(*owned) == partitions:
            return {consumer.member_id: consumer.partitions() for consumer in consumers}
        return None

    return wait_until(settled, f"group {group} to settle on {len(partitions)} partitions", timeout)
