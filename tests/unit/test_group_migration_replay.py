"""Property test of a group whose members speak both protocols (KIP-848 online migration),
through the production shard and the classic APIs' routing: classic clients (eager: they give
up everything before joining; the leader of a classic group assigns range-wise) and
consumer-protocol clients join, heartbeat, sync, leave and go silent, while time passes and the
coordinator restarts, so that the group is upgraded to a consumer group and downgraded back. After
every step:

- replaying the log gives the live state (``replay(log) == live``, for every group kind);
- a consumer group never has a partition with two owners, and its owner index agrees;
- no two clients that are still members own the same partition, whichever protocol they speak.
"""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcoord.classic.group import GroupConfig
from kcoord.classic.store import ClassicGroups
from kcoord.consumer.store import ConsumerGroups
from kcoord.groups.classic_protocol import JoinResult, SyncResult
from kcoord.groups.consumer_protocol import decode_assignment, decode_subscription, encode_assignment
from kcoord.protocol.errors import ErrorCode
from tests.unit.grouputil import (
    FakeTopics,
    Harness,
    Inbox,
    assert_candidate_protocols_counted,
    new_store,
    subscription,
)
from tests.unit.test_consumer_group import REBALANCE_MS, heartbeat

GROUP = "g"
TOPIC_NAMES = ("t1", "t2")
SESSION_MS = 10_000


