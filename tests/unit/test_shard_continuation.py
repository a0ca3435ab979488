"""An operation that continues on the state its own records made (``Outcome.then``): the
continuation sees them applied, and everything lands in one batch, answered together."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcoord.groups.offsets import commit_records
from kcoord.groups.store import GroupStore
from kcoord.runtime.outcome import Outcome
from tests.unit.grouputil import Harness, Inbox


def test_continuation_sees_the_records_before_it_and_shares_their_batch(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    seen: list[dict[tuple[str, int], int]] = []
    inbox = Inbox()

    def second(store: GroupStore, now: int) -> Outcome:
        seen.append({(t, p): v.offset for t, ps in store.offsets.of("g").items() for p, v in ps.items()})
        out = Outcome(records=commit_records("g", [("t", 1, 20, -1, "")], now, -1))
        out.respond(inbox, "second")
        return out

    def first(store: GroupStore, now: int) -> Outcome:
        out = Outcome(records=commit_records("g", [("t", 0, 10, -1, "")], now, -1), then=second)
        out.respond(inbox, "first")
        return out

    batches_before = sum(1 for _ in h.log.batches())
    h.run_op(first)
    assert seen == [{("t", 0): 10}]
    assert inbox.values == ["first", "second"]
    assert sum(1 for _ in h.log.batches()) == batches_before + 1
    assert h.committed("g") == {("t", 0): 10, ("t", 1): 20}
    assert h.replay().offsets.committed == h.state.offsets.committed


def test_an_outcome_has_one_continuation() -> None:
    a = Outcome(then=lambda s, n: Outcome())
    with pytest.raises(ValueError):
        a.extend(Outcome(then=lambda s, n: Outcome()))
