"""The C codecs (kcoord/protocol/_native_codecs.c) write the bytes the Python encoders write.

The encoders of offsets_codec, protocol.records and groups.records call the C functions when they
are built (held as Final module constants: compiled, no lookup per call), else their Python bodies
(``encode_python``, ``offset_value_python``, ``batch_body_python``); here both run on the same
generated input. tests/unit/test_offsets_codec.py checks the answers against kafka-python with
whichever the encoders call.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder

import kcoord
from kcoord.groups import records
from kcoord.groups.records import OffsetCommitValue, encode_offset_value
from kcoord.protocol import offsets_codec
from kcoord.protocol import records as batch_records
from kcoord.protocol.frames import response_frame
from kcoord.protocol.native import codecs
from kcoord.protocol.offsets_codec import OffsetCommitAnswer, OffsetFetchAnswer
from kcoord.protocol.records import build_batch

pytestmark = pytest.mark.skipif(
    codecs is None and not kcoord.compiled, reason="built without a C compiler (or KCOORD_PURE=1)"
)


def test_a_compiled_build_has_the_c_codecs() -> None:
    # They are built with the mypyc modules: a compiled kcoord without them lost its C build.
    assert codecs is not None


def _run(encode: Callable[[], Any]) -> Any:
    """``encode()``, or the type of the exception it raised."""
    try:
        return encode()
    except (AttributeError, OverflowError, TypeError, ValueError, UnicodeEncodeError) as e:
        return type(e)


def _both(native: Callable[[], Any], python: Callable[[], Any]) -> tuple[Any, Any]:
    return _run(native), _run(python)


def _same(native: Callable[[], Any], python: Callable[[], Any]) -> None:
    assert _run(native) == _run(python)


int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(max_size=40)
topic_ids = st.none() | st.uuids()


@settings(max_examples=300, deadline=None)
@given(offset=int64, epoch=int32, metadata=st.text(max_size=300), timestamp=int64)
def test_offset_values_match(offset: int, epoch: int, metadata: str, timestamp: int) -> None:
    value = OffsetCommitValue(offset, epoch, metadata, timestamp, None)
    _same(lambda: encode_offset_value(value), lambda: records.offset_value_python(value))


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(2, 10),
    topics=st.lists(
        st.tuples(names, topic_ids, st.lists(st.lists(int32, min_size=2, max_size=2), max_size=5)),
        max_size=4,
    ),
)
def test_commit_answers_match(version: int, topics: list[Any]) -> None:
    topics = [(n, t, [[p, e % 2**15] for p, e in parts]) for n, t, parts in topics]
    answer = OffsetCommitAnswer(topics)
    _same(lambda: answer.encode(version), lambda: answer.encode_python(version))
    _same_frames(answer, version)


def _same_frames(answer: OffsetCommitAnswer | OffsetFetchAnswer, version: int) -> None:
    """A framed answer is the same in C and Python, and is the head then the body."""
    for correlation_id, tagged in ((0, False), (-1, True), (2**31 - 1, True), (-(2**31), False)):
        native, python = _both(
            lambda c=correlation_id, t=tagged: answer.encode_framed(version, c, t),
            lambda c=correlation_id, t=tagged: response_frame(answer.encode_python(version), c, t),
        )
        assert native == python
        if isinstance(native, type):  # both refused the answer (an out-of-range field)
            continue
        assert int.from_bytes(native[:4], "big") == len(native) - 4
        assert int.from_bytes(native[4:8], "big", signed=True) == correlation_id
        head = 9 if tagged else 8
        assert native[8:head] == (b"\x00" if tagged else b"")
        assert native[head:] == answer.encode_python(version)


partitions = st.lists(st.tuples(int32, int64, int32, st.none() | st.text(max_size=30), int16), max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    version=st.integers(1, 10),
    topics=st.lists(st.tuples(names, st.none(), partitions), max_size=3),
    error=int16,
    groups=st.lists(
        st.tuples(names, int16, st.lists(st.tuples(names, topic_ids, partitions), max_size=3)), max_size=3
    ),
)
def test_fetch_answers_match(version: int, topics: list[Any], error: int, groups: list[Any]) -> None:
    answer = OffsetFetchAnswer(topics, error, groups)
    _same(lambda: answer.encode(version), lambda: answer.encode_python(version))
    _same_frames(answer, version)


record_parts = st.none() | st.binary(max_size=300) | st.binary(min_size=4000, max_size=9000)


@settings(max_examples=200, deadline=None)
@given(entries=st.lists(st.tuples(record_parts, record_parts), min_size=1, max_size=6), timestamp=int64)
def test_coordinator_batches_match(entries: list[tuple[bytes | None, bytes | None]], timestamp: int) -> None:
    assert codecs is not None
    _same(lambda: codecs.batch_body(entries), lambda: batch_records.batch_body_python(entries))
    # The body is the batch's end: build_batch writes the header around whichever made it.
    assert build_batch(entries, timestamp, 7).endswith(batch_records.batch_body_python(entries))


def test_a_batch_of_more_records_than_the_small_varints_matches() -> None:
    # offset deltas past the pre-encoded varints
    entries: list[tuple[bytes | None, bytes | None]] = [
        (b"k%d" % i, None if i % 7 == 0 else b"v" * (i % 300)) for i in range(5000)
    ]
    assert codecs is not None
    _same(lambda: codecs.batch_body(entries), lambda: batch_records.batch_body_python(entries))


def _key_scan(scan: Callable[[], bool]) -> bool | str:
    """A key scan's answer, or "invalid" for a record it found running past its batch."""
    try:
        return scan()
    except (ValueError, batch_records.InvalidBatch):  # C's ValueError, Python's InvalidBatch
        return "invalid"


