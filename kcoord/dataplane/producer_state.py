"""Idempotent producers: per-partition sequence checks as Kafka's ProducerStateManager.

For every producer id the partition remembers its epoch and the metadata of its last five
batches. A batch repeating one of them is a duplicate: it is not appended again and the
producer gets the offsets of the original (Kafka answers duplicates with success). Otherwise:
an older epoch is INVALID_PRODUCER_EPOCH, a new epoch must restart at sequence 0, and within
an epoch the first sequence must follow the last one (wrapping at 2^31-1), else
OUT_OF_ORDER_SEQUENCE_NUMBER. A producer id the partition does not know may start at any
sequence (its state may have expired). Kafka 4 never answers DUPLICATE_SEQUENCE_NUMBER: an
exact repeat is success, anything else out of line is OUT_OF_ORDER_SEQUENCE_NUMBER.

Transactions (Kafka's ProducerAppendInfo / ProducerStateManager): a transactional batch starts
the producer's transaction at its first offset (``current_txn_first_offset``) unless one is
ongoing; a non-transactional batch while one is ongoing is INVALID_TXN_STATE. A COMMIT or ABORT
marker (a control batch) ends it and records the coordinator epoch; a marker from an older
producer epoch is INVALID_PRODUCER_EPOCH, from an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED. A completed transaction stays "unstable" until the high
watermark passes its marker (Kafka's unreplicatedTxns), so the first unstable offset is the
smallest first offset of those and of the ongoing ones. Producers with an ongoing transaction
never expire.

State is rebuilt from the log on start (see Partition.load_producer_state), from a snapshot
(``snapshot``/``restore``) when one is usable.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.records import NO_SEQUENCE, BatchHeader

CACHED_BATCHES: Final = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
INT32_MAX: Final = 0x7FFFFFFF
INT64_MAX: Final = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    last_timestamp: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None

    def set_epoch(self, epoch: int) -> None:
        """Kafka's maybeUpdateProducerEpoch: a new epoch forgets the batches of the old one."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == h.base_sequence and b.last_seq == h.last_sequence:
                return b
        return None


def _in_sequence(last_seq: int, first_seq: int) -> bool:
    return first_seq == last_seq + 1 or (first_seq == 0 and last_seq == INT32_MAX)


