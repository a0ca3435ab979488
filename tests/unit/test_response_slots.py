"""A connection's response slots (server.connection._Slots): first in, first out, whatever the interleaving
of appends and pops, and the list under them does not grow with a connection that never drains
(a pipelining client always has answers in flight)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kcoord.config import BrokerConfig
from kcoord.server.app import Broker
from kcoord.server.connection import KafkaConnection, _Pending, _Slots


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaConnection]:
    """A connection the slots belong to (made, never connected: the slots only carry it)."""
    broker = Broker(BrokerConfig(log_dirs=str(tmp_path_factory.mktemp("broker"))))
    yield KafkaConnection(broker.server, "PLAINTEXT")
    broker.flusher.close()


def _slot(conn: KafkaConnection, n: int) -> _Pending:
    slot = _Pending(conn)
    slot.data = n.to_bytes(4, "big")
    return slot


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.booleans(), max_size=600))
def test_slots_come_out_in_the_order_they_went_in(conn: KafkaConnection, steps: list[bool]) -> None:
    slots = _Slots()
    model: list[_Pending] = []
    made = 0
    for append in steps:
        if append or not model:
            slot = _slot(conn, made)
            made += 1
            slots.append(slot)
            model.append(slot)
        else:
            assert slots.first() is model[0]
            assert slots.popleft() is model.pop(0)
        assert len(slots) == len(model)
        assert bool(slots) == bool(model)
    while model:
        assert slots.popleft() is model.pop(0)
    assert not slots
    with pytest.raises(IndexError):
        slots.first()


def test_a_connection_that_never_drains_keeps_only_what_is_in_flight(conn: KafkaConnection) -> None:
    slots = _Slots()
    for n in range(16):
        slots.append(_slot(conn, n))
    for n in range(16, 100_000):
        slots.append(_slot(conn, n))
        assert slots.popleft().data == (n - 16).to_bytes(4, "big")
    assert len(slots) == 16
    assert len(slots._items) <= 2 * 64 + 16
