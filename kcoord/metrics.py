"""In-process metrics under Kafka's names and tags (KIP-932's group-coordinator-metrics).

Meters keep a cumulative count and a rate per second over Kafka's default sampling (two
samples of ``metrics.sample.window.ms`` = 30 s); gauges are computed when read. Everything is
read with :meth:`Metrics.snapshot`, keyed by ``(name, tags)`` as Kafka's MetricName is; an
exporter only has to walk that snapshot. All of them are Kafka's ``group-coordinator-metrics``.

Request metrics (Kafka's ``kafka.network:type=RequestMetrics``) are kept apart, in
:class:`RequestMetrics`: the dispatcher records every request there, so recording is a counter
increment on an object it looked up once per (API, version), not a dictionary walk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Final

from kcoord.clock import Clock

SAMPLE_WINDOW_MS: Final = 30_000
SAMPLES: Final = 2

# group-coordinator-metrics recorded by more than one package (Kafka's GroupCoordinatorMetrics).
OFFSET_COMMIT: Final = "offset-commit"  # offsets committed (a meter: -rate, -count)
OFFSET_EXPIRATION: Final = "offset-expiration"  # offsets removed by KIP-211 expiry
OFFSET_DELETION: Final = "offset-deletion"  # offsets removed by OffsetDelete
PARTITION_LOAD_TIME: Final = "partition-load-time"  # ms to replay one coordinator partition (-avg, -max)

Tags = tuple[tuple[str, str], ...]
MetricKey = tuple[str, Tags]


def tags(**kw: str) -> Tags:
    return tuple(sorted((k.replace("_", "-"), v) for k, v in kw.items()))


@dataclass
class Meter:
    """Kafka's Meter: ``<name>-count`` (cumulative) and ``<name>-rate`` (per second)."""

    count: int = 0
    _windows: list[list[int]] = field(default_factory=list)  # closed windows: [start, events]
    # The open window, as plain ints: compiled, recording into a list's last list was boxed
    # reads and writes of list items, some 500 instructions per OffsetCommit.
    _start: int = -1  # -1: none open yet
    _events: int = 0

    def record(self, now_ms: int, n: int = 1) -> None:
        self.count += n
        if self._start < 0 or now_ms - self._start >= SAMPLE_WINDOW_MS:
            if self._start >= 0:
                self._windows.append([self._start, self._events])
                del self._windows[: len(self._windows) - (SAMPLES - 1)]
            self._start = now_ms
            self._events = 0
        self._events += n

    def rate(self, now_ms: int) -> float:
        windows = [*self._windows, [self._start, self._events]] if self._start >= 0 else self._windows
        live = [w for w in windows if now_ms - w[0] < SAMPLE_WINDOW_MS * SAMPLES]
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
        self.requests = RequestMetrics()
        # Kafka's socket-server-metrics group (the network layer's, per listener), read at scrape.
        self.socket_server: dict[MetricKey, Callable[[], float]] = {}
        # Recorded by every OffsetCommit: held, where looking it up by name and tags built and
        # hashed a tuple per commit.
        self.offset_commits = self.meter(OFFSET_COMMIT, ())

    def meter(self, name: str, t: Tags) -> Meter:
        m = self.meters.get((name, t))  # not setdefault: no Meter built per call on hot paths
        if m is None:
            m = self.meters[(name, t)] = Meter()
        return m

    def avg_max(self, name: str, t: Tags) -> AvgMax:
        s = self.stats.get((name, t))
        if s is None:
            s = self.stats[(name, t)] = AvgMax()
        return s

    def gauge(self, name: str, t: Tags, read: Callable[[], float]) -> None:
        self.gauges[(name, t)] = read

    def socket_server_gauge(self, name: str, t: Tags, read: Callable[[], float]) -> None:
        self.socket_server[(name, t)] = read

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


# Upper bounds (ms) of the TotalTimeMs histogram's buckets: sub-millisecond answers from memory up
# to long polls (Fetch and ShareFetch wait up to their max wait, 500 ms by default, often more).
REQUEST_TIME_BUCKETS_MS: Final[tuple[float, ...]] = (
    0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0
)  # fmt: skip
_BUCKETS: Final = len(REQUEST_TIME_BUCKETS_MS)


class RequestTime:
    """TotalTimeMs of one API: from the frame's arrival to its answer being ready, in ms."""

    __slots__ = ("buckets", "count", "sum_ms")

    def __init__(self) -> None:
        self.buckets = [0] * (_BUCKETS + 1)  # the last one is +Inf
        self.count = 0
        self.sum_ms = 0.0

    def record(self, ms: float) -> None:
        # The first bucket whose bound is >= ms (bisect_left), counted from the fast end: nearly
        # every answer is in the first few, and compiled this loop is C float compares, where
        # bisect is a Python call comparing objects.
        i = 0
        while i < _BUCKETS and REQUEST_TIME_BUCKETS_MS[i] < ms:
            i += 1
        self.buckets[i] += 1
        self.count += 1
        self.sum_ms += ms


class RequestCounter:
    """RequestsPerSec of one API at one version, and ErrorsPerSec by error code."""

    __slots__ = ("count", "failed", "ok", "time")

    def __init__(self, time: RequestTime) -> None:
        self.count = 0
        self.ok = 0  # answers with error code NONE: a C counter, not a dict entry, per answer
        self.failed: dict[int, int] = {}  # other error code -> answers
        self.time = time

    def answered(self, error_code: int, ms: float) -> None:
        if error_code == 0:
            self.ok += 1
        else:
            failed = self.failed
            failed[error_code] = failed.get(error_code, 0) + 1
        self.time.record(ms)

    @property
    def errors(self) -> dict[int, int]:
        """Answers by error code, NONE (0) included once any was answered."""
        return ({0: self.ok} if self.ok else {}) | self.failed


class RequestMetrics:
    """Kafka's RequestMetrics: requests by (request name, version), errors by (request name, error
    code), total time by request name."""

    def __init__(self) -> None:
        self.counters: dict[tuple[str, int], RequestCounter] = {}
        self.times: dict[str, RequestTime] = {}

    def counter(self, request: str, version: int) -> RequestCounter:
        c = self.counters.get((request, version))
        if c is None:
            time = self.times.get(request)
            if time is None:
                time = self.times[request] = RequestTime()
            c = self.counters[(request, version)] = RequestCounter(time)
        return c

    def errors(self) -> Iterator[tuple[str, int, int]]:
        """(request name, error code, count), the versions of a request added up."""
        totals: dict[tuple[str, int], int] = {}
        for (request, _version), c in self.counters.items():
            for code, n in c.errors.items():
                totals[(request, code)] = totals.get((request, code), 0) + n
        for (request, code), n in sorted(totals.items()):
            yield request, code, n