history_keys = st.none() | st.sampled_from([b"\x00\x01", b"\x00\x00", b"\x00"]).flatmap(
    lambda head: st.binary(max_size=40).map(lambda rest: head + rest)
)


@settings(max_examples=300, deadline=None)
@given(
    keys=st.lists(history_keys, min_size=1, max_size=8),
    prefixes=st.sampled_from([(b"\x00\x01",), (b"\x00\x00", b"\x00\x01"), (b"",), ()]),
    damage=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
    cut=st.integers(0, 40),
    extra=st.integers(-2, 2),
)
def test_key_scans_match(
    keys: list[bytes | None],
    prefixes: tuple[bytes, ...],
    damage: list[tuple[int, int]],
    cut: int,
    extra: int,
) -> None:
    """The cleaner's key scan (storage/record_filter.py) gives the same answer in C and Python on
    the records of coordinator batches, and on those bytes changed, cut short, or miscounted."""
    assert codecs is not None
    from kcoord.storage.record_filter import keys_start_with_python

    body = bytearray(batch_records.batch_body_python([(k, b"value") for k in keys]))
    for at, byte in damage:
        body[at % len(body)] = byte
    data = bytes(body[: len(body) - cut] if cut < len(body) else body)
    count = max(len(keys) + extra, 0)
    native = _key_scan(lambda: codecs.keys_start_with(data, count, prefixes))
    assert native == _key_scan(lambda: keys_start_with_python(data, count, prefixes))
    # The full pass reads every field the scan reads, and the values after them: whatever the scan
    # finds corrupt, it does too (the scan stops at the first key that is not history).
    if native == "invalid":
        assert _full_pass(data, count) == "invalid"
    if not damage and not cut and extra == 0:  # the records as written: no error either way
        expected = all(k is not None and k.startswith(prefixes) for k in keys)
        assert native is expected


def _padded(zigzag: int, size: int) -> bytes:
    """A varint of a small zigzag value written in ``size`` bytes (continuation bytes of zeros)."""
    if size == 1:
        return bytes([zigzag])
    return bytes([zigzag | 0x80]) + b"\x80" * (size - 2) + b"\x00"


# attributes, timestamp and offset deltas, key length 4 + (0x10 << 28) in five bytes, key, null
# value, no headers
HIGH_BITS_KEY_LENGTH = b"\x18" + b"\x00\x00\x00" + b"\x84\x80\x80\x80\x10" + b"\x00\x01" + b"\x01\x00"


def _record(length: int = 1, ts: int = 1, klen: int = 1, null_key: bool = False) -> bytes:
    """One record with key b"\x00\x01" and a null value, its record length, timestamp delta and
    key length varints written in that many bytes."""
    key = b"" if null_key else b"\x00\x01"
    rest = b"\x00" + _padded(0, ts) + b"\x00" + _padded(1 if null_key else 4, klen) + key + b"\x01\x00"
    return _padded(2 * len(rest), length) + rest


