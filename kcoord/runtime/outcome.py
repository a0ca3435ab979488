"""What a coordinator operation produces: records to persist and answers to send once they are.

An operation is a plain function of the shard's state and the current time. Its records are
applied to the state (the same ``replay`` start-up uses) before the next operation runs, and
its answers are released only once those records, and every record its key wrote before them,
are durable (docs/architecture.md, principle 1: durable-then-respond).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

Record = tuple[Any, Any]  # (key, value); a value of None is a tombstone
Producer = tuple[int, int]  # (producer id, producer epoch) of a transactional write
Responder = Callable[[Any], None]  # gets the answer, or the exception that failed it

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class TransactionMarker:
    """The end of a producer's transaction in one coordinator partition: Kafka's COMMIT or ABORT
    control record, written by the transaction coordinator's marker (WriteTxnMarkers in Kafka)."""

    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int = 0


@dataclass(slots=True, init=False)
class Outcome:
    records: list[Record]
    responses: list[tuple[Responder, Any]]
    # Set when the records are a producer's transactional writes (TxnOffsetCommit): they go into a
    # batch of their own carrying the producer, and count only once a marker commits them.
    producer: Producer | None
    # Written after the records: ends the producer's transaction in this partition.
    marker: TransactionMarker | None
    # What the operation does next on the state its records made, in the same run and the same
    # batch (a group converted to another type, then joined): records are only ever applied
    # through replay, so an operation that must see its own records continues here.
    then: Callable[[Any, int], Outcome] | None

    # One per operation: written out, compiled, it is C; dataclass's generated __init__ (with its
    # default factories) is Python.
    def __init__(
        self,
        records: list[Record] | None = None,
        responses: list[tuple[Responder, Any]] | None = None,
        producer: Producer | None = None,
        marker: TransactionMarker | None = None,
        then: Callable[[Any, int], Outcome] | None = None,
    ) -> None:
        self.records = [] if records is None else records
        self.responses = [] if responses is None else responses
        self.producer = producer
        self.marker = marker
        self.then = then

    def respond(self, responder: Responder | None, value: Any) -> None:
        if responder is not None:
            self.responses.append((responder, value))

    def and_then(self, step: Callable[[Any, int], Outcome]) -> None:
        """Continue with ``step`` once every continuation this outcome already has has run."""
        prior = self.then
        if prior is None:
            self.then = step
            return

        def chained(state: Any, now: int) -> Outcome:
            out = prior(state, now)
            out.and_then(step)
            return out

        self.then = chained

    def extend(self, other: Outcome) -> None:
        if other.records:
            if self.marker is not None or (self.records and other.producer != self.producer):
                raise ValueError("an outcome writes records of one producer, before its marker")
            self.producer = other.producer
        if other.marker is not None:
            if self.marker is not None:
                raise ValueError("an outcome writes one marker")
            self.marker = other.marker
        self.records.extend(other.records)
        self.responses.extend(other.responses)
        if other.then is not None:
            if self.then is not None:
                raise ValueError("an outcome has one continuation")
            self.then = other.then


Operation = Callable[[S, int], Outcome]  # (shard state, now in ms) -> Outcome
