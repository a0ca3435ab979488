"""Kafka's JSON schemas of coordinator records, through kafka-python's schema-driven codecs.

The schemas (``kcoord/protocol/schemas/records/``) are Kafka's files for ``__consumer_offsets``
and ``__transaction_state``; kafka-python compiles an encoder and a decoder per version from each,
the same machinery its request and response classes use.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from kafka.protocol.api_data import ApiData

from kcoord.protocol.fields import RecordFormatError

SCHEMAS = "kcoord.protocol.schemas.records"


def _null_defaults(node: Any) -> Any:
    """The schema with every JSON ``"default": null`` as the string ``"null"``, the spelling
    kafka-python reads as null (it reads a JSON null default of an array field as ``[]``)."""
    if isinstance(node, dict):
        return {k: "null" if k == "default" and v is None else _null_defaults(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_null_defaults(v) for v in node]
    return node


def _tagged_versions(node: Any) -> Any:
    """Kafka leaves out ``versions`` of a field that exists only as a tagged field (its
    ``taggedVersions`` are its versions); kafka-python needs both."""
    if isinstance(node, dict):
        out = {k: _tagged_versions(v) for k, v in node.items()}
        if "taggedVersions" in out and "versions" not in out:
            out["versions"] = out["taggedVersions"]
        return out
    if isinstance(node, list):
        return [_tagged_versions(v) for v in node]
    return node


def _patch(json: dict[str, Any]) -> dict[str, Any]:
    # The schemas say "coordinator-key"/"coordinator-value" (older ones "data"); ApiData wants "data".
    return dict(_tagged_versions(_null_defaults(json)), type="data")


def schema_class(name: str) -> Any:
    """kafka-python's ApiData class for one of the record schemas (``ConsumerGroupMetadataKey``...).

    Its own constructor and ``decode`` take the data's version as the keyword ``version``, so they
    fail on ConsumerGroupRegularExpressionValue, whose field ``Version`` has that name; the
    compiled codecs used here read and set fields as attributes and are not affected.
    """
    return type(name, (ApiData,), {"json_patch": classmethod(lambda cls, j: _patch(j))}, load_json=SCHEMAS)


def read_record(decode: Callable[[memoryview, int], tuple[Any, int]], buf: bytes, pos: int) -> Any:
    try:
        d, end = decode(memoryview(buf), pos)
    # kafka-python's readers fail on bad bytes with whatever the step that met them raises.
    except (ValueError, struct.error, EOFError, IndexError, AssertionError, TypeError, OverflowError) as e:
        raise RecordFormatError(f"malformed record: {e!r}") from e
    if end != len(buf):
        raise RecordFormatError(f"the record ends at byte {end} of {len(buf)}")
    return d
