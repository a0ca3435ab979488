"""The embedded consumer protocol's codecs refuse what Kafka's parsers refuse: nulls where the
schema has none come out of kafka-python as None, and must not reach the group."""

from __future__ import annotations

import struct

import pytest

from kcoord.groups.consumer_protocol import (
    MalformedConsumerProtocol,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)


def s(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


NULL_ARRAY = struct.pack(">i", -1)
NO_USER_DATA = struct.pack(">i", -1)

SUBSCRIPTIONS_WITH_NULLS = {
    "null topics": struct.pack(">h", 0) + NULL_ARRAY + NO_USER_DATA,
    "a null topic": struct.pack(">h", 0)
    + struct.pack(">i", 2)
    + s("t")
    + struct.pack(">h", -1)
    + NO_USER_DATA,
    "null owned partitions": struct.pack(">h", 1) + struct.pack(">i", 1) + s("t") + NO_USER_DATA + NULL_ARRAY,
    "an owned topic with null partitions": struct.pack(">h", 1)
    + struct.pack(">i", 1)
    + s("t")
    + NO_USER_DATA
    + struct.pack(">i", 1)
    + s("t")
    + NULL_ARRAY,
    "short": b"\x00",
}


@pytest.mark.parametrize("data", SUBSCRIPTIONS_WITH_NULLS.values(), ids=SUBSCRIPTIONS_WITH_NULLS.keys())
def test_subscriptions_with_nulls_are_malformed(data: bytes) -> None:
    with pytest.raises(MalformedConsumerProtocol):
        decode_subscription(data)


@pytest.mark.parametrize(
    "data",
    [
        struct.pack(">h", 0) + NULL_ARRAY + NO_USER_DATA,
        struct.pack(">h", 0) + struct.pack(">i", 1) + s("t") + NULL_ARRAY + NO_USER_DATA,
        b"\x00\x00\x00",
    ],
)
def test_assignments_with_nulls_are_malformed(data: bytes) -> None:
    with pytest.raises(MalformedConsumerProtocol):
        decode_assignment(data)


def test_round_trip_and_newer_versions() -> None:
    data = encode_assignment({"t": [2, 0], "u": [1]}, 3)
    assert decode_assignment(data) == {"t": (0, 2), "u": (1,)}
    # A version newer than the schema knows is read as the newest it knows, as Kafka's parser does.
    newer = struct.pack(">h", 9) + data[2:]
    assert decode_assignment(newer) == {"t": (0, 2), "u": (1,)}
    assert decode_assignment(b"") == {}
