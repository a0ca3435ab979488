"""Hand-written codecs for the classic group's most frequent messages: the JoinGroup and
SyncGroup responses, the SyncGroup request, and Heartbeat both ways.

A rebalance answers every member's JoinGroup and SyncGroup at once, so a group of a thousand
members makes two thousand answers in a burst, all on the critical path of the rebalance
(issue 15's rebalance row). kafka-python's schema-driven classes build a container object for
the answer and for each member and then walk the schema field by field; these write the same
bytes directly. The SyncGroup and Heartbeat requests are read into named tuples with
kafka-python's attribute names (request_reader.py), refusing forbidden nulls as they meet them:
a thousand members heartbeat several times a second, and their SyncGroups arrive together.
tests/unit/test_groups_codec.py checks them all against kafka-python for every version.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from kcoord.protocol.fields import any_string as _string
from kcoord.protocol.fields import array_length as _count
from kcoord.protocol.fields import uvarint as _uvarint
from kcoord.protocol.frames import MalformedRequest, int32_at
from kcoord.protocol.request_reader import (
    null_field,
    read_array_length,
    read_bytes,
    read_string,
    skip_tags,
)

_I32: Final = struct.Struct(">i")
_ERROR_GENERATION: Final = struct.Struct(">hi")  # error code, generation id
_ZERO_I32: Final = b"\x00\x00\x00\x00"

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


class HeartbeatAnswer:
    """A Heartbeat response (v0-v4) with throttle time 0."""

    __slots__ = ("error_code",)

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code

    def encode(self, version: int) -> bytes:
        code = self.error_code.to_bytes(2, "big", signed=True)
        if version == 0:
            return code
        return _ZERO_I32 + code + b"\x00" if version >= 4 else _ZERO_I32 + code


# --- requests ----------------------------------------------------------------------------------
class HeartbeatRequest(NamedTuple):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None  # v3+


class SyncGroupRequestAssignment(NamedTuple):
    member_id: str
    assignment: bytes


class SyncGroupRequest(NamedTuple):
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None  # v3+
    protocol_type: str | None  # v5+
    protocol_name: str | None  # v5+
    assignments: list[SyncGroupRequestAssignment]


_new = tuple.__new__


def _member(buf: bytes, pos: int, flexible: bool, name: str) -> tuple[str, int, str, int]:
    """The fields both requests open with: (group id, generation, member id, end)."""
    group_id, pos = read_string(buf, pos, flexible)
    if group_id is None:
        raise null_field(f"{name}.group_id")
    generation = int32_at(buf, pos)
    member_id, pos = read_string(buf, pos + 4, flexible)
    if member_id is None:
        raise null_field(f"{name}.member_id")
    return group_id, generation, member_id, pos


def _end(buf: bytes, pos: int, flexible: bool, name: str) -> int:
    if flexible:
        pos = skip_tags(buf, pos)
    if pos > len(buf):
        raise MalformedRequest(f"{name} runs past its frame")
    return pos


def decode_heartbeat(buf: bytes, pos: int, version: int) -> tuple[HeartbeatRequest, int]:
    """Heartbeat v0-v4 from ``buf[pos:]`` (after the request header): (request, end)."""
    flexible = version >= 4
    group_id, generation, member_id, pos = _member(buf, pos, flexible, "HeartbeatRequest")
    instance = None
    if version >= 3:
        instance, pos = read_string(buf, pos, flexible)
    pos = _end(buf, pos, flexible, "Heartbeat request")
    return _new(HeartbeatRequest, (group_id, generation, member_id, instance)), pos


def decode_sync_group(buf: bytes, pos: int, version: int) -> tuple[SyncGroupRequest, int]:
    """SyncGroup v0-v5 from ``buf[pos:]`` (after the request header): (request, end)."""
    flexible = version >= 4
    group_id, generation, member_id, pos = _member(buf, pos, flexible, "SyncGroupRequest")
    instance = protocol_type = protocol_name = None
    if version >= 3:
        instance, pos = read_string(buf, pos, flexible)
    if version >= 5:
        protocol_type, pos = read_string(buf, pos, flexible)
        protocol_name, pos = read_string(buf, pos, flexible)
    n, pos = read_array_length(buf, pos, flexible)
    if n < 0:
        raise null_field("SyncGroupRequest.assignments")
    assignments = []
    for _ in range(n):
        assigned, pos = read_string(buf, pos, flexible)
        if assigned is None:
            raise null_field("SyncGroupRequest.assignments.member_id")
        data, pos = read_bytes(buf, pos, flexible)
        if data is None:
            raise null_field("SyncGroupRequest.assignments.assignment")
        if flexible:
            pos = skip_tags(buf, pos)
        assignments.append(_new(SyncGroupRequestAssignment, (assigned, bytes(data))))
    pos = _end(buf, pos, flexible, "SyncGroup request")
    request = (group_id, generation, member_id, instance, protocol_type, protocol_name, assignments)
    return _new(SyncGroupRequest, request), pos
