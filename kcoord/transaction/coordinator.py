"""The transactions of one ``__transaction_state`` partition, as Kafka's TransactionCoordinator
runs them: the shard state the coordinator runtime holds, and the operations the handlers send.

Every operation returns its record (the transactional id's new metadata) and its answers; the
runtime applies the record through ``replay``, appends it, and releases the answers once it is
durable. What Kafka calls the pending state (a transition written but not yet in the log) needs no
field here: operations of one transactional id run one at a time, each on the state the previous
one left, and no answer leaves before the records it depends on are durable.

Markers: ending a transaction (EndTxn, a timed-out transaction, InitProducerId fencing an ongoing
one) writes PrepareCommit or PrepareAbort, and once that is durable hands a ``MarkerJob`` to the
marker writer the server wires in (Kafka's TransactionMarkerChannelManager). The writer puts a
COMMIT or ABORT marker into every partition of the transaction and then runs ``complete``, which
writes CompleteCommit or CompleteAbort. A transaction found in PrepareCommit or PrepareAbort at
start-up gets its markers again (markers are idempotent for readers), so a crash between the
prepare record and the last marker completes the transaction on restart.

Transaction version 1 (what kcoord serves): EndTxn keeps the producer epoch; the epoch is bumped by
InitProducerId and when the coordinator fences or aborts.

Requests that arrive while a transaction's markers are being written (the next transaction's
AddPartitionsToTxn/AddOffsetsToTxn right after EndTxn, an InitProducerId, a retried EndTxn) wait
in the store and run once the transaction completes, instead of being answered
CONCURRENT_TRANSACTIONS: a client would retry after its backoff (librdkafka 100 ms,
measured by bench/transactions.py at 9 transactions/s for one producer), while completion is one
flush round away. Kafka retries on the server side for the same reason under transaction.version 2
(KAFKA-18654); the answers are the ones the client's retry would get.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.fields import RecordFormatError
from kcoord.runtime.outcome import Operation, Outcome, Record, Responder
from kcoord.runtime.records import RecordRegistry
from kcoord.runtime.shard import Loader
from kcoord.transaction.metadata import (
    INT16_MAX,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
)
from kcoord.transaction.records import TransactionLogKey, TransactionLogValue

S = TransactionState


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """The markers of one ending transaction, to write into every one of its partitions."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int
    error: int = 0


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    transactional_id_expiration_ms: int = 7 * 24 * 3_600_000


