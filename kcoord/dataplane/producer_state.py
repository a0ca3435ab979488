"""Idempotent producers: per-partition sequence checks as Kafka's ProducerStateManager.

For every producer id the partition remembers its epoch and the metadata of its last five
batches. A batch repeating one of them is a duplicate: it is not appended again and the
producer gets the offsets of the original (Kafka answers duplicates with success). Otherwise:
an older epoch is INVALID_PRODUCER_EPOCH, a new epoch must restart at sequence 0, and within
an epoch the first sequence must follow the last one (wrapping at 2^31-1), else
OUT_OF_ORDER_SEQUENCE_NUMBER. A producer id the partition does not know may start at any
sequence (its state may have expired). Kafka 4 never answers DUPLICATE_SEQUENCE_NUMBER: an
exact repeat is success, anything else out of line is OUT_OF_ORDER_SEQUENCE_NUMBER.
State is rebuilt from the batch headers in the log on start.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.records import NO_SEQUENCE, BatchHeader

CACHED_BATCHES = 5  # Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
INT32_MAX = 0x7FFFFFFF


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=CACHED_BATCHES))
    last_timestamp: int = -1

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

    def validate(self, headers: list[BatchHeader]) -> BatchMetadata | None:
        """Check the batches of one append; returns the original if the append is a duplicate."""
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq) within this append
        for h in headers:
            if not h.has_producer_id:
                continue
            entry = self.producers.get(h.producer_id)
            if entry is not None and h.producer_id not in pending:
                dup = entry.find_duplicate(h)
                if dup is not None:
                    return dup
            if h.producer_id in pending:
                epoch, last_seq = pending[h.producer_id]
            elif entry is not None:
                epoch, last_seq = entry.epoch, entry.last_seq
            else:
                epoch, last_seq = None, NO_SEQUENCE
            self._check(h, epoch, last_seq)
            pending[h.producer_id] = (h.producer_epoch, h.last_sequence)
        return None

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
        """Record an appended batch (offsets assigned)."""
        if not h.has_producer_id:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None or h.producer_epoch != entry.epoch:
            entry = ProducerEntry(h.producer_id, h.producer_epoch)
            self.producers[h.producer_id] = entry
        if h.base_sequence != NO_SEQUENCE:
            entry.batches.append(
                BatchMetadata(h.base_sequence, h.last_sequence, h.base_offset, h.last_offset, timestamp)
            )
        entry.last_timestamp = max(entry.last_timestamp, timestamp)

    def expire(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle longer than producer.id.expiration.ms (Kafka's default 1 day)."""
        doomed = [pid for pid, e in self.producers.items() if now_ms - e.last_timestamp >= expiration_ms]
        for pid in doomed:
            del self.producers[pid]
        return len(doomed)
