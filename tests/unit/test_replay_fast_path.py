"""Replay's fast path (only the last record of each offset key is decoded) ends in exactly the
state that applying every record in log order gives: the same groups with the same persisted
metadata (simple groups included), the same offsets."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.classic import records as R
from kcoord.classic.group import GroupConfig
from kcoord.groups import records as GR
from kcoord.groups.store import GroupStore
from kcoord.protocol.records import build_batch, read_header
from kcoord.runtime.shard import CoordinatorShard
from kcoord.server.coordinators import group_records
from kcoord.storage.flush import Flusher
from kcoord.storage.log import Log, LogConfig
from tests.unit.grouputil import classic, new_store

NOW = 1_700_000_000_000
groups = st.sampled_from(["a", "b", "grp-c"])
offset_record = st.tuples(
    st.just("offset"),
    groups,
    st.sampled_from(["t", "u"]),
    st.integers(0, 2),
    st.one_of(st.none(), st.integers(0, 1000)),  # None: tombstone
    st.sampled_from([0, 1]),  # key type: 0 is the legacy offset key, read alike
)
group_record = st.tuples(st.just("group"), groups, st.booleans())  # False: tombstone


def _encode(op: tuple) -> tuple[bytes, bytes | None]:
    if op[0] == "offset":
        _, g, t, p, off, kind = op
        key = struct.pack(">h", kind) + GR.encode_offset_key(GR.OffsetCommitKey(g, t, p))[2:]
        value = (
            None
            if off is None
            else GR.encode_offset_value(GR.OffsetCommitValue(off, -1, f"m{off}", NOW + off))
        )
        return key, value
    _, g, alive = op
    value = R.GroupMetadataValue("consumer", 3, "range", None, NOW) if alive else None
    return R.encode_key(R.GroupMetadataKey(g)), R.encode_value(value)


def _state(store: GroupStore) -> list:
    groups = {gid: g.persisted for gid, g in classic(store).groups.items()}
    return [groups, store.offsets.committed]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.lists(st.one_of(offset_record, offset_record, group_record), min_size=1, max_size=6), max_size=12
    )
)
def test_fast_replay_equals_applying_every_record(batches: list[list[tuple]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        lg = Log.open(Path(d), LogConfig(retention_ms=-1), Flusher("os"))
        encoded = []
        for ops in batches:
            entries = [_encode(op) for op in ops]
            encoded += entries
            data = build_batch(entries, NOW)
            lg.append(data, [read_header(data)], NOW)
        fast = CoordinatorShard(0, lg, new_store(GroupConfig()), group_records())
        assert fast.load(NOW) == len(encoded)
        lg.close()
    every = new_store(GroupConfig())
    registry = group_records()
    for k, v in encoded:
        every.replay(*registry.decode(k, v), NOW)
    every.loaded(NOW)
    assert _state(fast.state) == _state(every)
