"""Kafka's Meter (metrics.Meter): ``-count`` is every event recorded, ``-rate`` the events of the
last two 30 s windows over the time they span (at least one window). Checked against the plain
list-of-windows model it was written as, on generated recording times."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.metrics import SAMPLE_WINDOW_MS, SAMPLES, Meter


class _Model:
    def __init__(self) -> None:
        self.count = 0
        self.windows: list[list[int]] = []

    def record(self, now_ms: int, n: int) -> None:
        self.count += n
        if not self.windows or now_ms - self.windows[-1][0] >= SAMPLE_WINDOW_MS:
            self.windows.append([now_ms, 0])
            del self.windows[:-SAMPLES]
        self.windows[-1][1] += n

    def rate(self, now_ms: int) -> float:
        live = [w for w in self.windows if now_ms - w[0] < SAMPLE_WINDOW_MS * SAMPLES]
        if not live:
            return 0.0
        elapsed = max(now_ms - live[0][0], SAMPLE_WINDOW_MS * (SAMPLES - 1))
        return sum(n for _, n in live) * 1000.0 / elapsed


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.integers(0, 3 * SAMPLE_WINDOW_MS), st.integers(1, 50), st.integers(0, 2 * SAMPLE_WINDOW_MS)
        ),
        max_size=60,
    )
)
def test_a_meter_counts_and_rates_as_its_model(steps: list[tuple[int, int, int]]) -> None:
    meter, model = Meter(), _Model()
    now = 1_700_000_000_000
    assert meter.rate(now) == model.rate(now) == 0.0
    for gap, n, ahead in steps:
        now += gap
        meter.record(now, n)
        model.record(now, n)
        assert meter.count == model.count
        assert meter.rate(now) == model.rate(now)
        assert meter.rate(now + ahead) == model.rate(now + ahead)
