"""The group page's history chart (kcoord.http.chart) and the record previews of the topic page."""

from __future__ import annotations

from kcoord.http.chart import HEIGHT, LEFT, WIDTH, history_chart
from kcoord.http.records import preview


def change(t: int, partition: int, offset: int, lag: int | None = None) -> dict[str, object]:
    return {"topic": "t", "partition": partition, "offset": offset, "commit_timestamp": t, "lag": lag}


def points(s: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",") for p in s.split())]


def test_offsets_are_steps_held_until_the_next_commit_and_drawn_to_now() -> None:
    c = history_chart([change(1000, 0, 10), change(2000, 0, 40)], {("t", 0): 80}, now_ms=3000)
    assert c is not None and c.kind == "offset" and c.y_max == 80
    (s,) = c.series
    pts = points(s.points)
    xs, ys = [x for x, _ in pts], [y for _, y in pts]
    assert xs[0] == LEFT and xs[-1] == c.right_x  # from the first commit to now
    assert ys[0] == ys[1] and ys[2] == ys[3]  # a step: 10 held until the second commit
    assert xs[1] == xs[2]  # ... where it rises
    assert ys[0] > ys[2]  # higher offsets are higher up (smaller y)
    assert s.end_y is not None and s.end_y < ys[-1]  # the log end now is above the last offset
    assert s.last == 40


def test_lag_is_plotted_when_the_history_gives_it() -> None:
    c = history_chart([change(1000, 0, 10, lag=5), change(2000, 1, 3, lag=9)], {}, now_ms=2000)
    assert c is not None and c.kind == "lag" and c.y_max == 9
    assert [s.label for s in c.series] == ["t-0", "t-1"]
    assert all(s.end_y is None for s in c.series)
    assert all(0 <= x <= WIDTH and 0 <= y <= HEIGHT for s in c.series for x, y in points(s.points))


def test_no_history_draws_nothing_and_many_partitions_are_cut() -> None:
    assert history_chart([], {}, now_ms=0) is None
    c = history_chart([change(1000, p, p) for p in range(12)], {}, now_ms=1000)
    assert c is not None and len(c.series) == 8 and c.hidden == 4


def test_previews_are_text_when_utf8_else_hex() -> None:
    assert preview(None, 10).text == "null" and preview(None, 10).size is None
    p = preview("héllo wörld".encode(), 5)
    assert (p.text, p.truncated, p.binary, p.size) == ("héllo", True, False, 13)
    b = preview(b"\xff\x00\x10", 2)
    assert (b.text, b.truncated, b.binary) == ("ff 00", True, True)
