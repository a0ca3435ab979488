"""Property: the transaction coordinator's log replays into exactly the live state, and every
step follows Kafka's state machine (TransactionMetadata.scala, transaction.version 1).

Random sequences of InitProducerId (fresh, continuing the current producer, retrying, stale or
foreign producer ids), AddPartitionsToTxn/AddOffsetsToTxn, EndTxn commit/abort, completions of
the marker jobs the store hands over, clock advances, the periodic abort of timed-out
transactions and expiry of idle ids, compactions of ``__transaction_state`` and restarts run
through the production shard (``TransactionStore`` on a ``CoordinatorShard`` and a real log).
After every step:

- a store loaded from the log equals the live one (``TransactionStore.snapshot``);
- every id's state moved along one of Kafka's valid transitions (``validPreviousStates``);
- an id's producer epoch never goes down while its producer id stays, and producer ids only grow;
- an expired id is gone (no metadata is ever Dead: the tombstone removes it);
- the answers agree with the state: a successful InitProducerId answers the id's producer and
  epoch in Empty, a successful EndTxn leaves PrepareCommit/PrepareAbort and a marker job.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kcoord.protocol.errors import ErrorCode
from kcoord.runtime.outcome import Outcome
from kcoord.transaction.coordinator import TransactionConfig
from kcoord.transaction.metadata import INT16_MAX, TransactionMetadata, TransactionState
from kcoord.transaction.records import TransactionLogKey
from tests.unit.txnutil import TxnHarness

S = TransactionState
IDS = ["a", "b", "c"]
PARTITIONS = [("t", 0), ("t", 1), ("u", 0), ("__consumer_offsets", 7)]
EXPIRATION_MS = 20_000
MAX_TIMEOUT_MS = 10_000

# Kafka's TransactionState.validPreviousStates (core TransactionMetadata.scala).
VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT},
}


class TransactionLog(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kcoord-txn-replay-"))
        self.h = TxnHarness(
            self.dir / "log",
            TransactionConfig(transactional_id_expiration_ms=EXPIRATION_MS),
            segment_bytes=2048,
        )
        self.before = self.h.store.snapshot()
        # Producer ids this test has seen per transactional id, for the "ids only grow" check.
        self.seen: dict[str, tuple[int, int]] = {}

    def teardown(self) -> None:
        self.h.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def meta(self, tid: str) -> TransactionMetadata | None:
        return self.h.store.transactions.get(tid)

    # --- InitProducerId -------------------------------------------------------------------------------
    @rule(tid=st.sampled_from(IDS), timeout=st.sampled_from([1_000, 5_000, MAX_TIMEOUT_MS]))
    def init_fresh(self, tid: str, timeout: int) -> None:
        before = self.meta(tid)
        state = before.state if before is not None else None
        result = self.h.init(tid, timeout)
        self._check_init(tid, state, result.error, result.producer_id, result.producer_epoch)

    @rule(
        tid=st.sampled_from(IDS),
        which=st.sampled_from(["current", "last", "older", "previous", "foreign"]),
    )
    def init_expected(self, tid: str, which: str) -> None:
        meta = self.meta(tid)
        if meta is None:
            expected = (424242, 0)
        elif which == "current":
            expected = (meta.producer_id, meta.producer_epoch)
        elif which == "last":  # a retry of an InitProducerId that succeeded
            expected = (meta.producer_id, meta.last_producer_epoch)
        elif which == "older":
            expected = (meta.producer_id, max(0, meta.producer_epoch - 1))
        elif which == "previous":  # a retry across a producer id rotation
            expected = (meta.previous_producer_id, INT16_MAX - 1)
        else:
            expected = (meta.producer_id + 100_000, 0)
        if expected[1] < 0 or expected[0] < 0:
            return  # no such producer to name: the request would be INVALID_REQUEST at the handler
        state = meta.state if meta is not None else None
        result = self.h.init(tid, 5_000, expected)
        if which == "foreign" and meta is not None and meta.producer_epoch >= 0:
            assert result.error == ErrorCode.PRODUCER_FENCED, result
        self._check_init(tid, state, result.error, result.producer_id, result.producer_epoch)

    def _check_init(self, tid: str, state: TransactionState | None, error: int, pid: int, epoch: int) -> None:
        meta = self.meta(tid)
        if (
            state is not None
            and (state.completing or state == S.ONGOING)
            and error != ErrorCode.PRODUCER_FENCED
        ):
            # Kafka checks the expected producer first (a stale one is fenced whatever the state);
            # otherwise the request waited for the transaction to complete (an ongoing one is
            # first aborted under a bumped epoch), as the client's retry after
            # CONCURRENT_TRANSACTIONS would have.
            assert self.h.parked
        if error == 0:
            assert meta is not None and meta.state == S.EMPTY
            assert (pid, epoch) == (meta.producer_id, meta.producer_epoch)
        else:
            assert error == ErrorCode.PRODUCER_FENCED, error

    @rule(tid=st.sampled_from(IDS))
    def near_exhaustion(self, tid: str) -> None:
        """An id whose epoch is about to run out (as after 32k InitProducerIds): the next bump
        rotates its producer id. The record is what the coordinator writes for such an id."""
        if tid in self.h.store.transactions:
            return
        pid = self.h.next_producer_id()
        meta = TransactionMetadata(
            tid, pid, INT16_MAX - 2, 5_000, S.EMPTY, last_update_timestamp=self.h.clock.now_ms()
        )

        def write(_store: object, _now: int) -> Outcome:
            return Outcome(records=[(TransactionLogKey(tid), meta.to_value())])

        self.h.run_op(write)
        self.before[tid] = self.h.store.transactions[tid].snapshot()

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------
    @rule(
        tid=st.sampled_from(IDS),
        parts=st.lists(st.sampled_from(PARTITIONS), min_size=1, max_size=3, unique=True),
        stale=st.booleans(),
    )
    def add_partitions(self, tid: str, parts: list[tuple[str, int]], stale: bool) -> None:
        meta = self.meta(tid)
        if meta is None:
            assert self.h.add(tid, 77, 0, parts) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
            return
        state = meta.state
        epoch = meta.producer_epoch - 1 if stale else meta.producer_epoch
        error = self.h.add(tid, meta.producer_id, epoch, parts)
        after = self.meta(tid)
        assert after is not None
        if stale:
            assert error == ErrorCode.PRODUCER_FENCED
        else:
            # While markers are written the request waits for the completion, then adds.
            assert self.h.parked == state.completing
            assert error == 0
            assert after.state == S.ONGOING and set(parts) <= after.partitions

    # --- EndTxn ---------------------------------------------------------------------------------------
    @rule(tid=st.sampled_from(IDS), commit=st.booleans(), stale=st.booleans())
    def end_txn(self, tid: str, commit: bool, stale: bool) -> None:
        meta = self.meta(tid)
        if meta is None:
            assert self.h.end(tid, 77, 0, commit) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
            return
        state = meta.state
        jobs = len(self.h.jobs)
        epoch = meta.producer_epoch - 1 if stale else meta.producer_epoch
        error = self.h.end(tid, meta.producer_id, epoch, commit)
        after = self.meta(tid)
        assert after is not None
        if stale:
            assert error == ErrorCode.PRODUCER_FENCED
        elif state == S.ONGOING:
            assert error == 0
            assert after.state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
            assert len(self.h.jobs) == jobs + 1
            job = self.h.jobs[-1]
            assert (job.commit, set(job.partitions)) == (commit, after.partitions)
        elif state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT):
            assert error == 0  # a retry of an EndTxn that completed
        elif state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
            # A retried EndTxn waits for the completion, then is answered as a retry of one that
            # completed.
            assert self.h.parked and error == 0
            assert after.state == (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
        else:
            assert error == ErrorCode.INVALID_TXN_STATE
        if not self.h.parked and (error or state != S.ONGOING):
            assert after.snapshot() == meta.snapshot()  # nothing written

    # --- markers ----------------------------------------------------------------------------------------
    @precondition(lambda self: bool(self.h.jobs))
    @rule(data=st.data())
    def complete(self, data: st.DataObject) -> None:
        job = data.draw(st.sampled_from(self.h.jobs))
        self.h.jobs.remove(job)
        meta = self.meta(job.transactional_id)
        out = self.h.complete(job)
        after = self.meta(job.transactional_id)
        if out.records:
            assert meta is not None and after is not None
            assert meta.state == (S.PREPARE_COMMIT if job.commit else S.PREPARE_ABORT)
            assert after.state == (S.COMPLETE_COMMIT if job.commit else S.COMPLETE_ABORT)
            assert not after.partitions

    # --- time ---------------------------------------------------------------------------------------------
    @rule(ms=st.sampled_from([1, 999, 1_000, 4_000, 11_000, EXPIRATION_MS]))
    def advance(self, ms: int) -> None:
        self.h.clock.advance(ms)

    @rule()
    def abort_timed_out(self) -> None:
        now = self.h.clock.now_ms()
        due = {
            tid
            for tid, m in self.h.store.transactions.items()
            if m.state == S.ONGOING and m.start_timestamp + m.timeout_ms < now
        }
        before = {tid: m.producer_epoch for tid, m in self.h.store.transactions.items()}
        self.h.abort_timed_out()
        for tid, m in self.h.store.transactions.items():
            if tid in due:
                assert m.state == S.PREPARE_ABORT and m.producer_epoch == before[tid] + 1
            elif m.state == S.ONGOING:
                assert m.producer_epoch == before[tid]

    @rule()
    def expire_ids(self) -> None:
        now = self.h.clock.now_ms()
        idle = {
            tid
            for tid, m in self.h.store.transactions.items()
            if m.state.expiration_allowed and m.last_update_timestamp <= now - EXPIRATION_MS
        }
        kept = set(self.h.store.transactions) - idle
        self.h.expire_ids()
        assert set(self.h.store.transactions) == kept

    # --- the log --------------------------------------------------------------------------------------------
    @rule()
    def restart(self) -> None:
        self.h.restart()

    @rule(delete_retention=st.sampled_from([0, 10**9]))
    def compact(self, delete_retention: int) -> None:
        self.h.compact(delete_retention)

    # --- invariants -----------------------------------------------------------------------------------------
    @invariant()
    def replay_equals_live(self) -> None:
        assert self.h.replay().snapshot() == self.h.store.snapshot()

    @invariant()
    def follows_kafka_state_machine(self) -> None:
        after = self.h.store.snapshot()
        for tid, snap in after.items():
            state = snap[3]
            assert state != S.DEAD
            old = self.before.get(tid)
            if old is None:
                assert state == S.EMPTY, (tid, state)  # a new id starts Empty (InitProducerId)
                pid, epoch = snap[0], snap[1]
                prior = self.seen.get(tid)
                assert prior is None or pid > prior[0]
                continue
            if old != snap:
                # One request may pass several transitions: one that waited for its transaction's
                # markers saw PrepareX -> CompleteX before its own (Ongoing -> ... -> Empty).
                assert _reachable(old[3], state), (tid, old[3], state)
                old_pid, old_epoch, pid, epoch = old[0], old[1], snap[0], snap[1]
                if pid == old_pid:
                    assert epoch >= old_epoch, (tid, old_epoch, epoch)
                else:  # rotated once the epoch ran out
                    meta = self.meta(tid)
                    assert meta is not None and meta.previous_producer_id == old_pid
                    assert pid > old_pid and epoch == 0, (tid, old, snap)
        for tid, old in self.before.items():
            if tid not in after:
                assert old[3] in VALID_PREVIOUS[S.DEAD], (tid, old[3])
        for tid, snap in after.items():
            self.seen[tid] = (snap[0], snap[1])
        self.before = after


TestTransactionLogReplay = TransactionLog.TestCase
TestTransactionLogReplay.settings = settings(
    max_examples=120,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _reachable(start: TransactionState, end: TransactionState) -> bool:
    """Whether Kafka's valid transitions lead from ``start`` to ``end`` in one step or more."""
    seen: set[TransactionState] = set()
    frontier = {start}
    while frontier:
        nxt = {s for s, previous in VALID_PREVIOUS.items() for f in frontier if f in previous} - seen
        if end in nxt:
            return True
        seen |= nxt
        frontier = nxt
    return False


def test_fencing_a_transaction_at_the_last_epoch_aborts_it_without_overflow() -> None:
    """Found by the state machine: a producer that names epoch 32767 (reachable only by fencing,
    never handed out) opens a transaction; an InitProducerId then has no epoch left to fence it
    with. It used to overflow int16 encoding the record, which stops the coordinator."""
    m = TransactionLog()
    try:
        m.near_exhaustion("a")
        m.init_expected("a", "current")  # 32766
        m.add_partitions("a", [("t", 0)], False)
        m.init_expected("a", "current")  # fenced at 32767, the retry is refused
        m.add_partitions("a", [("t", 0)], False)  # a transaction at 32767
        m.init_expected("a", "current")  # aborted at 32767, then a new producer id
        meta = m.meta("a")
        assert meta is not None and meta.producer_epoch == 0 and meta.state == S.EMPTY
        m.replay_equals_live()
    finally:
        m.teardown()
