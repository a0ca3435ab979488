"""The runtime's record registry: coordinator kinds register their codecs, and the bytes of every
record are what they were before the runtime existed."""

from __future__ import annotations

import pytest

from kcoord.classic.records import CLASSIC_RECORDS, GroupMetadataKey
from kcoord.groups.records import GROUP_RECORDS, GroupConfigKey, GroupConfigValue, OffsetCommitKey
from kcoord.runtime.records import RecordFormatError, RecordRegistry
from kcoord.server.coordinators import group_records
from kcoord.share.records import SHARE_RECORDS
from tests.legacy_log import FIXTURE_DIR, coordinator_records


def test_records_written_before_the_runtime_re_encode_to_the_same_bytes() -> None:
    """Every record of the legacy fixture (written by kcoord before the runtime was extracted)
    decodes through the registry and encodes back to exactly its bytes."""
    registry = group_records()
    seen = set()
    for _offset, key, value in coordinator_records(FIXTURE_DIR):
        decoded = registry.decode(key, value)
        assert registry.encode(*decoded) == (key, value), decoded
        seen.add(int.from_bytes(key[:2], "big"))
    assert seen == {1, 2, 100, 101, 102, 103}


def test_a_record_type_or_key_class_is_registered_once() -> None:
    registry = RecordRegistry([CLASSIC_RECORDS, SHARE_RECORDS, GROUP_RECORDS])
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(GROUP_RECORDS)
    assert sorted(registry.key_types) == [0, 1, 2, 100, 101, 102, 103]


def test_unknown_record_types_and_key_classes_are_refused() -> None:
    registry = RecordRegistry([GROUP_RECORDS])
    with pytest.raises(RecordFormatError, match="unknown record type 2"):
        registry.decode(b"\x00\x02\x00\x01g", None)
    with pytest.raises(RecordFormatError):
        registry.decode(b"\x00", None)
    with pytest.raises(TypeError, match="GroupMetadataKey"):
        registry.encode_all([(GroupMetadataKey("g"), None)])
    assert registry.decode(*registry.encode(OffsetCommitKey("g", "t", 0), None)) == (
        OffsetCommitKey("g", "t", 0),
        None,
    )
    key, value = GroupConfigKey("g"), GroupConfigValue((("share.auto.offset.reset", "earliest"),))
    assert registry.decode(*registry.encode(key, value)) == (key, value)
    assert registry.decode(*registry.encode(key, None)) == (key, None)
