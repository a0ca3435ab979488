"""A classic consumer group: membership and rebalances, as Kafka's ClassicGroup and the
classic part of its GroupMetadataManager.

States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and Dead once deleted.
Every operation takes the current time, mutates the group, and returns ``Outcome``: the
records to persist and the responses to send once they are durable. Responses of members
parked in JoinGroup/SyncGroup are produced by the later operation or timer that completes
them. Timers (member sessions, the join phase, pending syncs) are deadlines that
``on_timer(now)`` handles; the asyncio layer only calls it when ``next_deadline()`` passes.

Persistence follows Kafka: a group metadata record (value v3, with current_state_timestamp)
is written when the leader's SyncGroup completes a rebalance, when a rebalance ends with no
members (the group becomes Empty), and when a static member is replaced; tombstones when the
group is deleted or expires. ``apply`` (shared with log replay) records what was persisted.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from kcoord.classic.member import NEW_MEMBER_JOIN_TIMEOUT_MS, Member
from kcoord.classic.records import GroupMetadataKey, GroupMetadataValue
from kcoord.groups.classic_protocol import JoinRequest, JoinResult, SyncResult
from kcoord.groups.records import OffsetCommitValue, commit_time
from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Outcome, Record, Responder


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2147483647


class ClassicGroup:
    def __init__(self, group_id: str, config: GroupConfig, now: int) -> None:
        self.group_id = group_id
        self.config = config
        self.state = GroupState.EMPTY
        self.state_timestamp = now
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation = 0
        self.leader: str | None = None
        self.members: dict[str, Member] = {}  # insertion order: the next leader is the oldest member
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_members: dict[str, int] = {}  # MEMBER_ID_REQUIRED members -> expiry
        self.pending_sync: set[str] = set()
        # How many members support each protocol (Kafka's supportedProtocols): a join checks its
        # protocols against the group's in O(its protocols), not O(members).
        self._protocol_counts: Counter[str] = Counter()
        # What the log holds for this group (set by apply, shared with replay).
        self.persisted: GroupMetadataValue | None = None
        # Timers.
        self.join_deadline: int | None = None
        self.initial_delay_remaining: int | None = None  # set while in the initial delayed join
        self.new_member_added = False
        self.sync_deadline: int | None = None

    # --- basic facts ---------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now: int) -> None:
        self.state = state
        self.state_timestamp = now

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def has_all_members_joined(self) -> bool:
        return all(m.awaiting_join is not None for m in self.members.values()) and not self.pending_members

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, c in self._protocol_counts.items() if c == n}

    def _count_protocols(self, member: Member, sign: int) -> None:
        counts = self._protocol_counts
        for name in member.protocol_names():
            counts[name] += sign
            if not counts[name]:
                del counts[name]

    def set_protocols(self, member: Member, protocols: list[tuple[str, bytes]]) -> None:
        """Replace a member's protocols (the counts follow)."""
        self._count_protocols(member, -1)
        member.protocols = protocols
        self._count_protocols(member, 1)

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = [n for n, _ in protocols]
        if self.is_in(GroupState.EMPTY) or not self.members:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self) -> str:
        return select_protocol([m.protocol_names() for m in self.members.values()])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members consume (consumer protocol only); None if unknown."""
        if self.protocol_type != "consumer":
            return None
        topics: set[str] = set()
        for m in self.members.values():
            t = m.subscription_topics(self.protocol_name)
            if t is None:
                return None
            topics |= t
        return topics

    # --- offsets (the rules are in offsets.py and the group layer's offsets.py) ----------------
    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Whether members consume ``topic`` (their offsets of it never expire nor are deleted)."""
        if self.is_in(GroupState.EMPTY) or not self.members:
            return False
        topics = self.subscribed_topics()
        return topics is not None and topic in topics

    def offset_expiration_base(self) -> Callable[[OffsetCommitValue], int] | None:
        """KIP-211, as Kafka's ClassicGroup.offsetExpirationCondition: an Empty group with a
        protocol type expires its offsets once it has been Empty that long (from the commit for
        records older than current_state_timestamp); a Stable consumer group the offsets of topics
        no member consumes, from their commit; a standalone group each offset from its commit; a
        group in any other situation nothing."""
        if self.is_in(GroupState.DEAD):
            return None
        if not self.protocol_type:
            return commit_time
        if self.is_in(GroupState.EMPTY):
            empty_since = self.state_timestamp
            return commit_time if empty_since < 0 else (lambda _v: empty_since)
        if self.is_in(GroupState.STABLE) and self.subscribed_topics() is not None:
            return commit_time
        return None

    # --- persistence -------------------------------------------------------------------
    def to_record_value(self) -> GroupMetadataValue:
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader,
            current_state_timestamp=self.state_timestamp,
            members=tuple(m.to_record(self.protocol_name) for m in self.members.values()),
        )

    def metadata_record(self) -> Record:
        return (GroupMetadataKey(self.group_id), self.to_record_value())

    def load(self, value: GroupMetadataValue, now: int) -> None:
        """Rebuild the live group from its last record after replay.

        As Kafka's coordinator does on load, members come back with fresh session timers: those
        that keep heartbeating stay, the others expire and the group rebalances.
        """
        self.protocol_type = value.protocol_type or None
        self.protocol_name = value.protocol
        self.generation = value.generation
        self.leader = value.leader
        # -1 when the record predates KIP-211 (value v0/v1): an Empty group then expires each
        # offset from its commit timestamp, as Kafka's ClassicGroup does, not from load time.
        self.state_timestamp = value.current_state_timestamp
        self.members = {}
        self.static_members = {}
        self._protocol_counts = Counter()
        for m in value.members:
            member = Member.from_record(m, value.protocol_type, value.protocol)
            member.expires_at = now + member.session_timeout_ms
            self.members[member.member_id] = member
            self._count_protocols(member, 1)
            if member.group_instance_id is not None:
                self.static_members[member.group_instance_id] = member.member_id
        self.state = GroupState.STABLE if self.members else GroupState.EMPTY
        if self.leader not in self.members:
            self.leader = next(iter(self.members), None)

    # --- membership helpers ----------------------------------------------------------------
    def _add_member(self, member: Member, responder: Responder | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader is None:
            self.leader = member.member_id
        member.awaiting_join = responder

    def _remove_member(self, member_id: str, out: Outcome) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._count_protocols(member, -1)
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        out.respond(member.awaiting_join, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        out.respond(member.awaiting_sync, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member.awaiting_join = member.awaiting_sync = None
        if self.leader == member_id:
            self.leader = next(iter(self.members), None)

    def _validate_existing(self, member_id: str, instance_id: str | None) -> int:
        if instance_id is None:
            return 0 if member_id in self.members else ErrorCode.UNKNOWN_MEMBER_ID
        existing = self.static_members.get(instance_id)
        if existing is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if existing != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        return 0

    def _accept_joining(self, member_id: str) -> bool:
        if self.is_in(GroupState.EMPTY, GroupState.DEAD):
            return True
        if self.is_in(GroupState.PREPARING_REBALANCE):
            if len(self.members) < self.config.max_size:
                return True  # fewer awaiting than members: no count needed (group.max.size unset)
            m = self.members.get(member_id)
            awaiting = sum(1 for x in self.members.values() if x.awaiting_join is not None)
            return (m is not None and m.awaiting_join is not None) or awaiting < self.config.max_size
        return member_id in self.members or len(self.members) < self.config.max_size

    def _current_generation_result(self, member_id: str, skip_assignment: bool = False) -> JoinResult:
        is_leader = member_id == self.leader
        members = (
            [
                (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()
            ]
            if is_leader
            else []
        )
        return JoinResult(
            0,
            member_id,
            self.generation,
            self.protocol_type,
            self.protocol_name,
            self.leader or "",
            members,
            skip_assignment and is_leader,
        )

    # --- JoinGroup ---------------------------------------------------------------------
    def join(self, req: JoinRequest, responder: Responder, now: int) -> Outcome:
        out = Outcome()
        cfg = self.config
        if self.is_in(GroupState.DEAD):
            out.respond(responder, JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id))
            return out
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            out.respond(responder, JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
            return out
        if not self._accept_joining(req.member_id):
            if req.member_id in self.members:
                self._remove_member(req.member_id, out)
                out.extend(self._maybe_rebalance_or_complete_join(now))
            out.respond(responder, JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id))
            return out
        if not self.supports_protocols(req.protocol_type, req.protocols):
            out.respond(responder, JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
            return out
        if req.member_id == "":
            new_id = f"{req.client_id}-{uuid.uuid4()}"
            if req.group_instance_id is not None:
                old = self.static_members.get(req.group_instance_id)
                if old is not None:
                    return self._replace_static_member(req, old, new_id, responder, now)
                return self._add_and_rebalance(req, new_id, responder, now)
            if req.require_known_member_id:
                self.pending_members[new_id] = now + req.session_timeout_ms
                out.respond(responder, JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_id))
                return out
            return self._add_and_rebalance(req, new_id, responder, now)
        if req.member_id in self.pending_members:
            del self.pending_members[req.member_id]
            return self._add_and_rebalance(req, req.member_id, responder, now)
        error = self._validate_existing(req.member_id, req.group_instance_id)
        if error:
            out.respond(responder, JoinResult(error, req.member_id))
            return out
        member = self.members[req.member_id]
        if self.is_in(GroupState.PREPARING_REBALANCE):
            return self._update_and_rebalance(member, req, responder, now)
        if self.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                out.respond(responder, self._current_generation_result(member.member_id))
                return out
            return self._update_and_rebalance(member, req, responder, now)
        if self.is_in(GroupState.STABLE):
            if member.member_id == self.leader or not member.matches(req.protocols):
                return self._update_and_rebalance(member, req, responder, now)
            member.expires_at = now + member.session_timeout_ms
            out.respond(responder, self._current_generation_result(member.member_id))
            return out
        out.respond(responder, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
        return out

    def _add_and_rebalance(self, req: JoinRequest, member_id: str, responder: Responder, now: int) -> Outcome:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            list(req.protocols),
        )
        member.is_new = True
        if self.is_in(GroupState.PREPARING_REBALANCE) and self.generation == 0:
            self.new_member_added = True
        self._add_member(member, responder)
        # A parked JoinGroup of a new member cannot heartbeat; it times out on its own.
        member.expires_at = now + NEW_MEMBER_JOIN_TIMEOUT_MS
        return self._maybe_rebalance_or_complete_join(now)

    def _update_and_rebalance(
        self, member: Member, req: JoinRequest, responder: Responder, now: int
    ) -> Outcome:
        self.set_protocols(member, list(req.protocols))
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        out = Outcome()
        if member.awaiting_join is not None:
            # A duplicate JoinGroup replaces the parked one, as Kafka does.
            out.respond(member.awaiting_join, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        member.awaiting_join = responder
        out.extend(self._maybe_rebalance_or_complete_join(now))
        return out

    def _replace_static_member(
        self, req: JoinRequest, old_id: str, new_id: str, responder: Responder, now: int
    ) -> Outcome:
        out = Outcome()
        member = self.members.pop(old_id)
        out.respond(member.awaiting_join, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_id))
        out.respond(member.awaiting_sync, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        member.awaiting_join = member.awaiting_sync = None
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[req.group_instance_id] = new_id  # type: ignore[index]
        if self.leader == old_id:
            self.leader = new_id
        member.expires_at = now + req.session_timeout_ms
        self.set_protocols(member, list(req.protocols))
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        member.client_id, member.client_host = req.client_id, req.client_host
        if self.is_in(GroupState.STABLE):
            if self.protocol_name == self.select_protocol():
                # The static member takes its old place: persist the new member id, no rebalance.
                out.records.append(self.metadata_record())
                out.respond(responder, self._current_generation_result(new_id, skip_assignment=True))
                return out
            member.awaiting_join = responder
            out.extend(self._maybe_rebalance_or_complete_join(now))
            return out
        member.awaiting_join = responder
        if self.is_in(GroupState.COMPLETING_REBALANCE):
            out.extend(self._prepare_rebalance(now))
        else:
            out.extend(self._maybe_complete_join(now))
        return out

    # --- rebalance machinery --------------------------------------------------------------
    def rebalance(self, now: int) -> Outcome:
        """Ask every member to join again (a group just made from a consumer group)."""
        return self._prepare_rebalance(now)

    def _maybe_rebalance_or_complete_join(self, now: int) -> Outcome:
        if self.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            return self._prepare_rebalance(now)
        return self._maybe_complete_join(now)

    def _prepare_rebalance(self, now: int) -> Outcome:
        out = Outcome()
        if self.is_in(GroupState.COMPLETING_REBALANCE):
            for m in self.members.values():
                out.respond(m.awaiting_sync, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
                m.awaiting_sync = None
                m.assignment = b""
        self.sync_deadline = None
        initial = self.is_in(GroupState.EMPTY)
        self.transition(GroupState.PREPARING_REBALANCE, now)
        if initial:
            delay = self.config.initial_rebalance_delay_ms
            self.initial_delay_remaining = max(self.rebalance_timeout_ms() - delay, 0)
            self.join_deadline = now + delay
            return out
        self.initial_delay_remaining = None
        self.join_deadline = now + self.rebalance_timeout_ms()
        out.extend(self._maybe_complete_join(now))
        return out

    def _maybe_complete_join(self, now: int) -> Outcome:
        if (
            self.is_in(GroupState.PREPARING_REBALANCE)
            and self.has_all_members_joined()
            and self.initial_delay_remaining is None
        ):
            return self._complete_join(now)
        return Outcome()

    def _complete_join(self, now: int) -> Outcome:
        out = Outcome()
        self.join_deadline = None
        self.initial_delay_remaining = None
        for m in [m for m in self.members.values() if m.awaiting_join is None]:
            if m.group_instance_id is None:
                self._remove_member(m.member_id, out)
        self.generation += 1
        self.pending_sync.clear()
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY, now)
            out.records.append(self.metadata_record())
            return out
        for m in self.members.values():
            result = self._current_generation_result(m.member_id)
            out.respond(m.awaiting_join, result)
            m.awaiting_join = None
            m.is_new = False
            m.expires_at = now + m.session_timeout_ms
            self.pending_sync.add(m.member_id)
        self.sync_deadline = now + self.rebalance_timeout_ms()
        return out

    # --- SyncGroup ---------------------------------------------------------------------
    def sync(
        self,
        member_id: str,
        instance_id: str | None,
        generation: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        responder: Responder,
        now: int,
    ) -> Outcome:
        out = Outcome()
        if self.is_in(GroupState.DEAD):
            out.respond(responder, SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return out
        error = self._validate_existing(member_id, instance_id)
        if not error and generation != self.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        if not error and (
            (
                protocol_type is not None
                and self.protocol_type is not None
                and protocol_type != self.protocol_type
            )
            or (
                protocol_name is not None
                and self.protocol_name is not None
                and protocol_name != self.protocol_name
            )
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error:
            out.respond(responder, SyncResult(error))
            return out
        member = self.members[member_id]
        if self.is_in(GroupState.PREPARING_REBALANCE):
            out.respond(responder, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
            return out
        if self.is_in(GroupState.STABLE):
            self.pending_sync.discard(member_id)
            member.expires_at = now + member.session_timeout_ms
            out.respond(responder, self._sync_result(member))
            return out
        if not self.is_in(GroupState.COMPLETING_REBALANCE):
            out.respond(responder, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return out
        member.awaiting_sync = responder
        self.pending_sync.discard(member_id)
        member.expires_at = now + member.session_timeout_ms
        if member_id != self.leader:
            return out
        for m in self.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        self.transition(GroupState.STABLE, now)
        out.records.append(self.metadata_record())
        for m in self.members.values():
            out.respond(m.awaiting_sync, self._sync_result(m))
            m.awaiting_sync = None
        return out

    def _sync_result(self, member: Member) -> SyncResult:
        return SyncResult(0, member.assignment, self.protocol_type, self.protocol_name)

    # --- Heartbeat -----------------------------------------------------------------------
    def heartbeat(self, member_id: str, instance_id: str | None, generation: int, now: int) -> int:
        if self.is_in(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_existing(member_id, instance_id)
        if error:
            return error
        if generation != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        if self.is_in(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = self.members[member_id]
        member.expires_at = now + member.session_timeout_ms
        if self.is_in(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return 0

    # --- LeaveGroup ----------------------------------------------------------------------
    def leave(self, members: list[tuple[str, str | None]], now: int) -> tuple[Outcome, list[int]]:
        """Remove members (member id, group.instance.id); per-member error codes."""
        out = Outcome()
        errors: list[int] = []
        removed = False
        for member_id, instance_id in members:
            if self.is_in(GroupState.DEAD):
                errors.append(ErrorCode.COORDINATOR_NOT_AVAILABLE)
                continue
            if member_id == "" and instance_id is not None:
                target = self.static_members.get(instance_id)
                if target is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                member_id = target
            elif instance_id is not None:
                error = self._validate_existing(member_id, instance_id)
                if error:
                    errors.append(error)
                    continue
            elif member_id in self.pending_members:
                del self.pending_members[member_id]
                errors.append(0)
                removed = True
                continue
            elif member_id not in self.members:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            self._remove_member(member_id, out)
            errors.append(0)
            removed = True
        if removed:
            out.extend(self._after_removal(now))
        return out, errors

    def _after_removal(self, now: int) -> Outcome:
        if self.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return self._maybe_rebalance_or_complete_join(now)
        if self.is_in(GroupState.PREPARING_REBALANCE):
            return self._maybe_complete_join(now)
        return Outcome()

    # --- timers --------------------------------------------------------------------------
    def next_deadline(self) -> int | None:
        # Asked after every operation on the group (the actor arms its timer): one pass, no list.
        best = self.join_deadline
        sync = self.sync_deadline
        if sync is not None and (best is None or sync < best):
            best = sync
        for m in self.members.values():
            if best is None or m.expires_at < best:
                best = m.expires_at
        for expiry in self.pending_members.values():
            if best is None or expiry < best:
                best = expiry
        return best

    def on_timer(self, now: int) -> Outcome:
        out = Outcome()
        for pid, expiry in list(self.pending_members.items()):
            if expiry <= now:
                del self.pending_members[pid]
                out.extend(self._maybe_complete_join(now))
        expired = []
        for m in self.members.values():
            if m.expires_at > now:
                continue
            if (m.awaiting_join is not None or m.awaiting_sync is not None) and not m.is_new:
                m.expires_at = now + m.session_timeout_ms  # parked requests count as heartbeats
                continue
            expired.append(m.member_id)
        for member_id in expired:
            if member_id in self.members:
                self._remove_member(member_id, out)
                out.extend(self._after_removal(now))
        if (
            self.join_deadline is not None
            and self.join_deadline <= now
            and self.is_in(GroupState.PREPARING_REBALANCE)
        ):
            if (
                self.initial_delay_remaining is not None
                and self.new_member_added
                and self.initial_delay_remaining > 0
            ):
                self.new_member_added = False
                delay = min(self.config.initial_rebalance_delay_ms, self.initial_delay_remaining)
                self.initial_delay_remaining = max(
                    self.initial_delay_remaining - self.config.initial_rebalance_delay_ms, 0
                )
                self.join_deadline = now + delay
            else:
                out.extend(self._complete_join(now))
        if self.sync_deadline is not None and self.sync_deadline <= now:
            self.sync_deadline = None
            if self.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and self.pending_sync:
                for member_id in list(self.pending_sync):
                    self._remove_member(member_id, out)
                self.pending_sync.clear()
                out.extend(self._prepare_rebalance(now))
        return out

    # --- deletion ------------------------------------------------------------------------
    def mark_dead(self, now: int) -> Outcome:
        out = Outcome()
        for member_id in list(self.members):
            self._remove_member(member_id, out)
        self.transition(GroupState.DEAD, now)
        self.join_deadline = self.sync_deadline = None
        self.pending_members.clear()
        return out


def select_protocol(members: Sequence[Sequence[str]]) -> str:
    """Kafka's ClassicGroup.selectProtocol: of the protocols every member supports, the one most
    members list first (ties: the one listed first earliest). ``members``: each one's protocol
    names in its order of preference."""
    candidates = set(members[0]).intersection(*members[1:]) if members else set()
    votes: Counter[str] = Counter()
    order: list[str] = []
    for names in members:
        for p in names:
            if p in candidates:
                votes[p] += 1
                if p not in order:
                    order.append(p)
                break
    if not order:
        raise ValueError("the members share no protocol")
    return max(order, key=lambda p: (votes[p], -order.index(p)))
