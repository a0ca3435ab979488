"""What the operations endpoint shows of groups and topics, read the way handlers read state.

Like ListGroups and DescribeGroups, these read the coordinator's in-memory state between
operations (everything runs on the one event loop, so a read never sees an operation half done);
nothing here changes state. Lag is computed when asked, as kafka-exporter computes it: the
partition's high watermark minus the group's committed offset.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kcoord.apis.services import Services
from kcoord.classic.group import ClassicGroup, GroupState
from kcoord.classic.store import ClassicGroups
from kcoord.consumer.group import ConsumerGroup
from kcoord.consumer.store import ConsumerGroups
from kcoord.groups.consumer_protocol import MalformedConsumerProtocol, decode_assignment
from kcoord.groups.store import GroupStore
from kcoord.share.group import ShareGroup
from kcoord.share.inflight import RecordState
from kcoord.share.store import ShareGroups


@dataclass(frozen=True)
class PartitionLag:
    """A group's position in one partition: the committed offset (a share group's start offset)
    and how far the high watermark is ahead of it."""

    topic: str
    partition: int
    offset: int
    high_watermark: int

    @property
    def lag(self) -> int:
        return self.high_watermark - self.offset


@dataclass
class GroupView:
    group_id: str
    type: str  # classic, consumer, share; "classic" too for a group that only has offsets
    state: str
    protocol_type: str
    members: list[dict[str, Any]] = field(default_factory=list)
    offsets: list[PartitionLag] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {
            "group_id": self.group_id,
            "type": self.type,
            "state": self.state,
            "protocol_type": self.protocol_type,
            "members": len(self.members),
            "lag": sum(p.lag for p in self.offsets),
        }

    def detail(self) -> dict[str, Any]:
        out = self.summary()
        out["members"] = self.members
        out["offsets"] = [
            {"topic": p.topic, "partition": p.partition, "offset": p.offset,
             "high_watermark": p.high_watermark, "lag": p.lag}
            for p in self.offsets
        ]  # fmt: skip
        return out


def group_ids(services: Services) -> list[str]:
    """Every live group, and every group id that only has committed offsets (standalone commits)."""
    ids: set[str] = set()
    for store in services.groups.states():
        ids.update(
            g.group_id for g in store.kind(ClassicGroups).groups.values() if not g.is_in(GroupState.DEAD)
        )
        ids.update(g.group_id for g in store.kind(ConsumerGroups).groups.values() if not g.dead)
        ids.update(g.group_id for g in store.kind(ShareGroups).groups.values() if not g.dead)
        ids.update(store.offsets.committed)
    return sorted(ids)


def groups(services: Services) -> Iterator[GroupView]:
    for group_id in group_ids(services):
        view = group(services, group_id)
        if view is not None:
            yield view


def group(services: Services, group_id: str) -> GroupView | None:
    store = services.groups.state_for(group_id)
    classic = store.kind(ClassicGroups).get(group_id)
    if classic is not None and not classic.is_in(GroupState.DEAD):
        view = _classic(classic)
    elif (consumer := store.kind(ConsumerGroups).get(group_id)) is not None and not consumer.dead:
        view = _consumer(services, consumer)
    elif (share := store.kind(ShareGroups).get(group_id)) is not None and not share.dead:
        return _share(services, share)
    elif store.offsets.of(group_id):
        view = GroupView(group_id, "classic", GroupState.EMPTY.value, "")
    else:
        return None
    view.offsets = committed_lag(services, store, group_id)
    return view


def committed_lag(services: Services, store: GroupStore, group_id: str) -> list[PartitionLag]:
    """The group's committed offsets with the lag behind each partition's high watermark
    (partitions of deleted topics left out)."""
    out = []
    for topic, parts in sorted(store.offsets.of(group_id).items()):
        for p, value in sorted(parts.items()):
            part = services.partitions.partition(topic, p)
            if part is not None:
                out.append(PartitionLag(topic, p, value.offset, part.high_watermark))
    return out


def _classic(g: ClassicGroup) -> GroupView:
    members = []
    for m in g.members.values():
        member: dict[str, Any] = {
            "member_id": m.member_id,
            "group_instance_id": m.group_instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
        }
        if g.protocol_type == "consumer" and m.assignment:
            try:
                assigned = decode_assignment(m.assignment)
            except MalformedConsumerProtocol:
                assigned = {}
            member["assignment"] = {t: sorted(ps) for t, ps in sorted(assigned.items())}
        members.append(member)
    return GroupView(g.group_id, "classic", g.state.value, g.protocol_type or "", members)


def _names(services: Services, assignment: Any) -> dict[str, list[int]]:
    """{topic id: partitions} as {topic name: sorted partitions}."""
    out = {}
    for topic_id, parts in assignment.items():
        name = services.partitions.name_of(topic_id)
        out[name if name is not None else str(topic_id)] = sorted(parts)
    return dict(sorted(out.items()))


def _consumer(services: Services, g: ConsumerGroup) -> GroupView:
    members = [
        {
            "member_id": m.member_id,
            "group_instance_id": m.instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "member_epoch": m.member_epoch,
            "assignment": _names(services, m.assigned),
        }
        for m in g.members.values()
    ]
    return GroupView(g.group_id, "consumer", g.state.value, "consumer", members)


def _share(services: Services, g: ShareGroup) -> GroupView:
    members = [
        {
            "member_id": m.member_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "member_epoch": m.member_epoch,
            "assignment": _names(services, m.assignment),
        }
        for m in g.members.values()
    ]
    view = GroupView(g.group_id, "share", g.state, "share", members)
    view.offsets = share_start_lag(services, g)
    return view


def share_start_lag(services: Services, g: ShareGroup) -> list[PartitionLag]:
    """Each share-partition's start offset (every record below it is acknowledged or archived)
    and the records from there up to the high watermark: delivered, in flight or not yet read."""
    out = []
    for (topic_id, p), sp in sorted(g.partitions.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        part = services.partitions.partition_by_id(topic_id, p)
        name = services.partitions.name_of(topic_id)
        if part is not None and name is not None and not sp.deleted:
            out.append(PartitionLag(name, p, sp.start_offset, part.high_watermark))
    return out


@dataclass(frozen=True)
class InFlightRun:
    """Consecutive in-flight offsets in the same state, delivery count and owner."""

    first_offset: int
    last_offset: int
    state: str  # Available, Acquired, Acknowledged, Archived
    delivery_count: int
    member_id: str | None
    gap: bool  # offsets the log no longer has (compacted, control batches): never delivered

    @property
    def count(self) -> int:
        return self.last_offset - self.first_offset + 1


@dataclass
class SharePartitionState:
    """A share-partition as the share coordinator holds it: records below the start offset (SPSO)
    are done with, those in [SPSO, SPEO) are in flight, each run with its state."""

    topic: str
    partition: int
    start_offset: int
    end_offset: int
    high_watermark: int
    runs: list[InFlightRun]

    def records_in(self, state: str) -> int:
        return sum(r.count for r in self.runs if r.state == state and not r.gap)

    @property
    def gaps(self) -> int:
        return sum(r.count for r in self.runs if r.gap)


STATE_NAMES = {s: s.name.capitalize() for s in RecordState}


def share_partitions(services: Services, group_id: str) -> list[SharePartitionState]:
    """The share group's share-partitions (none if ``group_id`` is no live share group)."""
    g = services.groups.state_for(group_id).kind(ShareGroups).get(group_id)
    if g is None or g.dead:
        return []
    out = []
    for (topic_id, p), sp in g.partitions.items():
        part = services.partitions.partition_by_id(topic_id, p)
        name = services.partitions.name_of(topic_id)
        if part is None or name is None or sp.deleted:
            continue
        runs = [
            InFlightRun(b.first_offset, b.last_offset, STATE_NAMES[b.state], b.delivery_count, b.member_id,
                        b.state == RecordState.ARCHIVED and b.delivery_count == 0)
            for b in sp.in_flight()
        ]  # fmt: skip
        out.append(SharePartitionState(name, p, sp.start_offset, sp.end_offset, part.high_watermark, runs))
    return sorted(out, key=lambda s: (s.topic, s.partition))


def topics(services: Services) -> list[dict[str, Any]]:
    out = []
    for name in sorted(services.partitions.topics):
        topic = services.partitions.topics[name]
        out.append(
            {
                "name": name,
                "topic_id": str(topic.topic_id),
                "internal": topic.internal,
                "partitions": [
                    {
                        "partition": p.index,
                        "log_start_offset": p.log_start_offset,
                        "high_watermark": p.high_watermark,
                        "size_bytes": p.log.size_bytes,
                    }
                    for p in topic.partitions
                ],
                "configs": dict(sorted(topic.configs.items())),
            }
        )
    return out
