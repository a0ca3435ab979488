"""SHARE_CHECKPOINT (type 100) / SHARE_DELTA (type 101) records: byte layout and round trips."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcoord.share import records as R

TID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")

i16 = st.integers(-(2**15), 2**15 - 1)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
group_ids = st.text(max_size=20).filter(lambda s: len(s.encode()) < 2**15)
uuids = st.uuids()


@st.composite
def state_batches(draw: st.DrawFn) -> R.StateBatch:
    base = draw(st.integers(-(2**63), 2**63 - 2))
    last = draw(st.integers(base, 2**63 - 1))
    return R.StateBatch(base, last, draw(st.sampled_from(R.WRITABLE_STATES)), draw(i16))


batch_lists = st.lists(state_batches(), max_size=8).map(tuple)
checkpoint_keys = st.builds(R.ShareCheckpointKey, group_ids, uuids, i32)
delta_keys = st.builds(R.ShareDeltaKey, group_ids, uuids, i32, i32, i32)
checkpoint_values = st.builds(R.ShareCheckpointValue, i32, i64, i64, batch_lists)
delta_values = st.builds(R.ShareDeltaValue, i32, i64, batch_lists)


def test_checkpoint_layout() -> None:
    key = R.ShareCheckpointKey("G1", TID, 7)
    assert R.encode_key(key) == b"\x00\x64" + b"\x00\x02G1" + TID.bytes + b"\x00\x00\x00\x07"
    value = R.ShareCheckpointValue(1, 110, 121, (R.StateBatch(110, 110, 0, 1), R.StateBatch(119, 119, 2, 1)))
    assert R.encode_value(value) == (
        struct.pack(">hiqqi", 0, 1, 110, 121, 2)
        + struct.pack(">qqbh", 110, 110, 0, 1)
        + struct.pack(">qqbh", 119, 119, 2, 1)
    )
    assert len(R.encode_value(value)) == 2 + 4 + 8 + 8 + 4 + 2 * 19


def test_delta_layout() -> None:
    key = R.ShareDeltaKey("G1", TID, 0, 1, 3)
    assert R.encode_key(key) == (
        b"\x00\x65"
        + b"\x00\x02G1"
        + TID.bytes
        + b"\x00\x00\x00\x00"
        + b"\x00\x00\x00\x01"
        + b"\x00\x00\x00\x03"
    )
    value = R.ShareDeltaValue(1, 132, (R.StateBatch(111, 118, 0, 0), R.StateBatch(119, 119, 2, 1)))
    assert R.encode_value(value) == (
        struct.pack(">hiqi", 0, 1, 132, 2)
        + struct.pack(">qqbh", 111, 118, 0, 0)
        + struct.pack(">qqbh", 119, 119, 2, 1)
    )


def test_tombstones() -> None:
    key = R.ShareDeltaKey("g", TID, 1, 2, 3)
    assert R.encode_value(None) is None
    assert R.decode_share_record(R.encode_key(key), None) == (key, None)
    assert R.encode_record((key, None)) == (R.encode_key(key), None)


@given(key=st.one_of(checkpoint_keys, delta_keys))
def test_key_round_trip(key: R.ShareKey) -> None:
    raw = R.encode_key(key)
    assert R.record_type(raw) == (100 if isinstance(key, R.ShareCheckpointKey) else 101)
    assert R.decode_key(raw) == key


@given(key=checkpoint_keys, value=checkpoint_values)
def test_checkpoint_round_trip(key: R.ShareCheckpointKey, value: R.ShareCheckpointValue) -> None:
    kb, vb = R.encode_record((key, value))
    assert R.decode_share_record(kb, vb) == (key, value)
    assert R.decode_value(key, vb) == value


@given(key=delta_keys, value=delta_values)
def test_delta_round_trip(key: R.ShareDeltaKey, value: R.ShareDeltaValue) -> None:
    kb, vb = R.encode_record((key, value))
    assert R.decode_share_record(kb, vb) == (key, value)
    assert R.SHARE_RECORDS.decode(kb, vb) == (key, value)
    assert R.SHARE_RECORDS.encoders[type(key)](key, value) == (kb, vb)


@given(group=st.text(max_size=20), epoch=st.integers(0, 2**31 - 1), tombstone=st.booleans())
def test_share_group_record_round_trip(group: str, epoch: int, tombstone: bool) -> None:
    key, value = R.ShareGroupKey(group), None if tombstone else R.ShareGroupValue(epoch)
    kb, vb = R.SHARE_RECORDS.encoders[R.ShareGroupKey](key, value)
    assert kb[:2] == b"\x00\x66"  # type 102
    assert R.SHARE_RECORDS.decode(kb, vb) == (key, value)


def test_other_record_types_are_not_share_records() -> None:
    offset_commit_key = b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x00"
    with pytest.raises(R.ShareRecordFormatError):
        R.decode_key(offset_commit_key)


GOOD_KEY = R.encode_key(R.ShareCheckpointKey("G1", TID, 0))
GOOD_VALUE = R.encode_value(R.ShareCheckpointValue(1, 0, 10, (R.StateBatch(0, 9, 2, 1),)))
assert GOOD_VALUE is not None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (GOOD_KEY[:-1], GOOD_VALUE),  # key ends early
        (GOOD_KEY + b"\x00", GOOD_VALUE),  # trailing key bytes
        (b"\x00\x64\xff\xff" + TID.bytes + b"\x00\x00\x00\x00", GOOD_VALUE),  # null group id
        (b"\x00\x64\x00\x01\xff" + TID.bytes + b"\x00\x00\x00\x00", GOOD_VALUE),  # not UTF-8
        (R.encode_key(R.ShareDeltaKey("G1", TID, 0, 1, 1))[:-2], None),  # delta key ends early
        (GOOD_KEY, GOOD_VALUE[:-1]),  # value ends early
        (GOOD_KEY, GOOD_VALUE + b"\x00"),  # trailing value bytes
        (GOOD_KEY, b"\x00\x01" + GOOD_VALUE[2:]),  # unknown version
        (GOOD_KEY, GOOD_VALUE[:-3] + b"\x01" + GOOD_VALUE[-2:]),  # Acquired is never written
        (GOOD_KEY, struct.pack(">hiqqi", 0, 1, 0, 10, 1) + struct.pack(">qqbh", 9, 0, 0, 0)),  # last < base
        (GOOD_KEY, struct.pack(">hiqqi", 0, 1, 0, 10, -1)),  # negative count
        (GOOD_KEY, b"\x00"),
    ],
)
def test_malformed_records_are_refused(key: bytes, value: bytes | None) -> None:
    with pytest.raises(ValueError):
        R.decode_share_record(key, value)
