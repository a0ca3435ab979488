"""The plan of ``kcoord groups reset-offsets``: Kafka's reset options (ConsumerGroupCommand's
--to-earliest, --to-latest, --to-offset, --to-datetime, --by-duration, --shift-by, --to-current)
turned into a new offset per partition, with Kafka's rules:

- an offset outside [log start offset, log end offset] is moved to the nearer end (--to-offset,
  --shift-by), as Kafka's checkOffsetRange does;
- --to-datetime and --by-duration take the first offset whose record timestamp is at or after the
  time, or the log end offset when no record is that recent;
- --to-current keeps each committed offset, and takes the log end offset where none is committed;
- --shift-by needs a committed offset to shift.

For a share group the "current offset" is the share-partition start offset (SPSO).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]

RESET_KINDS = (
    "to-earliest",
    "to-latest",
    "to-offset",
    "to-datetime",
    "by-duration",
    "shift-by",
    "to-current",
)


class PlanError(ValueError):
    """The options do not apply to the group's partitions (a usage error)."""


@dataclass(frozen=True)
class ResetSpec:
    kind: str  # one of RESET_KINDS
    value: int = 0  # the offset (to-offset), the shift (shift-by) or the time in ms (to-datetime)

    @property
    def needs_timestamps(self) -> bool:
        return self.kind in ("to-datetime", "by-duration")


@dataclass(frozen=True)
class PlannedOffset:
    topic: str
    partition: int
    current: int | None  # the committed offset (or SPSO) now; None if there is none
    new: int


def parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2`` (Kafka's --topic syntax; a topic name has no colon)."""
    name, sep, parts = spec.partition(":")
    if not name:
        raise PlanError(f"invalid --topic {spec!r}: no topic name")
    if not sep:
        return name, None
    try:
        partitions = sorted({int(p) for p in parts.split(",") if p.strip() != ""})
    except ValueError:
        raise PlanError(f"invalid --topic {spec!r}: partitions must be numbers, e.g. {name}:0,1") from None
    if not partitions or any(p < 0 for p in partitions):
        raise PlanError(f"invalid --topic {spec!r}: expected {name}:0,1,...")
    return name, partitions


def parse_datetime(text: str) -> int:
    """``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``, ``+01:00``) to ms since the epoch;
    without a zone the local time zone is meant, as in Kafka's tool."""
    if "T" not in text:
        raise PlanError(f"invalid --to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss")
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise PlanError(f"invalid --to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss") from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as Kafka's Utils.getDateTime
    return int(when.timestamp() * 1000)


def parse_instant(text: str, option: str) -> int:
    """Epoch milliseconds, or a date and time as ``parse_datetime`` takes it (--since,
    --to-commit-at)."""
    if text.strip().lstrip("-").isdigit():
        return int(text)
    try:
        return parse_datetime(text)
    except PlanError:
        raise PlanError(
            f"invalid {option} {text!r}: expected epoch milliseconds or YYYY-MM-DDTHH:mm:SS.sss "
            "(local time unless a zone such as Z is given)"
        ) from None


# java.time.Duration.parse's format: PnDTnHnMn.nS, each part optional, signs allowed.
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> int:
    """A java.time.Duration text (``PnDTnHnMnS``, e.g. ``PT1H30M``, ``P1DT2H``) in ms."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or text.strip().upper().endswith("T") or not any(m.group(i) for i in range(2, 6)):
        raise PlanError(f"invalid --by-duration {text!r}: expected PnDTnHnMnS, e.g. PT1H or P1DT12H")
    sign, days, hours, minutes, seconds, frac = m.groups()
    ms = (
        int(days or 0) * 86_400_000
        + int(hours or 0) * 3_600_000
        + int(minutes or 0) * 60_000
        + int(seconds or 0) * 1000
    )
    if frac:
        fraction_ms = int(frac.ljust(9, "0")[:3])
        ms += -fraction_ms if (seconds or "").startswith("-") else fraction_ms
    return -ms if sign == "-" else ms


def plan(
    spec: ResetSpec,
    partitions: list[TopicPartition],
    current: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int] | None = None,
) -> list[PlannedOffset]:
    """The new offset of each partition (``by_time``: ListOffsets by the spec's timestamp)."""
    out = []
    for tp in sorted(partitions):
        lo, hi = earliest[tp], latest[tp]
        now = current.get(tp)
        if spec.kind == "to-earliest":
            new = lo
        elif spec.kind == "to-latest":
            new = hi
        elif spec.kind == "to-offset":
            new = min(max(spec.value, lo), hi)
        elif spec.kind == "shift-by":
            if now is None:
                raise PlanError(
                    f"cannot shift the offset of {tp[0]}-{tp[1]}: the group has no committed offset there"
                )
            new = min(max(now + spec.value, lo), hi)
        elif spec.kind in ("to-datetime", "by-duration"):
            assert by_time is not None
            found = by_time.get(tp, -1)
            new = found if found >= 0 else hi
        elif spec.kind == "to-current":
            new = now if now is not None else hi
        else:
            raise PlanError(f"unknown reset option {spec.kind}")
        out.append(PlannedOffset(tp[0], tp[1], now, new))
    return out
