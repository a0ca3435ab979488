"""A synchronous stand-in for the group actor: runs group operations on a GroupStore with a
manual clock, applies their records, appends them to a real coordinator Log, and hands out
responses, exactly as ``coordinator.GroupActor`` does minus the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kcoord.classic import offsets as rules
from kcoord.classic.coordinator import GroupCoordinator
from kcoord.classic.group import ClassicGroup, GroupConfig, JoinRequest, Outcome
from kcoord.classic.member import JoinResult, SyncResult
from kcoord.classic.records import encode_key, encode_value
from kcoord.classic.store import GroupStore
from kcoord.clock import ManualClock
from kcoord.protocol import records as batches
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig

CONSUMER = "consumer"


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0 naming ``topics``."""
    out = bytearray(b"\x00\x00") + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    return bytes(out + b"\xff\xff\xff\xff")  # null user data


class Inbox:
    """Collects responses delivered to one responder."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __call__(self, value: Any) -> None:
        self.values.append(value)

    @property
    def last(self) -> Any:
        return self.values[-1] if self.values else None


class Harness:
    def __init__(
        self, directory: Path, config: GroupConfig | None = None, segment_bytes: int = 1 << 30
    ) -> None:
        self.clock = ManualClock()
        self.config = config or GroupConfig(initial_rebalance_delay_ms=3000)
        self.store = GroupStore(self.config)
        self.directory = directory
        self.flusher = Flusher("os")
        self.log = Log.open(directory, LogConfig(segment_bytes=segment_bytes, retention_ms=-1), self.flusher)
        self.records_written = 0

    # --- the actor's job ------------------------------------------------------------------
    def run(
        self, group_id: str, op: Callable[[ClassicGroup | None, int], Outcome], create: bool = False
    ) -> Outcome:
        now = self.clock.now_ms()
        group = self.store.get_or_create(group_id, now) if create else self.store.get(group_id)
        out = op(group, now)
        for key, value in out.records:
            self.store.apply(key, value, now)
        if out.records:
            data = batches.build_batch([(encode_key(k), encode_value(v)) for k, v in out.records], now)
            self.log.append(data, [batches.read_header(data)], now)
            self.records_written += len(out.records)
        for responder, value in out.responses:
            responder(value)
        return out

    def group(self, group_id: str) -> ClassicGroup:
        g = self.store.get(group_id)
        assert g is not None
        return g

    # --- operations -----------------------------------------------------------------------
    def join(
        self,
        group_id: str,
        member_id: str = "",
        instance: str | None = None,
        topics: tuple[str, ...] = ("t",),
        protocols: list[tuple[str, bytes]] | None = None,
        session_ms: int = 10_000,
        rebalance_ms: int = 60_000,
        version: int = 5,
        protocol_type: str = CONSUMER,
    ) -> Inbox:
        inbox = Inbox()
        req = JoinRequest(
            member_id,
            instance,
            "client",
            "/127.0.0.1",
            session_ms,
            rebalance_ms,
            protocol_type,
            protocols or [("range", subscription(*topics))],
            require_known_member_id=version >= 4,
        )

        def op(g: ClassicGroup | None, now: int) -> Outcome:
            if g is None:
                out = Outcome()
                out.respond(inbox, JoinResult(25, member_id))  # UNKNOWN_MEMBER_ID
                return out
            return g.join(req, inbox, now)

        self.run(group_id, op, create=member_id == "")
        return inbox

    def join_fully(self, group_id: str, **kw: Any) -> tuple[str, Inbox]:
        """JoinGroup as a v4+ client does: get a member id, then join with it."""
        first = self.join(group_id, **kw)
        result: JoinResult | None = first.last
        if result is None:  # parked right away (a static member, or before v4): find its id
            instance = kw.get("instance")
            g = self.group(group_id)
            mid = g.static_members[instance] if instance else list(g.members)[-1]
            return mid, first
        if result.error == 79:  # MEMBER_ID_REQUIRED
            kw.pop("member_id", None)
            second = self.join(group_id, member_id=result.member_id, **kw)
            return result.member_id, second
        return result.member_id, first

    def sync(
        self,
        group_id: str,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        instance: str | None = None,
    ) -> Inbox:
        inbox = Inbox()

        def op(g: ClassicGroup | None, now: int) -> Outcome:
            if g is None:
                out = Outcome()
                out.respond(inbox, SyncResult(25))
                return out
            return g.sync(member_id, instance, generation, None, None, assignments or {}, inbox, now)

        self.run(group_id, op)
        return inbox

    def heartbeat(self, group_id: str, member_id: str, generation: int, instance: str | None = None) -> int:
        inbox = Inbox()

        def op(g: ClassicGroup | None, now: int) -> Outcome:
            out = Outcome()
            out.respond(inbox, 25 if g is None else g.heartbeat(member_id, instance, generation, now))
            return out

        self.run(group_id, op)
        return inbox.last

    def leave(self, group_id: str, *members: tuple[str, str | None]) -> list[int]:
        inbox = Inbox()

        def op(g: ClassicGroup | None, now: int) -> Outcome:
            if g is None:
                out = Outcome()
                out.respond(inbox, [25] * len(members))
                return out
            out, errors = g.leave(list(members), now)
            out.respond(inbox, errors)
            return out

        self.run(group_id, op)
        return inbox.last

    def commit(
        self,
        group_id: str,
        offsets: dict[tuple[str, int], int],
        member_id: str = "",
        generation: int = -1,
        retention_ms: int = -1,
        metadata: str = "",
    ) -> int:
        inbox = Inbox()
        commits = [(t, p, o, -1, metadata) for (t, p), o in offsets.items()]

        def op(g: ClassicGroup | None, now: int) -> Outcome:
            out = Outcome()
            if g is None:
                out.respond(inbox, 22)  # ILLEGAL_GENERATION
                return out
            error = rules.validate_commit(g, member_id, None, generation)
            if error:
                out.respond(inbox, error)
                return out
            out = rules.commit_records(g, commits, now, retention_ms)
            out.respond(inbox, 0)
            return out

        exists = self.store.get(group_id) is not None
        self.run(group_id, op, create=generation < 0 and not exists)
        return inbox.last

    def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        g = self.store.get(group_id)
        if g is None:
            return {}
        return {(t, p): v.offset for t, parts in g.offsets.items() for p, v in parts.items()}

    def tick(self, ms: int) -> None:
        """Advance the clock and fire every group's due timers."""
        self.clock.advance(ms)
        for gid in list(self.store.groups):
            g = self.store.get(gid)
            if g is not None and (d := g.next_deadline()) is not None and d <= self.clock.now_ms():
                self.run(gid, lambda g, now: g.on_timer(now) if g is not None else Outcome())

    def expire(self, retention_ms: int) -> None:
        for gid in list(self.store.groups):
            self.run(gid, lambda g, now: rules.expire(g, now, retention_ms) if g is not None else Outcome())

    def delete_group(self, group_id: str) -> int:
        inbox = Inbox()

        def op(g: ClassicGroup | None, now: int) -> Outcome:
            if g is None:
                out = Outcome()
                out.respond(inbox, 69)  # GROUP_ID_NOT_FOUND
                return out
            code, out = rules.delete_group(g, now)
            out.respond(inbox, code)
            return out

        self.run(group_id, op)
        return inbox.last

    # --- restart ---------------------------------------------------------------------------
    def replay(self) -> GroupStore:
        """A fresh store rebuilt from the log, as the broker does on start."""
        self.log.close()
        self.log = Log.open(self.directory, self.log.config, self.flusher)
        store = GroupStore(self.config)
        GroupCoordinator._replay(self.log, store, self.clock.now_ms(), 0)
        return store

    def compact(self, delete_retention_ms: int = 86_400_000) -> None:
        """Roll and run the real cleaner over every closed segment."""
        from kcoord.storage.cleaner import clean

        self.log.roll()
        asyncio.run(clean(self.log, self.clock.now_ms(), delete_retention_ms))
