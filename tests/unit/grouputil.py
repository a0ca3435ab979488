"""Classic group operations run through the production coordinator shard, synchronously.

``Harness.run`` is what the runtime's actor does for one operation, minus the event loop and the
batching of a flush round: ``CoordinatorShard.run`` (the operation, then its records through the
store's one ``replay``) and ``CoordinatorShard.append`` (the records' bytes, linked and encoded
by the registry, to a real coordinator log); then the answers. ``replay`` loads a fresh store from
the log through ``CoordinatorShard.load``, as the broker does on start.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kcoord.apis.groups import SyncRequest, heartbeat_op, join_op, leave_op, sync_op
from kcoord.classic import offsets as rules
from kcoord.classic.group import ClassicGroup, GroupConfig
from kcoord.classic.store import ClassicGroups
from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig
from kcoord.consumer.group import HeartbeatRequest, HeartbeatResult
from kcoord.consumer.store import ConsumerGroups
from kcoord.groups.classic_protocol import JoinRequest, JoinResult
from kcoord.groups.offsets import commit_records
from kcoord.groups.store import GroupStore
from kcoord.protocol import records as batches
from kcoord.runtime.outcome import Operation, Outcome
from kcoord.runtime.shard import CoordinatorShard
from kcoord.server.coordinators import group_records, group_store
from kcoord.share.config import SharePartitionConfig
from kcoord.share.store import ShareGroups
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


class FakeTopics:
    """Topics as groups see them, from a dict name -> (id, partition count) a test may change."""

    def __init__(self, topics: dict[str, tuple[Any, int]] | Callable[[str], Any] | None = None) -> None:
        names = None if callable(topics) else ({} if topics is None else topics)
        self._lookup = topics if callable(topics) else names.get  # type: ignore[union-attr]
        self._names = names
        self.version = 0

    def put(self, name: str, partitions: int) -> None:
        """Create a topic, or give it more partitions (the data plane's version moves)."""
        assert isinstance(self._names, dict)
        found = self._names.get(name)
        self._names[name] = (found[0] if found else uuid.uuid5(uuid.NAMESPACE_OID, name), partitions)
        self.version += 1

    def delete(self, name: str) -> None:
        assert isinstance(self._names, dict)
        del self._names[name]
        self.version += 1

    def lookup(self, name: str) -> Any:
        return self._lookup(name)

    def names(self) -> list[str]:
        return list(self._names or {})

    def name_of(self, topic_id: Any) -> str | None:
        return next((n for n, (i, _) in (self._names or {}).items() if i == topic_id), None)


def new_store(
    config: GroupConfig,
    topics: Any = None,
    records_available: Any = None,
    consumer_rebalanced: Callable[[], None] = lambda: None,
    **settings: Any,
) -> GroupStore:
    """The GroupStore the broker builds for a coordinator partition, with ``config``'s classic
    group rules and broker ``settings`` (BrokerConfig field names)."""
    broker_config = BrokerConfig(
        group_min_session_timeout_ms=config.min_session_timeout_ms,
        group_max_session_timeout_ms=config.max_session_timeout_ms,
        group_initial_rebalance_delay_ms=config.initial_rebalance_delay_ms,
        group_max_size=config.max_size,
        **settings,
    )
    view = topics if isinstance(topics, FakeTopics) else FakeTopics(topics)
    return group_store(broker_config, view, records_available or (lambda _gid: None), consumer_rebalanced)


def classic(store: GroupStore) -> ClassicGroups:
    return store.kind(ClassicGroups)


def share_store(partition_config: SharePartitionConfig, topics: Any = None) -> GroupStore:
    """The broker's GroupStore, with every share-partition on ``partition_config`` (checkpoint
    policy included, which no broker setting reaches)."""
    return GroupStore(
        [
            lambda ns: ClassicGroups(ns, GroupConfig()),
            lambda ns: ShareGroups(
                ns, lambda _configs: partition_config, topics or (lambda _n: None), lambda _g: None
            ),
        ],
        classic_groups=ClassicGroups,
    )


class Harness:
    def __init__(
        self,
        directory: Path,
        config: GroupConfig | None = None,
        segment_bytes: int = 1 << 30,
        new_state: Callable[[], GroupStore] | None = None,
    ) -> None:
        self.clock = ManualClock()
        self.config = config or GroupConfig(initial_rebalance_delay_ms=3000)
        self.new_state = new_state or (lambda: new_store(self.config))
        self.directory = directory
        self.flusher = Flusher("os")
        self.registry = group_records()
        log = Log.open(directory, LogConfig(segment_bytes=segment_bytes, retention_ms=-1), self.flusher)
        self.shard = CoordinatorShard(0, log, self.new_state(), self.registry)
        self.records_written = 0

    @property
    def log(self) -> Log:
        return self.shard.log

    @property
    def state(self) -> GroupStore:
        return self.shard.state

    @property
    def store(self) -> ClassicGroups:
        return classic(self.shard.state)

    # --- the actor's job ------------------------------------------------------------------
    def run_op(self, op: Operation[GroupStore]) -> Outcome:
        """One operation as the runtime runs it: apply, append, answer."""
        now = self.clock.now_ms()
        out = self.shard.run(op, now)
        if out.records:
            self.shard.append(out.records, now)
            self.records_written += len(out.records)
        for responder, value in out.responses:
            responder(value)
        return out

    def run(
        self, group_id: str, op: Callable[[ClassicGroup | None, int], Outcome], create: bool = False
    ) -> Outcome:
        """``op`` on the classic group ``group_id`` (created first when ``create``), or on None."""

        def on_group(store: GroupStore, now: int) -> Outcome:
            groups = classic(store)
            return op(groups.get_or_create(group_id, now) if create else groups.get(group_id), now)

        return self.run_op(on_group)

    def group(self, group_id: str) -> ClassicGroup:
        g = self.store.get(group_id)
        assert g is not None
        return g

    def consumer_heartbeat(self, group_id: str, req: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat as the handler runs it on the group's kind."""
        answers: list[HeartbeatResult] = []

        self.run_op(
            lambda store, now: store.kind(ConsumerGroups).heartbeat(group_id, req, answers.append, now)
        )
        return answers[0]

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

        bounds = (self.config.min_session_timeout_ms, self.config.max_session_timeout_ms)
        self.run_op(join_op(group_id, req, bounds, inbox))
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
        request = SyncRequest(member_id, instance, generation, None, None, assignments or {})
        self.run_op(sync_op(group_id, request, inbox))
        return inbox

    def heartbeat(self, group_id: str, member_id: str, generation: int, instance: str | None = None) -> int:
        inbox = Inbox()
        self.run_op(heartbeat_op(group_id, member_id, instance, generation, inbox))
        return inbox.last

    def leave(self, group_id: str, *members: tuple[str, str | None]) -> list[int]:
        inbox = Inbox()
        self.run_op(leave_op(group_id, list(members), inbox))
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
            out = Outcome(records=commit_records(group_id, commits, now, retention_ms))
            out.respond(inbox, 0)
            return out

        exists = self.store.get(group_id) is not None
        self.run(group_id, op, create=generation < 0 and not exists)
        return inbox.last

    def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        committed = self.state.offsets.of(group_id)
        return {(t, p): v.offset for t, parts in committed.items() for p, v in parts.items()}

    def tick(self, ms: int) -> None:
        """Advance the clock and fire every due timer, as the runtime's actors do."""
        self.clock.advance(ms)
        for key in list(self.state.keys()):
            deadline = self.state.next_deadline(key)
            if deadline is not None and deadline <= self.clock.now_ms():
                self.run_op(lambda state, now, key=key: state.on_timer(key, now))

    def expire(self, retention_ms: int) -> None:
        for gid in list(self.store.groups):
            self.run(
                gid,
                lambda g, now: (
                    rules.expire(g, self.state.offsets, now, retention_ms) if g is not None else Outcome()
                ),
            )

    def delete_group(self, group_id: str) -> int:
        inbox = Inbox()

        def op(g: ClassicGroup | None, now: int) -> Outcome:
            if g is None:
                out = Outcome()
                out.respond(inbox, 69)  # GROUP_ID_NOT_FOUND
                return out
            code, out = rules.delete_group(g, self.state.offsets, now)
            out.respond(inbox, code)
            return out

        self.run(group_id, op)
        return inbox.last

    # --- restart ---------------------------------------------------------------------------
    def replay(self) -> GroupStore:
        """A fresh store rebuilt from the log, as the broker does on start (the live one stays)."""
        config = self.log.config
        self.log.close()
        log = Log.open(self.directory, config, self.flusher)
        replayed = CoordinatorShard(0, log, self.new_state(), self.registry)
        replayed.load(self.clock.now_ms())
        self.shard.log = log
        return replayed.state

    def restart(self) -> GroupStore:
        """Continue on a store rebuilt from the log, as after a broker restart."""
        store = self.replay()
        self.shard.state = store
        return store

    def records(self) -> list[tuple[int, Any, Any]]:
        """(offset, key, value) of every record in the log, decoded by the registry."""
        out = []
        for h, data in self.log.batches():
            for offset, key, value in batches.iter_key_values(data, h):
                out.append((offset, *self.registry.decode(key, value)))
        return out

    def compact(self, delete_retention_ms: int = 86_400_000, history_ms: int = 0) -> None:
        """Roll and run the real cleaner over every closed segment, keeping superseded offset
        commits for ``history_ms`` (offsets.history.retention.ms) as the broker's cleaner does."""
        from kcoord.config import BrokerConfig
        from kcoord.server.coordinators import offset_history
        from kcoord.storage.cleaner import clean

        history = offset_history(BrokerConfig(offsets_history_retention_ms=history_ms))
        self.log.roll()
        asyncio.run(clean(self.log, self.clock.now_ms(), delete_retention_ms, history))


def assert_candidate_protocols_counted(group: ClassicGroup) -> None:
    """The protocols every member supports, as the group keeps them counted, are the ones a
    walk over the members finds (the counts follow every join, leave, update and load)."""
    names = [m.protocol_names() for m in group.members.values()]
    walked = set(names[0]).intersection(*names[1:]) if names else set()
    assert group.candidate_protocols() == walked, group.group_id