class ProducerStateTable:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # first offset -> producer id of undecided transactions
        self.unreplicated: dict[int, int] = {}  # first offset -> marker offset, marker above the HW

    def validate(self, headers: list[BatchHeader]) -> BatchMetadata | None:
        """Check the batches of one append; returns the original if the append is a duplicate."""
        # producer id -> (epoch, last seq, in a transaction) within this append
        pending: dict[int, tuple[int, int, bool]] = {}
        for h in headers:
            if not h.has_producer_id:
                continue
            entry = self.producers.get(h.producer_id)
            if entry is not None and h.producer_id not in pending:
                dup = entry.find_duplicate(h)
                if dup is not None:
                    return dup
            if h.producer_id in pending:
                epoch, last_seq, in_txn = pending[h.producer_id]
            elif entry is not None:
                epoch, last_seq = entry.epoch, entry.last_seq
                in_txn = entry.current_txn_first_offset is not None
            else:
                epoch, last_seq, in_txn = None, NO_SEQUENCE, False
            self._check(h, epoch, last_seq)
            if in_txn and not h.is_transactional:
                raise KafkaError(
                    ErrorCode.INVALID_TXN_STATE,
                    f"Expected transactional write from producer {h.producer_id}",
                )
            pending[h.producer_id] = (h.producer_epoch, h.last_sequence, in_txn or h.is_transactional)
        return None

    def validate_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Kafka's appendEndTxnMarker checks for a marker from the coordinator."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if producer_epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"marker epoch {producer_epoch} of producer {producer_id} is older than {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"Invalid coordinator epoch for producerId {producer_id}: {coordinator_epoch} "
                f"(zombie), {entry.coordinator_epoch} (current)",
            )

    @staticmethod
    def _check(h: BatchHeader, epoch: int | None, last_seq: int) -> None:
        if h.base_sequence == NO_SEQUENCE:
            raise KafkaError(ErrorCode.INVALID_RECORD, "idempotent batch without a sequence number")
        if epoch is not None and h.producer_epoch < epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"epoch {h.producer_epoch} of producer {h.producer_id} is older than {epoch}",
            )
        if epoch is None:
            return  # unknown producer (its state may have expired): Kafka accepts any sequence
        if h.producer_epoch > epoch or last_seq == NO_SEQUENCE:
            if h.base_sequence != 0:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {h.producer_id} epoch {h.producer_epoch}: sequence "
                    f"{h.base_sequence}, expected 0",
                )
            return
        if not _in_sequence(last_seq, h.base_sequence):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {h.producer_id}: sequence {h.base_sequence}, expected {last_seq + 1}",
            )

    def update(self, h: BatchHeader, timestamp: int) -> None:
        """Record an appended data batch (offsets assigned)."""
        if not h.has_producer_id:
            return
        entry = self._entry(h.producer_id, h.producer_epoch)
        entry.set_epoch(h.producer_epoch)
        if h.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(h.base_sequence, h.last_sequence, h.base_offset, h.last_offset, timestamp)
            )
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        if h.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = h.base_offset
            self.ongoing[h.base_offset] = h.producer_id

    def update_marker(
        self, h: BatchHeader, commit: bool, coordinator_epoch: int, timestamp: int
    ) -> CompletedTxn | None:
        """Record an appended COMMIT/ABORT marker; returns the transaction it ends, if it had data
        (a marker of an empty transaction changes neither the LSO nor the index). The caller
        indexes an aborted one, then calls ``complete``."""
        entry = self._entry(h.producer_id, h.producer_epoch)
        first = entry.current_txn_first_offset
        entry.set_epoch(h.producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = None
        entry.last_timestamp = timestamp
        if first is None:
            return None
        return CompletedTxn(h.producer_id, first, h.base_offset, not commit)

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """The LSO once ``txn`` completes, for its index entry (Kafka's lastStableOffset): the
        first ongoing transaction of another producer, else just after the marker."""
        others = [first for first, pid in self.ongoing.items() if pid != txn.producer_id]
        return min(others) if others else txn.last_offset + 1

    def complete(self, txn: CompletedTxn) -> None:
        """Kafka's completeTxn: no longer ongoing, but unstable until the high watermark passes
        its marker."""
        del self.ongoing[txn.first_offset]
        self.unreplicated[txn.first_offset] = txn.last_offset

    def on_high_watermark(self, high_watermark: int) -> None:
        done = [first for first, last in self.unreplicated.items() if last < high_watermark]
        for first in done:
            del self.unreplicated[first]

    def first_unstable_offset(self) -> int | None:
        if not self.ongoing and not self.unreplicated:
            return None
        return min(min(self.ongoing, default=INT64_MAX), min(self.unreplicated, default=INT64_MAX))

    def _entry(self, producer_id: int, epoch: int) -> ProducerEntry:
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = ProducerEntry(producer_id, epoch)
            self.producers[producer_id] = entry
        return entry

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle longer than producer.id.expiration.ms (Kafka's default 1 day),
        except those in a transaction (Kafka's isProducerExpired)."""
        doomed = [
            pid
            for pid, e in self.producers.items()
            if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms
        ]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)

    # --- snapshots ---------------------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The producers as plain data (completed transactions waiting for the high watermark
        are left out: after a restart the high watermark is the log end)."""
        return {
            "producers": [
                [
                    e.producer_id,
                    e.epoch,
                    e.coordinator_epoch,
                    e.last_timestamp,
                    e.current_txn_first_offset,
                    [
                        [b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                        for b in e.batches
                    ],
                ]
                for e in self.producers.values()
            ]
        }

    @classmethod
    def restore(cls, data: dict[str, Any]) -> ProducerStateTable:
        table = cls()
        for pid, epoch, coordinator_epoch, last_ts, txn_first, batches in data["producers"]:
            entry = ProducerEntry(pid, epoch, last_timestamp=last_ts, coordinator_epoch=coordinator_epoch)
            entry.batches.extend(BatchMetadata(*b) for b in batches)
            entry.current_txn_first_offset = txn_first
            if txn_first is not None:
                table.ongoing[txn_first] = pid
            table.producers[pid] = entry
        return table