@pytest.mark.parametrize(
    "body, answer",
    [
        (_record(), True),
        (_record(ts=10), True),  # Kafka's longest varlong
        (_record(ts=11), "invalid"),
        (_record(length=5), True),  # Kafka's longest varint
        (_record(length=6), "invalid"),
        (_record(klen=5), True),
        (_record(klen=6), "invalid"),
        # the record's length ends it before its key length: the byte after it, read as one
        # (a null key), would answer False
        (b"\x06\x00\x00\x00" + b"\x01", "invalid"),
        (_record(null_key=True), False),
        # a key length of five bytes with bits past 32: Kafka's int drops them (key length 2)
        (HIGH_BITS_KEY_LENGTH, True),
    ],
)
def test_key_scans_match_on_the_edges_of_a_record(body: bytes, answer: bool | str) -> None:
    """Kafka's varint limits (5 bytes, 10 for the timestamp delta) and a record's own end bound
    the scan, in C and in Python alike."""
    assert codecs is not None
    from kcoord.storage.record_filter import keys_start_with_python

    prefixes = (b"\x00\x01",)
    assert _key_scan(lambda: codecs.keys_start_with(body, 1, prefixes)) == answer
    assert _key_scan(lambda: keys_start_with_python(body, 1, prefixes)) == answer


def _full_pass(body: bytes, count: int) -> list[bytes | None] | str:
    """The keys ``record_filter.iter_raw`` (the cleaner's full pass) reads, or "invalid"."""
    from kcoord.storage.record_filter import iter_raw

    h = batch_records.read_header(build_batch([(b"k", b"v")], 0))
    h.records_count = count
    try:
        return [r.key for r in iter_raw(body, h)]
    except batch_records.InvalidBatch:
        return "invalid"


@pytest.mark.parametrize(
    "body, keys",
    [
        (_record(), [b"\x00\x01"]),
        (_record(ts=10, length=5, klen=5), [b"\x00\x01"]),
        (_record(ts=11), "invalid"),
        (_record(length=6), "invalid"),
        (_record(klen=6), "invalid"),
        (b"\x06\x00\x00\x00" + b"\x01", "invalid"),
        (_record(null_key=True), [None]),
        (HIGH_BITS_KEY_LENGTH, [b"\x00\x01"]),
        # a value length past the record's end (the scan, reading keys only, never sees it)
        (b"\x0a\x00\x00\x00\x00\x02", "invalid"),
        # a value length of six bytes
        (b"\x14\x00\x00\x00\x00\x81\x80\x80\x80\x80\x00", "invalid"),
    ],
)
def test_the_full_pass_has_the_key_scans_limits(body: bytes, keys: list[bytes | None] | str) -> None:
    """The cleaner's full pass (``iter_raw``) refuses what the key scan refuses: a CRC-valid log
    holding such a record failed every scan and was cleaned by the full pass all the same."""
    assert _full_pass(body, 1) == keys


def test_a_timestamp_is_a_longs_sum_as_kafka_reads_it() -> None:
    """A ten-byte timestamp delta keeps 64 bits, and the base timestamp plus the delta wraps as a
    Java long: a larger Python int made the cleaner's rebuild of the batch fail at every pass
    (``struct.error``), where Kafka reads 2**63 - 1."""
    from kcoord.storage.record_filter import iter_raw, rebuild

    body = bytes.fromhex("2200feffffffffffffffff7f000261026200")
    h = batch_records.read_header(build_batch([(b"k", b"v")], 0))
    for base, expected in ((0, 2**63 - 1), (2, -(2**63) + 1)):
        h.base_timestamp = base
        (record,) = iter_raw(body, h)
        assert record.timestamp == expected
        assert batch_records.read_header(bytes(rebuild(h, body, [record]))).records_count == 1


_header = st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8))
_maybe_bytes = st.none() | st.binary(max_size=20)


