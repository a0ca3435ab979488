"""What the groups commands ask a Kafka cluster, in Kafka's vocabulary, as plain data.

A group is one of three types (ListGroups v5's GroupType): ``classic`` (JoinGroup/SyncGroup,
described by DescribeGroups), ``consumer`` (KIP-848, ConsumerGroupDescribe) and ``share``
(KIP-932, ShareGroupDescribe). Classic and consumer groups keep committed offsets (OffsetFetch,
OffsetCommit, OffsetDelete); share groups keep a share-partition start offset per partition
(DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets).
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from kcoord.cli.admin import Admin, KafkaRequestError, request
from kcoord.protocol.messages import ApiKey

GROUP_TYPES = ("classic", "consumer", "share")
# Every state a group of some type can be in (Kafka's GroupState), for --state.
GROUP_STATES = (
    "Unknown",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
    "Assigning",
    "Reconciling",
)
GROUP_ID_NOT_FOUND = 69
# OffsetFetch/OffsetCommit v10 name topics by id only; these commands speak topic names.
OFFSET_FETCH_MAX = 9
OFFSET_COMMIT_MAX = 9

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    group_type: str
    state: str
    protocol_type: str


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[TopicPartition]


@dataclass
class Group:
    group_id: str
    group_type: str
    state: str
    # classic: the chosen protocol (the assignor, e.g. "range"); consumer/share: the assignor.
    protocol: str
    protocol_type: str
    members: list[Member] = field(default_factory=list)
    epoch: int | None = None

    @property
    def active(self) -> bool:
        """Members are connected: offsets must not be reset or deleted under them."""
        return bool(self.members) or self.state not in ("Empty", "Dead")

    def assigned(self) -> dict[TopicPartition, Member]:
        return {tp: m for m in self.members for tp in m.assignment}


@dataclass(frozen=True)
class ShareOffset:
    start_offset: int  # -1: the partition was never initialized for the group
    lag: int  # -1: the broker does not say (DescribeShareGroupOffsets v0)


# --- listing and describing ---------------------------------------------------------------------
def list_groups(admin: Admin, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
    """ListGroups on every broker (each lists the groups it coordinates)."""
    states, types = list(states), list(types)
    fields: dict[str, Any] = {"min_version": 0}
    if states:
        fields.update(states_filter=states, min_version=4)
    if types:
        fields.update(types_filter=types, min_version=5)
    seen: dict[str, ListedGroup] = {}
    for node in admin.broker_ids():
        resp = admin.send(request(ApiKey.ListGroups, **fields), node)
        if resp.error_code:
            raise KafkaRequestError(resp.error_code, None, f"ListGroups on broker {node}")
        for g in resp.groups:
            # Before v5 there is no type: such a broker has classic groups only.
            gtype = (getattr(g, "group_type", None) or "classic").lower()
            state = getattr(g, "group_state", None) or ""
            seen[g.group_id] = ListedGroup(g.group_id, gtype, state, g.protocol_type or "")
    return sorted(seen.values(), key=lambda g: g.group_id)


def describe_groups(admin: Admin, listed: Iterable[ListedGroup]) -> dict[str, Group | KafkaRequestError]:
    """The groups of a listing, each described by its type's API."""
    by_type: dict[str, list[str]] = defaultdict(list)
    for g in listed:
        by_type[g.group_type].append(g.group_id)
    out: dict[str, Group | KafkaRequestError] = {}
    for gtype, ids in by_type.items():
        out.update(_DESCRIBE[gtype](admin, ids) if gtype in _DESCRIBE else {})
    return out


def describe_group(admin: Admin, group_id: str) -> Group:
    """One group, whatever its type: DescribeGroups answers "not a classic group" (or, before
    v6, Dead) for the others, ConsumerGroupDescribe "not a consumer group"."""
    last: KafkaRequestError | None = None
    for describe in (describe_classic, describe_consumer, describe_share):
        found = describe(admin, [group_id])[group_id]
        if isinstance(found, Group):
            return found
        if found.code != GROUP_ID_NOT_FOUND:
            raise found
        last = found
    assert last is not None
    raise KafkaRequestError(GROUP_ID_NOT_FOUND, f"Group {group_id} not found.", f"group {group_id}")


