"""One transactional id's state, as Kafka's TransactionMetadata keeps it.

The states and their ids (TransactionStatus in ``__transaction_state``) are Kafka's:

    Empty 0 -> Ongoing 1 (AddPartitionsToTxn / AddOffsetsToTxn)
    Ongoing -> PrepareCommit 2 / PrepareAbort 3 (EndTxn; PrepareAbort also when the coordinator
               aborts: a timed-out transaction, or InitProducerId fencing an ongoing one)
    PrepareCommit -> CompleteCommit 4, PrepareAbort -> CompleteAbort 5 (every marker written)
    Empty / CompleteCommit / CompleteAbort -> Dead 6 (transactional.id.expiration.ms: tombstone)
    Ongoing -> PrepareEpochFence 7: never written; Kafka's pending state while it fences

Everything here but ``last_producer_epoch`` and ``previous_producer_id`` is rebuilt from the
records: Kafka does not persist them either at transaction.version 1 (the last epoch is -1 after a
reload; the previous producer id is a tagged field of value v1, which Kafka writes only under
transaction.version 2), so a retried InitProducerId that spans a restart is fenced, as in Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from kcoord.transaction.records import PartitionsSchema, TransactionLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INT16_MAX = 0x7FFF

TopicPartition = tuple[str, int]


class TransactionState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions give (Kafka's state names)."""
        return _NAMES[self]

    @property
    def expiration_allowed(self) -> bool:
        return self in (
            TransactionState.EMPTY,
            TransactionState.COMPLETE_COMMIT,
            TransactionState.COMPLETE_ABORT,
        )

    @property
    def completing(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)


_NAMES = {
    TransactionState.EMPTY: "Empty",
    TransactionState.ONGOING: "Ongoing",
    TransactionState.PREPARE_COMMIT: "PrepareCommit",
    TransactionState.PREPARE_ABORT: "PrepareAbort",
    TransactionState.COMPLETE_COMMIT: "CompleteCommit",
    TransactionState.COMPLETE_ABORT: "CompleteAbort",
    TransactionState.DEAD: "Dead",
    TransactionState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}


def is_epoch_exhausted(epoch: int) -> bool:
    # Kafka keeps Short.MaxValue free so that the coordinator can always fence a producer.
    return epoch >= INT16_MAX - 1


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp: int = -1
    last_update_timestamp: int = -1
    previous_producer_id: int = NO_PRODUCER_ID  # in memory only unless a v1 record carries it
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # in memory only, as in Kafka

    def to_value(self) -> TransactionLogValue:
        parts: tuple[PartitionsSchema, ...] | None = None
        if self.state != TransactionState.EMPTY:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(self.partitions):
                by_topic.setdefault(topic, []).append(partition)
            parts = tuple(PartitionsSchema(t, tuple(ps)) for t, ps in by_topic.items())
        return TransactionLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms,
            transaction_status=int(self.state),
            transaction_partitions=parts,
            transaction_last_update_timestamp_ms=self.last_update_timestamp,
            transaction_start_timestamp_ms=self.start_timestamp,
            # Value v0 (what kcoord writes) has no previous/next producer id: the value the live
            # replay gets is the one a reload decodes, so they stay out here too.
        )

    @classmethod
    def from_value(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        return cls(
            transactional_id=transactional_id,
            producer_id=value.producer_id,
            producer_epoch=value.producer_epoch,
            timeout_ms=value.transaction_timeout_ms,
            state=TransactionState(value.transaction_status),
            partitions={(p.topic, i) for p in value.transaction_partitions or () for i in p.partition_ids},
            start_timestamp=value.transaction_start_timestamp_ms,
            last_update_timestamp=value.transaction_last_update_timestamp_ms,
            previous_producer_id=value.previous_producer_id,
            next_producer_id=value.next_producer_id,
        )

    def snapshot(self) -> tuple[object, ...]:
        """What the records say (everything but the in-memory last epoch and previous producer
        id), for replay tests."""
        return (
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.start_timestamp,
            self.last_update_timestamp,
            self.next_producer_id,
        )
