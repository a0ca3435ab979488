"""The Kafka client of the ``kcoord groups`` and ``kcoord topics`` commands.

kafka-python's KafkaAdminClient bootstraps, keeps the cluster's metadata and negotiates versions;
its helpers raise on the first error and drop what they do not know (group types, share groups,
KIP-848 descriptions), so each command builds its requests itself and sends them through the
admin client's connection manager. Messages kafka-python has no schema for (ConsumerGroupDescribe,
ShareGroupDescribe and the share-group offsets APIs) are kcoord's schema classes, the same
codecs the broker serves them with. Nothing of the broker is imported: this is a Kafka client
that works against any broker serving these APIs.
"""

from __future__ import annotations

from typing import Any

import kafka.errors as kafka_errors
from kafka import KafkaAdminClient

from kcoord.protocol.errors import ErrorCode
from kcoord.protocol.messages import ApiKey, ApiMessage, register_schema_pair, request_class

for _name in (
    "ConsumerGroupDescribe",
    "ShareGroupDescribe",
    "DescribeShareGroupOffsets",
    "AlterShareGroupOffsets",
    "DeleteShareGroupOffsets",
):
    register_schema_pair(_name)

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


class KafkaRequestError(Exception):
    """A request answered with a Kafka error code (exit status 1)."""

    def __init__(self, code: int, message: str | None = None, subject: str | None = None) -> None:
        self.code = code
        self.name = error_name(code)
        self.detail = message or error_description(code)
        self.subject = subject
        super().__init__(self.sentence())

    def sentence(self) -> str:
        where = f"{self.subject}: " if self.subject else ""
        return f"{where}{self.name} ({self.code}): {self.detail}"


class BrokerUnreachable(Exception):
    """No broker answered at the bootstrap address (exit status 1)."""


def error_name(code: int) -> str:
    """Kafka's name of an error code (Errors.java), e.g. GROUP_ID_NOT_FOUND."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def error_description(code: int) -> str:
    return str(kafka_errors.for_code(code).description or "")


def request(api: ApiKey, /, *, max_version: int | None = None, **fields: Any) -> ApiMessage:
    """A request of ``api``; the version is the highest the broker and the schema share, capped
    at ``max_version`` where a newer version changes what the caller sends (topic ids)."""
    cls = request_class(api)
    assert cls is not None, api
    values = _structs(cls._struct.fields, fields)
    if max_version is not None:
        values["max_version"] = max_version
    return cls(**values)


def _structs(schema: Any, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with nested dicts made into the schema's struct classes (kafka-python's
    generated encoders read attributes and take no dicts)."""
    out = {}
    for name, value in values.items():
        f = schema.get(name)
        if f is not None and f.is_struct_array() and value is not None:
            out[name] = [f.data_class(**_structs(f.fields, v)) if isinstance(v, dict) else v for v in value]
        elif f is not None and f.is_struct() and isinstance(value, dict):
            out[name] = f.data_class(**_structs(f.fields, value))
        else:
            out[name] = value
    return out


class Admin:
    """One connection pool to the cluster at ``bootstrap`` (``HOST:PORT[,HOST:PORT...]``)."""

    def __init__(self, bootstrap: str, timeout_ms: int = 30000) -> None:
        try:
            self._client = KafkaAdminClient(
                bootstrap_servers=bootstrap.split(","),
                client_id="kcoord-cli",
                request_timeout_ms=timeout_ms,
                bootstrap_timeout_ms=min(timeout_ms, 10000),
            )
        except kafka_errors.KafkaError as e:
            raise BrokerUnreachable(f"no broker answered at {bootstrap}: {e}") from e
        # KafkaAdminClient offers no public way to send a request it has no helper for.
        self._manager = self._client._manager
        self._coordinators: dict[str, int] = {}

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, req: ApiMessage, node_id: int | None = None) -> Any:
        """Send ``req`` (to ``node_id``, else the least loaded broker) and wait for its answer."""

        async def _send() -> Any:
            return await self._manager.send(req, node_id=node_id)

        try:
            return self._manager.run(_send)
        except kafka_errors.KafkaError as e:
            raise BrokerUnreachable(f"{type(req).__name__} failed: {e}") from e

    def broker_ids(self) -> list[int]:
        return sorted(b.node_id for b in self._manager.cluster.brokers())

    def coordinator(self, group_id: str) -> int:
        """The node id of ``group_id``'s group coordinator (FindCoordinator)."""
        node = self._coordinators.get(group_id)
        if node is not None:
            return node
        resp = self.send(
            request(ApiKey.FindCoordinator, key_type=0, coordinator_keys=[group_id], min_version=4)
        )
        c = resp.coordinators[0]
        if c.error_code:
            raise KafkaRequestError(c.error_code, c.error_message, f"group {group_id}")
        self._coordinators[group_id] = c.node_id
        return int(c.node_id)

    def send_to_coordinator(self, group_id: str, req: ApiMessage) -> Any:
        return self.send(req, self.coordinator(group_id))