def _by_coordinator(admin: Admin, group_ids: Iterable[str]) -> dict[int, list[str]]:
    nodes: dict[int, list[str]] = defaultdict(list)
    for gid in group_ids:
        nodes[admin.coordinator(gid)].append(gid)
    return nodes


def _decode_assignment(raw: bytes | None) -> list[TopicPartition]:
    if not raw:
        return []
    try:
        a = ConsumerProtocolAssignment.decode(raw)
    except (struct.error, ValueError):  # not the consumer protocol's layout (e.g. Connect)
        return []
    return sorted((tp.topic, p) for tp in a.assigned_partitions for p in tp.partitions)


def _assignment(a: Any) -> list[TopicPartition]:
    return sorted((tp.topic_name, p) for tp in (a.topic_partitions if a else []) for p in tp.partitions)


def describe_classic(admin: Admin, group_ids: list[str]) -> dict[str, Group | KafkaRequestError]:
    out: dict[str, Group | KafkaRequestError] = {}
    for node, ids in _by_coordinator(admin, group_ids).items():
        resp = admin.send(
            request(ApiKey.DescribeGroups, groups=ids, include_authorized_operations=False), node
        )
        for g in resp.groups:
            subject = f"group {g.group_id}"
            if g.error_code:
                out[g.group_id] = KafkaRequestError(g.error_code, getattr(g, "error_message", None), subject)
            elif g.group_state == "Dead":  # before v6: unknown, or of another type
                out[g.group_id] = KafkaRequestError(GROUP_ID_NOT_FOUND, None, subject)
            else:
                consumer = g.protocol_type == "consumer"
                members = [
                    Member(
                        m.member_id,
                        getattr(m, "group_instance_id", None),
                        m.client_id,
                        m.client_host,
                        _decode_assignment(m.member_assignment) if consumer else [],
                    )
                    for m in g.members
                ]
                out[g.group_id] = Group(
                    g.group_id, "classic", g.group_state, g.protocol_data, g.protocol_type, members
                )
    return out


def describe_consumer(admin: Admin, group_ids: list[str]) -> dict[str, Group | KafkaRequestError]:
    return _describe_kip848(admin, group_ids, ApiKey.ConsumerGroupDescribe, "consumer")


def describe_share(admin: Admin, group_ids: list[str]) -> dict[str, Group | KafkaRequestError]:
    return _describe_kip848(admin, group_ids, ApiKey.ShareGroupDescribe, "share")


def _describe_kip848(
    admin: Admin, group_ids: list[str], api: ApiKey, gtype: str
) -> dict[str, Group | KafkaRequestError]:
    out: dict[str, Group | KafkaRequestError] = {}
    for node, ids in _by_coordinator(admin, group_ids).items():
        resp = admin.send(request(api, group_ids=ids, include_authorized_operations=False), node)
        for g in resp.groups:
            if g.error_code:
                out[g.group_id] = KafkaRequestError(g.error_code, g.error_message, f"group {g.group_id}")
                continue
            members = [
                Member(
                    m.member_id,
                    getattr(m, "instance_id", None),
                    m.client_id,
                    m.client_host,
                    _assignment(m.assignment),
                )
                for m in g.members
            ]
            out[g.group_id] = Group(
                g.group_id, gtype, g.group_state, g.assignor_name, gtype, members, g.group_epoch
            )
    return out


_DESCRIBE = {"classic": describe_classic, "consumer": describe_consumer, "share": describe_share}


# --- committed offsets (classic and consumer groups) --------------------------------------------
def committed_offsets(admin: Admin, group_id: str) -> dict[TopicPartition, int]:
    """Every committed offset of the group (OffsetFetch of all topics)."""
    req = request(
        ApiKey.OffsetFetch,
        groups=[{"group_id": group_id, "topics": None}],
        require_stable=False,
        min_version=8,
        max_version=OFFSET_FETCH_MAX,
    )
    resp = admin.send_to_coordinator(group_id, req)
    g = resp.groups[0]
    if g.error_code:
        raise KafkaRequestError(g.error_code, None, f"group {group_id}")
    out = {}
    for t in g.topics:
        for p in t.partitions:
            if p.error_code:
                raise KafkaRequestError(p.error_code, None, f"group {group_id}, {t.name}-{p.partition_index}")
            if p.committed_offset >= 0:
                out[(t.name, p.partition_index)] = p.committed_offset
    return out


