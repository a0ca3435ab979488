"""A hand-written encoder for the ConsumerGroupHeartbeat response (v0-v1, all flexible).

A KIP-848 group of a thousand members answers hundreds of heartbeats a second, nearly all with
nothing new; kafka-python's schema-driven classes cost several times the bytes they write. The
answer has the ``encode(version=...)`` method the dispatcher calls.
tests/unit/test_consumer_heartbeat_codec.py checks it byte for byte against kafka-python.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Collection, Mapping

from kcoord.protocol.fields import any_string, array_length

_HEAD = struct.Struct(">ih")  # throttle time, error code
_EPOCH_INTERVAL = struct.Struct(">ii")  # member epoch, heartbeat interval


class ConsumerGroupHeartbeatAnswer:
    __slots__ = ("assignment", "error", "heartbeat_interval_ms", "member_epoch", "member_id", "message")

    def __init__(
        self,
        error: int = 0,
        message: str | None = None,
        member_id: str | None = None,
        member_epoch: int = 0,
        heartbeat_interval_ms: int = 0,
        assignment: Mapping[uuid.UUID, Collection[int]] | None = None,
    ) -> None:
        self.error = error
        self.message = message
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.assignment = assignment  # topic id -> partitions; None: not sent

    def encode(self, version: int) -> bytes:
        out = bytearray(_HEAD.pack(0, self.error))
        out += any_string(self.message, True)
        out += any_string(self.member_id, True)
        out += _EPOCH_INTERVAL.pack(self.member_epoch, self.heartbeat_interval_ms)
        assignment = self.assignment
        if assignment is None:
            out += b"\xff"  # a null struct
        else:
            out += b"\x01"
            out += array_length(len(assignment), True)
            for topic_id, parts in sorted(assignment.items(), key=lambda kv: str(kv[0])):
                out += topic_id.bytes
                ordered = sorted(parts)
                out += array_length(len(ordered), True)
                out += struct.pack(f">{len(ordered)}i", *ordered)
                out += b"\x00"
            out += b"\x00"
        out += b"\x00"
        return bytes(out)
