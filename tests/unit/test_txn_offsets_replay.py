"""Property: transactional offset commits in ``__consumer_offsets`` replay into the live state, and
the committed offsets are what Kafka's OffsetMetadataManager makes of the same log.

Random interleavings of plain commits, TxnOffsetCommit writes of several producers, their COMMIT
and ABORT markers, offset tombstones, restarts and compactions of the log run through the
production shard (``GroupStore`` on a ``CoordinatorShard``, written with ``append_writes`` as the
runtime writes transactional batches and markers). After every step:

- a store loaded from the log equals the live one (``GroupStore.snapshot``, pending offsets
  included);
- the committed offsets equal a model of Kafka's rule (OffsetMetadataManager.replay and
  replayEndTransactionMarker): a plain commit sets the offset; a tombstone removes it and every
  pending write of its key; a COMMIT marker makes each of its producer's writes the committed
  offset only if it was written later in the log than the committed one; an ABORT drops them;
- the pending writes are the model's (also those a later commit means cannot win: they stay
  pending until their marker, as in Kafka);
- ``has_pending`` (OffsetFetch's UNSTABLE_OFFSET_COMMIT) is true exactly where Kafka has a
  pending write of the key.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kcoord.classic.group import GroupConfig
from kcoord.classic.store import ClassicGroups
from kcoord.groups.offsets import commit_records
from kcoord.groups.records import OffsetCommitKey
from kcoord.groups.store import GroupStore
from kcoord.runtime.outcome import Operation, Outcome, TransactionMarker
from kcoord.runtime.shard import Write
from tests.unit.grouputil import Harness

GROUPS = ["g1", "g2"]
KEYS = [(g, "t", p) for g in GROUPS for p in (0, 1)]
PRODUCERS = [(100, 0), (200, 3), (300, 1)]

Key = tuple[str, str, int]


class KafkaOffsetsModel:
    """OffsetMetadataManager's offsets: committed and pending values with their record offsets."""

    def __init__(self) -> None:
        self.committed: dict[Key, tuple[int, int]] = {}  # key -> (record offset, committed offset)
        self.pending: dict[int, dict[Key, tuple[int, int]]] = {}  # producer -> key -> same

    def commit(self, at: int, key: Key, value: int) -> None:
        self.committed[key] = (at, value)

    def txn_commit(self, at: int, pid: int, key: Key, value: int) -> None:
        self.pending.setdefault(pid, {})[key] = (at, value)

    def tombstone(self, key: Key) -> None:
        self.committed.pop(key, None)
        for entries in self.pending.values():
            entries.pop(key, None)

    def marker(self, pid: int, commit: bool) -> None:
        entries = self.pending.pop(pid, {})
        if not commit:
            return
        for key, (at, value) in entries.items():
            existing = self.committed.get(key)
            if existing is None or at > existing[0]:
                self.committed[key] = (at, value)


class TxnOffsets(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kcoord-txn-offsets-"))
        self.h = Harness(self.dir / "log", GroupConfig(), segment_bytes=1024)
        self.model = KafkaOffsetsModel()
        self.next_offset = 1

    def teardown(self) -> None:
        self.h.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, op: Operation[GroupStore]) -> Outcome:
        """One operation as the runtime runs it: apply, then append its records as the runtime
        does (a transactional batch of its producer, then its marker)."""
        now = self.h.clock.now_ms()
        out = self.h.shard.run(op, now)
        if out.records or out.marker is not None:
            self.h.shard.append_writes([Write(out.records, out.producer, out.marker)], now)
        return out

    def value(self) -> int:
        self.next_offset += 1
        return self.next_offset

    # --- rules -------------------------------------------------------------------------------------
    @rule(
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique_by=lambda k: k[2]),
        g=st.sampled_from(GROUPS),
    )
    def plain_commit(self, keys: list[Key], g: str) -> None:
        keys = [(g, t, p) for _, t, p in keys]
        values = [self.value() for _ in keys]
        at = self.h.log.log_end_offset

        def op(store: GroupStore, now: int) -> Outcome:
            store.kind(ClassicGroups).get_or_create(g, now)
            commits = [(t, p, v, -1, "") for (_, t, p), v in zip(keys, values, strict=True)]
            return Outcome(records=commit_records(g, commits, now, -1))

        self.write(op)
        for i, (key, v) in enumerate(zip(keys, values, strict=True)):
            self.model.commit(at + i, key, v)

    @rule(
        producer=st.sampled_from(PRODUCERS),
        keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique_by=lambda k: k[2]),
        g=st.sampled_from(GROUPS),
    )
    def txn_commit(self, producer: tuple[int, int], keys: list[Key], g: str) -> None:
        keys = [(g, t, p) for _, t, p in keys]
        values = [self.value() for _ in keys]
        at = self.h.log.log_end_offset

        def op(store: GroupStore, now: int) -> Outcome:
            store.kind(ClassicGroups).get_or_create(g, now)
            commits = [(t, p, v, -1, "") for (_, t, p), v in zip(keys, values, strict=True)]
            return Outcome(records=commit_records(g, commits, now, -1), producer=producer)

        self.write(op)
        for i, (key, v) in enumerate(zip(keys, values, strict=True)):
            self.model.txn_commit(at + i, producer[0], key, v)

    @rule(producer=st.sampled_from(PRODUCERS), commit=st.booleans())
    def marker(self, producer: tuple[int, int], commit: bool) -> None:
        self.write(lambda _s, _n: Outcome(marker=TransactionMarker(producer[0], producer[1], commit)))
        self.model.marker(producer[0], commit)

    @rule(key=st.sampled_from(KEYS))
    def tombstone(self, key: Key) -> None:
        self.write(lambda _s, _n: Outcome(records=[(OffsetCommitKey(*key), None)]))
        self.model.tombstone(key)

    @rule()
    def restart(self) -> None:
        self.h.restart()
        # Live writes are ordered by a counter above every loaded record offset.
        assert self.h.state.offsets.seq >= 0

    @rule(delete_retention=st.sampled_from([0, 10**9]))
    def compact(self, delete_retention: int) -> None:
        self.h.compact(delete_retention)

    @rule(ms=st.sampled_from([1, 1000]))
    def advance(self, ms: int) -> None:
        self.h.clock.advance(ms)

    # --- invariants ------------------------------------------------------------------------------------
    @invariant()
    def replay_equals_live(self) -> None:
        replayed = self.h.replay()
        assert replayed.snapshot() == self.h.state.snapshot()

    @invariant()
    def committed_follows_kafka(self) -> None:
        live = {
            (g, t, p): v.offset
            for g, topics in self.h.state.offsets.committed.items()
            for t, parts in topics.items()
            for p, v in parts.items()
        }
        assert live == {k: v for k, (_, v) in self.model.committed.items()}

    @invariant()
    def pending_follows_kafka(self) -> None:
        live: dict[int, dict[Key, int]] = {
            pid: {(k.group, k.topic, k.partition): v.offset for k, v in entries.items()}
            for pid, entries in self.h.state.offsets.pending.snapshot().items()
        }
        model = {pid: {k: v for k, (_, v) in e.items()} for pid, e in self.model.pending.items() if e}
        assert live == model

    @invariant()
    def unstable_follows_kafka(self) -> None:
        offsets: Any = self.h.state.offsets
        for key in KEYS:
            kafka = any(key in entries for entries in self.model.pending.values())
            assert offsets.has_pending(*key) == kafka, key


TestTxnOffsetsReplay = TxnOffsets.TestCase
TestTxnOffsetsReplay.settings = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
