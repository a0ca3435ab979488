"""A topic's deletion is recorded (topics.json) before its files go, so that a crash in between
finishes the deletion at the next start instead of bringing the topic back empty."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kcoord.clock import ManualClock
from kcoord.config import BrokerConfig
from kcoord.dataplane.partitions import PartitionManager
from kcoord.storage.flush import Flusher


class Crash(BaseException):
    """The process dying: nothing after it runs, no handler catches it."""


def _manager(data: Path) -> PartitionManager:
    pm = PartitionManager(BrokerConfig(log_dirs=str(data)), Flusher("os", directory=data), ManualClock())
    pm.open()
    return pm


def test_a_crash_between_recording_a_deletion_and_removing_the_files_finishes_it_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pm = _manager(tmp_path)
    pm.create_topic("gone", 3, {})
    pm.create_topic("kept", 1, {})
    rename = os.rename

    def crash_at_the_files(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if os.fspath(dst).endswith("-delete"):  # Log.delete's rename of the partition directory
            raise Crash
        rename(src, dst)

    monkeypatch.setattr(os, "rename", crash_at_the_files)
    with pytest.raises(Crash):
        pm.delete_topic(pm.topics["gone"])
    monkeypatch.setattr(os, "rename", rename)
    assert (tmp_path / "gone-0").exists()  # the crash left the files

    again = _manager(tmp_path)  # the first manager is never closed: the crash
    assert sorted(again.topics) == ["kept"]
    assert not any(d.name.startswith("gone-") for d in tmp_path.iterdir())
    again.close()
