"""Hand-written encoders for the JoinGroup and SyncGroup responses.

A rebalance answers every member's JoinGroup and SyncGroup at once, so a group of a thousand
members makes two thousand answers in a burst, all on the critical path of the rebalance
(issue 15's rebalance row). kafka-python's schema-driven classes build a container object for
the answer and for each member and then walk the schema field by field; these write the same
bytes directly. tests/unit/test_groups_codec.py checks them byte for byte against kafka-python
for every version.
"""

from __future__ import annotations

import struct

from kcoord.protocol.fields import any_string as _string
from kcoord.protocol.fields import array_length as _count
from kcoord.protocol.fields import uvarint as _uvarint

_I32 = struct.Struct(">i")
_ERROR_GENERATION = struct.Struct(">hi")  # error code, generation id
_ZERO_I32 = b"\x00\x00\x00\x00"

# (member id, group instance id or None, protocol metadata)
JoinMember = tuple[str, str | None, bytes]


def _bytes(data: bytes, flexible: bool) -> bytes:
    return (_uvarint(len(data) + 1) if flexible else _I32.pack(len(data))) + data


class JoinGroupAnswer:
    """A JoinGroup response (v0-v9) with throttle time 0."""

    __slots__ = (
        "error_code",
        "generation_id",
        "leader",
        "member_id",
        "members",
        "protocol_name",
        "protocol_type",
        "skip_assignment",
    )

    def __init__(
        self,
        error_code: int,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        leader: str,
        skip_assignment: bool,
        member_id: str,
        members: list[JoinMember],
    ) -> None:
        self.error_code = error_code
        self.generation_id = generation_id
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader = leader
        self.skip_assignment = skip_assignment
        self.member_id = member_id
        self.members = members

    def encode(self, version: int) -> bytes:
        flexible = version >= 6
        out = bytearray(_ZERO_I32 if version >= 2 else b"")
        out += _ERROR_GENERATION.pack(self.error_code, self.generation_id)
        if version >= 7:
            out += _string(self.protocol_type, flexible)
        out += _string(self.protocol_name, flexible)
        out += _string(self.leader, flexible)
        if version >= 9:
            out.append(1 if self.skip_assignment else 0)
        out += _string(self.member_id, flexible)
        out += _count(len(self.members), flexible)
        for member_id, instance_id, metadata in self.members:
            out += _string(member_id, flexible)
            if version >= 5:
                out += _string(instance_id, flexible)
            out += _bytes(metadata, flexible)
            if flexible:
                out.append(0)
        if flexible:
            out.append(0)
        return bytes(out)


class SyncGroupAnswer:
    """A SyncGroup response (v0-v5) with throttle time 0."""

    __slots__ = ("assignment", "error_code", "protocol_name", "protocol_type")

    def __init__(
        self, error_code: int, protocol_type: str | None, protocol_name: str | None, assignment: bytes
    ) -> None:
        self.error_code = error_code
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.assignment = assignment

    def encode(self, version: int) -> bytes:
        flexible = version >= 4
        out = bytearray(_ZERO_I32 if version >= 1 else b"")
        out += self.error_code.to_bytes(2, "big", signed=True)
        if version >= 5:
            out += _string(self.protocol_type, flexible)
            out += _string(self.protocol_name, flexible)
        out += _bytes(self.assignment, flexible)
        if flexible:
            out.append(0)
        return bytes(out)
