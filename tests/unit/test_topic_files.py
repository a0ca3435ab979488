"""Topics' files and topics.json when the disk fails or the broker crashes part-way: a deletion is
recorded before the files go, a created partition never takes over a leftover directory, and a
topics.json replaced but not synced is never undone as if it had not been written."""

from __future__ import annotations

import os
from collections.abc import Callable
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


def test_a_topic_created_again_where_a_deleted_ones_files_were_left_starts_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deleted topic's directory that could not be removed (logged, left to the next start)
    does not become the log of a topic created under the same name before that start."""
    from tests.wire import build_batch

    pm = _manager(tmp_path)
    old = pm.create_topic("x", 1, {})
    old.partitions[0].log.append(*_batch(build_batch([(None, b"old", 1_700_000_000_000)])), now_ms=0)
    restore = _refuse_renames(monkeypatch, lambda src, dst: dst.endswith("-delete"))
    pm.delete_topic(old)  # recorded: the files' removal failing is logged
    restore()
    assert (tmp_path / "x-0").exists() and "x" not in pm.topics

    new = pm.create_topic("x", 1, {})
    assert new.partitions[0].log.log_end_offset == 0
    assert new.topic_id != old.topic_id
    metadata = (tmp_path / "x-0" / "partition.metadata").read_text()
    assert str(old.topic_id) not in metadata and _b64(new.topic_id) in metadata
    pm.close()


def test_a_deletion_whose_directory_sync_failed_leaves_the_files_for_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """topics.json replaced but its directory not synced: the topic is gone (as topics.json says)
    and DirectoryNotSynced is raised, but its files stay, so that a crash that brings the old
    topics.json back brings the topic back whole."""
    from kcoord.storage.atomic import DirectoryNotSynced

    pm = _manager(tmp_path)
    deleted = pm.create_topic("y", 2, {})
    logs = [p.log for p in deleted.partitions]
    fsync = os.fsync

    def failing_directory_sync(fd: int) -> None:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError(5, "Input/output error")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_directory_sync)
    with pytest.raises(DirectoryNotSynced):
        pm.delete_topic(pm.topics["y"])
    monkeypatch.setattr(os, "fsync", fsync)
    assert "y" not in pm.topics
    assert '"y"' not in (tmp_path / "topics.json").read_text()
    assert (tmp_path / "y-0").exists() and (tmp_path / "y-1").exists()
    assert not deleted.partitions and all(log.closed for log in logs)
    pm.close()


def _batch(data: bytes) -> tuple[bytes, list]:
    from kcoord.protocol import records

    return data, list(records.iter_headers(data))


def _b64(topic_id: object) -> str:
    from kcoord.dataplane.partitions import uuid_to_base64

    return uuid_to_base64(topic_id)  # type: ignore[arg-type]


def test_a_directory_named_like_an_internal_topics_is_never_removed_by_a_create(tmp_path: Path) -> None:
    """Start-up keeps directories whose names start with "__" (the coordinators' logs): a create
    of such a topic over one fails (KAFKA_STORAGE_ERROR) instead of removing it."""
    from kcoord.protocol.errors import ErrorCode, KafkaError

    pm = _manager(tmp_path)
    (tmp_path / "__kept-0").mkdir()
    (tmp_path / "__kept-0" / "precious").write_bytes(b"x")
    with pytest.raises(KafkaError) as failed:
        pm.create_topic("__kept", 1, {})
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert (tmp_path / "__kept-0" / "precious").read_bytes() == b"x"
    assert "__kept" not in pm.topics
    pm.close()


def _failing_directory_syncs(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """Syncs of ``directory`` itself (topics.json's, not a partition's) fail with EIO."""
    fsync = os.fsync

    def failing(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}") == str(directory):
            raise OSError(5, "Input/output error")
        fsync(fd)

    monkeypatch.setattr(os, "fsync", failing)


def test_a_created_topic_whose_directory_sync_failed_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """topics.json lists the new topic although its directory's sync failed: the topic stays (the
    create answers KAFKA_STORAGE_ERROR, saying so), rather than vanishing now and coming back
    empty at the next start."""
    from kcoord.protocol.errors import ErrorCode, KafkaError

    pm = _manager(tmp_path)
    _failing_directory_syncs(monkeypatch, tmp_path)
    with pytest.raises(KafkaError) as failed:
        pm.create_topic("z", 2, {})
    monkeypatch.undo()
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR and "may not survive" in str(failed.value)
    assert len(pm.topics["z"].partitions) == 2
    assert '"z"' in (tmp_path / "topics.json").read_text()
    pm.close()


def test_partitions_that_could_not_all_be_created_are_none_of_them_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CreatePartitions failing on its third new partition keeps neither of the two before it: the
    topic has the partitions topics.json says, now and after a restart."""
    from kcoord.protocol.errors import ErrorCode, KafkaError

    pm = _manager(tmp_path)
    pm.create_topic("t", 1, {})
    (tmp_path / "t-3").mkdir()  # a leftover the create must move aside, which fails here
    restore = _refuse_renames(monkeypatch, lambda src, dst: src.endswith("t-3"))
    with pytest.raises(KafkaError) as failed:
        pm.create_partitions("t", 4)
    restore()
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert len(pm.topics["t"].partitions) == 1
    assert not (tmp_path / "t-1").exists() and not (tmp_path / "t-2").exists()
    pm.close()
    again = _manager(tmp_path)
    assert len(again.topics["t"].partitions) == 1
    again.close()


def _refuse_renames(monkeypatch: pytest.MonkeyPatch, which: Callable[[str, str], bool]) -> Callable[[], None]:
    """os.rename fails with EACCES for the (source, destination) ``which`` picks; returns what
    puts it back."""
    rename = os.rename

    def refused(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if which(os.fspath(src), os.fspath(dst)):
            raise PermissionError(13, "Permission denied")
        rename(src, dst)

    monkeypatch.setattr(os, "rename", refused)
    return lambda: monkeypatch.setattr(os, "rename", rename)
