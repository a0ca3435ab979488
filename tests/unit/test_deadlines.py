"""Deadlines keeps the earliest of its values whatever is set, set again or removed."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kcoord.runtime.deadlines import Deadlines

ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from("abcdef"), st.integers(0, 100)),
        st.tuples(st.just("default"), st.sampled_from("abcdef"), st.integers(0, 100)),
        st.tuples(st.just("pop"), st.sampled_from("abcdef"), st.just(0)),
    ),
    max_size=300,
)


@given(ops)
def test_earliest_is_the_minimum_of_the_values(steps: list[tuple[str, str, int]]) -> None:
    d = Deadlines()
    model: dict[str, int] = {}
    for op, key, value in steps:
        if op == "set":
            d[key] = model[key] = value
        elif op == "default":
            assert d.setdefault(key, value) == model.setdefault(key, value)
        else:
            d.pop(key, None)
            model.pop(key, None)
        assert dict(d) == model
        assert d.earliest() == (min(model.values()) if model else None)


def test_stale_entries_do_not_pile_up() -> None:
    d = Deadlines()
    for i in range(10_000):
        d[f"m{i % 10}"] = i
    assert len(d._heap) <= 4 * len(d) + 64
    assert d.earliest() == 9_990