class ClassicClient:
    """An eager classic consumer: out -> joining -> syncing -> stable, and out again when told to
    rejoin (it gives up its partitions first) or when it loses its membership."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.member_id = ""
        self.generation = -1
        self.owned: dict[str, tuple[int, ...]] = {}
        self.phase = "out"
        self.inbox = Inbox()
        self.seen = 0

    def reset(self, forget_id: bool) -> None:
        self.owned, self.phase = {}, "out"
        if forget_id:
            self.member_id, self.generation = "", -1


class ConsumerClient:
    def __init__(self, index: int) -> None:
        self.member_id = f"k{index}"
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.joined = False


class MigrationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.topics = FakeTopics({})
        self.topics.put("t1", 4)
        self.topics.put("t2", 2)
        self.config = GroupConfig(initial_rebalance_delay_ms=0)
        self.h = Harness(
            Path(self.tmp.name), self.config, new_state=lambda: new_store(self.config, self.topics)
        )
        self.classic = [ClassicClient(i) for i in range(3)]
        self.consumers = [ConsumerClient(i) for i in range(2)]

    def teardown(self) -> None:
        self.h.log.close()
        self.tmp.cleanup()

    # --- classic clients -----------------------------------------------------------------------
    def _join(self, c: ClassicClient) -> None:
        c.owned = {}  # eager: everything is given up before joining
        c.inbox, c.seen = Inbox(), 0
        c.phase = "joining"
        c.inbox = self.h.join(
            GROUP,
            member_id=c.member_id,
            protocols=[("range", subscription(*TOPIC_NAMES))],
            session_ms=SESSION_MS,
            rebalance_ms=REBALANCE_MS,
        )

    def _assign(self, members: list[tuple[str, str | None, bytes]]) -> dict[str, bytes]:
        """The leader of a classic group: range over the members, per subscribed topic."""
        ids = sorted(m for m, _, _ in members)
        plan: dict[str, dict[str, list[int]]] = {m: {} for m in ids}
        topics = sorted({t for _, _, meta in members for t in decode_subscription(meta).topics})
        for topic in topics:
            found = self.topics.lookup(topic)
            if found is None:
                continue
            for p in range(found[1]):
                plan[ids[p % len(ids)]].setdefault(topic, []).append(p)
        return {m: encode_assignment(parts, 1) for m, parts in plan.items()}

    def _advance(self, c: ClassicClient) -> None:
        """Handle whatever answer arrived; send the next request if the protocol says so."""
        if c.phase == "out":
            self._join(c)
        if c.phase == "joining" and len(c.inbox.values) > c.seen:
            result: JoinResult = c.inbox.values[-1]
            c.seen = len(c.inbox.values)
            event(f"classic join {ErrorCode(result.error).name if result.error else 'ok'}")
            if result.error == ErrorCode.MEMBER_ID_REQUIRED:
                c.member_id = result.member_id
                self._join(c)
            elif result.error == 0:
                c.member_id, c.generation = result.member_id, result.generation
                plan = self._assign(result.members) if result.members else {}
                c.phase = "syncing"
                c.inbox, c.seen = self.h.sync(GROUP, c.member_id, c.generation, plan), 0
            else:
                c.reset(forget_id=result.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID))
        if c.phase == "syncing" and len(c.inbox.values) > c.seen:
            sync: SyncResult = c.inbox.values[-1]
            c.seen = len(c.inbox.values)
            event(f"classic sync {ErrorCode(sync.error).name if sync.error else 'ok'}")
            if sync.error == 0:
                c.owned, c.phase = decode_assignment(sync.assignment), "stable"
            else:
                c.reset(forget_id=sync.error == ErrorCode.UNKNOWN_MEMBER_ID)

    @rule(i=st.integers(0, 2))
    def classic_step(self, i: int) -> None:
        c = self.classic[i]
        if c.phase == "stable":
            code = self.h.heartbeat(GROUP, c.member_id, c.generation)
            event(f"classic heartbeat {ErrorCode(code).name if code else 'ok'}")
            if code == ErrorCode.REBALANCE_IN_PROGRESS or code == ErrorCode.ILLEGAL_GENERATION:
                c.reset(forget_id=False)
            elif code:
                c.reset(forget_id=True)
        self._advance(c)

    @rule(i=st.integers(0, 2))
    def classic_leave(self, i: int) -> None:
        c = self.classic[i]
        if c.member_id:
            self.h.leave(GROUP, (c.member_id, None))
        c.reset(forget_id=True)

    # --- consumer-protocol clients -----------------------------------------------------------------
    def _send(self, c: ConsumerClient, req: object) -> None:
        result = self.h.consumer_heartbeat(GROUP, req)  # type: ignore[arg-type]
        event(f"consumer heartbeat {ErrorCode(result.error).name if result.error else 'ok'}")
        if result.error:
            c.epoch, c.owned, c.joined = 0, {}, False
            return
        if req.member_epoch < 0:  # type: ignore[attr-defined]
            c.epoch, c.owned, c.joined = 0, {}, False
            return
        c.joined, c.epoch = True, result.member_epoch
        if result.assignment is not None:
            c.owned = {t: frozenset(ps) for t, ps in result.assignment.items() if ps}

    @rule(i=st.integers(0, 1))
    def consumer_step(self, i: int) -> None:
        c = self.consumers[i]
        if not c.joined:
            req = heartbeat(c.member_id, 0, topics=TOPIC_NAMES, owned={}, rebalance_timeout_ms=REBALANCE_MS)
        else:
            req = heartbeat(c.member_id, c.epoch, owned=c.owned)
        self._send(c, req)

    @rule(i=st.integers(0, 1))
    def consumer_leave(self, i: int) -> None:
        c = self.consumers[i]
        if c.joined:
            self._send(c, heartbeat(c.member_id, -1))

    # --- the world ----------------------------------------------------------------------------------
    @rule(ms=st.sampled_from((100, 3_000, SESSION_MS + 1, REBALANCE_MS + 1)))
    def tick(self, ms: int) -> None:
        self.h.tick(ms)

    @rule()
    def restart(self) -> None:
        self.h.restart()

    # --- invariants ------------------------------------------------------------------------------------
    @invariant()
    def replay_equals_live(self) -> None:
        assert self.h.replay().snapshot() == self.h.state.snapshot()

    @invariant()
    def one_owner_per_partition(self) -> None:
        event(f"group type {self.h.state.group_type(GROUP)}")
        cg = self.h.state.kind(ConsumerGroups).get(GROUP)
        members: set[str]
        if cg is not None:
            held: Counter[tuple[uuid.UUID, int]] = Counter()
            for m in cg.members.values():
                for t, ps in (*m.assigned.items(), *m.pending_revocation.items()):
                    held.update((t, p) for p in ps)
            assert [tp for tp, n in held.items() if n > 1] == []
            members = set(cg.members)
        else:
            classic = self.h.state.kind(ClassicGroups).get(GROUP)
            members = set(classic.members) if classic is not None else set()
            if classic is not None:
                assert_candidate_protocols_counted(classic)
        ids = {name: self.topics.lookup(name) for name in TOPIC_NAMES}
        seen: set[tuple[str, int]] = set()
        for c in self.classic:
            if c.member_id in members:
                mine = {(t, p) for t, ps in c.owned.items() for p in ps}
                assert not mine & seen, (c.member_id, mine & seen)
                seen |= mine
        for k in self.consumers:
            if k.member_id in members:
                names = {found[0]: name for name, found in ids.items() if found is not None}
                mine = {(names[t], p) for t, ps in k.owned.items() for p in ps if t in names}
                assert not mine & seen, (k.member_id, mine & seen)
                seen |= mine


TestGroupMigrationReplay = MigrationMachine.TestCase
TestGroupMigrationReplay.settings = settings(
    max_examples=100, stateful_step_count=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
