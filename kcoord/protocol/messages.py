"""Request/response classes by API key.

kafka-python 3 generates a codec for every message from Kafka's JSON schemas. The schemas it
does not bundle live in ``kcoord/protocol/schemas/`` and are turned into classes through the
same machinery (``ApiMessage`` with ``load_json=``), so every API is decoded and encoded alike.
"""

from __future__ import annotations

import importlib
import pkgutil

import kafka.protocol
from kafka.protocol.api_key import ApiKey
from kafka.protocol.api_message import ApiMessage

__all__ = ["ApiKey", "ApiMessage", "register_schema_pair", "request_class", "response_class"]

_requests: dict[int, type[ApiMessage]] = {}
_responses: dict[int, type[ApiMessage]] = {}
_SCHEMA_PACKAGE = "kcoord.protocol.schemas"


def _walk(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_walk(sub))
    return out


def _load_kafka_python() -> None:
    for mod in pkgutil.walk_packages(kafka.protocol.__path__, kafka.protocol.__name__ + "."):
        if ".old" in mod.name or mod.name.endswith(("generate_stubs", "sasl")):
            continue
        importlib.import_module(mod.name)
    for cls in _walk(ApiMessage):
        if getattr(cls, "_class_version", None) is not None or getattr(cls, "_json", None) is None:
            continue
        table = _requests if cls.type == "request" else _responses
        table.setdefault(cls.API_KEY, cls)


def register_schema_pair(name: str) -> tuple[type[ApiMessage], type[ApiMessage]]:
    """Create the classes for ``<name>Request.json``/``<name>Response.json`` of our schemas."""
    req = type(name + "Request", (ApiMessage,), {"__slots__": ()}, load_json=_SCHEMA_PACKAGE)
    resp = type(name + "Response", (ApiMessage,), {"__slots__": ()}, load_json=_SCHEMA_PACKAGE)
    _requests[req.API_KEY] = req
    _responses[resp.API_KEY] = resp
    return req, resp


def request_class(api_key: int) -> type[ApiMessage] | None:
    return _requests.get(api_key)


def response_class(api_key: int) -> type[ApiMessage] | None:
    return _responses.get(api_key)


_load_kafka_python()