@settings(max_examples=300, deadline=None)
@given(
    entries=st.lists(
        st.tuples(
            st.none() | st.binary(max_size=20),
            st.none() | st.binary(max_size=20),
            st.lists(_header, max_size=3),
        ),
        min_size=1,
        max_size=6,
    ),
    damage=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
    cut=st.integers(0, 20),
    extra=st.integers(-2, 2),
)
def test_record_checks_match(
    entries: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    damage: list[tuple[int, int]],
    cut: int,
    extra: int,
) -> None:
    """Produce's check of a batch's records (protocol/records.py ``records_problem``) gives the same
    answer in C and Python on kafka-python's batches (null keys and values, headers), and on those
    bytes changed, cut short, or miscounted; a batch as kafka-python wrote it has no problem."""
    assert codecs is not None
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for i, (key, value, headers) in enumerate(entries):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=key, value=value, headers=headers)
    batch = bytearray(bytes(builder.build()))
    for at, byte in damage:
        at = batch_records.HEADER_SIZE + at % (len(batch) - batch_records.HEADER_SIZE)
        batch[at] = byte
    data = bytes(batch[: max(len(batch) - cut, batch_records.HEADER_SIZE)])
    count = max(len(entries) + extra, 0)
    native = codecs.records_problem(data, batch_records.HEADER_SIZE, len(data), count)
    assert native == batch_records.records_problem_python(data[batch_records.HEADER_SIZE :], count)
    if not damage and not cut and extra == 0:
        assert native is None


def _one_record(rest: bytes) -> bytes:
    """A record of ``rest`` (everything after its length), its length written before it."""
    return bytes([2 * len(rest)]) + rest


@pytest.mark.parametrize(
    "body, problem",
    [
        (_one_record(b"\x00\x00\x00\x02k\x02v\x00"), None),
        (_one_record(b"\x00\x00\x00\x01\x01\x00"), None),  # null key and value
        (_one_record(b"\x00\x00\x00\x01\x01\x02\x02h\x01"), None),  # a header with a null value
        (_one_record(b"\x00\x00\x00\x01\x01\x01"), "Found invalid number of record headers"),
        (_one_record(b"\x00\x00\x00\x01\x01\x02\x01\x01"), "Invalid negative header key size"),
        (_one_record(b"\x00\x00\x00\x01\x01\x00\x00"), "the record's fields do not fill its length"),
        (_one_record(b"\x00\x00\x00\x01\x01\x00") + b"\x00", "records still remaining"),
        (_one_record(b"\x00\x00\x00\x04k\x01\x00"), "Found invalid record structure"),  # key past the end
        (b"\x40" + b"\x00" * 7, "the record runs past its batch"),
        (_one_record(b"\x00\x00\x00\x81\x80\x80\x80\x80\x00\x01\x00"), "Found invalid record structure"),
        # a key length of five bytes with bits past 32, which Kafka's int drops (length 1)
        (_one_record(b"\x00\x00\x00\x82\x80\x80\x80\x10k\x01\x00"), None),
    ],
)
def test_record_checks_on_the_edges_of_a_record(body: bytes, problem: str | None) -> None:
    """What Kafka's DefaultRecord.readFrom refuses (InvalidRecordException), in C and in Python."""
    assert codecs is not None
    native = codecs.records_problem(body, 0, len(body), 1)
    assert native == batch_records.records_problem_python(body, 1)
    assert (native is None) if problem is None else (native is not None and problem in native)


def test_a_key_scan_lets_other_threads_run() -> None:
    """The scan runs without the GIL. With the switch interval out of reach, a thread waiting for
    the GIL runs only while this one lets go of it: holding it through the call, the counter
    could never move between the two reads around it."""
    import sys
    import threading
    import time

    assert codecs is not None
    body = batch_records.batch_body_python([(b"\x00\x01" + b"k" * 30, b"v")] * 100_000)
    ticks = 0
    stop = False

    def count() -> None:
        nonlocal ticks
        while not stop:
            ticks += 1
            time.sleep(0)  # gives the GIL back

    interval = sys.getswitchinterval()
    sys.setswitchinterval(100)
    thread = threading.Thread(target=count)
    thread.start()
    moved = []
    try:
        for _ in range(20):
            before = ticks
            assert codecs.keys_start_with(body, 100_000, (b"\x00\x01",)) is True
            moved.append(ticks - before)
            if moved[-1]:
                break
            time.sleep(0.001)
    finally:
        stop = True
        thread.join()
        sys.setswitchinterval(interval)
    assert any(moved), moved


