"""What a coordinator operation produces: records to persist and answers to send once they are.

An operation is a plain function of the shard's state and the current time. Its records are
applied to the state (the same ``replay`` start-up uses) before the next operation runs, and
its answers are released only once those records, and every record its key wrote before them,
are durable (docs/architecture.md, principle 1: durable-then-respond).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

Record = tuple[Any, Any]  # (key, value); a value of None is a tombstone
Responder = Callable[[Any], None]  # gets the answer, or the exception that failed it

S = TypeVar("S")


@dataclass(slots=True)
class Outcome:
    records: list[Record] = field(default_factory=list)
    responses: list[tuple[Responder, Any]] = field(default_factory=list)
    # What the operation does next on the state its records made, in the same run and the same
    # batch (a group converted to another type, then joined): records are only ever applied
    # through replay, so an operation that must see its own records continues here.
    then: Callable[[Any, int], Outcome] | None = None

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
        self.records.extend(other.records)
        self.responses.extend(other.responses)
        if other.then is not None:
            if self.then is not None:
                raise ValueError("an outcome has one continuation")
            self.then = other.then


Operation = Callable[[S, int], Outcome]  # (shard state, now in ms) -> Outcome
