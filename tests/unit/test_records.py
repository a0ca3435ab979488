"""Record-batch helpers: header parsing, validation, offset stamping, timestamp search."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kcoord.protocol import records
from kcoord.protocol.records import InvalidBatch
from tests.wire import build_batch

T0 = 1_700_000_000_000


def header_of(data: bytes | bytearray) -> records.BatchHeader:
    (h,) = records.iter_headers(data)
    return h


def test_read_header_fields() -> None:
    data = build_batch(
        [(b"a", b"1", T0 + 5), (None, b"2", T0), (b"c", None, T0 + 9)],
        producer_id=77,
        producer_epoch=3,
        base_sequence=10,
    )
    h = records.read_header(data)
    assert h.position == 0 and h.size == len(data)
    assert (h.base_offset, h.magic, h.records_count, h.last_offset_delta) == (0, 2, 3, 2)
    assert (h.base_timestamp, h.max_timestamp) == (T0 + 5, T0 + 9)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (77, 3, 10, 12)
    assert (h.last_offset, h.next_offset) == (2, 3)
    assert h.has_producer_id and not h.is_transactional and not h.is_control and h.compression == 0
    records.validate_batch(data, h)


def test_last_sequence_wraps_at_int32_max() -> None:
    # Three records from MAX-1: sequences MAX-1, MAX, 0 (Kafka's DefaultRecordBatch.incrementSequence).
    h = header_of(build_batch(count=3, producer_id=1, producer_epoch=0, base_sequence=0x7FFFFFFF - 1))
    assert h.last_sequence == 0
    h = header_of(build_batch(count=1, producer_id=1, producer_epoch=0, base_sequence=0x7FFFFFFF))
    assert h.last_sequence == 0x7FFFFFFF
    h = header_of(build_batch(count=5, producer_id=1, producer_epoch=0, base_sequence=0x7FFFFFFF))
    assert h.last_sequence == 3


def test_no_sequence_has_no_last_sequence() -> None:
    assert header_of(build_batch(count=4)).last_sequence == records.NO_SEQUENCE


def test_iter_headers_of_several_batches_and_partial_tails() -> None:
    a, b = build_batch(count=2), build_batch(count=3)
    data = a + b
    hs = list(records.iter_headers(data))
    assert [(h.position, h.size) for h in hs] == [(0, len(a)), (len(a), len(b))]
    for cut in (1, 30, len(b) - 1):
        truncated = data[:-cut]
        assert [h.position for h in records.iter_headers(truncated, partial_ok=True)] == [0]
        with pytest.raises(InvalidBatch):
            list(records.iter_headers(truncated))
    assert list(records.iter_headers(b"")) == []
    bad_length = bytearray(a)
    struct.pack_into(">i", bad_length, 8, 10)
    with pytest.raises(InvalidBatch):
        list(records.iter_headers(bad_length, partial_ok=True))


def test_validate_batch_rejects_what_kafka_rejects() -> None:
    good = build_batch(count=2)
    records.validate_batch(good, header_of(good))

    flipped = bytearray(good)
    flipped[-1] ^= 1
    with pytest.raises(InvalidBatch) as e:
        records.validate_batch(flipped, header_of(flipped))
    assert e.value.corrupt

    magic1 = bytearray(good)
    magic1[16] = 1
    with pytest.raises(InvalidBatch) as e:
        records.validate_batch(magic1, header_of(magic1))
    assert not e.value.corrupt

    # A count that disagrees with lastOffsetDelta (CRC recomputed so only the count is wrong).
    miscount = bytearray(good)
    struct.pack_into(">i", miscount, 57, 5)
    struct.pack_into(">I", miscount, 17, records.crc_of(miscount, 0, len(miscount)))
    with pytest.raises(InvalidBatch) as e:
        records.validate_batch(miscount, header_of(miscount))
    assert not e.value.corrupt

    control = bytearray(good)
    (attrs,) = struct.unpack_from(">h", control, 21)
    struct.pack_into(">h", control, 21, attrs | records.ATTR_CONTROL)
    struct.pack_into(">I", control, 17, records.crc_of(control, 0, len(control)))
    with pytest.raises(InvalidBatch) as e:
        records.validate_batch(control, header_of(control))
    assert not e.value.corrupt


def test_assign_offset_keeps_the_crc_valid() -> None:
    data = bytearray(build_batch(count=3))
    records.assign_offset(data, 0, 1234, leader_epoch=7)
    h = header_of(data)
    assert (h.base_offset, h.partition_leader_epoch) == (1234, 7)
    records.validate_batch(data, h)
    assert [r.offset for r in DefaultRecordBatch(bytes(data))] == [1234, 1235, 1236]


def test_set_log_append_time() -> None:
    data = bytearray(build_batch(count=2))
    records.set_log_append_time(data, 0, len(data), T0 + 10_000)
    h = header_of(data)
    records.validate_batch(data, h)
    assert h.max_timestamp == T0 + 10_000
    assert [r.timestamp for r in DefaultRecordBatch(bytes(data))] == [T0 + 10_000] * 2


@given(
    timestamps=st.lists(st.integers(0, 100), min_size=1, max_size=12),
    target=st.integers(-1, 102),
    base=st.integers(0, 10**6),
)
def test_first_offset_at_or_after_is_the_first_matching_record(
    timestamps: list[int], target: int, base: int
) -> None:
    data = bytearray(build_batch([(None, b"x", T0 + t) for t in timestamps]))
    records.assign_offset(data, 0, base)
    h = header_of(data)
    want = next(((base + i, T0 + t) for i, t in enumerate(timestamps) if t >= target), None)
    assert records.first_offset_at_or_after(bytes(data), h, T0 + target) == want
    top = max(timestamps)
    assert records.max_timestamp_offset(bytes(data), h) == base + timestamps.index(top)


_blob = st.one_of(st.none(), st.binary(max_size=5000))


@given(
    st.lists(st.tuples(_blob, _blob), min_size=1, max_size=300),
    st.integers(0, 2**41),
    st.integers(0, 2**40),
)
def test_coordinator_batches_are_the_general_builders_bytes(
    entries: list[tuple[bytes | None, bytes | None]], timestamp: int, base_offset: int
) -> None:
    # build_batch joins pre-encoded varints; it must write exactly what build_batch_at encodes
    # field by field, including keys, values and indexes past the pre-encoded range.
    data = records.build_batch(entries, timestamp, base_offset)
    general = records.build_batch_at([(base_offset + i, timestamp, k, v) for i, (k, v) in enumerate(entries)])
    assert data == general
    h = header_of(data)
    assert (h.base_offset, h.records_count, h.max_timestamp) == (base_offset, len(entries), timestamp)
    assert h.size == len(data) and h.crc == records.crc_of(data, 0, h.size)
    got = [(k, v) for _, k, v in records.iter_key_values(data, h)]
    assert got == entries


def test_coordinator_batch_past_the_pre_encoded_range() -> None:
    # Hypothesis rarely reaches 4096 records or values: one explicit case of each.
    entries = [(b"k", None)] * 4100 + [(None, b"v" * 70_000)]
    data = records.build_batch(entries, T0, 7)
    assert data == records.build_batch_at([(7 + i, T0, k, v) for i, (k, v) in enumerate(entries)])
    assert [(k, v) for _, k, v in records.iter_key_values(data, header_of(data))] == entries


@pytest.mark.parametrize(
    "entries, producer, marker",
    [
        ([(b"k", b"v")], None, None),
        ([(b"k%d" % i, None if i % 3 == 0 else b"v" * i) for i in range(40)], None, None),
        ([(b"k", b"v"), (None, b"w")], (7, 2), None),
        ([], (9, 1), True),
    ],
)
def test_a_batch_appended_in_place_has_the_header_read_back_and_build_batch_bytes(
    entries: list, producer: tuple[int, int] | None, marker: bool | None
) -> None:
    """append_batch / append_marker_batch hand back the header read_header finds where they wrote
    (the coordinators append with it, parsing nothing), after bytes already in the buffer."""
    data = bytearray(b"already here")
    start = len(data)
    if marker is not None:
        assert producer is not None
        h = records.append_marker_batch(data, producer[0], producer[1], marker, 5, 1_700_000_000_000)
        expected = records.build_marker_batch(producer[0], producer[1], marker, 5, 1_700_000_000_000)
    elif producer is not None:
        kwargs = {
            "producer_id": producer[0],
            "producer_epoch": producer[1],
            "attributes": records.ATTR_TRANSACTIONAL,
        }
        h = records.append_batch(data, entries, 1_700_000_000_000, **kwargs)
        expected = records.build_batch(entries, 1_700_000_000_000, **kwargs)
    else:
        h = records.append_batch(data, entries, 1_700_000_000_000)
        expected = records.build_batch(entries, 1_700_000_000_000)
    assert bytes(data[start:]) == bytes(expected)
    assert h == records.read_header(data, start)
    assert h.position == start and h.size == len(expected)
