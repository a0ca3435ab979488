"""The group page's small chart of a group's offset history, drawn as inline SVG on the server.

Its input is the history API's ``changes`` (oldest first). Where the API gives ``lag`` the chart
plots lag over time; where it gives none (the log holds no high watermark as of a commit) it
plots each partition's committed offset over time beside the partition's log end now, so the
distance between the two at the right edge is today's lag. Lines are steps: an offset holds
until the next commit. Only numbers reach the template, which the SVG needs no escaping for.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 10, 26
PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777")
MAX_SERIES = len(PALETTE)


@dataclass(frozen=True)
class Series:
    label: str  # topic-partition
    color: str
    points: str  # SVG polyline points
    end_y: float | None  # the log end now, as a dashed line (offset charts only)
    last: int


@dataclass(frozen=True)
class Chart:
    kind: str  # "lag" or "offset"
    series: list[Series]
    hidden: int  # series left out beyond MAX_SERIES
    y_max: int
    t_from: str
    t_to: str
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    top: int = TOP
    bottom_y: int = HEIGHT - BOTTOM
    right_x: int = WIDTH - RIGHT


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def history_chart(
    changes: Sequence[Mapping[str, Any]], log_ends: Mapping[tuple[str, int], int], now_ms: int
) -> Chart | None:
    """The chart of ``changes``; None when there is nothing to draw."""
    with_lag = [c for c in changes if c.get("lag") is not None]
    kind = "lag" if with_lag else "offset"
    field = "lag" if with_lag else "offset"
    by_partition: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for c in with_lag or changes:
        by_partition.setdefault((c["topic"], c["partition"]), []).append((c["commit_timestamp"], c[field]))
    if not by_partition:
        return None
    keys = sorted(by_partition)
    shown, hidden = keys[:MAX_SERIES], max(0, len(keys) - MAX_SERIES)
    t0 = min(t for k in shown for t, _ in by_partition[k])
    t1 = max(now_ms, max(t for k in shown for t, _ in by_partition[k]))
    if t1 <= t0:
        t0 = t1 - 1000
    values = [v for k in shown for _, v in by_partition[k]]
    if kind == "offset":
        values += [log_ends[k] for k in shown if k in log_ends]
    y_max = max(1, *values)

    def x(t: int) -> float:
        return round(LEFT + (t - t0) / (t1 - t0) * (WIDTH - LEFT - RIGHT), 1)

    def y(v: int) -> float:
        return round(HEIGHT - BOTTOM - v / y_max * (HEIGHT - TOP - BOTTOM), 1)

    series = []
    for i, k in enumerate(shown):
        pts: list[str] = []
        prev: int | None = None
        for t, v in by_partition[k]:
            if prev is not None:
                pts.append(f"{x(t)},{y(prev)}")  # hold the previous value until this commit
            pts.append(f"{x(t)},{y(v)}")
            prev = v
        assert prev is not None
        pts.append(f"{x(t1)},{y(prev)}")
        end = y(log_ends[k]) if kind == "offset" and k in log_ends else None
        series.append(Series(f"{k[0]}-{k[1]}", PALETTE[i], " ".join(pts), end, prev))
    return Chart(kind, series, hidden, y_max, _when(t0), _when(t1))
