"""The C snapshot codec (``kcoord/runtime/_snapshot_codec.c``) writes the bytes the Python
``encode_snapshot`` writes, entry for entry, for any shard's latest records and pending writes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.runtime import snapshot
from kcoord.runtime.snapshot import NO_PRODUCER, decode_snapshot, encode_latest

pytestmark = pytest.mark.skipif(snapshot._codec is None, reason="the C snapshot codec is not built")

offsets = st.integers(-(2**63), 2**63 - 1) | st.integers(0, 20)  # small ones collide: ties keep order
values = st.none() | st.binary(max_size=40)
latest_records = st.dictionaries(st.binary(max_size=20), st.tuples(offsets, values), max_size=30)
pending_writes = st.lists(
    st.tuples(
        offsets,
        st.just(NO_PRODUCER) | st.integers(0, 2**63 - 1),  # -1: a plain record held for a transaction
        st.integers(-(2**15), 2**15 - 1),
        st.binary(max_size=20),
        values,
    ),
    max_size=10,
)


def python_encoding(latest: dict, pending: list, monkeypatch: pytest.MonkeyPatch) -> bytearray:
    with monkeypatch.context() as m:
        m.setattr(snapshot, "_codec", None)
        return encode_latest("__consumer_offsets-0", 1234, latest, list(pending))


@settings(max_examples=300, deadline=None)
@given(latest=latest_records, pending=pending_writes)
def test_the_c_codec_writes_what_python_writes(latest: dict, pending: list) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        expected = python_encoding(latest, pending, monkeypatch)
    written = encode_latest("__consumer_offsets-0", 1234, latest, list(pending))
    assert bytes(written) == bytes(expected)
    end, entries = decode_snapshot(written, "__consumer_offsets-0")
    assert end == 1234 and len(entries) == len(latest) + len(pending)
    assert [e[0] for e in entries] == sorted(e[0] for e in entries)
    assert {(e[3], e[0], e[4]) for e in entries if e[1] == NO_PRODUCER} >= {
        (k, o, v) for k, (o, v) in latest.items()
    }


def test_equal_offsets_keep_the_latest_records_first_then_the_pending_writes_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What list.sort keeps, which qsort alone need not (glibc's happens to be stable)."""
    latest = {b"b": (5, b"1"), b"a": (5, None), b"c": (2, b"3")}
    pending = [(5, 7, 0, b"p", b"4"), (2, NO_PRODUCER, 0, b"q", b"5"), (5, 8, 1, b"r", None)]
    written = encode_latest("__consumer_offsets-0", 1234, latest, list(pending))
    assert bytes(written) == bytes(python_encoding(latest, pending, monkeypatch))
    _, entries = decode_snapshot(written, "__consumer_offsets-0")
    assert [e[3] for e in entries] == [b"c", b"q", b"b", b"a", b"p", b"r"]


def test_a_large_shard_lets_other_threads_run_while_it_is_encoded() -> None:
    """The sort and the copy run without the GIL: another thread gets on meanwhile."""
    import threading
    import time

    latest = {i.to_bytes(4, "big") * 4: (i, b"v" * 16) for i in range(200_000)}
    ticks: list[float] = []
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.0002)

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        start = time.perf_counter()
        encode_latest("__consumer_offsets-0", 200_000, latest, [])
        end = time.perf_counter()
    finally:
        done.set()
        ticker.join()
    during = [t for t in ticks if start < t < end]
    assert len(during) >= 3, f"the other thread ran {len(during)} times in {1000 * (end - start):.1f} ms"


@pytest.mark.parametrize(
    ("latest", "pending"),
    [
        ({"k": (1, b"v")}, []),  # a key that is not bytes
        ({b"k": (1, "v")}, []),  # a value neither bytes nor None
        ({b"k": (1.5, b"v")}, []),  # an offset that is not an int
        ({b"k": [1, b"v"]}, []),  # not an (offset, value) tuple
        ({}, [(1, 2, 2**15, b"k", b"v")]),  # an epoch past an int16
        ({}, [(1, 2, 3, b"k")]),  # a pending write of four fields
    ],
)
def test_the_c_codec_refuses_what_the_file_cannot_hold(latest: dict, pending: list) -> None:
    with pytest.raises((TypeError, OverflowError)):
        snapshot._codec.snapshot_entries(latest, pending, NO_PRODUCER)  # type: ignore[union-attr]
