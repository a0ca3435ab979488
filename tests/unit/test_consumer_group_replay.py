"""Property test of KIP-848 consumer groups through the production shard: random clients join,
heartbeat (promptly, or slow to revoke), change subscriptions, leave, go silent, lie about their
epoch and partitions, while topics come and go and the coordinator restarts. After every step:

- replaying the log gives the live state (``replay(log) == live``);
- the coordinator never has a partition with two owners (assigned or pending revocation), and its
  owner index agrees with its members;
- no two clients that follow the protocol and are still members own the same partition;
- a well-behaved client never owns what the coordinator does not count as its own.
"""

from __future__ import annotations

import copy
import tempfile
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kcoord.classic.group import GroupConfig
from kcoord.consumer.group import ConsumerGroup
from kcoord.consumer.store import ConsumerGroups
from kcoord.protocol.errors import ErrorCode
from tests.unit.grouputil import FakeTopics, Harness, new_store
from tests.unit.test_consumer_group import REBALANCE_MS, heartbeat

GROUP = "g"
CLIENTS = 3
STATIC = {0: "i0", 1: "i1"}  # clients 0 and 1 are static members
TOPICS = ("t1", "t2", "x1")
SUBSCRIPTIONS = st.one_of(
    st.tuples(st.sets(st.sampled_from((*TOPICS, "absent")), min_size=1).map(sorted), st.none()),
    st.tuples(st.just([]), st.sampled_from(("t.*", "x.*", ".*", "t1|x1"))),
)


