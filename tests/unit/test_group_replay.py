"""Property: replaying a coordinator log rebuilds exactly the state that was live.

Random sequences of joins, syncs, heartbeats, leaves, commits, clock advances, KIP-211
cleanups, group and offset deletions and log compactions (with and without offset history
retention, which must not change what replay yields) run against the real state machine
and a real log; then a store replayed from the log must equal the live one (offsets and
persisted group metadata of every group), and every group at rest (Empty or Stable) must be
exactly what its last record says.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kcoord.classic import offsets as rules
from kcoord.classic.group import GroupConfig, GroupState
from kcoord.groups.store import GroupStore
from kcoord.runtime.outcome import Outcome
from tests.unit.grouputil import Harness, assert_candidate_protocols_counted, classic

GROUPS = ["g1", "g2", "g3"]
TOPICS = ["t", "u", "v"]
RETENTION = 60_000


class GroupLog(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kcoord-replay-"))
        self.h = Harness(self.dir / "log", GroupConfig(initial_rebalance_delay_ms=100), segment_bytes=4096)
        self.members: dict[str, list[tuple[str, str | None]]] = {g: [] for g in GROUPS}

    def teardown(self) -> None:
        self.check_replay()
        self.h.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # --- helpers ---------------------------------------------------------------------------
    def _known(self, gid: str) -> list[tuple[str, str | None]]:
        g = self.h.store.get(gid)
        live = set(g.members) if g is not None else set()
        self.members[gid] = [(m, i) for m, i in self.members[gid] if m in live]
        return self.members[gid]

    # --- rules -----------------------------------------------------------------------------
    @rule(
        gid=st.sampled_from(GROUPS),
        topics=st.lists(st.sampled_from(TOPICS), min_size=1, max_size=2, unique=True),
        static=st.booleans(),
        session=st.sampled_from([6000, 20_000]),
    )
    def join_new(self, gid: str, topics: list[str], static: bool, session: int) -> None:
        instance = f"inst-{len(self.members[gid])}" if static else None
        mid, _ = self.h.join_fully(
            gid, topics=tuple(topics), instance=instance, session_ms=session, rebalance_ms=10_000
        )
        if mid and self.h.store.get(gid) is not None and mid in self.h.group(gid).members:
            self.members[gid].append((mid, instance))

    @rule(gid=st.sampled_from(GROUPS), data=st.data(), change=st.booleans())
    def rejoin(self, gid: str, data: st.DataObject, change: bool) -> None:
        known = self._known(gid)
        if not known:
            return
        mid, inst = data.draw(st.sampled_from(known))
        self.h.join(
            gid, member_id=mid, instance=inst, topics=("t", "u") if change else ("t",), rebalance_ms=10_000
        )

    @rule(gid=st.sampled_from(GROUPS))
    def sync_all(self, gid: str) -> None:
        g = self.h.store.get(gid)
        if g is None or g.state is not GroupState.COMPLETING_REBALANCE:
            return
        leader = g.leader
        members = list(g.members.values())
        for m in sorted(members, key=lambda m: m.member_id != leader):
            self.h.sync(
                gid,
                m.member_id,
                g.generation,
                {x.member_id: x.member_id.encode() for x in members},
                instance=m.group_instance_id,
            )

    @rule(gid=st.sampled_from(GROUPS))
    def rebalance_to_stable(self, gid: str) -> None:
        """Let the join phase end and every member sync: the common path to Stable."""
        for _ in range(3):
            g = self.h.store.get(gid)
            if g is None or g.state is not GroupState.PREPARING_REBALANCE:
                break
            self.h.tick(100)
            self.heartbeat_all(gid)
        self.sync_all(gid)

    @rule(gid=st.sampled_from(GROUPS))
    def heartbeat_all(self, gid: str) -> None:
        g = self.h.store.get(gid)
        if g is None:
            return
        for m in list(g.members.values()):
            self.h.heartbeat(gid, m.member_id, g.generation, instance=m.group_instance_id)

    @rule(gid=st.sampled_from(GROUPS), data=st.data())
    def leave(self, gid: str, data: st.DataObject) -> None:
        known = self._known(gid)
        if known:
            self.h.leave(gid, data.draw(st.sampled_from(known)))

    @rule(
        gid=st.sampled_from(GROUPS),
        topic=st.sampled_from(TOPICS),
        part=st.integers(0, 2),
        offset=st.integers(0, 10**6),
        as_member=st.booleans(),
        retention=st.sampled_from([-1, -1, 5000]),
    )
    def commit(self, gid: str, topic: str, part: int, offset: int, as_member: bool, retention: int) -> None:
        g = self.h.store.get(gid)
        if as_member and g is not None and g.members:
            m = next(iter(g.members))
            self.h.commit(
                gid, {(topic, part): offset}, member_id=m, generation=g.generation, retention_ms=retention
            )
        else:
            self.h.commit(gid, {(topic, part): offset}, retention_ms=retention)

    @rule(ms=st.sampled_from([50, 100, 1000, 5000, 30_000, 120_000]))
    def tick(self, ms: int) -> None:
        self.h.tick(ms)

    @rule()
    def expire(self) -> None:
        self.h.expire(RETENTION)

    @rule(gid=st.sampled_from(GROUPS))
    def delete_group(self, gid: str) -> None:
        self.h.delete_group(gid)

    @rule(gid=st.sampled_from(GROUPS), topic=st.sampled_from(TOPICS))
    def delete_offsets(self, gid: str, topic: str) -> None:
        self.h.run(
            gid,
            lambda g, now: (
                self.h.state.offsets.delete(gid, g, [(topic, [0, 1, 2])])[0]
                if g is not None and rules.validate_offset_delete(g) == 0
                else Outcome()
            ),
        )

    @precondition(lambda self: self.h.records_written > 0)
    @rule(
        delete_retention=st.sampled_from([0, 10_000, 86_400_000]),
        # offsets.history.retention.ms: none, shorter and longer than delete.retention.ms
        history=st.sampled_from([0, 5_000, 604_800_000]),
    )
    def compact(self, delete_retention: int, history: int) -> None:
        self.h.compact(delete_retention, history)

    @rule()
    def restart(self) -> None:
        """Replay mid-run too, then continue on the replayed state (as after a broker restart)."""
        self.check_replay()
        self.h.restart()

    # --- invariants --------------------------------------------------------------------------
    @invariant()
    def candidate_protocols_are_counted(self) -> None:
        for g in self.h.store.groups.values():
            assert_candidate_protocols_counted(g)

    @invariant()
    def groups_at_rest_match_their_record(self) -> None:
        for gid, g in self.h.store.groups.items():
            if g.persisted is None or g.state not in (GroupState.EMPTY, GroupState.STABLE):
                continue
            assert g.to_record_value() == g.persisted, gid

    def check_replay(self) -> GroupStore:
        replayed = self.h.replay()
        assert replayed.snapshot() == self.h.state.snapshot()
        for gid, g in classic(replayed).groups.items():
            live = self.h.store.get(gid)
            if (
                g.persisted is not None
                and live is not None
                and live.state in (GroupState.EMPTY, GroupState.STABLE)
            ):
                assert g.state == live.state
                assert g.generation == live.generation and g.leader == live.leader
                assert g.state_timestamp == live.state_timestamp  # KIP-211 expiry survives restart
        return replayed


TestGroupLogReplay = GroupLog.TestCase
TestGroupLogReplay.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
