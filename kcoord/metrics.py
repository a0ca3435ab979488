"""In-process metrics under Kafka's names and tags (KIP-932's group-coordinator-metrics).

Meters keep a cumulative count and a rate per second over Kafka's default sampling (two
samples of ``metrics.sample.window.ms`` = 30 s); gauges are computed when read. Everything is
read with :meth:`Metrics.snapshot`, keyed by ``(name, tags)`` as Kafka's MetricName is; an
exporter only has to walk that snapshot.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kcoord.clock import Clock

SAMPLE_WINDOW_MS = 30_000
SAMPLES = 2

Tags = tuple[tuple[str, str], ...]
MetricKey = tuple[str, Tags]


def tags(**kw: str) -> Tags:
    return tuple(sorted((k.replace("_", "-"), v) for k, v in kw.items()))


@dataclass
class Meter:
    """Kafka's Meter: ``<name>-count`` (cumulative) and ``<name>-rate`` (per second)."""

    count: int = 0
    _windows: list[list[int]] = field(default_factory=list)  # [window start, events]

    def record(self, now_ms: int, n: int = 1) -> None:
        self.count += n
        if not self._windows or now_ms - self._windows[-1][0] >= SAMPLE_WINDOW_MS:
            self._windows.append([now_ms, 0])
            del self._windows[:-SAMPLES]
        self._windows[-1][1] += n

    def rate(self, now_ms: int) -> float:
        live = [w for w in self._windows if now_ms - w[0] < SAMPLE_WINDOW_MS * SAMPLES]
        if not live:
            return 0.0
        elapsed = max(now_ms - live[0][0], SAMPLE_WINDOW_MS * (SAMPLES - 1))
        return sum(n for _, n in live) * 1000.0 / elapsed


@dataclass
class AvgMax:
    """``<name>-avg`` and ``<name>-max`` of recorded values."""

    total: float = 0.0
    n: int = 0
    max: float = 0.0

    def record(self, value: float) -> None:
        self.total += value
        self.n += 1
        self.max = max(self.max, value)

    @property
    def avg(self) -> float:
        return self.total / self.n if self.n else 0.0


class Metrics:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.meters: dict[MetricKey, Meter] = {}
        self.stats: dict[MetricKey, AvgMax] = {}
        self.gauges: dict[MetricKey, Callable[[], float]] = {}

    def meter(self, name: str, t: Tags) -> Meter:
        return self.meters.setdefault((name, t), Meter())

    def avg_max(self, name: str, t: Tags) -> AvgMax:
        return self.stats.setdefault((name, t), AvgMax())

    def gauge(self, name: str, t: Tags, read: Callable[[], float]) -> None:
        self.gauges[(name, t)] = read

    def snapshot(self) -> dict[MetricKey, float]:
        now = self.clock.now_ms()
        out: dict[MetricKey, float] = {}
        for (name, t), m in self.meters.items():
            out[(name + "-count", t)] = m.count
            out[(name + "-rate", t)] = m.rate(now)
        for (name, t), s in self.stats.items():
            out[(name + "-avg", t)] = s.avg
            out[(name + "-max", t)] = s.max
        for key, read in self.gauges.items():
            out[key] = read()
        return out

    def value(self, name: str, **kw: str) -> float:
        return self.snapshot()[(name, tags(**kw))]
