"""Fixtures shared by the unit tests of the storage layer."""

from __future__ import annotations

import pytest

from kcoord.storage import log_dir_failure


@pytest.fixture
def halts(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """A failed sync halts the broker (log_dir_failure); here it is recorded instead, so that what
    the writers and the rounds after it hear can be checked. A module that fails syncs uses it
    for every test (``pytestmark``)."""
    seen: list[BaseException] = []
    monkeypatch.setattr(log_dir_failure, "halt", seen.append)
    return seen