class TransactionStore:
    """The transactional ids of one ``__transaction_state`` partition (a ``CoordinatorState``)."""

    def __init__(
        self,
        config: TransactionConfig,
        next_producer_id: Callable[[], int],
        send_markers: Callable[[MarkerJob], None],
    ) -> None:
        self.config = config
        self.transactions: dict[str, TransactionMetadata] = {}
        self._next_producer_id = next_producer_id
        self._send_markers = send_markers
        self._resend: set[str] = set()  # loaded mid-completion: markers to write again
        # Operations waiting for their id's transaction to complete (not state: not in the log).
        self._parked: dict[str, list[Operation[TransactionStore]]] = {}

    # --- records ----------------------------------------------------------------------------------
    def replay(self, key: TransactionLogKey, value: TransactionLogValue | None, now: int) -> None:
        tid = key.transactional_id
        if value is None:
            self.transactions.pop(tid, None)
            return
        meta = TransactionMetadata.from_value(tid, value)
        old = self.transactions.get(tid)
        if old is not None:
            meta.last_producer_epoch = old.last_producer_epoch
            if meta.previous_producer_id == NO_PRODUCER_ID:  # not in the record (value v0)
                meta.previous_producer_id = old.previous_producer_id
        self.transactions[tid] = meta

    def replay_transactional(
        self, producer_id: int, producer_epoch: int, key: Any, value: Any, now: int
    ) -> None:
        raise RecordFormatError("__transaction_state holds no transactional records")

    def replay_end_transaction(self, producer_id: int, producer_epoch: int, commit: bool, now: int) -> None:
        raise RecordFormatError("__transaction_state holds no transaction markers")

    def loaders(self, registry: RecordRegistry, now: int) -> Mapping[int, Loader]:
        return {}

    def loaded(self, now: int) -> None:
        self._resend = {tid for tid, m in self.transactions.items() if m.state.completing}

    def link(self, records: list[Record], base_offset: int) -> list[Record]:
        return records

    # --- keys and timers ------------------------------------------------------------------------
    def holds(self, key: str) -> bool:
        return key in self.transactions or key in self._parked

    def keys(self) -> Iterable[str]:
        return self.transactions.keys()

    def next_deadline(self, key: str) -> int | None:
        return 0 if key in self._resend else None

    def on_timer(self, key: str, now: int) -> Outcome:
        out = Outcome()
        if key in self._resend:
            self._resend.discard(key)
            meta = self.transactions.get(key)
            if meta is not None and meta.state.completing:
                out.respond(self._send_markers, _job(meta))
        return out

    def snapshot(self) -> dict[str, tuple[object, ...]]:
        return {tid: m.snapshot() for tid, m in self.transactions.items()}

    # --- writing ------------------------------------------------------------------------------------
    @staticmethod
    def _write(out: Outcome, meta: TransactionMetadata) -> None:
        out.records.append((TransactionLogKey(meta.transactional_id), meta.to_value()))

    def _set_last_epoch(
        self, tid: str, last_epoch: int, previous_producer_id: int | None = None
    ) -> Callable[[Any, int], Outcome]:
        # The last epoch and the previous producer id live in memory only (Kafka does not persist
        # them at transaction.version 1): set them on the metadata the record made, once replay
        # has made it, so that the record the live state went through is the one a reload reads.
        def step(_store: Any, _now: int) -> Outcome:
            meta = self.transactions.get(tid)
            if meta is not None:
                meta.last_producer_epoch = last_epoch
                if previous_producer_id is not None:
                    meta.previous_producer_id = previous_producer_id
            return Outcome()

        return step

    # --- InitProducerId ---------------------------------------------------------------------------
    def init_producer_id(
        self,
        tid: str,
        timeout_ms: int,
        expected: tuple[int, int] | None,
        respond: Responder,
        now: int,
    ) -> Outcome:
        out = Outcome()
        meta = self.transactions.get(tid)
        if meta is None:
            meta = TransactionMetadata(
                tid,
                self._next_producer_id(),
                NO_PRODUCER_EPOCH,
                timeout_ms,
                S.EMPTY,
                last_update_timestamp=now,
            )
        if expected is not None and not _valid_expected(meta, *expected):
            out.respond(respond, ProducerIdAndEpoch(-1, -1, ErrorCode.PRODUCER_FENCED))
            return out
        state = meta.state
        if state.completing:
            self._park(tid, lambda s, n: s.init_producer_id(tid, timeout_ms, expected, respond, n))
            return out
        if state == S.ONGOING:
            # Abort the ongoing transaction under a bumped epoch (fencing its producer), then
            # answer as the client's retry would be answered: once the abort is complete, with
            # the epoch bumped once more (Kafka's PrepareEpochFence, then CONCURRENT_TRANSACTIONS).
            self._abort(out, meta, now)
            self._park(tid, lambda s, n: s.init_producer_id(tid, timeout_ms, expected, respond, n))
            return out
        new = _copy(meta)
        new.timeout_ms = timeout_ms
        new.partitions = set()
        new.start_timestamp = -1
        new.last_update_timestamp = now
        new.state = S.EMPTY
        previous: int | None = None
        if is_epoch_exhausted(meta.producer_epoch) and (
            expected is None or expected[1] == meta.producer_epoch
        ):
            previous = meta.producer_id
            new.producer_id = self._next_producer_id()
            new.producer_epoch = 0
            last_epoch = meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
        elif expected is None:
            new.producer_epoch = meta.producer_epoch + 1
            last_epoch = NO_PRODUCER_EPOCH
        elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
            new.producer_epoch = meta.producer_epoch + 1
            last_epoch = meta.producer_epoch
        elif expected[1] == meta.last_producer_epoch:
            # A retry of an InitProducerId that succeeded: answer the epoch it got.
            last_epoch = meta.last_producer_epoch
        else:
            out.respond(respond, ProducerIdAndEpoch(-1, -1, ErrorCode.PRODUCER_FENCED))
            return out
        self._write(out, new)
        out.and_then(self._set_last_epoch(tid, last_epoch, previous))
        out.respond(respond, ProducerIdAndEpoch(new.producer_id, new.producer_epoch))
        return out

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------
    def _check_producer(self, meta: TransactionMetadata | None, producer_id: int, epoch: int) -> int:
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED
        return 0

    def add_partitions(
        self,
        tid: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
        respond: Responder,
        now: int,
    ) -> Outcome:
        out = Outcome()
        meta = self.transactions.get(tid)
        error = self._check_producer(meta, producer_id, epoch)
        if error or meta is None:
            out.respond(respond, error)
            return out
        wanted = set(partitions)
        if meta.state.completing:
            self._park(tid, lambda s, n: s.add_partitions(tid, producer_id, epoch, wanted, respond, n))
            return out
        if meta.state == S.ONGOING and wanted <= meta.partitions:
            out.respond(respond, 0)
            return out
        new = _copy(meta)
        if meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            new.start_timestamp = now
            new.partitions = set()
        new.state = S.ONGOING
        new.partitions = new.partitions | wanted
        new.last_update_timestamp = now
        self._write(out, new)
        out.respond(respond, 0)
        return out

    def verify_partitions(
        self, tid: str, producer_id: int, epoch: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """KIP-890 part 1: whether a transactional produce's partitions are in its transaction
        (Kafka's AddPartitionsToTxn with VerifyOnly). Read-only: the produce handler calls it."""
        meta = self.transactions.get(tid)
        error = self._check_producer(meta, producer_id, epoch)
        if not error and meta is not None and meta.state.completing:
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error or meta is None:
            return {tp: error for tp in partitions}
        return {
            tp: 0 if tp in meta.partitions and meta.state == S.ONGOING else ErrorCode.TRANSACTION_ABORTABLE
            for tp in partitions
        }

    # --- EndTxn -----------------------------------------------------------------------------------
    def end_transaction(
        self, tid: str, producer_id: int, epoch: int, commit: bool, respond: Responder, now: int
    ) -> Outcome:
        out = Outcome()
        meta = self.transactions.get(tid)
        if meta is None or meta.producer_id != producer_id:
            out.respond(respond, ErrorCode.INVALID_PRODUCER_ID_MAPPING)
            return out
        if epoch != meta.producer_epoch:
            out.respond(respond, ErrorCode.PRODUCER_FENCED)
            return out
        state = meta.state
        if state == S.ONGOING:
            new = _copy(meta)
            new.state = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
            new.last_update_timestamp = now
            self._write(out, new)
            out.respond(respond, 0)
            out.respond(self._send_markers, _job(new))
            return out
        if (state == S.COMPLETE_COMMIT and commit) or (state == S.COMPLETE_ABORT and not commit):
            error = 0  # a retry of an EndTxn that completed
        elif (state == S.PREPARE_COMMIT and commit) or (state == S.PREPARE_ABORT and not commit):
            self._park(tid, lambda s, n: s.end_transaction(tid, producer_id, epoch, commit, respond, n))
            return out
        else:
            error = ErrorCode.INVALID_TXN_STATE
        out.respond(respond, error)
        return out

    def _abort(self, out: Outcome, meta: TransactionMetadata, now: int) -> None:
        """The coordinator aborts an ongoing transaction under a bumped epoch, fencing its producer."""
        new = _copy(meta)
        # A client that names the last epoch (never handed out: it is only reached by fencing)
        # can open a transaction at it; there is no epoch left to fence with. Kafka throws there
        # (prepareFenceProducerEpoch) and leaves the transaction open; kcoord aborts it at that
        # epoch, and the next InitProducerId rotates the producer id, which fences it.
        new.producer_epoch = min(meta.producer_epoch + 1, INT16_MAX)
        new.state = S.PREPARE_ABORT
        new.last_update_timestamp = now
        self._write(out, new)
        out.and_then(self._set_last_epoch(meta.transactional_id, NO_PRODUCER_EPOCH))
        out.respond(self._send_markers, _job(new))

    def complete(self, tid: str, producer_id: int, epoch: int, commit: bool, now: int) -> Outcome:
        """Every marker of the transaction is written: CompleteCommit or CompleteAbort."""
        out = Outcome()
        meta = self.transactions.get(tid)
        expected = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if (
            meta is None
            or meta.producer_id != producer_id
            or meta.producer_epoch != epoch
            or meta.state != expected
        ):
            return out  # a stale job (markers written again after a restart that also completed)
        new = _copy(meta)
        new.state = S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT
        new.partitions = set()
        new.last_update_timestamp = now
        self._write(out, new)
        # What waited for the completion runs on the state it left, in arrival order.
        for op in self._parked.pop(tid, ()):
            out.and_then(op)
        return out

    def _park(self, tid: str, op: Operation[TransactionStore]) -> None:
        self._parked.setdefault(tid, []).append(op)

    # --- expiry -----------------------------------------------------------------------------------
    def abort_if_timed_out(self, tid: str, now: int) -> Outcome:
        """transaction.abort.timed.out.transaction.cleanup.interval.ms: abort a transaction open
        longer than its timeout."""
        out = Outcome()
        meta = self.transactions.get(tid)
        if meta is not None and meta.state == S.ONGOING and meta.start_timestamp + meta.timeout_ms < now:
            self._abort(out, meta, now)
        return out

    def expire_if_idle(self, tid: str, now: int) -> Outcome:
        """transactional.id.expiration.ms: forget an id idle that long (a tombstone)."""
        out = Outcome()
        meta = self.transactions.get(tid)
        if (
            meta is not None
            and meta.state.expiration_allowed
            and meta.last_update_timestamp <= now - self.config.transactional_id_expiration_ms
        ):
            out.records.append((TransactionLogKey(tid), None))
        return out


def verification_error(error: int, generic_errors: bool) -> int:
    """A ``verify_partitions`` answer as the transactional write's client expects it (Kafka's
    AddPartitionsToTxnManager): a fenced producer is INVALID_PRODUCER_EPOCH, and a partition not in
    the transaction TRANSACTION_ABORTABLE only for clients that know it (``generic_errors``),
    INVALID_TXN_STATE for the others."""
    if error == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and not generic_errors:
        return ErrorCode.INVALID_TXN_STATE
    return error


def _copy(meta: TransactionMetadata) -> TransactionMetadata:
    return TransactionMetadata(
        meta.transactional_id,
        meta.producer_id,
        meta.producer_epoch,
        meta.timeout_ms,
        meta.state,
        set(meta.partitions),
        meta.start_timestamp,
        meta.last_update_timestamp,
        meta.previous_producer_id,
        meta.next_producer_id,
        meta.last_producer_epoch,
    )


def _job(meta: TransactionMetadata) -> MarkerJob:
    return MarkerJob(
        meta.transactional_id,
        meta.producer_id,
        meta.producer_epoch,
        meta.state == S.PREPARE_COMMIT,
        tuple(sorted(meta.partitions)),
    )


def _valid_expected(meta: TransactionMetadata, producer_id: int, epoch: int) -> bool:
    """Kafka's isValidProducerId: an InitProducerId naming a producer id and epoch continues that
    producer only if the id is the current one, or the previous one with an exhausted epoch (a
    retry after a rotation), or the metadata was just created."""
    return (
        meta.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == meta.producer_id
        or (producer_id == meta.previous_producer_id and is_epoch_exhausted(epoch))
    )


def abort_timed_out(store: TransactionStore) -> Iterator[tuple[str, Operation[TransactionStore]]]:
    """The periodic scan (transaction.abort.timed.out.transaction.cleanup.interval.ms): an operation
    for every ongoing transaction, which aborts it if it is past its timeout by then."""
    for tid, meta in list(store.transactions.items()):
        if meta.state == S.ONGOING:
            yield tid, _op(TransactionStore.abort_if_timed_out, tid)


def expire_transactional_ids(store: TransactionStore) -> Iterator[tuple[str, Operation[TransactionStore]]]:
    """The periodic scan (transaction.remove.expired.transaction.cleanup.interval.ms)."""
    for tid, meta in list(store.transactions.items()):
        if meta.state.expiration_allowed:
            yield tid, _op(TransactionStore.expire_if_idle, tid)


def _op(method: Callable[[TransactionStore, str, int], Outcome], tid: str) -> Operation[TransactionStore]:
    return lambda store, now: method(store, tid, now)
