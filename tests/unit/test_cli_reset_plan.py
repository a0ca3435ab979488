"""The reset-offsets plan and its option parsing (kcoord/cli/reset_offsets.py), without a broker."""

from __future__ import annotations

import datetime as dt

import pytest

from kcoord.cli.reset_offsets import PlanError, ResetSpec, parse_datetime, parse_duration, parse_topic, plan

A0, A1 = ("a", 0), ("a", 1)
EARLIEST = {A0: 5, A1: 0}
LATEST = {A0: 20, A1: 8}


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H", 3_600_000),
        ("P1DT2H3M4S", 86_400_000 + 7_200_000 + 180_000 + 4000),
        ("PT0.5S", 500),
        ("pt90m", 5_400_000),
        ("P2D", 172_800_000),
        ("-PT1M", -60_000),
    ],
)
def test_durations_as_java_parses_them(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize("text", ["1h", "P", "PT", "P1H", "PT1D", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(PlanError):
        parse_duration(text)


def test_datetimes() -> None:
    utc = dt.datetime(2026, 11, 23, 10, 15, tzinfo=dt.UTC)
    assert parse_datetime("2026-11-23T10:15:00.000Z") == int(utc.timestamp() * 1000)
    assert parse_datetime("2026-11-23T11:15:00.000+01:00") == int(utc.timestamp() * 1000)
    local = dt.datetime(2026, 11, 23, 10, 15).astimezone()
    assert parse_datetime("2026-11-23T10:15:00.000") == int(local.timestamp() * 1000)
    for bad in ("2026-11-23", "tomorrow", "2026-13-01T00:00:00"):
        with pytest.raises(PlanError):
            parse_datetime(bad)


def test_topic_specs() -> None:
    assert parse_topic("a") == ("a", None)
    assert parse_topic("a:2,0,2") == ("a", [0, 2])
    for bad in (":1", "a:", "a:x", "a:-1"):
        with pytest.raises(PlanError):
            parse_topic(bad)


def new(spec: ResetSpec, current: dict, by_time: dict | None = None) -> dict:  # type: ignore[type-arg]
    return {(p.topic, p.partition): p.new for p in plan(spec, [A1, A0], current, EARLIEST, LATEST, by_time)}


def test_offsets_are_kept_inside_the_log() -> None:
    assert new(ResetSpec("to-offset", 3), {}) == {A0: 5, A1: 3}
    assert new(ResetSpec("to-offset", 30), {}) == {A0: 20, A1: 8}
    assert new(ResetSpec("shift-by", -4), {A0: 7, A1: 6}) == {A0: 5, A1: 2}
    assert new(ResetSpec("shift-by", 4), {A0: 7, A1: 6}) == {A0: 11, A1: 8}
    with pytest.raises(PlanError):
        new(ResetSpec("shift-by", 1), {A0: 7})


def test_time_and_current() -> None:
    # no record that recent (-1): the log end
    assert new(ResetSpec("to-datetime", 1), {}, {A0: 9, A1: -1}) == {A0: 9, A1: 8}
    assert new(ResetSpec("to-current"), {A0: 7}) == {A0: 7, A1: 8}
    assert new(ResetSpec("to-earliest"), {}) == EARLIEST
    assert new(ResetSpec("to-latest"), {}) == LATEST