def commit_offsets(
    admin: Admin, group_id: str, offsets: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """OffsetCommit as an admin (no member, generation -1); error code per partition."""
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (topic, p), offset in sorted(offsets.items()):
        by_topic[topic].append(
            {
                "partition_index": p,
                "committed_offset": offset,
                "committed_leader_epoch": -1,
                "committed_metadata": "",
            }
        )
    req = request(
        ApiKey.OffsetCommit,
        group_id=group_id,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        retention_time_ms=-1,
        topics=[{"name": t, "partitions": parts} for t, parts in by_topic.items()],
        max_version=OFFSET_COMMIT_MAX,
    )
    resp = admin.send_to_coordinator(group_id, req)
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def delete_offsets(
    admin: Admin, group_id: str, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """OffsetDelete; a group-level error is raised, partition errors are returned."""
    by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
    for topic, p in sorted(partitions):
        by_topic[topic].append({"partition_index": p})
    req = request(
        ApiKey.OffsetDelete,
        group_id=group_id,
        topics=[{"name": t, "partitions": parts} for t, parts in by_topic.items()],
    )
    resp = admin.send_to_coordinator(group_id, req)
    if resp.error_code:
        raise KafkaRequestError(resp.error_code, None, f"group {group_id}")
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def delete_groups(admin: Admin, group_ids: list[str]) -> dict[str, int]:
    """DeleteGroups; the error code per group."""
    out: dict[str, int] = {}
    for node, ids in _by_coordinator(admin, group_ids).items():
        resp = admin.send(request(ApiKey.DeleteGroups, groups_names=ids), node)
        out.update({r.group_id: r.error_code for r in resp.results})
    return out


# --- share groups -------------------------------------------------------------------------------
def share_offsets(admin: Admin, group_id: str) -> dict[TopicPartition, ShareOffset]:
    """DescribeShareGroupOffsets of every partition the group has a start offset for."""
    req = request(ApiKey.DescribeShareGroupOffsets, groups=[{"group_id": group_id, "topics": None}])
    resp = admin.send_to_coordinator(group_id, req)
    g = resp.groups[0]
    if g.error_code:
        raise KafkaRequestError(g.error_code, g.error_message, f"group {group_id}")
    out = {}
    for t in g.topics:
        for p in t.partitions:
            if p.error_code:
                raise KafkaRequestError(
                    p.error_code, p.error_message, f"group {group_id}, {t.topic_name}-{p.partition_index}"
                )
            out[(t.topic_name, p.partition_index)] = ShareOffset(p.start_offset, getattr(p, "lag", -1))
    return out


def alter_share_offsets(
    admin: Admin, group_id: str, offsets: Mapping[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """AlterShareGroupOffsets; a group-level error (NON_EMPTY_GROUP) is raised."""
    by_topic: dict[str, list[dict[str, int]]] = defaultdict(list)
    for (topic, p), offset in sorted(offsets.items()):
        by_topic[topic].append({"partition_index": p, "start_offset": offset})
    req = request(
        ApiKey.AlterShareGroupOffsets,
        group_id=group_id,
        topics=[{"topic_name": t, "partitions": parts} for t, parts in by_topic.items()],
    )
    resp = admin.send_to_coordinator(group_id, req)
    if resp.error_code:
        raise KafkaRequestError(resp.error_code, resp.error_message, f"group {group_id}")
    return {(t.topic_name, p.partition_index): p.error_code for t in resp.responses for p in t.partitions}


def delete_share_offsets(admin: Admin, group_id: str, topics: Iterable[str]) -> dict[str, int]:
    """DeleteShareGroupOffsets (whole topics only); the error code per topic."""
    req = request(
        ApiKey.DeleteShareGroupOffsets,
        group_id=group_id,
        topics=[{"topic_name": t} for t in sorted(set(topics))],
    )
    resp = admin.send_to_coordinator(group_id, req)
    if resp.error_code:
        raise KafkaRequestError(resp.error_code, resp.error_message, f"group {group_id}")
    return {t.topic_name: t.error_code for t in resp.responses}
