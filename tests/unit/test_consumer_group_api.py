"""The answers of the KIP-848 consumer group APIs (kcoord/apis/consumer_groups.py) as Kafka's
GroupCoordinatorService and KafkaApis build them, encoded at every version."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from kcoord.apis.consumer_groups import described_error, heartbeat_request_error, heartbeat_response
from kcoord.consumer.group import HeartbeatResult
from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import response_class

T = uuid.uuid5(uuid.NAMESPACE_OID, "t")
DESCRIBE_RESPONSE = response_class(69)
HEARTBEAT_RESPONSE = response_class(68)
assert DESCRIBE_RESPONSE is not None and HEARTBEAT_RESPONSE is not None


def decoded(answer: object, version: int) -> Any:
    """The answer as a client reads it off the wire."""
    return HEARTBEAT_RESPONSE.decode(answer.encode(version=version), version=version, header=False)  # type: ignore[attr-defined, union-attr]


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_errors_carry_no_member_id(version: int) -> None:
    """Kafka turns the exception into a response with its code and message only."""
    resp = decoded(
        heartbeat_response(
            HeartbeatResult(
                ErrorCode.UNKNOWN_MEMBER_ID, "Member m is not a member of group g.", member_id="m"
            )
        ),
        version,
    )
    assert (resp.error_code, resp.error_message) == (
        ErrorCode.UNKNOWN_MEMBER_ID,
        "Member m is not a member of group g.",
    )
    assert (resp.member_id, resp.member_epoch, resp.heartbeat_interval_ms, resp.assignment) == (
        None,
        0,
        0,
        None,
    )


@pytest.mark.parametrize("version", [0, 1])
def test_heartbeat_answer(version: int) -> None:
    resp = decoded(
        heartbeat_response(
            HeartbeatResult(
                member_id="m", member_epoch=3, heartbeat_interval_ms=5_000, assignment={T: frozenset({2, 0})}
            )
        ),
        version,
    )
    assert (resp.error_code, resp.error_message, resp.member_id, resp.member_epoch) == (0, None, "m", 3)
    assert [(t.topic_id, t.partitions) for t in resp.assignment.topic_partitions] == [(T, [0, 2])]
    unchanged = decoded(
        heartbeat_response(HeartbeatResult(member_id="m", member_epoch=3, heartbeat_interval_ms=5_000)),
        version,
    )
    assert unchanged.assignment is None


@pytest.mark.parametrize("version", [0, 1])
def test_described_error_leaves_fields_at_their_defaults(version: int) -> None:
    """KafkaApis sets authorized operations only on groups described without error; the group
    coordinator sets the group id, the code and the message."""
    d = described_error("g", ErrorCode.GROUP_ID_NOT_FOUND, "Group g not found.")
    assert (d.error_code, d.error_message, d.group_id) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Group g not found.",
        "g",
    )
    assert (d.group_state, d.group_epoch, d.assignment_epoch, d.assignor_name, d.members) == (
        "",
        0,
        0,
        "",
        [],
    )
    assert d.authorized_operations == -(2**31)
    assert DESCRIBE_RESPONSE(throttle_time_ms=0, groups=[d]).encode(version=version)


# --- the request's own checks (GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid) --
def request(**fields: object) -> SimpleNamespace:
    """A valid join of a v1 ConsumerGroupHeartbeat, with ``fields`` over it."""
    values: dict[str, object] = {
        "group_id": "g",
        "member_id": "m",
        "member_epoch": 0,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 30_000,
        "subscribed_topic_names": ["t"],
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": [],
    }
    values.update(fields)
    return SimpleNamespace(**values)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"member_id": " "}, "MemberId can't be empty."),
        ({"group_id": "\x01\x1f "}, "GroupId can't be empty."),  # Java's trim(): all up to U+0020
        ({"instance_id": "\t"}, "InstanceId can't be empty."),
        ({"rack_id": "\n\r"}, "RackId can't be empty."),
    ],
)
def test_blank_strings_as_java_trims_them(fields: dict[str, object], message: str) -> None:
    assert heartbeat_request_error(request(**fields), 1, ("uniform",)) == (ErrorCode.INVALID_REQUEST, message)


def test_unicode_spaces_are_not_blank_for_java() -> None:
    """String.trim() leaves U+00A0 and U+3000 alone (str.strip() would remove them)."""
    assert heartbeat_request_error(request(group_id="\u00a0", rack_id="\u3000"), 1, ("uniform",)) is None


def test_v0_join_needs_no_member_id() -> None:
    assert heartbeat_request_error(request(member_id=""), 0, ("uniform",)) is None
    assert heartbeat_request_error(request(member_id="", member_epoch=1), 0, ("uniform",)) == (
        ErrorCode.INVALID_REQUEST,
        "MemberId can't be empty.",
    )