@pytest.mark.parametrize(
    "answer, version",
    [
        # out of range, as to_bytes refuses it
        (OffsetCommitAnswer([("t", None, [[0, 2**15]])]), 8),
        (OffsetFetchAnswer([("t", None, [(0, 0, 0, None, 0)])], error=2**15), 5),
        # a lone surrogate has no UTF-8
        (OffsetCommitAnswer([("\ud800", None, [])]), 3),
    ],
)
def test_what_python_refuses_c_refuses(answer: OffsetCommitAnswer | OffsetFetchAnswer, version: int) -> None:
    native, python = _both(lambda: answer.encode(version), lambda: answer.encode_python(version))
    assert isinstance(python, type) and native is python


@pytest.mark.parametrize(
    "value",
    [
        OffsetCommitValue(2**63, 0, "", 0, None),
        OffsetCommitValue(0, 2**31, "", 0, None),
        OffsetCommitValue(0, 0, "m" * 40_000, 0, None),
    ],
)
def test_what_python_refuses_c_refuses_in_a_value(value: OffsetCommitValue) -> None:
    native, python = _both(lambda: encode_offset_value(value), lambda: records.offset_value_python(value))
    assert isinstance(python, type) and native is python


def test_the_encoders_call_the_c_codecs() -> None:
    # Read once at import: a build whose encoders held None would compare the Python bodies
    # with themselves above.
    assert codecs is not None
    assert records._offset_value_c is codecs.offset_value
    assert offsets_codec._commit_answer_c is codecs.commit_answer
    assert offsets_codec._fetch_answer_c is codecs.fetch_answer
    assert batch_records._batch_body_c is codecs.batch_body


def test_a_topic_id_is_a_uuid() -> None:
    # C reads a uuid.UUID's int slot (no Python code runs while it holds the lists' items) and
    # refuses anything else; the Python body reads .bytes: both refuse a str.
    refused = OffsetCommitAnswer([(None, "x", [])])  # type: ignore[list-item]
    for outcome in _both(lambda: refused.encode(10), lambda: refused.encode_python(10)):
        assert outcome in (TypeError, AttributeError)
    for value in (0, 1, 2**64 - 1, 2**64, 2**128 - 1, 0x0123456789ABCDEF_FEDCBA9876543210):
        answer = OffsetCommitAnswer([(None, uuid.UUID(int=value), [])])
        _same(lambda a=answer: a.encode(10), lambda a=answer: a.encode_python(10))
    assert codecs is not None
    assert codecs.commit_answer([(None, uuid.UUID(int=1), [])], 10)[5:21] == uuid.UUID(int=1).bytes


def test_the_c_encoders_run_no_python_code_while_they_walk_a_list() -> None:
    # An int with __index__ or a uuid subclass could run Python code that changes the lists the
    # C code holds borrowed items of: both are refused before anything of them is read.
    class Index:
        def __index__(self) -> int:
            return 0

    class Id(uuid.UUID):
        pass

    assert codecs is not None
    with pytest.raises(TypeError):
        codecs.commit_answer([("t", None, [[Index(), 0]])], 3)
    with pytest.raises(TypeError):
        codecs.commit_answer([(None, Id(int=1), [])], 10)

    # A frame head's ``tagged`` is read (its truth, which may be Python code) before any list.
    topics: list[Any] = [("t", None, [[0, 0]] * 50)] * 50

    class Emptying:
        def __bool__(self) -> bool:
            topics.clear()
            return True

    framed = codecs.commit_answer(topics, 3, 1, Emptying())
    assert framed == (4 + 1 + 8).to_bytes(4, "big") + (1).to_bytes(4, "big") + b"\x00" + bytes(8)
    groups: list[Any] = [("g", 0, [("t", None, [(0, 0, 0, None, 0)] * 50)] * 50)]

    class Emptying2:
        def __bool__(self) -> bool:
            groups.clear()
            return False

    assert codecs.fetch_answer(8, [], 0, groups, 1, Emptying2())[8:] == bytes(4) + b"\x01" + b"\x00"


def test_a_frame_head_is_refused_what_is_no_int32() -> None:
    # A correlation id comes from a parsed header, so it always fits; C refuses what does not
    # rather than truncate it.
    assert codecs is not None
    with pytest.raises(OverflowError):
        codecs.commit_answer([], 3, 2**31, False)
    with pytest.raises(TypeError):
        codecs.fetch_answer(5, [], 0, [], "1", False)
    with pytest.raises(TypeError, match="2 or 4 arguments, not 3"):
        codecs.commit_answer([], 3, 0)
