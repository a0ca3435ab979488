"""The C snapshot codec (``kcoord/runtime/_snapshot_codec.c``) writes the bytes the Python
``encode_snapshot`` writes, entry for entry, for any shard's latest records and pending writes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.runtime import snapshot
from kcoord.runtime.snapshot import NO_PRODUCER, decode_snapshot, encode_latest

pytestmark = pytest.mark.skipif(snapshot._codec is None, reason="the C snapshot codec is not built")

offsets = st.integers(0, 2**63 - 1) | st.integers(0, 20)  # small ones collide: ties keep their order
values = st.none() | st.binary(max_size=40)
latest_records = st.dictionaries(st.binary(max_size=20), st.tuples(offsets, values), max_size=30)
pending_writes = st.lists(
    st.tuples(
        offsets, st.integers(0, 2**63 - 1), st.integers(-(2**15), 2**15 - 1), st.binary(max_size=20), values
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
