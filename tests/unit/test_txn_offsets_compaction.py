"""Property: compacting ``__consumer_offsets`` keeps transactional offset commits' outcome.

Plain offset commits, TxnOffsetCommits of several producers, COMMIT and ABORT markers, offset and
group deletions (tombstones), clock advances, cleanings (often with a transaction still open)
and restarts run through the production CoordinatorShard and GroupStore and the real cleaner;
the state replayed from the cleaned log must equal the live one: committed offsets and the
offsets still pending in open transactions.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from kcoord.classic import offsets as rules
from kcoord.classic.group import GroupConfig
from kcoord.groups.offsets import commit_records
from kcoord.groups.store import GroupStore
from kcoord.protocol import records as batches
from kcoord.runtime.outcome import Operation, Outcome, TransactionMarker
from kcoord.runtime.shard import Write
from tests.unit.grouputil import Harness, classic

GROUPS = ["g1", "g2"]
TOPICS = ["t", "u"]
PRODUCERS = [1000, 1001, 1002]


class TxnHarness(Harness):
    """The harness, writing an outcome's records as the runtime's shard writer does: as the
    producer's transactional batch when it has one, then its marker."""

    def run_op(self, op: Operation[GroupStore]) -> Outcome:
        now = self.clock.now_ms()
        out = self.shard.run(op, now)
        if out.records or out.marker is not None:
            self.shard.append_writes([Write(list(out.records), out.producer, out.marker)], now)
            self.records_written += len(out.records) + (out.marker is not None)
        for responder, value in out.responses:
            responder(value)
        return out


class TxnOffsetLog(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kcoord-txn-compaction-"))
        self.h = TxnHarness(self.dir / "log", GroupConfig(), segment_bytes=600)
        self.epochs = dict.fromkeys(PRODUCERS, 0)

    def teardown(self) -> None:
        self.check_replay()
        self.h.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        gid=st.sampled_from(GROUPS),
        topic=st.sampled_from(TOPICS),
        part=st.integers(0, 1),
        offset=st.integers(0, 1000),
    )
    def commit(self, gid: str, topic: str, part: int, offset: int) -> None:
        self.h.commit(gid, {(topic, part): offset})

    @rule(
        pid=st.sampled_from(PRODUCERS),
        gid=st.sampled_from(GROUPS),
        parts=st.lists(
            st.tuples(st.sampled_from(TOPICS), st.integers(0, 1), st.integers(0, 1000)),
            min_size=1,
            max_size=3,
        ),
    )
    def txn_commit(self, pid: int, gid: str, parts: list[tuple[str, int, int]]) -> None:
        """TxnOffsetCommit as handle_txn_commit's operation runs it (no generation)."""
        commits = [(t, p, o, -1, "") for t, p, o in dict(((t, p), (t, p, o)) for t, p, o in parts).values()]
        epoch = self.epochs[pid]

        def op(store: GroupStore, now: int) -> Outcome:
            groups = classic(store)
            group = groups.get_or_create(gid, now)
            out = Outcome()
            if not rules.validate_commit(group, "", None, -1, transactional=True):
                out.records = commit_records(gid, commits, now, -1)
                out.producer = (pid, epoch)
            return out

        self.h.run_op(op)

    @rule(pid=st.sampled_from(PRODUCERS), commit=st.booleans())
    def end_txn(self, pid: int, commit: bool) -> None:
        marker = TransactionMarker(pid, self.epochs[pid], commit)
        self.h.run_op(lambda _store, _now: Outcome(marker=marker))

    @rule(gid=st.sampled_from(GROUPS), topic=st.sampled_from(TOPICS))
    def delete_offsets(self, gid: str, topic: str) -> None:
        self.h.run(
            gid,
            lambda g, now: (
                self.h.state.offsets.delete(gid, g, [(topic, [0, 1])])[0]
                if g is not None and rules.validate_offset_delete(g) == 0
                else Outcome()
            ),
        )

    @rule(gid=st.sampled_from(GROUPS))
    def delete_group(self, gid: str) -> None:
        self.h.delete_group(gid)

    @rule(ms=st.sampled_from([1000, 60_000, 3_600_000]))
    def tick(self, ms: int) -> None:
        self.h.clock.advance(ms)

    @precondition(lambda self: self.h.records_written > 0)
    @rule(delete_retention=st.sampled_from([0, 60_000, 86_400_000]))
    def compact(self, delete_retention: int) -> None:
        self.h.compact(delete_retention)
        self.check_crcs()
        self.check_replay()

    @rule()
    def restart(self) -> None:
        self.check_replay()
        self.h.restart()

    # --- checks ------------------------------------------------------------------------------
    def check_replay(self) -> None:
        assert self.h.replay().snapshot() == self.h.state.snapshot()

    def check_crcs(self) -> None:
        for h, data in self.h.log.batches():
            assert batches.crc_of(data, 0, h.size) == h.crc


TestTxnOffsetCompaction = TxnOffsetLog.TestCase
TestTxnOffsetCompaction.settings = settings(
    max_examples=200,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