class Client:
    """A consumer following the protocol; its assignment is taken on (revoked and acquired) only
    when it reconciles, and until then it reports what it still owns."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.generation = 0
        self.member_id = f"c{index}-0"
        self.instance = STATIC.get(index)
        self.epoch = 0
        self.owned: dict[uuid.UUID, frozenset[int]] = {}
        self.pending: dict[uuid.UUID, frozenset[int]] | None = None
        self.joined = False
        self.honest = True  # False once someone sent a heartbeat in its name it did not send

    def reset(self, new_id: bool) -> None:
        if new_id:
            self.generation += 1
            self.member_id = f"c{self.index}-{self.generation}"
        self.epoch, self.owned, self.pending, self.joined, self.honest = 0, {}, None, False, True


class ConsumerGroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.topics = FakeTopics({})
        self.topics.put("t1", 4)
        self.topics.put("t2", 2)
        self.h = Harness(
            Path(self.tmp.name),
            new_state=lambda: new_store(GroupConfig(), self.topics, group_consumer_assignors="uniform,range"),
        )
        self.clients = [Client(i) for i in range(CLIENTS)]

    def teardown(self) -> None:
        self.h.log.close()
        self.tmp.cleanup()

    # --- the client side -----------------------------------------------------------------------
    def _send(self, c: Client, req: object) -> None:
        self._check_steady_path(req)
        result = self.h.consumer_heartbeat(GROUP, req)  # type: ignore[arg-type]
        event(f"heartbeat answered {ErrorCode(result.error).name}" if result.error else "heartbeat accepted")
        if result.error in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID):
            c.reset(new_id=False)  # as the Java client: abandon everything, rejoin later
        elif result.error in (ErrorCode.FENCED_INSTANCE_ID, ErrorCode.UNRELEASED_INSTANCE_ID):
            c.reset(new_id=True)
        elif result.error == ErrorCode.GROUP_MAX_SIZE_REACHED:
            c.reset(new_id=False)
        else:
            assert result.error == 0, result
            if req.member_epoch < 0:  # type: ignore[attr-defined]
                c.reset(new_id=c.instance is not None)
                return
            c.joined = True
            c.epoch = result.member_epoch
            if result.assignment is not None:
                c.pending = {t: frozenset(ps) for t, ps in result.assignment.items() if ps}

    @rule(
        i=st.integers(0, CLIENTS - 1), sub=SUBSCRIPTIONS, assignor=st.sampled_from((None, "uniform", "range"))
    )
    def join(self, i: int, sub: tuple[list[str], str | None], assignor: str | None) -> None:
        c = self.clients[i]
        if c.joined:
            self.resubscribe(i, sub)
            return
        names, regex = sub
        self._send(
            c,
            heartbeat(
                c.member_id,
                0,
                topics=names,
                regex=regex,
                owned={},
                instance=c.instance,
                rebalance_timeout_ms=REBALANCE_MS,
                assignor=assignor,
            ),
        )

    @rule(i=st.integers(0, CLIENTS - 1), reconcile=st.booleans())
    def beat(self, i: int, reconcile: bool) -> None:
        """A heartbeat; the client first finishes reconciling its last assignment or not yet."""
        c = self.clients[i]
        if not c.joined:
            self.join(i, (["t1", "t2"], None), None)
            return
        if reconcile and c.pending is not None:
            c.owned, c.pending = c.pending, None
        self._send(c, heartbeat(c.member_id, c.epoch, owned=c.owned, instance=c.instance))

    @rule(i=st.integers(0, CLIENTS - 1), sub=SUBSCRIPTIONS)
    def resubscribe(self, i: int, sub: tuple[list[str], str | None]) -> None:
        c = self.clients[i]
        if not c.joined:
            return
        names, regex = sub
        self._send(
            c,
            heartbeat(
                c.member_id, c.epoch, topics=names, regex=regex or "", owned=c.owned, instance=c.instance
            ),
        )

    @rule(i=st.integers(0, CLIENTS - 1), static=st.booleans())
    def leave(self, i: int, static: bool) -> None:
        c = self.clients[i]
        if not c.joined:
            return
        self._send(c, heartbeat(c.member_id, -2 if static and c.instance else -1, instance=c.instance))

    @rule(i=st.sampled_from(sorted(STATIC)))
    def static_restart(self, i: int) -> None:
        """The process of a static member dies and comes back with a new member id."""
        self.clients[i].reset(new_id=True)

    @rule(
        i=st.integers(0, CLIENTS - 1),
        epoch=st.integers(-1, 12),
        owned=st.dictionaries(st.sampled_from(TOPICS), st.sets(st.integers(0, 5), max_size=3), max_size=2),
    )
    def stray_heartbeat(self, i: int, epoch: int, owned: dict[str, set[int]]) -> None:
        """A heartbeat in a client's name with any epoch and partitions (a duplicate, a bug)."""
        c = self.clients[i]
        ids = {t: uuid.uuid5(uuid.NAMESPACE_OID, t) for t in owned}
        self.h.consumer_heartbeat(
            GROUP,
            heartbeat(c.member_id, epoch, owned={ids[t]: ps for t, ps in owned.items()}, instance=c.instance),
        )
        c.honest = False

    def _check_steady_path(self, req: Any) -> None:
        """Where the steady path answers, the full path (on a copy) answers the same and writes
        nothing."""
        g = self._group()
        if g is None:
            return
        config = self.h.state.kind(ConsumerGroups).config
        now = self.h.clock.now_ms()
        probe = copy.deepcopy(g)
        steady = probe._steady(req, config, self.topics, now)
        if steady is None:
            return
        event("steady path")
        full = copy.deepcopy(g)
        full._steady = lambda *_args: None  # type: ignore[method-assign]
        result, records = full._heartbeat(req, config, self.topics, now)
        assert (result, records) == (steady, [])

    # --- the world -----------------------------------------------------------------------------
    @rule(name=st.sampled_from(TOPICS), more=st.integers(1, 3))
    def create_or_grow_topic(self, name: str, more: int) -> None:
        found = self.topics.lookup(name)
        self.topics.put(name, (found[1] if found else 0) + more)

    @rule(name=st.sampled_from(TOPICS))
    def delete_topic(self, name: str) -> None:
        if self.topics.lookup(name) is not None:
            self.topics.delete(name)

    @rule(ms=st.sampled_from((100, 5_000, REBALANCE_MS + 1, 45_001)))
    def tick(self, ms: int) -> None:
        self.h.tick(ms)

    @rule()
    def restart(self) -> None:
        self.h.restart()

    # --- invariants ----------------------------------------------------------------------------
    def _group(self) -> ConsumerGroup | None:
        return self.h.state.kind(ConsumerGroups).get(GROUP)

    @invariant()
    def replay_equals_live(self) -> None:
        assert self.h.replay().kind(ConsumerGroups).snapshot() == self.h.state.kind(ConsumerGroups).snapshot()

    @precondition(lambda self: self._group() is not None)
    @invariant()
    def coordinator_never_has_two_owners(self) -> None:
        g = self._group()
        assert g is not None
        held: Counter[tuple[uuid.UUID, int]] = Counter()
        index = {}
        for m in g.members.values():
            for t, ps in (*m.assigned.items(), *m.pending_revocation.items()):
                for p in ps:
                    held[(t, p)] += 1
                    index[(t, p)] = m.member_id
        assert [tp for tp, n in held.items() if n > 1] == []
        for m in g.members.values():
            event(f"member {m.state.name}")
        assert g.owners == index
        assert g.assignment_epoch <= g.group_epoch
        assert all(m.member_epoch <= g.assignment_epoch for m in g.members.values())

    @invariant()
    def clients_never_share_a_partition(self) -> None:
        g = self._group()
        members = g.members if g is not None else {}
        seen: set[tuple[uuid.UUID, int]] = set()
        for c in self.clients:
            m = members.get(c.member_id)
            if not c.honest or m is None or m.member_epoch < 0:
                continue
            mine = {(t, p) for t, ps in c.owned.items() for p in ps}
            assert not mine & seen
            seen |= mine
            coordinator = {
                (t, p) for t, ps in (*m.assigned.items(), *m.pending_revocation.items()) for p in ps
            }
            assert mine <= coordinator, (c.member_id, mine - coordinator)


TestConsumerGroupReplay = ConsumerGroupMachine.TestCase
TestConsumerGroupReplay.settings = settings(
    max_examples=100, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
