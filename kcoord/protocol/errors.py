"""Kafka error codes by name, taken from kafka-python's table plus the codes it lacks."""

from __future__ import annotations

import inspect
from enum import IntEnum

import kafka.errors as _kerr

# kafka-python names a few codes differently from Kafka's Errors.java; Kafka's names come first
# (so ``ErrorCode(17).name`` is Kafka's), kafka-python's stay as aliases.
_KAFKA_NAMES = {
    "UNKNOWN_SERVER_ERROR": -1,  # kafka-python: UNKNOWN
    "NOT_LEADER_OR_FOLLOWER": 6,  # NOT_LEADER_FOR_PARTITION
    "MESSAGE_TOO_LARGE": 10,  # MESSAGE_SIZE_TOO_LARGE
    "INVALID_TOPIC_EXCEPTION": 17,  # INVALID_TOPIC
    "INVALID_REPLICA_ASSIGNMENT": 39,  # INVALID_REPLICATION_ASSIGNMENT
}


def _codes() -> dict[str, int]:
    codes = {"NONE": 0, **_KAFKA_NAMES}
    for _, cls in inspect.getmembers(_kerr, inspect.isclass):
        if issubclass(cls, _kerr.BrokerResponseError) and isinstance(cls.errno, int):
            codes.setdefault(cls.message, cls.errno)
    # Codes added by Kafka after kafka-python 3.0's table (clients/.../protocol/Errors.java).
    codes.update(
        {
            "INVALID_REGULAR_EXPRESSION": 128,
            "REBOOTSTRAP_REQUIRED": 129,
            "STREAMS_INVALID_TOPOLOGY": 130,
            "STREAMS_INVALID_TOPOLOGY_EPOCH": 131,
            "STREAMS_TOPOLOGY_FENCED": 132,
            "SHARE_SESSION_LIMIT_REACHED": 133,
        }
    )
    return codes


ErrorCode = IntEnum("ErrorCode", _codes())  # type: ignore[misc]
"""``ErrorCode.UNSUPPORTED_VERSION == 35`` and so on: Kafka's numbering."""


class KafkaError(Exception):
    """Raised inside the broker to answer with a Kafka error code."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or ErrorCode(code).name)
        self.code = int(code)
        self.message = message


class CloseConnection(Exception):
    """The request cannot be answered; the connection must be closed (as Kafka's SocketServer
    closes it for a request it cannot parse, or after a failed acks=0 produce)."""
