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

__all__ = [
    "ApiKey",
    "ApiMessage",
    "null_violation",
    "register_schema_pair",
    "request_class",
    "response_class",
]

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
        if ".old" in mod.name or mod.name.endswith("generate_stubs"):
            continue
        importlib.import_module(mod.name)
    for cls in _walk(ApiMessage):
        if getattr(cls, "_class_version", None) is not None or getattr(cls, "_json", None) is None:
            continue
        table = _requests if cls.type == "request" else _responses
        table.setdefault(cls.API_KEY, cls)


_pairs: dict[str, tuple[type[ApiMessage], type[ApiMessage]]] = {}


def register_schema_pair(name: str) -> tuple[type[ApiMessage], type[ApiMessage]]:
    """The classes for ``<name>Request.json``/``<name>Response.json`` of our schemas, made once."""
    made = _pairs.get(name)
    if made is not None:
        return made
    req = type(name + "Request", (ApiMessage,), {"__slots__": ()}, load_json=_SCHEMA_PACKAGE)
    resp = type(name + "Response", (ApiMessage,), {"__slots__": ()}, load_json=_SCHEMA_PACKAGE)
    _requests[req.API_KEY] = req
    _responses[resp.API_KEY] = resp
    _pairs[name] = (req, resp)
    return req, resp


def request_class(api_key: int) -> type[ApiMessage] | None:
    return _requests.get(api_key)


def response_class(api_key: int) -> type[ApiMessage] | None:
    return _responses.get(api_key)


def null_violation(message: ApiMessage, version: int) -> str | None:
    """The path of a field sent as null although its schema does not allow null at ``version``.

    kafka-python decodes such a null (an array or string of length -1) without complaint, and a
    handler would then fail on it; Kafka's generated parsers refuse the request ("non-nullable
    field ... was serialized as null"), and the broker closes the connection.
    """
    cls = type(message)
    plan = _plans.get((cls, version))
    if plan is None:
        plan = _plans[(cls, version)] = _plan(cls._struct, version)
    return _null_in(plan, message, cls.__name__) if plan else None


# Per (message class, version): the fields to look at, so that a request's check touches only
# the fields that can be null and must not be, and skips arrays whose items have none.
Plan = tuple[tuple[str, bool, "Plan", bool], ...]
_plans: dict[tuple[type, int], Plan] = {}

# Decoded values of these types are never None: nothing to check.
_NEVER_NULL = frozenset({"int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "bool"})


def _plan(struct: object, version: int) -> Plan:
    """(name, may be null, plan of the nested struct(s), is an array) per field worth checking."""
    out = []
    for name, field in struct.fields.items():  # type: ignore[attr-defined]
        # A tagged field that is absent takes its default, and a uuid has no null encoding
        # (kafka-python reads the zero uuid as None): neither can be a null sent by the client.
        if not field.for_version_q(version) or field.tagged_field_q(version) or field.type_str == "uuid":
            continue
        if field.type_str in _NEVER_NULL:
            continue
        nullable = bool(field.nullable_for_version_q(version))
        sub = _plan(field, version) if field.is_struct_array() or field.is_struct() else ()
        # An array of strings or bytes: its items are never nullable in Kafka's schemas (a null
        # item fails Kafka's parser as a null field does).
        element = field.type_str[2:]
        items = field.is_array() and not field.is_struct_array() and element not in _NEVER_NULL | {"uuid"}
        if nullable and not sub and not items:
            continue
        out.append((name, nullable, _ITEMS if items else sub, bool(field.is_struct_array())))
    return tuple(out)


_ITEMS: Plan = (("", False, (), False),)  # marks an array whose items must not be null


def _null_in(plan: Plan, obj: object, path: str) -> str | None:
    for name, nullable, sub, is_array in plan:
        value = getattr(obj, name, None)
        if value is None:
            if not nullable:
                return f"{path}.{name}"
        elif sub is _ITEMS:
            if None in value:
                return f"{path}.{name}[{value.index(None)}]"
        elif sub:
            if is_array:
                for i, item in enumerate(value):
                    bad = _null_in(sub, item, f"{path}.{name}[{i}]")
                    if bad is not None:
                        return bad
            else:
                bad = _null_in(sub, value, f"{path}.{name}")
                if bad is not None:
                    return bad
    return None


_load_kafka_python()
