"""The records every group type shares: a group's config overrides.

kcoord's own record type, beside Kafka's in ``__consumer_offsets`` (Kafka keeps group configs
in its metadata log, which kcoord does not have):

- type 103, group configs: key (group); value v0 (int32 count, then count x (name string, value
  string)): the group's config overrides (IncrementalAlterConfigs on a GROUP resource). A
  tombstone removes them all.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from kcoord.protocol.fields import FieldReader, RecordFormatError, string
from kcoord.runtime.outcome import Record
from kcoord.runtime.records import Encoder

GROUP_CONFIG_KEY_TYPE = 103

_H = struct.Struct(">h")
_I = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class GroupConfigKey:
    group: str


@dataclass(frozen=True, slots=True)
class GroupConfigValue:
    configs: tuple[tuple[str, str], ...]


def _encode(key: GroupConfigKey, value: GroupConfigValue | None) -> tuple[bytes, bytes | None]:
    key_bytes = _H.pack(GROUP_CONFIG_KEY_TYPE) + string(key.group)
    if value is None:
        return key_bytes, None
    return key_bytes, (
        _H.pack(0) + _I.pack(len(value.configs)) + b"".join(string(n) + string(v) for n, v in value.configs)
    )


class GroupRecords:
    """Records of the group layer, for the runtime's registry."""

    key_types = (GROUP_CONFIG_KEY_TYPE,)
    encoders: Mapping[type, Encoder] = {GroupConfigKey: _encode}

    @staticmethod
    def decode(key: bytes, value: bytes | None) -> Record:
        r = FieldReader(key, 0)
        if r.i16() != GROUP_CONFIG_KEY_TYPE:
            raise RecordFormatError("not a group config record")
        k = GroupConfigKey(r.str())
        if value is None:
            return k, None
        r = FieldReader(value, 0)
        r.i16()
        return k, GroupConfigValue(tuple((r.str(), r.str()) for _ in range(r.array_len())))


GROUP_RECORDS = GroupRecords()
