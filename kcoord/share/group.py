"""A share group (KIP-932): membership, epochs, assignment, and its share-partitions.

Membership follows Kafka 4.x's GroupMetadataManager.shareGroupHeartbeat: the client names its
own member id; epoch 0 joins (and creates the group), -1 leaves; the group epoch moves when
a member joins, leaves, changes its subscription, or the subscribed topics change (created,
deleted, partitions added); the target assignment is then recomputed (assignor.py) and members
move straight to it on their next heartbeat (share groups have no revocation phase). A member
whose session (share.session.timeout.ms) lapses is removed, and the records it had acquired
are released.

The group also owns its share-partitions (share/partition.py), so one actor serializes
heartbeats, fetches and acknowledgements of a group. Persisted: the group epoch (record type
102, so epochs never go back after a restart), config overrides (103), and share-partition
state (100/101). Members are not persisted: after a restart they are fenced and rejoin.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kcoord.groups.records import GroupConfigKey, GroupConfigValue
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Outcome
from kcoord.share.assignor import Assignment, assign
from kcoord.share.partition import SharePartition
from kcoord.share.records import ShareGroupKey, ShareGroupValue
from kcoord.share.topics import TopicLookup

LEAVE_EPOCH = -1
JOIN_EPOCH = 0


@dataclass
class ShareMember:
    member_id: str
    member_epoch: int
    previous_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed: list[str]
    session_timeout_ms: int
    expires_at: int
    assignment: Assignment = field(default_factory=dict)


@dataclass
class HeartbeatResult:
    error: int
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None  # None: unchanged since the member last heard it


class ShareGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareMember] = {}
        self.target: dict[str, Assignment] = {}
        self.topics_fingerprint: tuple[tuple[str, str, int], ...] = ()
        self.configs: dict[str, str] = {}
        self.partitions: dict[tuple[uuid.UUID, int], SharePartition] = {}
        self.dead = False
        self.persisted_epoch = 0  # set by apply (log replay and live writes alike)
        self.rebalances = 0

    # --- facts -------------------------------------------------------------------------
    @property
    def state(self) -> str:
        if self.dead:
            return "Dead"
        return "Stable" if self.members else "Empty"

    def subscribed_topic_names(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def _fingerprint(self, lookup: TopicLookup) -> tuple[tuple[str, str, int], ...]:
        out = []
        for name in sorted(self.subscribed_topic_names()):
            found = lookup(name)
            if found is not None:
                out.append((name, str(found[0]), found[1]))
        return tuple(out)

    # --- records -----------------------------------------------------------------------
    def epoch_record(self) -> tuple[ShareGroupKey, ShareGroupValue]:
        return ShareGroupKey(self.group_id), ShareGroupValue(self.group_epoch)

    def config_record(self) -> tuple[GroupConfigKey, GroupConfigValue | None]:
        value = GroupConfigValue(tuple(sorted(self.configs.items()))) if self.configs else None
        return GroupConfigKey(self.group_id), value

    # --- heartbeat -----------------------------------------------------------------------
    def heartbeat(
        self,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed: list[str] | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        max_size: int,
        lookup: TopicLookup,
        now: int,
    ) -> tuple[HeartbeatResult, Outcome]:
        out = Outcome()
        if member_epoch == LEAVE_EPOCH:
            if member_id in self.members:
                out.extend(self._remove(member_id, now, lookup))
            return HeartbeatResult(
                0, member_id=member_id, member_epoch=LEAVE_EPOCH, heartbeat_interval_ms=heartbeat_interval_ms
            ), out
        member = self.members.get(member_id)
        if member is None:
            if member_epoch != JOIN_EPOCH:
                return HeartbeatResult(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"member {member_id} is not in the group",
                    member_id=member_id,
                ), out
            if len(self.members) >= max_size:
                return HeartbeatResult(
                    ErrorCode.GROUP_MAX_SIZE_REACHED,
                    f"share group {self.group_id} has reached its maximum size {max_size}",
                    member_id=member_id,
                ), out
            member = ShareMember(
                member_id,
                0,
                0,
                client_id,
                client_host,
                rack_id,
                list(subscribed or []),
                session_timeout_ms,
                now + session_timeout_ms,
            )
            self.members[member_id] = member
            changed = True
        else:
            if (
                member_epoch != JOIN_EPOCH
                and member_epoch != member.member_epoch
                and member_epoch != member.previous_epoch
            ):
                return HeartbeatResult(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"member epoch {member_epoch} is not {member.member_epoch}",
                    member_id=member_id,
                ), out
            changed = subscribed is not None and sorted(subscribed) != sorted(member.subscribed)
            if subscribed is not None:
                member.subscribed = list(subscribed)
            if rack_id is not None:
                member.rack_id = rack_id
            member.client_id, member.client_host = client_id, client_host
        member.session_timeout_ms = session_timeout_ms
        member.expires_at = now + session_timeout_ms
        fingerprint = self._fingerprint(lookup)
        if changed or fingerprint != self.topics_fingerprint:
            out.extend(self._bump_epoch(fingerprint, lookup))
        before = member.assignment
        if member.member_epoch != self.assignment_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
            member.assignment = self.target.get(member_id, {})
        full = member_epoch == JOIN_EPOCH or subscribed is not None
        assignment = member.assignment if full or member.assignment != before else None
        return HeartbeatResult(
            0,
            member_id=member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=heartbeat_interval_ms,
            assignment=assignment,
        ), out

    def _bump_epoch(self, fingerprint: tuple[tuple[str, str, int], ...], lookup: TopicLookup) -> Outcome:
        out = Outcome()
        self.topics_fingerprint = fingerprint
        self.group_epoch += 1
        self.rebalances += 1
        subscriptions = {}
        partitions: dict[uuid.UUID, int] = {}
        for m in self.members.values():
            topics = set()
            for name in m.subscribed:
                found = lookup(name)
                if found is not None:
                    topics.add(found[0])
                    partitions[found[0]] = found[1]
            subscriptions[m.member_id] = topics
        self.target = assign(subscriptions, partitions, {m: self.target.get(m, {}) for m in self.members})
        self.assignment_epoch = self.group_epoch
        out.records.append(self.epoch_record())
        return out

    def _remove(self, member_id: str, now: int, lookup: TopicLookup) -> Outcome:
        out = Outcome()
        self.members.pop(member_id, None)
        self.target.pop(member_id, None)
        for sp in self.partitions.values():
            out.records.extend(sp.release_member(member_id, now))
        out.extend(self._bump_epoch(self._fingerprint(lookup), lookup))
        return out

    # --- timers --------------------------------------------------------------------------
    def next_deadline(self) -> int | None:
        deadlines = [m.expires_at for m in self.members.values()]
        for sp in self.partitions.values():
            d = sp.next_deadline()
            if d is not None:
                deadlines.append(d)
        return min(deadlines) if deadlines else None

    def on_timer(self, now: int, lookup: TopicLookup) -> Outcome:
        out = Outcome()
        for member_id in [m.member_id for m in self.members.values() if m.expires_at <= now]:
            out.extend(self._remove(member_id, now, lookup))
        for sp in self.partitions.values():
            out.records.extend(sp.on_timer(now))
        return out

    # --- lifecycle -----------------------------------------------------------------------
    def delete(self) -> Outcome:
        """DeleteGroups: tombstones for everything the group wrote (the caller checks Empty)."""
        out = Outcome()
        for sp in self.partitions.values():
            out.records.extend(sp.delete_records())
        out.records.append((ShareGroupKey(self.group_id), None))
        if self.configs:
            out.records.append((GroupConfigKey(self.group_id), None))
        self.dead = True
        return out

    def snapshot(self) -> dict[str, Any]:
        """What survives a restart (for replay tests)."""
        return {
            "epoch": self.persisted_epoch,
            "configs": dict(self.configs),
            "partitions": {k: sp.durable_view() for k, sp in self.partitions.items()},
        }
