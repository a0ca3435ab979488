"""A partition whose reads keep failing is logged when it first fails, then once a minute with
how many failures the line stands for: clients retry at once and for ever."""

from __future__ import annotations

import errno

import pytest
from structlog.testing import capture_logs

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.records import InvalidBatch
from kcoord.storage import read_errors
from kcoord.storage.read_errors import REPEAT_LOG_SECONDS, unreadable


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    at = [1000.0]
    monkeypatch.setattr(read_errors, "now", lambda: at[0])
    monkeypatch.setattr(read_errors, "_logged", {})
    return at


def test_a_partition_failing_again_and_again_is_logged_once_a_minute(clock: list[float]) -> None:
    eio = OSError(errno.EIO, "Input/output error")
    with capture_logs() as logs:
        codes = {unreadable("fetch", "t", 1, eio) for _ in range(500)}
        clock[0] += REPEAT_LOG_SECONDS - 1
        unreadable("fetch", "t", 1, eio)
        assert len(logs) == 1 and "failures_since_last_logged" not in logs[0]
        clock[0] += 1
        unreadable("fetch", "t", 1, eio)
        # the window starts again at the second line: quiet again until a minute after it
        unreadable("fetch", "t", 1, eio)
        clock[0] += REPEAT_LOG_SECONDS - 1
        unreadable("fetch", "t", 1, eio)
        assert len(logs) == 2
        clock[0] += 1
        unreadable("fetch", "t", 1, eio)
    assert codes == {ErrorCode.KAFKA_STORAGE_ERROR}
    assert [e.get("failures_since_last_logged") for e in logs] == [None, 501, 3]
    assert logs[0]["log_level"] == "warning" and logs[0]["partition"] == 1


def test_each_partition_api_and_kind_of_failure_is_logged_on_its_own(clock: list[float]) -> None:
    eio = OSError(errno.EIO, "Input/output error")
    corrupt = InvalidBatch("batch at position 0 of 00000000000000000000.log has length 5")
    with capture_logs() as logs:
        answers = [
            unreadable("fetch", "t", 1, eio),
            unreadable("fetch", "t", 2, eio),
            unreadable("fetch", "u", 1, eio),
            unreadable("list offsets", "t", 1, eio),
            unreadable("fetch", "t", 1, corrupt),
            unreadable("fetch", "t", 1, corrupt),
        ]
    assert answers[-1] == ErrorCode.CORRUPT_MESSAGE
    assert len(logs) == 5
    assert "holds a corrupt batch" in logs[4]["event"]
